/* kiln.DeviceArray, the type: its methods and attributes, assembled from the core (arrayobj.c)
 * and the exchange with other libraries (interop.c); and its makers kiln.to_device, empty and
 * zeros. A DeviceArray is C-contiguous. */
#include "array.h"

#include "arrayobj.h"
#include "arrayops.h"
#include "errors.h"
#include "interop.h"
#include "shape.h"
#include "stream.h"

#include <string.h>

/* ---- Making arrays ------------------------------------------------------------------------ */

/* stream= of an array call, read once. */
typedef struct kpy_on {
  PyObject *arg;      /* borrowed: None, a kiln.Stream, an int handle or another library's */
  kiln_stream handle; /* what kpy_stream_parse read from it */
} kpy_on;

static int kpy_on_parse(kpy_state *st, PyObject *arg, kpy_on *on) {
  on->arg = arg;
  return kpy_stream_parse(st, arg, &on->handle);
}

static PyObject *kpy_empty_or_zeros(PyObject *module, PyObject *args, PyObject *kwargs, int zero,
                                    const char *fmt) {
  static char *kwlist[] = {(char *)"shape", (char *)"dtype", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *shape_obj, *stream_obj = Py_None;
  PyArray_Descr *dtype = NULL;
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, PyArray_DescrConverter,
                                   &dtype, &stream_obj))
    return NULL;
  Py_ssize_t shape[KPY_MAX_DIMS];
  int ndim = 0;
  kpy_array *a = NULL;
  if (!dtype) dtype = PyArray_DescrFromType(NPY_DOUBLE);
  if (kpy_shape_parse(shape_obj, &ndim, shape) == 0 && kpy_on_parse(st, stream_obj, &on) == 0)
    a = kpy_array_new(st, dtype, ndim, shape, on.handle, kpy_stream_owner(stream_obj));
  Py_DECREF(dtype);
  if (a && zero && a->nbytes) {
    kiln_status s = kiln_memset_async(a->ptr, 0, (size_t)a->nbytes, on.handle);
    if (s) {
      Py_DECREF(a);
      return kpy_raise(st, s);
    }
  }
  return (PyObject *)a;
}

static PyObject *kpy_empty(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_empty_or_zeros(module, args, kwargs, 0, "O|O&O:empty");
}

static PyObject *kpy_zeros(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_empty_or_zeros(module, args, kwargs, 1, "O|O&O:zeros");
}

/* ---- Copies between host and device ------------------------------------------------------- */

/* A host array an array can copy to or from: an ndarray, C-contiguous, of its dtype and shape
 * (and writable, to receive). */
static int kpy_check_host(kpy_array *a, PyObject *host, int receive, const char *what) {
  if (!PyArray_Check(host)) {
    PyErr_Format(PyExc_TypeError, "%s must be a numpy array, not %.100s", what,
                 Py_TYPE(host)->tp_name);
    return -1;
  }
  PyArrayObject *h = (PyArrayObject *)host;
  if (!PyArray_IS_C_CONTIGUOUS(h)) {
    PyErr_Format(PyExc_ValueError,
                 "%s is not C-contiguous; copy it with "
                 "numpy.ascontiguousarray first",
                 what);
    return -1;
  }
  if (receive && !PyArray_ISWRITEABLE(h)) {
    PyErr_Format(PyExc_ValueError, "%s is read-only", what);
    return -1;
  }
  if (!PyArray_EquivTypes(PyArray_DESCR(h), a->dtype)) {
    PyErr_Format(PyExc_ValueError, "%s has dtype %R; the DeviceArray has %R", what,
                 (PyObject *)PyArray_DESCR(h), (PyObject *)a->dtype);
    return -1;
  }
  int same = PyArray_NDIM(h) == a->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = PyArray_DIM(h, i) == a->shape[i];
  if (!same) {
    PyObject *hs = PyObject_GetAttrString(host, "shape");
    PyErr_Format(PyExc_ValueError,
                 "%s has shape %R; the DeviceArray has %d dimension%s of "
                 "%zd elements in all",
                 what, hs, a->ndim, a->ndim == 1 ? "" : "s", a->size);
    Py_XDECREF(hs);
    return -1;
  }
  return 0;
}

/* Copies between a's memory and host. With stream= None the copy blocks. On a kiln.Stream it
 * is queued and the stream keeps host alive until it is seen to be done. On any other stream
 * (an int handle, another library's stream object) it is queued and then waited for: nothing
 * kiln holds past the call could keep host alive, as that stream knows nothing of it (the
 * same rule as In/Out in a launch); kiln.Stream.from_handle gives a queued copy there. */
static int kpy_copy(kpy_state *st, kpy_array *a, PyObject *host, int to_host, const kpy_on *on) {
  void *data = PyArray_DATA((PyArrayObject *)host);
  size_t n = (size_t)a->nbytes;
  kiln_deviceptr p = a->ptr;
  kiln_stream h = on->handle;
  kiln_status s;
  if (!n) return 0;
  if (on->arg == Py_None) {
    Py_BEGIN_ALLOW_THREADS
      s = to_host ? kiln_memcpy_dtoh(data, p, n) : kiln_memcpy_htod(p, data, n);
    Py_END_ALLOW_THREADS
  } else {
    int queued = kpy_stream_is_kiln(st, on->arg);
    /* A large pageable copy is staged by host threads before the call returns. */
    Py_BEGIN_ALLOW_THREADS
      s = to_host ? kiln_memcpy_dtoh_async(data, p, n, h) : kiln_memcpy_htod_async(p, data, n, h);
      if (!s && !queued) s = kiln_stream_synchronize(h);
    Py_END_ALLOW_THREADS
    if (!s && queued && kpy_stream_keep(on->arg, host) < 0) return -1;
  }
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  return 0;
}

static PyObject *kpy_to_device(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"array", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *host, *stream_obj = Py_None;
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:to_device", kwlist, &host, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  if (PyArray_IsScalar(host, Generic)) /* np.float32(3) goes as a 0-d array */
    host = PyArray_FromScalar(host, NULL);
  else Py_INCREF(host);
  if (!host) return NULL;
  kpy_array *a = NULL;
  if (!PyArray_Check(host)) {
    PyErr_Format(PyExc_TypeError,
                 "to_device() takes a numpy array, not %.100s "
                 "(kiln.asarray wraps arrays already on the GPU)",
                 Py_TYPE(host)->tp_name);
  } else if (!PyArray_IS_C_CONTIGUOUS((PyArrayObject *)host)) { /* before the GPU is touched */
    PyErr_SetString(PyExc_ValueError, "the array is not C-contiguous; copy it with "
                                      "numpy.ascontiguousarray first");
  } else {
    PyArrayObject *h = (PyArrayObject *)host;
    Py_ssize_t shape[KPY_MAX_DIMS];
    for (int i = 0; i < PyArray_NDIM(h) && i < KPY_MAX_DIMS; i++) shape[i] = PyArray_DIM(h, i);
    a = kpy_array_new(st, PyArray_DESCR(h), PyArray_NDIM(h), shape, on.handle,
                      kpy_stream_owner(stream_obj));
    if (a && (kpy_check_host(a, host, 0, "the array") < 0 || kpy_copy(st, a, host, 0, &on) < 0))
      Py_CLEAR(a);
  }
  Py_DECREF(host);
  return (PyObject *)a;
}

/* Copies a into out (None: a new numpy array) on stream; gives back out, a new reference. */
static PyObject *kpy_array_into(kpy_state *st, kpy_array *a, PyObject *out, const kpy_on *on) {
  if (out == Py_None) {
    npy_intp dims[KPY_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) dims[i] = a->shape[i];
    Py_INCREF(a->dtype); /* NewFromDescr steals it */
    out = PyArray_NewFromDescr(&PyArray_Type, a->dtype, a->ndim, dims, NULL, NULL, 0, NULL);
    if (!out) return NULL;
  } else {
    if (kpy_check_host(a, out, 1, "out") < 0) return NULL;
    Py_INCREF(out);
  }
  if (kpy_copy(st, a, out, 1, on) < 0) Py_CLEAR(out);
  return out;
}

static PyObject *kpy_array_get(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"out", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *out = Py_None, *stream_obj = Py_None;
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:get", kwlist, &out, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  return kpy_array_into(st, (kpy_array *)op, out, &on);
}

static PyObject *kpy_array_copy_to(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"host", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *host, *stream_obj = Py_None;
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_to", kwlist, &host, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  PyObject *r = kpy_array_into(st, (kpy_array *)op, host, &on);
  if (!r) return NULL;
  Py_DECREF(r);
  Py_RETURN_NONE;
}

static PyObject *kpy_array_copy_from(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"source", (char *)"stream", NULL};
  kpy_array *a = (kpy_array *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *src, *stream_obj = Py_None;
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_from", kwlist, &src, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  if (PyObject_TypeCheck(src, st->ref.DeviceArray_type)) { /* device to device */
    kpy_array *b = (kpy_array *)src;
    if (b->nbytes != a->nbytes || !PyArray_EquivTypes(b->dtype, a->dtype)) {
      PyErr_Format(PyExc_ValueError, "the source holds %zd elements of %R; this array %zd of %R",
                   b->size, (PyObject *)b->dtype, a->size, (PyObject *)a->dtype);
      return NULL;
    }
    kiln_status s = kiln_memcpy_dtod_async(a->ptr, b->ptr, (size_t)a->nbytes, on.handle);
    if (s) return kpy_raise(st, s);
    Py_RETURN_NONE;
  }
  if (kpy_check_host(a, src, 0, "the source") < 0 || kpy_copy(st, a, src, 0, &on) < 0) return NULL;
  Py_RETURN_NONE;
}

/* ---- Views -------------------------------------------------------------------------------- */

static PyObject *kpy_array_view(kpy_array *a, Py_ssize_t start, int ndim, const Py_ssize_t *shape) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  kpy_array *v = kpy_array_blank(st, a->dtype, ndim, shape);
  if (!v) return NULL;
  Py_ssize_t row = a->ndim ? a->nbytes / (a->shape[0] ? a->shape[0] : 1) : 0;
  v->ptr = v->nbytes ? a->ptr + (kiln_deviceptr)(start * row) : 0;
  v->device = a->device;
  v->stream = a->stream; /* where the memory is ordered: the consumers of its interface wait */
  v->base = Py_NewRef((PyObject *)a);
  return (PyObject *)v;
}

static PyObject *kpy_array_subscript(PyObject *op, PyObject *key) {
  kpy_array *a = (kpy_array *)op;
  if (a->ndim == 0) {
    PyErr_SetString(PyExc_IndexError, "a 0-d DeviceArray cannot be indexed; get() it");
    return NULL;
  }
  Py_ssize_t n = a->shape[0], shape[KPY_MAX_DIMS];
  memcpy(shape, a->shape, (size_t)a->ndim * sizeof *shape);
  if (PyIndex_Check(key)) {
    Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
    if (i == -1 && PyErr_Occurred()) return NULL;
    if (i < 0) i += n;
    if (i < 0 || i >= n) {
      PyErr_Format(PyExc_IndexError, "index %zd is out of range for an axis of %zd", i, n);
      return NULL;
    }
    return kpy_array_view(a, i, a->ndim - 1, shape + 1);
  }
  if (PySlice_Check(key)) {
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0) return NULL;
    Py_ssize_t len = PySlice_AdjustIndices(n, &start, &stop, step);
    if (step != 1) {
      PyErr_SetString(PyExc_ValueError, "a DeviceArray view must be contiguous: slices of the "
                                        "first axis with step 1 only");
      return NULL;
    }
    shape[0] = len;
    return kpy_array_view(a, len ? start : 0, a->ndim, shape);
  }
  PyErr_Format(PyExc_TypeError,
               "a DeviceArray is indexed by an int or a slice of its first "
               "axis, not %.100s",
               Py_TYPE(key)->tp_name);
  return NULL;
}

static Py_ssize_t kpy_array_length(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  if (a->ndim == 0) {
    PyErr_SetString(PyExc_TypeError, "len() of a 0-d DeviceArray");
    return -1;
  }
  return a->shape[0];
}

/* ---- Attributes --------------------------------------------------------------------------- */

static PyObject *kpy_array_get_shape(PyObject *op, void *c) {
  (void)c;
  return kpy_shape_tuple(((kpy_array *)op)->shape, ((kpy_array *)op)->ndim);
}

static PyObject *kpy_array_get_strides(PyObject *op, void *c) {
  (void)c;
  kpy_array *a = (kpy_array *)op;
  Py_ssize_t strides[KPY_MAX_DIMS], s = PyDataType_ELSIZE(a->dtype);
  for (int i = a->ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= a->shape[i];
  }
  return kpy_shape_tuple(strides, a->ndim);
}

static PyObject *kpy_array_get_dtype(PyObject *op, void *c) {
  (void)c;
  return Py_NewRef((PyObject *)((kpy_array *)op)->dtype);
}

static PyObject *kpy_array_get_size(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromSsize_t(((kpy_array *)op)->size);
}

static PyObject *kpy_array_get_nbytes(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromSsize_t(((kpy_array *)op)->nbytes);
}

static PyObject *kpy_array_get_ndim(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromLong(((kpy_array *)op)->ndim);
}

static PyObject *kpy_array_get_ptr(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromUnsignedLongLong(((kpy_array *)op)->ptr);
}

static PyObject *kpy_array_get_device(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromLong(((kpy_array *)op)->device);
}

/* ---- The type ----------------------------------------------------------------------------- */

static PyObject *kpy_array_repr(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  PyObject *shape = kpy_shape_tuple(a->shape, a->ndim);
  if (!shape) return NULL;
  PyObject *r = PyUnicode_FromFormat("<kiln.DeviceArray shape=%R dtype=%R on device %d>", shape,
                                     (PyObject *)a->dtype, a->device);
  Py_DECREF(shape);
  return r;
}

static PyMethodDef kpy_array_methods[] = {
    {"get", (PyCFunction)(void (*)(void))kpy_array_get, METH_VARARGS | METH_KEYWORDS,
     "get(out=None, stream=None): the contents as a numpy array (into out when given). With a "
     "stream the copy is queued; the array holds the data once the stream is synchronized."},
    {"copy_to", (PyCFunction)(void (*)(void))kpy_array_copy_to, METH_VARARGS | METH_KEYWORDS,
     "copy_to(host, stream=None): into a numpy array of the same dtype and shape."},
    {"copy_from", (PyCFunction)(void (*)(void))kpy_array_copy_from, METH_VARARGS | METH_KEYWORDS,
     "copy_from(source, stream=None): from a numpy array or a DeviceArray of the same dtype and "
     "shape."},
    {"__dlpack__", (PyCFunction)(void (*)(void))kpy_array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "The DLPack protocol: a capsule over the array's memory, no copy."},
    {"__dlpack_device__", kpy_array_dlpack_device, METH_NOARGS, "(kDLCUDA, device)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_array_getset[] = {
    {"shape", kpy_array_get_shape, NULL, "Its shape.", NULL},
    {"dtype", kpy_array_get_dtype, NULL, "Its numpy dtype.", NULL},
    {"strides", kpy_array_get_strides, NULL, "Its strides in bytes (always C-contiguous).", NULL},
    {"size", kpy_array_get_size, NULL, "Its number of elements.", NULL},
    {"nbytes", kpy_array_get_nbytes, NULL, "Its size in bytes.", NULL},
    {"ndim", kpy_array_get_ndim, NULL, "Its number of dimensions.", NULL},
    {"ptr", kpy_array_get_ptr, NULL, "The device address of its first element.", NULL},
    {"device", kpy_array_get_device, NULL, "The ordinal of its device.", NULL},
    {"__cuda_array_interface__", kpy_array_cai, NULL, "The CUDA array interface, v3.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_array_slots[] = {
    {Py_tp_dealloc, kpy_array_dealloc},
    {Py_tp_traverse, kpy_array_traverse},
    {Py_tp_clear, kpy_array_clear},
    {Py_tp_repr, kpy_array_repr},
    {Py_tp_methods, kpy_array_methods},
    {Py_tp_getset, kpy_array_getset},
    {Py_mp_subscript, kpy_array_subscript},
    {Py_mp_length, kpy_array_length},
    {Py_tp_doc, (void *)"An array in device memory; passed to a kernel as its pointer. Made by "
                        "kiln.to_device, kiln.empty, kiln.zeros, kiln.asarray."},
    {0, NULL},
};

static PyType_Spec kpy_array_spec = {"kiln.DeviceArray", sizeof(kpy_array), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                         Py_TPFLAGS_IMMUTABLETYPE |
                                         Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                     kpy_array_slots};

static PyMethodDef kpy_array_functions[] = {
    {"empty", (PyCFunction)(void (*)(void))kpy_empty, METH_VARARGS | METH_KEYWORDS,
     "empty(shape, dtype=float64, stream=None): an uninitialized DeviceArray."},
    {"zeros", (PyCFunction)(void (*)(void))kpy_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(shape, dtype=float64, stream=None): a DeviceArray of zeros."},
    {"to_device", (PyCFunction)(void (*)(void))kpy_to_device, METH_VARARGS | METH_KEYWORDS,
     "to_device(array, stream=None): a DeviceArray holding a copy of a numpy array."},
    {NULL, NULL, 0, NULL},
};

int kpy_array_init(PyObject *module, kpy_state *st) {
  /* The type's own slots, then arithmetic's (arrayops.c). */
  static PyType_Slot slots[sizeof kpy_array_slots / sizeof kpy_array_slots[0] + KPY_ARRAYOPS_SLOTS];
  size_t n = 0;
  for (PyType_Slot *p = kpy_array_slots; p->slot; p++) slots[n++] = *p;
  for (PyType_Slot *p = kpy_arrayops_slots; p->slot; p++) slots[n++] = *p;
  /* Its own methods, then those that run kernels (arrayops.c). */
  static PyMethodDef
      methods[sizeof kpy_array_methods / sizeof kpy_array_methods[0] + KPY_ARRAYOPS_METHODS];
  size_t m = 0;
  for (PyMethodDef *p = kpy_array_methods; p->ml_name; p++) methods[m++] = *p;
  for (PyMethodDef *p = kpy_arrayops_methods; p->ml_name; p++) methods[m++] = *p;
  methods[m] = (PyMethodDef){NULL, NULL, 0, NULL};
  for (size_t i = 0; i < n; i++)
    if (slots[i].slot == Py_tp_methods) slots[i].pfunc = methods;
  slots[n] = (PyType_Slot){0, NULL};
  kpy_array_spec.slots = slots;
  st->ref.DeviceArray_type = kpy_add_type(module, &kpy_array_spec, NULL);
  if (!st->ref.DeviceArray_type) return -1;
  return PyModule_AddFunctions(module, kpy_array_functions);
}
