/* kiln's exceptions, and the one place an engine status becomes a Python exception. */
#include "errors.h"

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

/* ---- Warnings: the engine's, queued on the thread that made them ------------------------- */

#define KPY_PENDING_MAX 8

static _Thread_local struct {
  int n;
  char text[KPY_PENDING_MAX][1024];
} kpy_pending;

/* Runs inside engine calls, often without the GIL: only queues. */
static void kpy_on_warning(const char *message, void *ctx) {
  (void)ctx;
  if (kpy_pending.n < KPY_PENDING_MAX)
    PyOS_snprintf(kpy_pending.text[kpy_pending.n++], sizeof kpy_pending.text[0], "%s", message);
}

int kpy_flush_warnings(kpy_state *st) {
  int n = kpy_pending.n;
  kpy_pending.n = 0;
  for (int i = 0; i < n; i++)
    if (PyErr_WarnEx(st->ref.CacheWarning, kpy_pending.text[i], 1) < 0) return -1;
  return 0;
}

int kpy_errors_init(PyObject *module, kpy_state *st) {
  kiln_set_warning_handler(kpy_on_warning, NULL);
  if (!(st->ref.CacheWarning = kpy_new_exception(
            module, "CacheWarning", PyExc_UserWarning,
            "The kernel cache met a problem it worked around: a damaged entry it replaced, a "
            "folder it cannot write or will not trust.")))
    return -1;
  if (!(st->ref.Error = kpy_new_exception(module, "Error", NULL, "Base of every kiln error.")) ||
      !(st->ref.CompileError = kpy_new_exception(
            module, "CompileError", st->ref.Error,
            "NVRTC could not compile the source; .log holds NVRTC's log.")) ||
      !(st->ref.CudaError = kpy_new_exception(
            module, "CudaError", st->ref.Error,
            "A CUDA driver call failed; .code is the CUresult, .name its name.")) ||
      !(st->ref.LaunchError = kpy_new_exception(module, "LaunchError", st->ref.CudaError,
                                            "A kernel launch failed.")) ||
      !(st->ref.OutOfMemoryError = kpy_new_exception(module, "OutOfMemoryError", st->ref.CudaError,
                                                 "The device ran out of memory.")) ||
      !(st->ref.NoDeviceError = kpy_new_exception(
            module, "NoDeviceError", st->ref.CudaError,
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
  case KILN_ERROR_NO_DEVICE: kpy_raise_cuda(st->ref.NoDeviceError, msg); break;
  case KILN_ERROR_OUT_OF_MEMORY: kpy_raise_cuda(st->ref.OutOfMemoryError, msg); break;
  case KILN_ERROR_LAUNCH: kpy_raise_cuda(st->ref.LaunchError, msg); break;
  case KILN_ERROR_CUDA: kpy_raise_cuda(st->ref.CudaError, msg); break;
  case KILN_ERROR_INVALID:
  case KILN_ERROR_AMBIGUOUS: PyErr_SetString(PyExc_ValueError, msg); break;
  case KILN_ERROR_NOT_FOUND: PyErr_SetString(PyExc_AttributeError, msg); break;
  case KILN_ERROR_NO_MEMORY: PyErr_SetString(PyExc_MemoryError, msg); break;
  default: PyErr_SetString(st->ref.Error, msg); break;
  }
  return NULL;
}
