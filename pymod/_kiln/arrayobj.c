/* The DeviceArray object's core: making one, and its lifetime. */
#include "arrayobj.h"

#include "errors.h"

#include <string.h>

kpy_array *kpy_array_blank(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape) {
  if (ndim > KPY_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "a DeviceArray has at most %d dimensions, not %d", KPY_MAX_DIMS,
                 ndim);
    return NULL;
  }
  if (PyDataType_REFCHK(dtype) || PyDataType_ELSIZE(dtype) == 0) {
    PyErr_Format(PyExc_TypeError,
                 "dtype %R cannot live on the GPU: it holds Python objects "
                 "or has no size",
                 (PyObject *)dtype);
    return NULL;
  }
  Py_ssize_t size = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      PyErr_Format(PyExc_ValueError, "negative dimension %zd in the shape", shape[i]);
      return NULL;
    }
    if (shape[i] && size > PY_SSIZE_T_MAX / shape[i] / PyDataType_ELSIZE(dtype)) {
      PyErr_SetString(PyExc_ValueError, "the array is too large");
      return NULL;
    }
    size *= shape[i];
  }
  kpy_array *a = (kpy_array *)st->ref.DeviceArray_type->tp_alloc(st->ref.DeviceArray_type, 0);
  if (!a) return NULL;
  a->dtype = (PyArray_Descr *)Py_NewRef(dtype);
  a->ndim = ndim;
  memcpy(a->shape, shape, (size_t)ndim * sizeof *shape);
  a->size = size;
  a->nbytes = size * PyDataType_ELSIZE(dtype);
  a->device = kiln_device_current();
  return a;
}

kpy_array *kpy_array_new(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape,
                         kiln_stream stream, PyObject *owner) {
  kpy_array *a = kpy_array_blank(st, dtype, ndim, shape);
  if (!a || !a->nbytes) return a;
  kiln_status s = kiln_mem_alloc_async((size_t)a->nbytes, stream, &a->alloc);
  if (s) {
    Py_DECREF(a);
    return (kpy_array *)kpy_raise(st, s);
  }
  a->ptr = a->alloc;
  a->stream = stream;
  a->stream_owner = Py_XNewRef(owner);
  return a;
}

int kpy_array_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_array *a = (kpy_array *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(a->stream_owner);
  Py_VISIT(a->base);
  return 0;
}

int kpy_array_clear(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  Py_CLEAR(a->base);
  return 0;
}

void kpy_array_dealloc(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  if (a->alloc) {
    /* Freed where it was made: the block cache and the pool are per device. */
    int current = kiln_device_current();
    if (current != a->device) kiln_device_set_current(a->device);
    kiln_mem_free_async(a->alloc, (size_t)a->nbytes, a->stream);
    if (current != a->device) kiln_device_set_current(current);
  }
  if (a->dlpack && a->dlpack->deleter) a->dlpack->deleter(a->dlpack);
  Py_CLEAR(a->stream_owner);
  kpy_array_clear(op);
  Py_XDECREF(a->dtype);
  tp->tp_free(op);
  Py_DECREF(tp);
}
