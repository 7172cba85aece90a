/* Exchange with other GPU libraries, both ways and without copies: a DeviceArray offers the
 * CUDA array interface and DLPack, and kiln.asarray wraps an array that offers either. */
#include "interop.h"

#include "arrayobj.h"
#include "dlpack.h"
#include "errors.h"
#include "shape.h"
#include "stream.h"
#include "wait.h"

/* ---- The CUDA array interface ------------------------------------------------------------- */

/* An entry of the interface as a strong reference; NULL when absent or None. */
static int kpy_cai_entry(PyObject *cai, PyObject *key, PyObject **out) {
  PyObject *v = PyDict_GetItemWithError(cai, key);
  if (!v && PyErr_Occurred()) return -1;
  *out = v && v != Py_None ? Py_NewRef(v) : NULL;
  return 0;
}

/* Reads the interface dict into out. The entries are held while they are converted, since a
 * conversion (an __index__, say) may run code that changes the dict. */
static int kpy_cai_parse(kpy_state *st, PyObject *obj, PyObject *cai, int what, kpy_cai *out) {
  const char *of = Py_TYPE(obj)->tp_name;
  if (!PyDict_Check(cai)) {
    PyErr_Format(PyExc_TypeError,
                 "the __cuda_array_interface__ of %.100s must be a dict, not "
                 "%.100s",
                 of, Py_TYPE(cai)->tp_name);
    return -1;
  }
  PyObject *data = NULL, *stream = NULL, *typestr = NULL, *shape = NULL, *strides = NULL;
  int rc = -1;
  if (kpy_cai_entry(cai, st->str.data, &data) < 0 ||
      kpy_cai_entry(cai, st->str.stream, &stream) < 0 ||
      kpy_cai_entry(cai, st->str.strides, &strides) < 0)
    goto done;
  /* A pointer alone is what a kernel takes, unless strides say the elements are not where a
   * kernel indexing from it would look: then the layout is read to tell. */
  int layout = what == KPY_CAI_LAYOUT || strides;
  if (layout && (kpy_cai_entry(cai, st->str.typestr, &typestr) < 0 ||
                 kpy_cai_entry(cai, st->str.shape, &shape) < 0))
    goto done;

  /* "data": (pointer, read-only). */
  int valid = data && PyTuple_Check(data) && PyTuple_GET_SIZE(data) == 2 &&
              PyLong_Check(PyTuple_GET_ITEM(data, 0));
  unsigned long long ptr = valid ? PyLong_AsUnsignedLongLong(PyTuple_GET_ITEM(data, 0)) : 0;
  if (!valid || (ptr == (unsigned long long)-1 && PyErr_Occurred())) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "the __cuda_array_interface__ of %.100s has no valid "
                 "'data': it must be (pointer, read-only), the pointer an int from 0 to "
                 "2**64-1",
                 of);
    goto done;
  }
  out->ptr = (kiln_deviceptr)ptr;
  if ((out->readonly = PyObject_IsTrue(PyTuple_GET_ITEM(data, 1))) < 0) goto done;

  /* "stream" (v3): absent or None when no synchronization is needed. 0 is disallowed: it
   * would not say which default stream. */
  if (stream) {
    if (!PyLong_Check(stream)) {
      PyErr_Format(PyExc_TypeError,
                   "the __cuda_array_interface__ of %.100s has a 'stream' "
                   "of type %.100s; it must be an int CUstream handle or None",
                   of, Py_TYPE(stream)->tp_name);
      goto done;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(stream);
    if (v == 0 || (v == (unsigned long long)-1 && PyErr_Occurred())) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError,
                   "the __cuda_array_interface__ of %.100s has 'stream' %R; "
                   "it must be None or a CUstream handle (1 the legacy default stream, 2 the "
                   "per-thread one; 0 is disallowed)",
                   of, stream);
      goto done;
    }
    if (kpy_stream_check(st, (kiln_stream)(uintptr_t)v,
                         "the 'stream' of its __cuda_array_interface__") < 0)
      goto done;
    out->has_stream = 1;
    out->stream = (kiln_stream)(uintptr_t)v;
  }
  if (!layout) {
    rc = 0;
    goto done;
  }

  /* "typestr", "shape" and "strides". */
  if (!typestr || !shape) {
    PyErr_Format(PyExc_TypeError, "the __cuda_array_interface__ of %.100s has no '%s'", of,
                 typestr ? "shape" : "typestr");
    goto done;
  }
  if (!PyArray_DescrConverter(typestr, &out->dtype)) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "the __cuda_array_interface__ of %.100s has 'typestr' %R, "
                 "which is no numpy dtype",
                 of, typestr);
    goto done;
  }
  if (kpy_shape_parse(shape, &out->ndim, out->shape) < 0) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) goto done;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "the __cuda_array_interface__ of %.100s has 'shape' %R; it "
                 "must be a tuple of ints",
                 of, shape);
    goto done;
  }
  if (strides) {
    int n = -1;
    if (kpy_shape_parse(strides, &n, out->strides) < 0 || n != out->ndim) {
      if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_TypeError) &&
          !PyErr_ExceptionMatches(PyExc_ValueError))
        goto done;
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "the __cuda_array_interface__ of %.100s has 'strides' %R; "
                   "it must be None or a tuple of %d ints, as 'shape' has",
                   of, strides, out->ndim);
      goto done;
    }
    out->has_strides = 1;
  }
  rc = 0;
done:
  Py_XDECREF(data);
  Py_XDECREF(stream);
  Py_XDECREF(typestr);
  Py_XDECREF(shape);
  Py_XDECREF(strides);
  return rc;
}

int kpy_cai_read(kpy_state *st, PyObject *obj, int what, kpy_cai *out) {
  out->ptr = 0;
  out->readonly = out->has_stream = out->ndim = out->has_strides = 0;
  out->stream = NULL;
  out->dtype = NULL;
  PyObject *cai = NULL;
  int found = kpy_get_optional_attr(obj, st->str.cuda_array_interface, &cai);
  if (found <= 0) return found;
  int rc = kpy_cai_parse(st, obj, cai, what, out);
  Py_DECREF(cai); /* nothing read from it is used after this */
  if (rc < 0) {
    kpy_cai_release(out);
    return -1;
  }
  return 1;
}

void kpy_cai_release(kpy_cai *cai) { Py_CLEAR(cai->dtype); }

int kpy_cai_is_c_contiguous(const kpy_cai *cai) {
  if (!cai->has_strides) return 1;
  Py_ssize_t expected = PyDataType_ELSIZE(cai->dtype);
  for (int i = 0; i < cai->ndim; i++)
    if (cai->shape[i] == 0) return 1; /* no elements: no layout to get wrong */
  for (int i = cai->ndim - 1; i >= 0; i--) {
    if (cai->shape[i] != 1 && cai->strides[i] != expected) return 0;
    if (expected > PY_SSIZE_T_MAX / cai->shape[i]) return 0; /* no memory is that large */
    expected *= cai->shape[i];
  }
  return 1;
}

/* Version 3: with "stream", the stream a consumer must wait for; 1 is the legacy default.
 * "strides" is None for a C-contiguous array, as the interface asks; "data" 0 for an empty
 * one. */
PyObject *kpy_array_cai(PyObject *op, void *closure) {
  (void)closure;
  kpy_array *a = (kpy_array *)op;
  kpy_array_address_out(a);
  PyObject *stream =
      a->stream ? PyLong_FromUnsignedLongLong((uintptr_t)a->stream) : PyLong_FromLong(1);
  PyObject *typestr = PyObject_GetAttrString((PyObject *)a->dtype, "str");
  PyObject *shape = kpy_shape_tuple(a->shape, a->ndim);
  /* Strides always, never the None the interface allows for C order: PyCUDA gives them, and
   * code written for it compares them with NumPy's. */
  PyObject *strides = kpy_shape_tuple(a->strides, a->ndim);
  PyObject *d = NULL;
  if (stream && typestr && shape && strides)
    d = Py_BuildValue("{sOsOs(KO)sisOsO}", "shape", shape, "typestr", typestr, "data",
                      (unsigned long long)(a->size ? a->ptr : 0), Py_False, "version", 3, "strides",
                      strides, "stream", stream);
  Py_XDECREF(stream);
  Py_XDECREF(typestr);
  Py_XDECREF(shape);
  Py_XDECREF(strides);
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
  default: PyErr_Format(PyExc_BufferError, "DLPack has no dtype for %R", (PyObject *)d); return -1;
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

PyObject *kpy_array_dlpack(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"stream", (char *)"max_version", (char *)"dl_device",
                           (char *)"copy", NULL};
  kpy_array *a = (kpy_array *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|$OOOO:__dlpack__", kwlist, &stream, &max_version,
                                   &dl_device, &copy))
    return NULL;
  if (copy == Py_True) {
    PyErr_SetString(PyExc_BufferError, "a DeviceArray exports its memory; it does not copy");
    return NULL;
  }
  kpy_array_address_out(a);
  DLDataType dt;
  if (kpy_dl_dtype(a->dtype, &dt) < 0) return NULL;
  for (int i = 0; i < a->ndim; i++) { /* DLPack counts strides in elements */
    if (a->strides[i] % a->itemsize) {
      PyErr_Format(PyExc_BufferError,
                   "DLPack counts strides in elements; stride %zd of axis %d is no multiple of "
                   "the itemsize, %zd (a copy() has none such)",
                   a->strides[i], i, a->itemsize);
      return NULL;
    }
  }
  /* The consumer will use the data on `stream`: it waits for this array's stream first. By
   * the protocol -1 asks for no synchronization. */
  int overflow = 0;
  long given =
      stream != Py_None && PyLong_Check(stream) ? PyLong_AsLongAndOverflow(stream, &overflow) : 0;
  if (stream != Py_None && (given != -1 || overflow)) {
    kiln_stream consumer = NULL;
    if (kpy_stream_parse(st, stream, &consumer) < 0 ||
        kpy_stream_order(st, consumer, a->stream) < 0)
      return NULL;
  }
  size_t extra = 2 * (size_t)(a->ndim ? a->ndim : 1) * sizeof(int64_t);
  DLManagedTensor *t = PyMem_RawCalloc(1, sizeof *t + extra);
  if (!t) return PyErr_NoMemory();
  int64_t *shape = (int64_t *)(t + 1), *strides = shape + (a->ndim ? a->ndim : 1);
  for (int i = 0; i < a->ndim; i++) {
    shape[i] = a->shape[i];
    strides[i] = a->strides[i] / a->itemsize;
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

PyObject *kpy_array_dlpack_device(PyObject *op, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(ii)", kDLCUDA, ((kpy_array *)op)->device);
}

/* ---- Wrapping other libraries' arrays ----------------------------------------------------- */

/* Gives a (made by kpy_array_blank from a wrapped array) the strides the other library
 * gave, in bytes; they must be multiples of the itemsize, as a DeviceArray's are. -1 with
 * ValueError naming the library's own way to a contiguous copy. */
static int kpy_asarray_strides(kpy_array *a, const Py_ssize_t *strides) {
  for (int i = 0; i < a->ndim; i++) {
    if (strides[i] % a->itemsize) {
      PyErr_Format(PyExc_ValueError,
                   "stride %zd of axis %d is no multiple of the itemsize, %zd; make the array "
                   "contiguous (.contiguous() in PyTorch, cupy.ascontiguousarray) first",
                   strides[i], i, a->itemsize);
      return -1;
    }
    a->strides[i] = strides[i];
  }
  kpy_array_update_flags(a);
  return 0;
}

/* A DeviceArray over the memory the interface describes, strided or not; it keeps obj alive.
 * asarray has no stream to order after the producer's, so it waits for that stream's work to
 * finish. */
static PyObject *kpy_asarray_cai(kpy_state *st, PyObject *obj, const kpy_cai *cai) {
  if (cai->has_stream) {
    if (kpy_wait_stream(st, cai->stream, -1) < 0) return NULL;
  }
  kpy_array *a = kpy_array_blank(st, cai->dtype, cai->ndim, cai->shape);
  if (!a) return NULL;
  if (cai->has_strides && kpy_asarray_strides(a, cai->strides) < 0) {
    Py_DECREF(a);
    return NULL;
  }
  a->ptr = cai->ptr;
  a->base = Py_NewRef(obj);
  if (kpy_array_check_span(a, a->ptr, "the __cuda_array_interface__'s data") < 0) Py_CLEAR(a);
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
    char kind = d->dtype.code == kDLInt       ? 'i'
                : d->dtype.code == kDLUInt    ? 'u'
                : d->dtype.code == kDLFloat   ? 'f'
                : d->dtype.code == kDLComplex ? 'c'
                : d->dtype.code == kDLBool    ? 'b'
                                              : 0;
    if (!kind || d->dtype.bits % 8) problem = "its dtype has no numpy equivalent";
    PyOS_snprintf(typestr, sizeof typestr, "<%c%d", kind, d->dtype.bits / 8);
    for (int i = 0; !problem && i < d->ndim; i++) {
      if (d->shape[i] < 0) problem = "it has a negative dimension";
      else if (d->strides &&
               (d->strides[i] > PY_SSIZE_T_MAX / 64 || d->strides[i] < -PY_SSIZE_T_MAX / 64))
        problem = "a stride is too large";
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
  Py_ssize_t dims[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  for (int i = 0; i < d->ndim; i++) dims[i] = (Py_ssize_t)d->shape[i];
  kpy_array *a = ok ? kpy_array_blank(st, dtype, d->ndim, dims) : NULL;
  Py_XDECREF(dtype);
  if (a && d->strides) { /* in elements; NULL means C-contiguous */
    for (int i = 0; i < d->ndim; i++) strides[i] = (Py_ssize_t)d->strides[i] * a->itemsize;
    if (kpy_asarray_strides(a, strides) < 0) Py_CLEAR(a);
  }
  if (a) {
    a->ptr = (kiln_deviceptr)(uintptr_t)d->data + d->byte_offset;
    if (kpy_array_check_span(a, a->ptr, "the DLPack tensor's data") < 0) Py_CLEAR(a);
  }
  if (a) {
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
  kpy_cai cai;
  int found = kpy_cai_read(st, obj, KPY_CAI_LAYOUT, &cai);
  if (found < 0) return NULL;
  if (found) {
    PyObject *a = kpy_asarray_cai(st, obj, &cai);
    kpy_cai_release(&cai);
    return a;
  }
  PyObject *dl = NULL;
  if (kpy_get_optional_attr(obj, st->str.dlpack, &dl) < 0) return NULL;
  if (dl) {
    Py_DECREF(dl);
    return kpy_asarray_dlpack(st, obj);
  }
  PyErr_Format(PyExc_TypeError,
               "asarray() wraps an array already on the GPU (one with "
               "__cuda_array_interface__ or __dlpack__), not %.100s; kiln.to_device copies a "
               "numpy array",
               Py_TYPE(obj)->tp_name);
  return NULL;
}

static PyMethodDef kpy_interop_functions[] = {
    {"asarray", kpy_asarray, METH_O,
     "asarray($module, obj, /)\n--\n\nA DeviceArray over the memory of a GPU array (torch, CuPy, "
     "...) that offers __cuda_array_interface__ or __dlpack__; no copy."},
    {NULL, NULL, 0, NULL},
};

int kpy_interop_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_interop_functions);
}
