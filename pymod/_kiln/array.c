/* kiln.DeviceArray: a C-contiguous array in device memory, kiln.to_device / empty / zeros /
 * asarray, the CUDA array interface and DLPack both ways, and page-locked host arrays. */
#include "array.h"

#include "dlpack.h"
#include "errors.h"
#include "stream.h"

#define KPY_MAX_DIMS 32

typedef struct kpy_array {
  PyObject_HEAD
  kiln_deviceptr ptr;       /* the first element; 0 for an empty array */
  PyArray_Descr *dtype;     /* strong */
  int ndim;
  Py_ssize_t shape[KPY_MAX_DIMS];
  Py_ssize_t size, nbytes;
  int device;
  kiln_deviceptr alloc;     /* memory it owns and frees; 0 for a view or a foreign array */
  PyObject *stream;         /* the kiln.Stream that owned memory is ordered on, or NULL */
  PyObject *base;           /* what a view keeps alive: the array it views, or the owner */
  DLManagedTensor *dlpack;  /* an imported DLPack tensor, released with the array */
} kpy_array;

/* ---- Making arrays ------------------------------------------------------------------------ */

static kpy_array *kpy_array_blank(kpy_state *st, PyArray_Descr *dtype, int ndim,
                                  const Py_ssize_t *shape) {
  if (ndim > KPY_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "a DeviceArray has at most %d dimensions, not %d",
                 KPY_MAX_DIMS, ndim);
    return NULL;
  }
  if (PyDataType_REFCHK(dtype) || PyDataType_ELSIZE(dtype) == 0) {
    PyErr_Format(PyExc_TypeError, "dtype %R cannot live on the GPU: it holds Python objects "
                 "or has no size", (PyObject *)dtype);
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

/* A new array with memory of its own, allocated in stream order on stream (None or a Stream). */
static kpy_array *kpy_array_new(kpy_state *st, PyArray_Descr *dtype, int ndim,
                                const Py_ssize_t *shape, PyObject *stream) {
  kpy_array *a = kpy_array_blank(st, dtype, ndim, shape);
  if (!a || !a->nbytes) return a;
  kiln_stream handle = stream ? kpy_stream_handle(stream) : NULL;
  kiln_status s = kiln_mem_alloc_async((size_t)a->nbytes, handle, &a->alloc);
  if (s) {
    Py_DECREF(a);
    return (kpy_array *)kpy_raise(st, s);
  }
  a->ptr = a->alloc;
  a->stream = Py_XNewRef(stream);
  return a;
}

/* stream= of array calls: None or a kiln.Stream (which keeps the host array alive). */
static int kpy_array_stream(kpy_state *st, PyObject *obj, PyObject **out) {
  *out = NULL;
  if (obj == Py_None) return 0;
  if (!PyObject_TypeCheck(obj, st->ref.Stream_type)) {
    PyErr_Format(PyExc_TypeError, "stream must be None or a kiln.Stream (for another library's "
                 "stream, kiln.Stream.from_handle(...)), not %.100s", Py_TYPE(obj)->tp_name);
    return -1;
  }
  *out = obj;
  return 0;
}

static int kpy_dims(PyObject *obj, int *ndim, Py_ssize_t *shape) {
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

static PyObject *kpy_empty_or_zeros(PyObject *module, PyObject *args, PyObject *kwargs,
                                    int zero, const char *fmt) {
  static char *kwlist[] = {(char *)"shape", (char *)"dtype", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *shape_obj, *stream_obj = Py_None, *stream;
  PyArray_Descr *dtype = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, PyArray_DescrConverter,
                                   &dtype, &stream_obj))
    return NULL;
  Py_ssize_t shape[KPY_MAX_DIMS];
  int ndim = 0;
  kpy_array *a = NULL;
  if (!dtype) dtype = PyArray_DescrFromType(NPY_DOUBLE);
  if (kpy_dims(shape_obj, &ndim, shape) == 0 && kpy_array_stream(st, stream_obj, &stream) == 0)
    a = kpy_array_new(st, dtype, ndim, shape, stream);
  Py_DECREF(dtype);
  if (a && zero && a->nbytes) {
    kiln_status s = kiln_memset_async(a->ptr, 0, (size_t)a->nbytes,
                                      stream ? kpy_stream_handle(stream) : NULL);
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
    PyErr_Format(PyExc_ValueError, "%s is not C-contiguous; copy it with "
                 "numpy.ascontiguousarray first", what);
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
    PyErr_Format(PyExc_ValueError, "%s has shape %R; the DeviceArray has %d dimension%s of "
                 "%zd elements in all", what, hs, a->ndim, a->ndim == 1 ? "" : "s", a->size);
    Py_XDECREF(hs);
    return -1;
  }
  return 0;
}

/* Copies between a's memory and host, on stream (None: before returning). */
static int kpy_copy(kpy_state *st, kpy_array *a, PyObject *host, int to_host, PyObject *stream) {
  void *data = PyArray_DATA((PyArrayObject *)host);
  size_t n = (size_t)a->nbytes;
  kiln_status s;
  if (!n) return 0;
  if (stream) {
    kiln_stream h = kpy_stream_handle(stream);
    kiln_deviceptr p = a->ptr;
    /* A large pageable copy is staged by host threads before the call returns. */
    Py_BEGIN_ALLOW_THREADS
    s = to_host ? kiln_memcpy_dtoh_async(data, p, n, h) : kiln_memcpy_htod_async(p, data, n, h);
    Py_END_ALLOW_THREADS
    if (!s && kpy_stream_keep(stream, host) < 0) return -1;
  } else {
    Py_BEGIN_ALLOW_THREADS
    s = to_host ? kiln_memcpy_dtoh(data, a->ptr, n) : kiln_memcpy_htod(a->ptr, data, n);
    Py_END_ALLOW_THREADS
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
  PyObject *host, *stream_obj = Py_None, *stream;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:to_device", kwlist, &host, &stream_obj) ||
      kpy_array_stream(st, stream_obj, &stream) < 0)
    return NULL;
  if (PyArray_IsScalar(host, Generic)) /* np.float32(3) goes as a 0-d array */
    host = PyArray_FromScalar(host, NULL);
  else
    Py_INCREF(host);
  if (!host) return NULL;
  kpy_array *a = NULL;
  if (!PyArray_Check(host)) {
    PyErr_Format(PyExc_TypeError, "to_device() takes a numpy array, not %.100s "
                 "(kiln.asarray wraps arrays already on the GPU)", Py_TYPE(host)->tp_name);
  } else if (!PyArray_IS_C_CONTIGUOUS((PyArrayObject *)host)) { /* before the GPU is touched */
    PyErr_SetString(PyExc_ValueError, "the array is not C-contiguous; copy it with "
                    "numpy.ascontiguousarray first");
  } else {
    PyArrayObject *h = (PyArrayObject *)host;
    Py_ssize_t shape[KPY_MAX_DIMS];
    for (int i = 0; i < PyArray_NDIM(h) && i < KPY_MAX_DIMS; i++) shape[i] = PyArray_DIM(h, i);
    a = kpy_array_new(st, PyArray_DESCR(h), PyArray_NDIM(h), shape, stream);
    if (a && (kpy_check_host(a, host, 0, "the array") < 0 || kpy_copy(st, a, host, 0, stream) < 0))
      Py_CLEAR(a);
  }
  Py_DECREF(host);
  return (PyObject *)a;
}

/* Copies a into out (None: a new numpy array) on stream; gives back out, a new reference. */
static PyObject *kpy_array_into(kpy_state *st, kpy_array *a, PyObject *out, PyObject *stream) {
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
  if (kpy_copy(st, a, out, 1, stream) < 0) Py_CLEAR(out);
  return out;
}

static PyObject *kpy_array_get(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"out", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *out = Py_None, *stream_obj = Py_None, *stream;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:get", kwlist, &out, &stream_obj) ||
      kpy_array_stream(st, stream_obj, &stream) < 0)
    return NULL;
  return kpy_array_into(st, (kpy_array *)op, out, stream);
}

static PyObject *kpy_array_copy_to(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"host", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *host, *stream_obj = Py_None, *stream;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_to", kwlist, &host, &stream_obj) ||
      kpy_array_stream(st, stream_obj, &stream) < 0)
    return NULL;
  PyObject *r = kpy_array_into(st, (kpy_array *)op, host, stream);
  if (!r) return NULL;
  Py_DECREF(r);
  Py_RETURN_NONE;
}

static PyObject *kpy_array_copy_from(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"source", (char *)"stream", NULL};
  kpy_array *a = (kpy_array *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *src, *stream_obj = Py_None, *stream;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_from", kwlist, &src, &stream_obj) ||
      kpy_array_stream(st, stream_obj, &stream) < 0)
    return NULL;
  if (PyObject_TypeCheck(src, st->ref.DeviceArray_type)) { /* device to device */
    kpy_array *b = (kpy_array *)src;
    if (b->nbytes != a->nbytes || !PyArray_EquivTypes(b->dtype, a->dtype)) {
      PyErr_Format(PyExc_ValueError, "the source holds %zd elements of %R; this array %zd of %R",
                   b->size, (PyObject *)b->dtype, a->size, (PyObject *)a->dtype);
      return NULL;
    }
    kiln_status s = kiln_memcpy_dtod_async(a->ptr, b->ptr, (size_t)a->nbytes,
                                           stream ? kpy_stream_handle(stream) : NULL);
    if (s) return kpy_raise(st, s);
    Py_RETURN_NONE;
  }
  if (kpy_check_host(a, src, 0, "the source") < 0 || kpy_copy(st, a, src, 0, stream) < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* ---- Views -------------------------------------------------------------------------------- */

static PyObject *kpy_array_view(kpy_array *a, Py_ssize_t start, int ndim,
                                const Py_ssize_t *shape) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  kpy_array *v = kpy_array_blank(st, a->dtype, ndim, shape);
  if (!v) return NULL;
  Py_ssize_t row = a->ndim ? a->nbytes / (a->shape[0] ? a->shape[0] : 1) : 0;
  v->ptr = v->nbytes ? a->ptr + (kiln_deviceptr)(start * row) : 0;
  v->device = a->device;
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
  PyErr_Format(PyExc_TypeError, "a DeviceArray is indexed by an int or a slice of its first "
               "axis, not %.100s", Py_TYPE(key)->tp_name);
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

static PyObject *kpy_tuple_of(const Py_ssize_t *v, int n) {
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

static PyObject *kpy_array_get_shape(PyObject *op, void *c) {
  (void)c;
  return kpy_tuple_of(((kpy_array *)op)->shape, ((kpy_array *)op)->ndim);
}

static PyObject *kpy_array_get_strides(PyObject *op, void *c) {
  (void)c;
  kpy_array *a = (kpy_array *)op;
  Py_ssize_t strides[KPY_MAX_DIMS], s = PyDataType_ELSIZE(a->dtype);
  for (int i = a->ndim - 1; i >= 0; i--) {
    strides[i] = s;
    s *= a->shape[i];
  }
  return kpy_tuple_of(strides, a->ndim);
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

/* Version 3: with "stream", the stream a consumer must wait for; 1 is the legacy default. */
static PyObject *kpy_array_get_cai(PyObject *op, void *c) {
  (void)c;
  kpy_array *a = (kpy_array *)op;
  PyObject *stream = a->stream ? PyLong_FromUnsignedLongLong(
                                     (unsigned long long)(uintptr_t)kpy_stream_handle(a->stream))
                               : PyLong_FromLong(1);
  PyObject *typestr = PyObject_GetAttrString((PyObject *)a->dtype, "str");
  PyObject *shape = kpy_array_get_shape(op, NULL);
  PyObject *d = NULL;
  if (stream && typestr && shape)
    d = Py_BuildValue("{sOsOs(KO)sisOsO}", "shape", shape, "typestr", typestr, "data",
                      (unsigned long long)a->ptr, Py_False, "version", 3, "strides", Py_None,
                      "stream", stream);
  Py_XDECREF(stream);
  Py_XDECREF(typestr);
  Py_XDECREF(shape);
  return d;
}

/* ---- DLPack ------------------------------------------------------------------------------- */

static int kpy_dl_dtype(PyArray_Descr *d, DLDataType *out) {
  out->lanes = 1;
  out->bits = (uint8_t)(PyDataType_ELSIZE(d) * 8);
  switch (d->kind) {
  case 'b': out->code = kDLBool; break;
  case 'i': out->code = kDLInt; break;
  case 'u': out->code = kDLUInt; break;
  case 'f': out->code = kDLFloat; break;
  case 'c': out->code = kDLComplex; break;
  default:
    PyErr_Format(PyExc_BufferError, "DLPack has no dtype for %R", (PyObject *)d);
    return -1;
  }
  if (d->byteorder == '>') {
    PyErr_SetString(PyExc_BufferError, "DLPack has no big-endian dtypes");
    return -1;
  }
  return 0;
}

static void kpy_dl_release(DLManagedTensor *t) {
  PyGILState_STATE g = PyGILState_Ensure(); /* a consumer may free it from any thread */
  Py_XDECREF((PyObject *)t->manager_ctx);
  PyMem_RawFree(t);
  PyGILState_Release(g);
}

static void kpy_dl_capsule_free(PyObject *capsule) {
  if (PyCapsule_IsValid(capsule, "dltensor")) { /* never consumed */
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (t && t->deleter) t->deleter(t);
  }
}

static PyObject *kpy_array_dlpack(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"stream", (char *)"max_version", (char *)"dl_device",
                           (char *)"copy", NULL};
  kpy_array *a = (kpy_array *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream,
                                   &max_version, &dl_device, &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError, "a DeviceArray exports its memory; it does not copy");
    return NULL;
  }
  DLDataType dt;
  if (kpy_dl_dtype(a->dtype, &dt) < 0) return NULL;
  /* The consumer will use the data on `stream`: it waits for this array's stream first. */
  if (stream != Py_None && !(PyLong_Check(stream) && PyLong_AsLong(stream) == 1)) {
    kiln_stream consumer = NULL;
    kiln_event event = NULL;
    if (kpy_stream_parse(st, stream, &consumer) < 0) return NULL;
    kiln_stream mine = a->stream ? kpy_stream_handle(a->stream) : NULL;
    kiln_status s = kiln_event_create(0, &event);
    if (!s) s = kiln_event_record(event, mine);
    if (!s) s = kiln_stream_wait_event(consumer, event);
    kiln_event_destroy(event);
    if (s) return kpy_raise(st, s);
  }
  size_t extra = 2 * (size_t)(a->ndim ? a->ndim : 1) * sizeof(int64_t);
  DLManagedTensor *t = PyMem_RawCalloc(1, sizeof *t + extra);
  if (!t) return PyErr_NoMemory();
  int64_t *shape = (int64_t *)(t + 1), *strides = shape + (a->ndim ? a->ndim : 1);
  int64_t step = 1;
  for (int i = a->ndim - 1; i >= 0; i--) {
    shape[i] = a->shape[i];
    strides[i] = step; /* in elements */
    step *= a->shape[i];
  }
  t->dl_tensor.data = (void *)(uintptr_t)a->ptr;
  t->dl_tensor.device.device_type = kDLCUDA;
  t->dl_tensor.device.device_id = a->device;
  t->dl_tensor.ndim = a->ndim;
  t->dl_tensor.dtype = dt;
  t->dl_tensor.shape = shape;
  t->dl_tensor.strides = strides;
  t->manager_ctx = Py_NewRef(op);
  t->deleter = kpy_dl_release;
  PyObject *capsule = PyCapsule_New(t, "dltensor", kpy_dl_capsule_free);
  if (!capsule) {
    Py_DECREF(op);
    PyMem_RawFree(t);
  }
  return capsule;
}

static PyObject *kpy_array_dlpack_device(PyObject *op, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", kDLCUDA, ((kpy_array *)op)->device);
}

/* ---- Wrapping other libraries' arrays ----------------------------------------------------- */

static PyObject *kpy_asarray_cai(kpy_state *st, PyObject *obj, PyObject *cai) {
  if (!PyDict_Check(cai)) {
    PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ is not a dict");
    return NULL;
  }
  PyObject *shape = PyDict_GetItemString(cai, "shape"), *typestr = PyDict_GetItemString(cai, "typestr");
  PyObject *data = PyDict_GetItemString(cai, "data"), *strides = PyDict_GetItemString(cai, "strides");
  PyObject *stream = PyDict_GetItemString(cai, "stream");
  if (!shape || !typestr || !data || !PyTuple_Check(data) || PyTuple_GET_SIZE(data) != 2) {
    PyErr_SetString(PyExc_TypeError, "__cuda_array_interface__ lacks shape, typestr or data");
    return NULL;
  }
  PyArray_Descr *dtype = NULL;
  Py_ssize_t dims[KPY_MAX_DIMS];
  int ndim = 0;
  if (!PyArray_DescrConverter(typestr, &dtype)) return NULL;
  if (kpy_dims(shape, &ndim, dims) < 0) {
    Py_DECREF(dtype);
    return NULL;
  }
  /* Strides are accepted when they are the C-contiguous ones. */
  if (strides && strides != Py_None) {
    Py_ssize_t want[KPY_MAX_DIMS], s = PyDataType_ELSIZE(dtype);
    int got_n = 0;
    for (int i = ndim - 1; i >= 0; i--) {
      want[i] = s;
      s *= dims[i];
    }
    Py_ssize_t got[KPY_MAX_DIMS];
    int ok = kpy_dims(strides, &got_n, got) == 0 && got_n == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = dims[i] <= 1 || got[i] == want[i];
    if (!ok) {
      PyErr_Clear();
      Py_DECREF(dtype);
      PyErr_SetString(PyExc_ValueError, "the array is not C-contiguous; make it contiguous "
                      "(.contiguous() in PyTorch, cupy.ascontiguousarray) first");
      return NULL;
    }
  }
  unsigned long long ptr = PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0));
  if (ptr == (unsigned long long)-1 && PyErr_Occurred()) {
    Py_DECREF(dtype);
    return NULL;
  }
  /* The producer's work on its stream comes before kiln's. */
  if (stream && stream != Py_None) {
    kiln_stream h = NULL;
    kiln_status s = KILN_OK;
    if (kpy_stream_parse(st, stream, &h) < 0) {
      Py_DECREF(dtype);
      return NULL;
    }
    if ((uintptr_t)h > 2) {
      Py_BEGIN_ALLOW_THREADS
      s = kiln_stream_synchronize(h);
      Py_END_ALLOW_THREADS
    }
    if (s) {
      Py_DECREF(dtype);
      return kpy_raise(st, s);
    }
  }
  kpy_array *a = kpy_array_blank(st, dtype, ndim, dims);
  Py_DECREF(dtype);
  if (!a) return NULL;
  a->ptr = (kiln_deviceptr)ptr;
  a->base = Py_NewRef(obj);
  return (PyObject *)a;
}

static PyObject *kpy_asarray_dlpack(kpy_state *st, PyObject *obj) {
  PyObject *capsule = PyObject_CallMethod(obj, "__dlpack__", "()");
  if (!capsule) return NULL;
  DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
  if (!t) {
    Py_DECREF(capsule);
    return NULL;
  }
  DLTensor *d = &t->dl_tensor;
  const char *problem = NULL;
  char typestr[16];
  if (d->device.device_type != kDLCUDA) problem = "it is not in CUDA device memory";
  else if (d->dtype.lanes != 1) problem = "its dtype has lanes";
  else if (d->ndim < 0 || d->ndim > KPY_MAX_DIMS) problem = "it has too many dimensions";
  else {
    char kind = d->dtype.code == kDLInt ? 'i' : d->dtype.code == kDLUInt ? 'u'
              : d->dtype.code == kDLFloat ? 'f' : d->dtype.code == kDLComplex ? 'c'
              : d->dtype.code == kDLBool ? 'b' : 0;
    if (!kind || d->dtype.bits % 8) problem = "its dtype has no numpy equivalent";
    PyOS_snprintf(typestr, sizeof typestr, "<%c%d", kind, d->dtype.bits / 8);
    int64_t step = 1;
    for (int i = d->ndim - 1; !problem && d->strides && i >= 0; i--) {
      if (d->shape[i] > 1 && d->strides[i] != step) problem = "it is not C-contiguous";
      step *= d->shape[i];
    }
  }
  if (problem) {
    PyErr_Format(PyExc_ValueError, "cannot wrap the DLPack tensor: %s", problem);
    Py_DECREF(capsule);
    return NULL;
  }
  PyObject *dt = PyUnicode_FromString(typestr);
  PyArray_Descr *dtype = NULL;
  int ok = dt && PyArray_DescrConverter(dt, &dtype);
  Py_XDECREF(dt);
  Py_ssize_t dims[KPY_MAX_DIMS];
  for (int i = 0; i < d->ndim; i++) dims[i] = (Py_ssize_t)d->shape[i];
  kpy_array *a = ok ? kpy_array_blank(st, dtype, d->ndim, dims) : NULL;
  Py_XDECREF(dtype);
  if (a) {
    a->ptr = (kiln_deviceptr)(uintptr_t)d->data + d->byte_offset;
    a->device = d->device.device_id;
    a->dlpack = t; /* consumed: the array calls its deleter */
    if (PyCapsule_SetName(capsule, "used_dltensor") < 0) {
      a->dlpack = NULL;
      Py_CLEAR(a);
    }
  }
  Py_DECREF(capsule);
  return (PyObject *)a;
}

static PyObject *kpy_asarray(PyObject *module, PyObject *obj) {
  kpy_state *st = kpy_state_of_module(module);
  if (PyObject_TypeCheck(obj, st->ref.DeviceArray_type)) return Py_NewRef(obj);
  PyObject *cai = NULL;
  if (kpy_get_optional_attr(obj, st->str.cuda_array_interface, &cai) < 0) return NULL;
  if (cai) {
    PyObject *a = kpy_asarray_cai(st, obj, cai);
    Py_DECREF(cai);
    return a;
  }
  PyObject *dl = NULL;
  if (kpy_get_optional_attr(obj, st->str.dlpack, &dl) < 0) return NULL;
  if (dl) {
    Py_DECREF(dl);
    return kpy_asarray_dlpack(st, obj);
  }
  PyErr_Format(PyExc_TypeError, "asarray() wraps an array already on the GPU (one with "
               "__cuda_array_interface__ or __dlpack__), not %.100s; kiln.to_device copies a "
               "numpy array", Py_TYPE(obj)->tp_name);
  return NULL;
}

/* ---- The type ----------------------------------------------------------------------------- */

static int kpy_array_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_array *a = (kpy_array *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(a->stream);
  Py_VISIT(a->base);
  return 0;
}

static int kpy_array_clear(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  Py_CLEAR(a->base);
  return 0;
}

static void kpy_array_dealloc(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  if (a->alloc) {
    /* Freed where it was made: the block cache and the pool are per device. */
    int current = kiln_device_current();
    if (current != a->device) kiln_device_set_current(a->device);
    kiln_mem_free_async(a->alloc, (size_t)a->nbytes,
                        a->stream ? kpy_stream_handle(a->stream) : NULL);
    if (current != a->device) kiln_device_set_current(current);
  }
  if (a->dlpack && a->dlpack->deleter) a->dlpack->deleter(a->dlpack);
  Py_CLEAR(a->stream);
  kpy_array_clear(op);
  Py_XDECREF(a->dtype);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_array_repr(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  PyObject *shape = kpy_array_get_shape(op, NULL);
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
    {"__cuda_array_interface__", kpy_array_get_cai, NULL, "The CUDA array interface, v3.", NULL},
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

kiln_deviceptr kpy_array_ptr(PyObject *array) { return ((kpy_array *)array)->ptr; }
int kpy_array_device(PyObject *array) { return ((kpy_array *)array)->device; }

/* ---- Page-locked host arrays -------------------------------------------------------------- */

static void kpy_pagelocked_free(PyObject *capsule) {
  kiln_host_free(PyCapsule_GetPointer(capsule, "kiln.pagelocked"));
}

static PyObject *kpy_pagelocked(PyObject *module, PyObject *args, PyObject *kwargs, int zero,
                                const char *fmt) {
  static char *kwlist[] = {(char *)"shape", (char *)"dtype", NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *shape_obj;
  PyArray_Descr *dtype = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, PyArray_DescrConverter,
                                   &dtype))
    return NULL;
  if (!dtype) dtype = PyArray_DescrFromType(NPY_DOUBLE);
  Py_ssize_t shape[KPY_MAX_DIMS];
  npy_intp dims[KPY_MAX_DIMS];
  int ndim = 0;
  Py_ssize_t nbytes = PyDataType_ELSIZE(dtype);
  if (kpy_dims(shape_obj, &ndim, shape) < 0) {
    Py_DECREF(dtype);
    return NULL;
  }
  for (int i = 0; i < ndim; i++) {
    dims[i] = shape[i];
    if (shape[i] < 0 || (shape[i] && nbytes > PY_SSIZE_T_MAX / shape[i])) {
      Py_DECREF(dtype);
      PyErr_SetString(PyExc_ValueError, "negative or too large a shape");
      return NULL;
    }
    nbytes *= shape[i];
  }
  void *p = NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
  s = kiln_host_alloc((size_t)nbytes, &p);
  Py_END_ALLOW_THREADS
  if (s) {
    Py_DECREF(dtype);
    return kpy_raise(st, s);
  }
  if (zero) memset(p, 0, (size_t)nbytes);
  PyObject *owner = PyCapsule_New(p, "kiln.pagelocked", kpy_pagelocked_free);
  if (!owner) {
    kiln_host_free(p);
    Py_DECREF(dtype);
    return NULL;
  }
  PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, dtype, ndim, dims, NULL, p,
                                       NPY_ARRAY_CARRAY, NULL); /* steals dtype */
  if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) { /* steals owner */
    Py_XDECREF(arr);
    if (!arr) Py_DECREF(owner);
    return NULL;
  }
  return arr;
}

static PyObject *kpy_pagelocked_empty(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_pagelocked(module, args, kwargs, 0, "O|O&:pagelocked_empty");
}

static PyObject *kpy_pagelocked_zeros(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_pagelocked(module, args, kwargs, 1, "O|O&:pagelocked_zeros");
}

static PyObject *kpy_staging_info(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  kiln_staging_info i;
  kiln_staging_get_info(&i);
  return Py_BuildValue("{snsnsisKsK}", "min_bytes", (Py_ssize_t)(i.min_bytes > PY_SSIZE_T_MAX
                       ? PY_SSIZE_T_MAX : i.min_bytes), "chunk_bytes", (Py_ssize_t)i.chunk_bytes,
                       "threads", i.threads, "copies", (unsigned long long)i.copies, "bytes",
                       (unsigned long long)i.bytes);
}

static PyMethodDef kpy_array_functions[] = {
    {"empty", (PyCFunction)(void (*)(void))kpy_empty, METH_VARARGS | METH_KEYWORDS,
     "empty(shape, dtype=float64, stream=None): an uninitialized DeviceArray."},
    {"zeros", (PyCFunction)(void (*)(void))kpy_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(shape, dtype=float64, stream=None): a DeviceArray of zeros."},
    {"to_device", (PyCFunction)(void (*)(void))kpy_to_device, METH_VARARGS | METH_KEYWORDS,
     "to_device(array, stream=None): a DeviceArray holding a copy of a numpy array."},
    {"asarray", kpy_asarray, METH_O,
     "asarray(obj): a DeviceArray over the memory of a GPU array (torch, CuPy, ...) that offers "
     "__cuda_array_interface__ or __dlpack__; no copy."},
    {"pagelocked_empty", (PyCFunction)(void (*)(void))kpy_pagelocked_empty,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_empty(shape, dtype=float64): a numpy array in page-locked host memory."},
    {"pagelocked_zeros", (PyCFunction)(void (*)(void))kpy_pagelocked_zeros,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_zeros(shape, dtype=float64): the same, zeroed."},
    {"staging_info", kpy_staging_info, METH_NOARGS,
     "How large pageable copies are staged: min_bytes, chunk_bytes, threads, and the copies "
     "and bytes staged so far."},
    {NULL, NULL, 0, NULL},
};

int kpy_array_init(PyObject *module, kpy_state *st) {
  st->ref.DeviceArray_type = kpy_add_type(module, &kpy_array_spec, NULL);
  if (!st->ref.DeviceArray_type) return -1;
  return PyModule_AddFunctions(module, kpy_array_functions);
}
