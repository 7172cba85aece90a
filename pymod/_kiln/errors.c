/* kiln's exceptions, and the one place an engine status becomes a Python exception. */
#include "kpy.h"

static PyObject *kpy_new_exception(PyObject *module, const char *name, PyObject *base,
                                   const char *doc) {
  char qualified[64];
  PyOS_snprintf(qualified, sizeof qualified, "kiln.%s", name);
  PyObject *e = PyErr_NewExceptionWithDoc(qualified, doc, base, NULL);
  if (!e) return NULL;
  if (PyModule_AddObjectRef(module, name, e) < 0) {
    Py_DECREF(e);
    return NULL;
  }
  return e;
}

int kpy_errors_init(PyObject *module, kpy_state *st) {
  if (!(st->Error = kpy_new_exception(module, "Error", NULL, "Base of every kiln error.")) ||
      !(st->CompileError = kpy_new_exception(
            module, "CompileError", st->Error,
            "NVRTC could not compile the source; .log holds NVRTC's log.")) ||
      !(st->CudaError = kpy_new_exception(
            module, "CudaError", st->Error,
            "A CUDA driver call failed; .code is the CUresult, .name its name.")) ||
      !(st->LaunchError = kpy_new_exception(module, "LaunchError", st->CudaError,
                                            "A kernel launch failed.")) ||
      !(st->OutOfMemoryError = kpy_new_exception(module, "OutOfMemoryError", st->CudaError,
                                                 "The device ran out of memory.")) ||
      !(st->NoDeviceError = kpy_new_exception(
            module, "NoDeviceError", st->CudaError,
            "No CUDA driver or no CUDA device: compiling works, launching does not.")))
    return -1;
  return 0;
}

/* Raises `type(message)` with .code and .name set (None when no CUresult is behind it). */
static void kpy_raise_cuda(PyObject *type, const char *message) {
  int code = kiln_last_cuda_result();
  const char *name = kiln_cuda_result_name(code);
  PyObject *exc = PyObject_CallFunction(type, "s", message);
  if (!exc) return;
  PyObject *py_code = code ? PyLong_FromLong(code) : Py_NewRef(Py_None);
  PyObject *py_name = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
  if (py_code && py_name && PyObject_SetAttrString(exc, "code", py_code) == 0 &&
      PyObject_SetAttrString(exc, "name", py_name) == 0)
    PyErr_SetObject(type, exc);
  Py_XDECREF(py_code);
  Py_XDECREF(py_name);
  Py_DECREF(exc);
}

PyObject *kpy_raise(kpy_state *st, kiln_status s) {
  const char *msg = kiln_last_error();
  if (!msg[0]) msg = kiln_status_string(s);
  switch (s) {
  case KILN_ERROR_NO_DRIVER:
  case KILN_ERROR_NO_DEVICE: kpy_raise_cuda(st->NoDeviceError, msg); break;
  case KILN_ERROR_OUT_OF_MEMORY: kpy_raise_cuda(st->OutOfMemoryError, msg); break;
  case KILN_ERROR_LAUNCH: kpy_raise_cuda(st->LaunchError, msg); break;
  case KILN_ERROR_CUDA: kpy_raise_cuda(st->CudaError, msg); break;
  case KILN_ERROR_INVALID:
  case KILN_ERROR_AMBIGUOUS: PyErr_SetString(PyExc_ValueError, msg); break;
  case KILN_ERROR_NOT_FOUND: PyErr_SetString(PyExc_AttributeError, msg); break;
  case KILN_ERROR_NO_MEMORY: PyErr_SetString(PyExc_MemoryError, msg); break;
  default: PyErr_SetString(st->Error, msg); break;
  }
  return NULL;
}
