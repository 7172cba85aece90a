/* Shapes of device and host arrays. */
#include "shape.h"

int kpy_shape_parse(PyObject *obj, int *ndim, Py_ssize_t *shape) {
  if (PyLong_CheckExact(obj)) { /* the common empty(n): no sequence to convert */
    shape[0] = PyLong_AsSsize_t(obj);
    *ndim = 1;
    return shape[0] == -1 && PyErr_Occurred() ? -1 : 0;
  }
  /* A list is read as a tuple of its items: NumPy's converter reads a list in place while the
   * items' __index__ (Python code) runs, which could empty it under the reader. */
  PyObject *items = PyList_Check(obj) ? PyList_AsTuple(obj) : Py_NewRef(obj);
  if (!items) return -1;
  PyArray_Dims dims = {NULL, 0};
  int converted = PyArray_IntpConverter(items, &dims);
  Py_DECREF(items);
  if (!converted) return -1;
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
