/* Pickling's C half and NVRTC's whereabouts. A Module travels as its compiled code and the
 * kernels' signatures (kiln_module_serialize), never as its source: the receiver loads the code
 * on its own GPU at the first launch and runs no NVRTC. */
#include "portable.h"

#include "errors.h"
#include "function.h"
#include "sourcemodule.h"

#include <stdlib.h>

static PyObject *kpy_module_serialize(PyObject *module, PyObject *arg) {
  kpy_state *st = kpy_state_of_module(module);
  if (!PyObject_TypeCheck(arg, st->ref.Module_type)) {
    PyErr_Format(PyExc_TypeError, "_module_serialize() takes a kiln.Module, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  kiln_module *m = ((kpy_module *)arg)->module;
  if (!m) {
    PyErr_SetString(PyExc_ValueError, "this Module holds no code (it failed to compile)");
    return NULL;
  }
  unsigned char *data = NULL;
  size_t size = 0;
  kiln_status s = kiln_module_serialize(m, &data, &size);
  if (s) return kpy_raise(st, s);
  PyObject *bytes = PyBytes_FromStringAndSize((const char *)data, (Py_ssize_t)size);
  free(data);
  return bytes;
}

static PyObject *kpy_module_deserialize(PyObject *module, PyObject *arg) {
  kpy_state *st = kpy_state_of_module(module);
  Py_buffer view;
  if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
    PyErr_Format(PyExc_TypeError, "_module_deserialize() takes bytes, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  kiln_module *m = NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_module_deserialize(view.buf, (size_t)view.len, &m);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  if (s) return kpy_raise(st, s);
  return kpy_module_adopt(st, m);
}

static PyObject *kpy_function_module(PyObject *module, PyObject *arg) {
  kpy_state *st = kpy_state_of_module(module);
  if (!PyObject_TypeCheck(arg, st->ref.Function_type)) {
    PyErr_Format(PyExc_TypeError, "_function_module() takes a kiln.Function, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  return Py_NewRef(((kpy_function *)arg)->owner);
}

static PyObject *kpy_nvrtc_set_search_path(PyObject *module, PyObject *arg) {
  kpy_state *st = kpy_state_of_module(module);
  if (!PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "_nvrtc_set_search_path() takes a str, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  const char *dirs = PyUnicode_AsUTF8(arg);
  if (!dirs) return NULL;
  kiln_status s = kiln_nvrtc_set_search_path(dirs);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_nvrtc_set_helper(PyObject *module, PyObject *arg) {
  kpy_state *st = kpy_state_of_module(module);
  if (arg != Py_None && !PyUnicode_Check(arg)) {
    PyErr_Format(PyExc_TypeError, "_nvrtc_set_helper() takes a str or None, not %.100s",
                 Py_TYPE(arg)->tp_name);
    return NULL;
  }
  const char *path = arg == Py_None ? NULL : PyUnicode_AsUTF8(arg);
  if (arg != Py_None && !path) return NULL;
  kiln_status s = kiln_nvrtc_set_helper(path);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_nvrtc_where(PyObject *module, PyObject *Py_UNUSED(ignored)) {
  kpy_state *st = kpy_state_of_module(module);
  const char *lib = NULL, *include_dir = NULL, *cccl_dir = NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS /* may open NVRTC: 10-20 ms */
    s = kiln_nvrtc_where(&lib, &include_dir, &cccl_dir);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  return Py_BuildValue("{s:s,s:s,s:s}", "library", lib, "include_dir", include_dir, "cccl_dir",
                       cccl_dir);
}

static PyMethodDef kpy_portable_functions[] = {
    {"_module_serialize", kpy_module_serialize, METH_O,
     "_module_serialize(module): the module's code and signatures as bytes (for pickling)."},
    {"_module_deserialize", kpy_module_deserialize, METH_O,
     "_module_deserialize(data): the Module _module_serialize gave those bytes for."},
    {"_function_module", kpy_function_module, METH_O,
     "_function_module(f): the Module a Function belongs to."},
    {"_nvrtc_set_search_path", kpy_nvrtc_set_search_path, METH_O,
     "_nvrtc_set_search_path(dirs): ':'-separated folders to look for libnvrtc in first."},
    {"_nvrtc_set_helper", kpy_nvrtc_set_helper, METH_O,
     "_nvrtc_set_helper(path): kiln-nvrtc, the compile helper whose precompiled headers serve "
     "later processes (None: none)."},
    {"nvrtc_where", kpy_nvrtc_where, METH_NOARGS,
     "nvrtc_where($module, /)\n--\n\n{'library', 'include_dir', 'cccl_dir'}: the NVRTC kiln "
     "compiles with and the CUDA header folders it passes; opens NVRTC if it is not open yet."},
    {NULL, NULL, 0, NULL},
};

int kpy_portable_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_portable_functions);
}
