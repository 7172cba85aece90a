/* Shapes of device and host arrays. */
#include "shape.h"

int kpy_shape_parse(PyObject *obj, int *ndim, Py_ssize_t *shape) {
  if (PyLong_CheckExact(obj)) { /* the common empty(n): no sequence to convert */
    shape[0] = PyLong_AsSsize_t(obj);
    *ndim = 1;
    return shape[0] == -1 && PyErr_Occurred() ? -1 : 0;
  }
  PyArray_Dims dims = {NULL, 0};
  if (!PyArray_IntpConverter(obj, &dims)) return -1;
  int ok = dims.len <= KPY_MAX_DIMS;
  if (ok) {
    for (int i = 0; i < dims.len; i++) shape[i] = dims.ptr[i];
    *ndim = dims.len;
  } else {
    PyErr_Format(PyExc_ValueError, "at most %d dimensions", KPY_MAX_DIMS);
  }
  PyDimMem_FREE(dims.ptr);
  return ok ? 0 : -1;
}

PyObject *kpy_shape_tuple(const Py_ssize_t *v, int n) {
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *x = PyLong_FromSsize_t(v[i]);
    if (!x) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, x);
  }
  return t;
}
