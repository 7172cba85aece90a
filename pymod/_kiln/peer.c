/* Copies between devices, PyCUDA's memcpy_peer(dest, src, size, dest_context=None,
 * src_context=None) and memcpy_peer_async(..., stream=None): each address is memory of its
 * context's device (the current one when the context is None), checked there by the engine. */
#include "peer.h"

#include "context.h"
#include "errors.h"
#include "memory.h"
#include "stream.h"

static PyObject *kpy_memcpy_peer_any(PyObject *module, PyObject *args, PyObject *kwargs,
                                     int async) {
  kpy_state *st = kpy_state_of_module(module);
  /* The blocking form's list stops before stream. */
  static char *kwlist[] = {(char *)"dest",
                           (char *)"src",
                           (char *)"size",
                           (char *)"dest_context",
                           (char *)"src_context",
                           (char *)"stream",
                           NULL};
  static char *kwlist_sync[] = {(char *)"dest",         (char *)"src",         (char *)"size",
                                (char *)"dest_context", (char *)"src_context", NULL};
  PyObject *dest, *src, *size_obj, *dest_ctx = Py_None, *src_ctx = Py_None, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(
          args, kwargs, async ? "OOO|OOO:memcpy_peer_async" : "OOO|OO:memcpy_peer",
          async ? kwlist : kwlist_sync, &dest, &src, &size_obj, &dest_ctx, &src_ctx, &stream))
    return NULL;
  if (!PyIndex_Check(size_obj) || PyBool_Check(size_obj)) {
    PyErr_Format(PyExc_TypeError, "size must be an int, not %.100s", Py_TYPE(size_obj)->tp_name);
    return NULL;
  }
  Py_ssize_t n = PyNumber_AsSsize_t(size_obj, PyExc_OverflowError);
  if (n == -1 && PyErr_Occurred()) return NULL;
  if (n < 0) {
    PyErr_Format(PyExc_ValueError, "size must not be negative, not %zd", n);
    return NULL;
  }
  int dst_device, src_device;
  kiln_deviceptr d, s_ptr;
  kiln_stream handle = NULL;
  /* The contexts and the stream may run Python code: the pointers are read after them. */
  if (kpy_context_device(st, dest_ctx, 1, "dest_context", &dst_device) < 0 ||
      kpy_context_device(st, src_ctx, 1, "src_context", &src_device) < 0 ||
      (async && kpy_stream_parse(st, stream, &handle) < 0) ||
      kpy_device_pointers(st, dest, src, (size_t)n, &d, &s_ptr) < 0)
    return NULL;
  kiln_status s;
  kpy_copies_begin(st);
  Py_BEGIN_ALLOW_THREADS
    s = async ? kiln_memcpy_peer_async(d, dst_device, s_ptr, src_device, (size_t)n, handle)
              : kiln_memcpy_peer(d, dst_device, s_ptr, src_device, (size_t)n);
  Py_END_ALLOW_THREADS
  kpy_copies_end(st);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_memcpy_peer(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_memcpy_peer_any(module, args, kwargs, 0);
}

static PyObject *kpy_memcpy_peer_async(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_memcpy_peer_any(module, args, kwargs, 1);
}

static PyMethodDef kpy_peer_functions[] = {
    {"memcpy_peer", (PyCFunction)(void (*)(void))kpy_memcpy_peer, METH_VARARGS | METH_KEYWORDS,
     "memcpy_peer($module, dest, src, size, dest_context=None, src_context=None)\n--\n\nSize "
     "bytes from src, memory of src_context's device, to dest, memory of dest_context's (None: "
     "the current context); no peer access is needed."},
    {"memcpy_peer_async", (PyCFunction)(void (*)(void))kpy_memcpy_peer_async,
     METH_VARARGS | METH_KEYWORDS,
     "memcpy_peer_async($module, dest, src, size, dest_context=None, src_context=None, "
     "stream=None)\n--\n\nThe same, queued on stream."},
    {NULL, NULL, 0, NULL},
};

int kpy_peer_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_peer_functions);
}
