/* Views of a DeviceArray: new shapes and strides over the same memory, laid out as NumPy lays
 * out the same view of a host array, so that a test can hold one against the other. */
#include "views.h"

#include "errors.h"
#include "hooks.h"

#include <string.h>

/* ---- Axes --------------------------------------------------------------------------------- */

/* NumPy's AxisError (an IndexError and a ValueError) for axis of an array of ndim axes. */
static void kpy_axis_error(Py_ssize_t axis, int ndim) {
  PyObject *m = PyImport_ImportModule("numpy.exceptions");
  PyObject *cls = m ? PyObject_GetAttrString(m, "AxisError") : NULL;
  Py_XDECREF(m);
  PyObject *e = cls ? PyObject_CallFunction(cls, "ni", axis, ndim) : NULL;
  if (e) {
    PyErr_SetObject(cls, e);
  } else {
    PyErr_Clear();
    PyErr_Format(PyExc_IndexError, "axis %zd is out of bounds for array of dimension %d", axis,
                 ndim);
  }
  Py_XDECREF(e);
  Py_XDECREF(cls);
}

/* An axis argument, negative ones counted from the end, into 0 .. ndim-1. */
static int kpy_axis(PyObject *obj, int ndim, int *out) {
  Py_ssize_t axis = PyNumber_AsSsize_t(obj, PyExc_IndexError);
  if (axis == -1 && PyErr_Occurred()) return -1;
  if (axis < -ndim || axis >= ndim) {
    kpy_axis_error(axis, ndim);
    return -1;
  }
  *out = (int)(axis < 0 ? axis + ndim : axis);
  return 0;
}

/* ---- Indexing ----------------------------------------------------------------------------- */

enum { KPY_IX_INT, KPY_IX_SLICE, KPY_IX_NEWAXIS, KPY_IX_ELLIPSIS };

/* What kind of index item is: -1 with IndexError for what basic indexing does not take. */
static int kpy_index_kind(kpy_state *st, PyObject *item) {
  if (item == Py_None) return KPY_IX_NEWAXIS;
  if (item == Py_Ellipsis) return KPY_IX_ELLIPSIS;
  if (PySlice_Check(item)) return KPY_IX_SLICE;
  int bool_like = PyBool_Check(item) || PyArray_IsScalar(item, Bool);
  int array_like = kpy_array_check(st, item) || PyList_Check(item) || PyTuple_Check(item) ||
                   (PyArray_Check(item) && (PyArray_NDIM((PyArrayObject *)item) > 0 ||
                                            !PyArray_ISINTEGER((PyArrayObject *)item)));
  if (bool_like || array_like) {
    PyErr_SetString(PyExc_IndexError,
                    "a DeviceArray is indexed by ints, slices, None and Ellipsis only: "
                    "integer-array and boolean-mask indexing are not supported (gpuarray.take "
                    "gathers elements by an array of indices)");
    return -1;
  }
  if (PyIndex_Check(item)) return KPY_IX_INT;
  PyErr_Format(PyExc_IndexError,
               "only integers, slices (`:`), ellipsis (`...`) and numpy.newaxis (`None`) are "
               "valid indices of a DeviceArray, not %.100s",
               Py_TYPE(item)->tp_name);
  return -1;
}

PyObject *kpy_array_subscript(PyObject *op, PyObject *key) {
  kpy_array *a = (kpy_array *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return NULL;
  int tuple = PyTuple_Check(key);
  Py_ssize_t n = tuple ? PyTuple_GET_SIZE(key) : 1;
  int consumed = 0, ellipses = 0;
  for (Py_ssize_t k = 0; k < n; k++) {
    int kind = kpy_index_kind(st, tuple ? PyTuple_GET_ITEM(key, k) : key);
    if (kind < 0) return NULL;
    consumed += kind == KPY_IX_INT || kind == KPY_IX_SLICE;
    ellipses += kind == KPY_IX_ELLIPSIS;
  }
  if (ellipses > 1) {
    PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
    return NULL;
  }
  if (consumed > a->ndim) {
    PyErr_Format(PyExc_IndexError,
                 "too many indices for array: array is %d-dimensional, but %d were indexed",
                 a->ndim, consumed);
    return NULL;
  }
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS], offset = 0;
  int axis = 0, ndim = 0;
  for (Py_ssize_t k = 0; k <= n; k++) {
    PyObject *item = k == n ? NULL : tuple ? PyTuple_GET_ITEM(key, k) : key;
    int kind = item ? kpy_index_kind(st, item) : KPY_IX_ELLIPSIS; /* the axes left at the end */
    if (kind < 0) return NULL;
    if ((kind == KPY_IX_INT || kind == KPY_IX_SLICE) && axis >= a->ndim) { /* it changed kind */
      PyErr_SetString(PyExc_IndexError, "the index changed while it was read");
      return NULL;
    }
    if (kind == KPY_IX_INT) {
      Py_ssize_t i = PyNumber_AsSsize_t(item, PyExc_IndexError), len = a->shape[axis];
      if (i == -1 && PyErr_Occurred()) return NULL;
      if (i < -len || i >= len) {
        PyErr_Format(PyExc_IndexError, "index %zd is out of bounds for axis %d with size %zd", i,
                     axis, len);
        return NULL;
      }
      offset += (i < 0 ? i + len : i) * a->strides[axis++];
      continue;
    }
    int add = kind == KPY_IX_ELLIPSIS ? (item ? a->ndim - consumed : a->ndim - axis) : 1;
    if (ndim + add > KPY_MAX_DIMS) {
      PyErr_Format(PyExc_IndexError, "the view would have more than %d dimensions", KPY_MAX_DIMS);
      return NULL;
    }
    if (kind == KPY_IX_NEWAXIS) {
      shape[ndim] = 1;
      strides[ndim++] = 0;
    } else if (kind == KPY_IX_SLICE) {
      Py_ssize_t start, stop, step;
      if (PySlice_Unpack(item, &start, &stop, &step) < 0) return NULL;
      shape[ndim] = PySlice_AdjustIndices(a->shape[axis], &start, &stop, step);
      /* A step past the axis (a[::2**62]) leaves one element at most: any stride will do. */
      if (__builtin_mul_overflow(step, a->strides[axis], &strides[ndim])) strides[ndim] = 0;
      ndim++;
      offset += start * a->strides[axis++];
    } else { /* Ellipsis: as many whole axes as the other items leave */
      for (int i = 0; i < add; i++, axis++, ndim++) {
        shape[ndim] = a->shape[axis];
        strides[ndim] = a->strides[axis];
      }
    }
  }
  return (PyObject *)kpy_array_view(a, NULL, ndim, shape, strides, a->ptr + (kiln_deviceptr)offset);
}

Py_ssize_t kpy_array_length(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  if (a->ndim == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of unsized object (a 0-d DeviceArray)");
    return -1;
  }
  return a->shape[0];
}

/* ---- Broadcasting ------------------------------------------------------------------------- */

int kpy_broadcast_strides(int n, const Py_ssize_t *from, const Py_ssize_t *strides, int ndim,
                          const Py_ssize_t *shape, Py_ssize_t *out) {
  int ok = n <= ndim;
  for (int i = 0; ok && i < ndim; i++) {
    int j = i - (ndim - n);
    if (j < 0 || (from[j] == 1 && shape[i] != 1)) out[i] = 0;
    else if (from[j] == shape[i]) out[i] = strides ? strides[j] : 0;
    else ok = 0;
  }
  if (ok) return 0;
  PyObject *f = kpy_shape_tuple(from, n), *t = kpy_shape_tuple(shape, ndim);
  if (f && t)
    PyErr_Format(PyExc_ValueError, "could not broadcast input array from shape %R into shape %R", f,
                 t);
  Py_XDECREF(f);
  Py_XDECREF(t);
  return -1;
}

kpy_array *kpy_array_broadcast(kpy_array *a, int ndim, const Py_ssize_t *shape) {
  if (ndim == a->ndim && !memcmp(shape, a->shape, (size_t)ndim * sizeof *shape))
    return (kpy_array *)Py_NewRef((PyObject *)a);
  Py_ssize_t strides[KPY_MAX_DIMS];
  if (kpy_broadcast_strides(a->ndim, a->shape, a->strides, ndim, shape, strides) < 0) return NULL;
  return kpy_array_view(a, NULL, ndim, shape, strides, a->ptr);
}

/* ---- Reshaping ---------------------------------------------------------------------------- */

/* The strides of shape[ndim] over a's memory in C or Fortran order without a copy, as NumPy
 * finds them: runs of a's axes that are contiguous with one another (length-1 axes left out)
 * are matched to runs of the new axes with the same number of elements. 0 when a run of a's
 * that must merge is not contiguous: then only a copy has that shape. a is not empty. */
static int kpy_reshape_strides(const kpy_array *a, int ndim, const Py_ssize_t *shape, int fortran,
                               Py_ssize_t *out) {
  Py_ssize_t od[KPY_MAX_DIMS], os[KPY_MAX_DIMS];
  int on = 0;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] != 1) {
      od[on] = a->shape[i];
      os[on++] = a->strides[i];
    }
  }
  int oi = 0, oj = 1, ni = 0, nj = 1;
  while (ni < ndim && oi < on) {
    Py_ssize_t np_ = shape[ni], op = od[oi];
    while (np_ != op) {
      if (np_ < op) {
        if (nj >= ndim) return 0;
        np_ *= shape[nj++];
      } else {
        if (oj >= on) return 0;
        op *= od[oj++];
      }
    }
    for (int k = oi; k < oj - 1; k++) {
      if (fortran ? os[k + 1] != od[k] * os[k] : os[k] != od[k + 1] * os[k + 1]) return 0;
    }
    if (fortran) {
      out[ni] = os[oi];
      for (int k = ni + 1; k < nj; k++) out[k] = out[k - 1] * shape[k - 1];
    } else {
      out[nj - 1] = os[oj - 1];
      for (int k = nj - 1; k > ni; k--) out[k - 1] = out[k] * shape[k];
    }
    ni = nj++;
    oi = oj++;
  }
  /* New axes of length 1 past the last run. */
  Py_ssize_t last = ni ? out[ni - 1] * (fortran ? shape[ni - 1] : 1) : a->itemsize;
  for (int k = ni; k < ndim; k++) out[k] = last;
  return 1;
}

PyObject *kpy_array_reshaped(kpy_array *a, int ndim, const Py_ssize_t *shape, int fortran) {
  Py_ssize_t strides[KPY_MAX_DIMS];
  int same_shape = ndim == a->ndim && !memcmp(shape, a->shape, (size_t)ndim * sizeof *shape);
  int in_order = a->flags & (fortran ? KPY_F_CONTIGUOUS : KPY_C_CONTIGUOUS);
  int other_order = a->flags & (fortran ? KPY_C_CONTIGUOUS : KPY_F_CONTIGUOUS);
  /* The same shape is NumPy's view, except that an array contiguous only in the other order is
   * copied into the order asked: PyCUDA's reshape(order=) promises that order, and code written
   * for it checks the flags. The values stay NumPy's. */
  if (same_shape && !in_order && other_order) {
    kpy_state *st = kpy_state_of_type(Py_TYPE(a));
    return st ? (PyObject *)kpy_array_copy_order(st, a, fortran, Py_None, NULL) : NULL;
  }
  if (same_shape) return (PyObject *)kpy_array_view(a, NULL, ndim, shape, a->strides, a->ptr);
  if (in_order) kpy_strides_contiguous(ndim, shape, a->itemsize, fortran, strides);
  else if (!kpy_reshape_strides(a, ndim, shape, fortran, strides)) {
    kpy_state *st = kpy_state_of_type(Py_TYPE(a));
    kpy_array *c = st ? kpy_array_copy_order(st, a, fortran, Py_None, NULL) : NULL;
    if (!c) return NULL;
    PyObject *r = kpy_array_reshaped(c, ndim, shape, fortran);
    Py_DECREF(c);
    return r;
  }
  return (PyObject *)kpy_array_view(a, NULL, ndim, shape, strides, a->ptr);
}

/* order= of reshape and ravel: 1 for "F", 0 for "C" (or not given), -1 with ValueError. */
static int kpy_order_arg(PyObject *order) {
  const char *o = order && PyUnicode_Check(order) ? kpy_cstring(order, "order") : NULL;
  if (!order || (o && !strcmp(o, "C"))) return 0;
  if (o && !strcmp(o, "F")) return 1;
  PyErr_Clear();
  PyErr_Format(PyExc_ValueError, "order must be 'C' or 'F', not %R", order);
  return -1;
}

/* The new shape of reshape: its one negative entry (NumPy takes any negative one for -1) gets
 * what the others leave of size. */
static int kpy_reshape_resolve(const kpy_array *a, int ndim, Py_ssize_t *shape) {
  int unknown = -1, bad = 0;
  Py_ssize_t known = 1;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      if (unknown >= 0) {
        PyErr_SetString(PyExc_ValueError, "can only specify one unknown dimension");
        return -1;
      }
      unknown = i;
    } else if (__builtin_mul_overflow(known, shape[i], &known)) {
      bad = 1;
    }
  }
  if (!bad && unknown >= 0 && known && a->size % known == 0) shape[unknown] = a->size / known;
  else if (bad || unknown >= 0 || known != a->size) bad = 1;
  if (!bad) return 0;
  PyObject *t = kpy_shape_tuple(shape, ndim);
  if (t)
    PyErr_Format(PyExc_ValueError, "cannot reshape array of size %zd into shape %R", a->size, t);
  Py_XDECREF(t);
  return -1;
}

PyObject *kpy_array_reshape(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"order", NULL};
  PyObject *order = NULL, *empty = PyTuple_New(0);
  int ok = empty && PyArg_ParseTupleAndKeywords(empty, kwargs, "|$O:reshape", kwlist, &order);
  Py_XDECREF(empty);
  int fortran = ok ? kpy_order_arg(order) : -1;
  if (fortran < 0) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(args), shape[KPY_MAX_DIMS];
  int ndim = 0;
  if (n == 0) {
    PyErr_SetString(PyExc_TypeError, "reshape() takes the new shape: reshape(2, 3) or "
                                     "reshape((2, 3))");
    return NULL;
  }
  if (kpy_shape_parse(n == 1 ? PyTuple_GET_ITEM(args, 0) : args, &ndim, shape) < 0 ||
      kpy_reshape_resolve((kpy_array *)op, ndim, shape) < 0)
    return NULL;
  return kpy_array_reshaped((kpy_array *)op, ndim, shape, fortran);
}

/* a laid out again from the same first element, by a setter that checked the layout: its
 * dtype, shape and strides (bytes); size, nbytes and the contiguity flags follow. */
static void kpy_array_relayout(kpy_array *a, PyArray_Descr *dtype, int ndim,
                               const Py_ssize_t *shape, const Py_ssize_t *strides) {
  Py_ssize_t size = 1;
  for (int i = 0; i < ndim; i++) size *= shape[i];
  Py_SETREF(a->dtype, (PyArray_Descr *)Py_NewRef((PyObject *)dtype));
  a->itemsize = PyDataType_ELSIZE(dtype);
  a->ndim = ndim;
  memcpy(a->shape, shape, sizeof shape[0] * (size_t)ndim);
  memcpy(a->strides, strides, sizeof strides[0] * (size_t)ndim);
  a->size = size;
  a->nbytes = size * a->itemsize;
  kpy_array_update_flags(a);
}

/* The number of elements of a shape with no -1 in it; -1 for one with a -1, or too large. */
static Py_ssize_t kpy_shape_count(int ndim, const Py_ssize_t *shape) {
  Py_ssize_t n = 1;
  for (int i = 0; i < ndim; i++)
    if (shape[i] < 0 || __builtin_mul_overflow(n, shape[i], &n)) return -1;
  return n;
}

/* a.shape = a shape of another size. PyCUDA's shape is a plain attribute, and a program that
 * puts new memory under an array (scikit-cuda's set_realloc: gpudata, then shape, size,
 * strides and dtype, one by one) gives it the shape of that memory. Taken, in C order, where
 * the allocation the array holds has the new shape's bytes from its first element; NumPy's
 * refusal where it does not, or where the array's memory is not an allocation of its own. */
static int kpy_array_resize(kpy_array *a, int ndim, const Py_ssize_t *shape, Py_ssize_t count) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  if (!st) return -1;
  Py_ssize_t lo, hi, nbytes;
  int room = kpy_array_room(st, a, &lo, &hi);
  int overflow = __builtin_mul_overflow(count, a->itemsize, &nbytes);
  if (!room || overflow || nbytes > hi) {
    PyObject *t = kpy_shape_tuple(shape, ndim);
    if (t && room && !overflow)
      PyErr_Format(PyExc_ValueError,
                   "cannot reshape array of size %zd into shape %R: %zd items of %S are %zd "
                   "bytes, past the %zd the allocation under the array holds from its first "
                   "element",
                   a->size, t, count, (PyObject *)a->dtype, nbytes, hi);
    else if (t)
      PyErr_Format(PyExc_ValueError, "cannot reshape array of size %zd into shape %R", a->size, t);
    Py_XDECREF(t);
    return -1;
  }
  Py_ssize_t strides[KPY_MAX_DIMS];
  kpy_strides_contiguous(ndim, shape, a->itemsize, 0, strides);
  kpy_array_address_out(a); /* a reduction's host mirror is of the old size */
  kpy_array_relayout(a, a->dtype, ndim, shape, strides);
  return 0;
}

/* a.shape = (...): NumPy's reshape in place, taken only where the new shape is a view of the
 * same memory in C order (else NumPy's refusal, which points to reshape()). Views already made
 * keep their own layout. A shape of another size is PyCUDA's plain assignment (above). */
int kpy_array_set_shape(PyObject *op, PyObject *value, void *closure) {
  (void)closure;
  kpy_array *a = (kpy_array *)op;
  if (kpy_array_refuse_deletion(value, "shape") < 0) return -1;
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  int ndim = 0;
  if (kpy_shape_parse(value, &ndim, shape) < 0) return -1;
  Py_ssize_t count = kpy_shape_count(ndim, shape);
  if (count >= 0 && count != a->size) return kpy_array_resize(a, ndim, shape, count);
  if (kpy_reshape_resolve(a, ndim, shape) < 0) return -1;
  if (!a->size || a->flags & KPY_C_CONTIGUOUS) {
    kpy_strides_contiguous(ndim, shape, a->itemsize, 0, strides);
  } else if (!kpy_reshape_strides(a, ndim, shape, 0, strides)) {
    PyErr_SetString(PyExc_AttributeError, "Incompatible shape for in-place modification: the "
                                          "array's memory is not laid out for it. Use "
                                          "`.reshape()` to make a copy with the desired shape.");
    return -1;
  }
  kpy_array_relayout(a, a->dtype, ndim, shape, strides);
  return 0;
}

PyObject *kpy_array_ravel(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"order", NULL};
  PyObject *order = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:ravel", kwlist, &order)) return NULL;
  int fortran = kpy_order_arg(order);
  if (fortran < 0) return NULL;
  kpy_array *a = (kpy_array *)op;
  kpy_array *r = (kpy_array *)kpy_array_reshaped(a, 1, &a->size, fortran);
  if (!r || r->flags & KPY_C_CONTIGUOUS) return (PyObject *)r;
  /* A strided 1-d view (of a 1-d strided array): NumPy's ravel is always contiguous. */
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  kpy_array *c = st ? kpy_array_copy_order(st, r, 0, Py_None, NULL) : NULL;
  Py_DECREF(r);
  return (PyObject *)c;
}

/* ---- Reinterpreting and permuting --------------------------------------------------------- */

/* The layout of a reinterpreted as items of `to` bytes, NumPy's view(dtype): shape and strides
 * (a's to begin with) with the last axis taking the change of size. NULL, or NumPy's words for
 * why it cannot be. */
static const char *kpy_view_layout(const kpy_array *a, Py_ssize_t to, Py_ssize_t *shape,
                                   Py_ssize_t *strides) {
  Py_ssize_t from = a->itemsize;
  memcpy(shape, a->shape, (size_t)a->ndim * sizeof *shape);
  memcpy(strides, a->strides, (size_t)a->ndim * sizeof *strides);
  if (to == from) return NULL;
  int last = a->ndim - 1;
  if (a->ndim == 0)
    return "Changing the dtype of a 0d array is only supported if the itemsize is unchanged";
  if (shape[last] != 1 && a->size && strides[last] != from)
    return "To change to a dtype of a different size, the last axis must be contiguous";
  if (to && to < from && from % to)
    return "When changing to a smaller dtype, its size must be a divisor of the size of "
           "original dtype";
  if (to && to > from && shape[last] * from % to)
    return "When changing to a larger dtype, its size must be a divisor of the total size "
           "in bytes of the last axis of the array.";
  if (to) {
    shape[last] = shape[last] * from / to;
    strides[last] = to;
  }
  return NULL;
}

PyObject *kpy_array_view_as(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"dtype", NULL};
  kpy_array *a = (kpy_array *)op;
  PyObject *dtype_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:view", kwlist, &dtype_obj)) return NULL;
  PyArray_Descr *dtype = NULL;
  if (dtype_obj == Py_None) dtype = (PyArray_Descr *)Py_NewRef((PyObject *)a->dtype);
  else if (!PyArray_DescrConverter(dtype_obj, &dtype)) return NULL;
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  const char *problem = kpy_view_layout(a, PyDataType_ELSIZE(dtype), shape, strides);
  PyObject *v = NULL;
  if (problem) PyErr_SetString(PyExc_ValueError, problem);
  else v = (PyObject *)kpy_array_view(a, dtype, a->ndim, shape, strides, a->ptr);
  Py_DECREF(dtype);
  return v;
}

/* a.dtype = dtype kept with a's shape and strides, as PyCUDA's plain attribute takes it: 1
 * where the strides already suit the new item size and the layout stays inside the allocation
 * a holds (scikit-cuda's set_realloc sets the strides of the new dtype before the dtype
 * itself), else 0. */
static int kpy_array_retype(kpy_array *a, PyArray_Descr *dtype) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  Py_ssize_t to = PyDataType_ELSIZE(dtype), lo, hi, new_lo, new_hi;
  if (!st || !kpy_array_room(st, a, &lo, &hi)) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] > 1 && a->strides[i] % to) return 0;
  if (kpy_layout_extent(a->ndim, a->shape, a->strides, to, &new_lo, &new_hi) < 0) {
    PyErr_Clear();
    return 0;
  }
  if (a->size && (new_lo < lo || new_hi > hi)) return 0;
  kpy_array_address_out(a); /* a reduction's host mirror is of the old bytes */
  kpy_array_relayout(a, dtype, a->ndim, a->shape, a->strides);
  return 1;
}

/* a.dtype = t: NumPy's reinterpretation in place, the view(t) layout taken by the array
 * itself (the last axis takes a change of item size). Where view(t) is refused, PyCUDA's
 * plain assignment where it is safe (above), else view(t)'s refusal. */
int kpy_array_set_dtype(PyObject *op, PyObject *value, void *closure) {
  (void)closure;
  if (kpy_array_refuse_deletion(value, "dtype") < 0) return -1;
  PyArray_Descr *dtype = NULL; /* None is float64 here, as NumPy's setter takes it */
  if (!PyArray_DescrConverter(value, &dtype)) return -1;
  if (PyDataType_HASSUBARRAY(dtype)) {
    PyErr_Format(PyExc_ValueError,
                 "a DeviceArray's dtype cannot be the subarray type %R: its "
                 "items would be arrays",
                 (PyObject *)dtype);
    Py_DECREF(dtype);
    return -1;
  }
  kpy_array *a = (kpy_array *)op;
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  const char *problem = kpy_view_layout(a, PyDataType_ELSIZE(dtype), shape, strides);
  int rc = kpy_dtype_check(dtype);
  if (rc == 0 && !problem) {
    kpy_array_address_out(a); /* a reduction's host mirror is of the old dtype */
    kpy_array_relayout(a, dtype, a->ndim, shape, strides);
  } else if (rc == 0 && !kpy_array_retype(a, dtype)) {
    PyErr_SetString(PyExc_ValueError, problem);
    rc = -1;
  }
  Py_DECREF(dtype);
  return rc;
}

/* a with its axes in the order perm gives. */
static PyObject *kpy_array_permuted(kpy_array *a, const int *perm) {
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) {
    shape[i] = a->shape[perm[i]];
    strides[i] = a->strides[perm[i]];
  }
  return (PyObject *)kpy_array_view(a, NULL, a->ndim, shape, strides, a->ptr);
}

PyObject *kpy_array_transpose(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_array *a = (kpy_array *)op;
  int perm[KPY_MAX_DIMS], seen[KPY_MAX_DIMS] = {0};
  Py_ssize_t n = PyTuple_GET_SIZE(args);
  PyObject *first = n == 1 ? PyTuple_GET_ITEM(args, 0) : NULL;
  if (kwargs && PyDict_GET_SIZE(kwargs)) { /* transpose(axes=...), PyCUDA's and NumPy's keyword */
    static char *kwlist[] = {(char *)"axes", NULL};
    PyObject *empty = PyTuple_New(0);
    first = Py_None;
    int ok =
        empty && !n && PyArg_ParseTupleAndKeywords(empty, kwargs, "|O:transpose", kwlist, &first);
    Py_XDECREF(empty);
    if (!ok) {
      if (n)
        PyErr_SetString(PyExc_TypeError, "transpose() takes the axes either as arguments "
                                         "or as axes=, not both");
      return NULL;
    }
    n = 1;
  }
  if (n == 0 || first == Py_None) { /* reversed */
    for (int i = 0; i < a->ndim; i++) perm[i] = a->ndim - 1 - i;
    return kpy_array_permuted(a, perm);
  }
  /* One argument (or axes=) is a sequence of axes, or the one axis of a 1-d array. */
  PyObject *axes = !first                    ? Py_NewRef(args)
                   : PySequence_Check(first) ? PySequence_Tuple(first)
                                             : PyTuple_Pack(1, first);
  if (!axes) return NULL;
  PyObject *r = NULL;
  if (PyTuple_GET_SIZE(axes) != a->ndim) {
    PyErr_SetString(PyExc_ValueError, "axes don't match array");
    goto done;
  }
  for (int i = 0; i < a->ndim; i++) {
    if (kpy_axis(PyTuple_GET_ITEM(axes, i), a->ndim, &perm[i]) < 0) goto done;
    if (seen[perm[i]]++) {
      PyErr_SetString(PyExc_ValueError, "repeated axis in transpose");
      goto done;
    }
  }
  r = kpy_array_permuted(a, perm);
done:
  Py_DECREF(axes);
  return r;
}

PyObject *kpy_array_swapaxes(PyObject *op, PyObject *args) {
  kpy_array *a = (kpy_array *)op;
  PyObject *x, *y;
  int perm[KPY_MAX_DIMS], i, j;
  if (!PyArg_ParseTuple(args, "OO:swapaxes", &x, &y) || kpy_axis(x, a->ndim, &i) < 0 ||
      kpy_axis(y, a->ndim, &j) < 0)
    return NULL;
  for (int k = 0; k < a->ndim; k++) perm[k] = k;
  perm[i] = j;
  perm[j] = i;
  return kpy_array_permuted(a, perm);
}

PyObject *kpy_array_get_T(PyObject *op, void *closure) {
  (void)closure;
  PyObject *none = PyTuple_New(0);
  PyObject *r = none ? kpy_array_transpose(op, none, NULL) : NULL;
  Py_XDECREF(none);
  return r;
}

PyObject *kpy_array_squeeze(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"axis", NULL};
  kpy_array *a = (kpy_array *)op;
  PyObject *axis = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:squeeze", kwlist, &axis)) return NULL;
  int drop[KPY_MAX_DIMS] = {0};
  if (axis == Py_None) {
    for (int i = 0; i < a->ndim; i++) drop[i] = a->shape[i] == 1;
  } else {
    PyObject *axes = PyTuple_Check(axis) ? Py_NewRef(axis) : PyTuple_Pack(1, axis);
    if (!axes) return NULL;
    int rc = 0;
    for (Py_ssize_t k = 0; !rc && k < PyTuple_GET_SIZE(axes); k++) {
      int i;
      rc = kpy_axis(PyTuple_GET_ITEM(axes, k), a->ndim, &i);
      if (!rc && drop[i]++) {
        PyErr_SetString(PyExc_ValueError, "duplicate value in 'axis'");
        rc = -1;
      } else if (!rc && a->shape[i] != 1) {
        PyErr_SetString(PyExc_ValueError,
                        "cannot select an axis to squeeze out which has size not equal to one");
        rc = -1;
      }
    }
    Py_DECREF(axes);
    if (rc) return NULL;
  }
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  int ndim = 0;
  for (int i = 0; i < a->ndim; i++) {
    if (drop[i]) continue;
    shape[ndim] = a->shape[i];
    strides[ndim++] = a->strides[i];
  }
  return (PyObject *)kpy_array_view(a, NULL, ndim, shape, strides, a->ptr);
}

/* ---- Complex parts ------------------------------------------------------------------------ */

/* The dtype of the real and imaginary parts of a complex dtype, in its byte order. */
static PyArray_Descr *kpy_part_dtype(PyArray_Descr *d) {
  int t = d->type_num == NPY_CFLOAT    ? NPY_FLOAT
          : d->type_num == NPY_CDOUBLE ? NPY_DOUBLE
                                       : NPY_LONGDOUBLE;
  PyArray_Descr *part = PyArray_DescrFromType(t);
  if (part && !PyArray_ISNBO(d->byteorder)) {
    PyArray_Descr *swapped = PyArray_DescrNewByteorder(part, NPY_SWAP);
    Py_DECREF(part);
    part = swapped;
  }
  return part;
}

/* The real or imaginary parts of a complex array in place: a view strided as NumPy's. */
static PyObject *kpy_array_part(kpy_array *a, int imag) {
  PyArray_Descr *part = kpy_part_dtype(a->dtype);
  if (!part) return NULL;
  kiln_deviceptr ptr = a->ptr + (imag ? (kiln_deviceptr)PyDataType_ELSIZE(part) : 0);
  PyObject *v = (PyObject *)kpy_array_view(a, part, a->ndim, a->shape, a->strides, ptr);
  Py_DECREF(part);
  return v;
}

/* PyCUDA's real and imag of a complex array: the parts copied into a new array, contiguous in
 * the array's order. A view of them (NumPy's way) would be strided, and a PyCUDA program reads
 * the memory under the result as the parts alone: its gpudata passed to a kernel or a
 * memcpy_dtoh. Writing to the parts is `a.real = value`, as in NumPy. */
static PyObject *kpy_array_part_copy(kpy_array *a, int imag) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  kpy_array *v = st ? (kpy_array *)kpy_array_part(a, imag) : NULL;
  if (!v) return NULL;
  kpy_array *c =
      kpy_array_copy_alloc(st, v, a->allocator, kpy_array_fortran_only(a), Py_None, NULL);
  Py_DECREF(v);
  return (PyObject *)c;
}

PyObject *kpy_array_get_real(PyObject *op, void *closure) {
  (void)closure;
  kpy_array *a = (kpy_array *)op;
  return PyTypeNum_ISCOMPLEX(a->dtype->type_num) ? kpy_array_part_copy(a, 0) : Py_NewRef(op);
}

PyObject *kpy_array_get_imag(PyObject *op, void *closure) {
  (void)closure;
  kpy_array *a = (kpy_array *)op;
  if (PyTypeNum_ISCOMPLEX(a->dtype->type_num)) return kpy_array_part_copy(a, 1);
  /* A real array's imaginary part: zeros of its shape and order, all bytes 0. */
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  kpy_array *z = st && kpy_array_check_device(a) == 0
                     ? kpy_array_new_from(st, a->allocator, a->dtype, a->ndim, a->shape,
                                          kpy_array_fortran_only(a), NULL, NULL)
                     : NULL;
  if (z && z->nbytes) {
    kiln_status s = kiln_memset_async(z->ptr, 0, (size_t)z->nbytes, NULL);
    if (s) {
      Py_DECREF(z);
      return kpy_raise(st, s);
    }
  }
  return (PyObject *)z;
}

/* a.real = value and a.imag = value write into the parts, as NumPy's do: value converted and
 * broadcast as in a[...] = value. A real array's real part is the array; it has no imaginary
 * part to set. */
static int kpy_array_set_part(PyObject *op, PyObject *value, int imag) {
  kpy_array *a = (kpy_array *)op;
  if (!value) {
    PyErr_Format(PyExc_AttributeError, "cannot delete an array's %s", imag ? "imag" : "real");
    return -1;
  }
  if (!PyTypeNum_ISCOMPLEX(a->dtype->type_num)) {
    if (!imag) return PyObject_SetItem(op, Py_Ellipsis, value);
    PyErr_SetString(PyExc_TypeError, "array does not have imaginary part to set");
    return -1;
  }
  PyObject *v = kpy_array_part(a, imag);
  int rc = v ? PyObject_SetItem(v, Py_Ellipsis, value) : -1;
  Py_XDECREF(v);
  return rc;
}

int kpy_array_set_real(PyObject *op, PyObject *value, void *closure) {
  (void)closure;
  return kpy_array_set_part(op, value, 0);
}

int kpy_array_set_imag(PyObject *op, PyObject *value, void *closure) {
  (void)closure;
  return kpy_array_set_part(op, value, 1);
}

/* _parts(): the real and imaginary parts as views, for kiln's own kernels, which read strided
 * arrays in place (cumath.real(a, out=) copies from them once). */
PyObject *kpy_array_parts(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_array *a = (kpy_array *)op;
  if (!PyTypeNum_ISCOMPLEX(a->dtype->type_num)) {
    PyErr_SetString(PyExc_TypeError, "_parts() is for complex arrays");
    return NULL;
  }
  PyObject *re = kpy_array_part(a, 0), *im = re ? kpy_array_part(a, 1) : NULL;
  PyObject *r = im ? PyTuple_Pack(2, re, im) : NULL;
  Py_XDECREF(re);
  Py_XDECREF(im);
  return r;
}
