/* The DeviceArray object's core: its layout, making one (the makers', the views', PyCUDA's
 * constructor), and its lifetime. */
#include "arrayobj.h"

#include "errors.h"
#include "memory.h"

#include <string.h>

/* ---- Layout ------------------------------------------------------------------------------- */

void kpy_strides_contiguous(int ndim, const Py_ssize_t *shape, Py_ssize_t itemsize, int fortran,
                            Py_ssize_t *strides) {
  Py_ssize_t s = itemsize;
  for (int k = 0; k < ndim; k++) {
    int i = fortran ? k : ndim - 1 - k;
    strides[i] = s;
    if (shape[i]) s *= shape[i];
  }
}

int kpy_array_used_on_other(kpy_state *st, kpy_array *a, kiln_stream stream) {
  /* The memory's owner: the array's allocation, or that of the array a view leans on. */
  PyObject *owner = a->gpudata;
  if (!owner && a->base && kpy_array_check(st, a->base)) owner = ((kpy_array *)a->base)->gpudata;
  if (!kpy_allocation_is_pooled(st, owner)) return 0; /* not kiln's pool: the owner's to order */
  return kpy_allocation_used_on(st, owner, stream);
}

int kpy_array_refuse_deletion(PyObject *value, const char *attribute) {
  if (value) return 0;
  PyErr_Format(PyExc_AttributeError, "a DeviceArray's %s cannot be deleted", attribute);
  return -1;
}

void kpy_array_update_flags(kpy_array *a) {
  int c = 1, f = 1;
  Py_ssize_t sc = a->itemsize, sf = a->itemsize;
  for (int k = 0; k < a->ndim; k++) {
    int i = a->ndim - 1 - k, j = k;
    if (a->shape[i] == 0) { /* empty: both, whatever the strides */
      a->flags = KPY_C_CONTIGUOUS | KPY_F_CONTIGUOUS;
      return;
    }
    if (a->shape[i] != 1) {
      c = c && a->strides[i] == sc;
      sc *= a->shape[i];
    }
    if (a->shape[j] != 1) {
      f = f && a->strides[j] == sf;
      sf *= a->shape[j];
    }
  }
  a->flags = (c ? KPY_C_CONTIGUOUS : 0) | (f ? KPY_F_CONTIGUOUS : 0);
}

int kpy_layout_extent(int ndim, const Py_ssize_t *shape, const Py_ssize_t *strides,
                      Py_ssize_t itemsize, Py_ssize_t *lo, Py_ssize_t *hi) {
  *lo = *hi = 0;
  for (int i = 0; i < ndim; i++)
    if (shape[i] == 0) return 0;
  Py_ssize_t l = 0, h = itemsize;
  for (int i = 0; i < ndim; i++) {
    Py_ssize_t reach;
    if (__builtin_mul_overflow(shape[i] - 1, strides[i], &reach) ||
        (reach < 0 ? __builtin_add_overflow(l, reach, &l) : __builtin_add_overflow(h, reach, &h))) {
      PyErr_SetString(PyExc_ValueError, "the strides reach further than any address can");
      return -1;
    }
  }
  *lo = l;
  *hi = h;
  return 0;
}

/* ---- Making one --------------------------------------------------------------------------- */

/* Sets a's dtype and shape, checked, with C-contiguous strides, on the current device; its
 * memory is the caller's to set. */
int kpy_dtype_check(PyArray_Descr *dtype) {
  if (!PyDataType_REFCHK(dtype) && PyDataType_ELSIZE(dtype)) return 0;
  PyErr_Format(PyExc_TypeError,
               "dtype %R cannot live on the GPU: it holds Python objects or has no size",
               (PyObject *)dtype);
  return -1;
}

static int kpy_array_set_layout(kpy_array *a, PyArray_Descr *dtype, int ndim,
                                const Py_ssize_t *shape) {
  if (ndim > KPY_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "a DeviceArray has at most %d dimensions, not %d", KPY_MAX_DIMS,
                 ndim);
    return -1;
  }
  Py_ssize_t itemsize = PyDataType_ELSIZE(dtype);
  if (kpy_dtype_check(dtype) < 0) return -1;
  /* span: the bytes with each axis of length 0 counted as 1, which bounds the strides; NumPy
   * refuses a shape whose span is too large even when it has no elements. */
  Py_ssize_t size = 1, span = itemsize;
  for (int i = 0; i < ndim; i++) {
    if (shape[i] < 0) {
      PyErr_Format(PyExc_ValueError, "negative dimension %zd in the shape", shape[i]);
      return -1;
    }
    if (__builtin_mul_overflow(span, shape[i] ? shape[i] : 1, &span)) {
      PyErr_SetString(PyExc_ValueError, "the array is too large");
      return -1;
    }
    size *= shape[i];
  }
  Py_XSETREF(a->dtype, (PyArray_Descr *)Py_NewRef(dtype));
  a->ndim = ndim;
  if (ndim) memcpy(a->shape, shape, (size_t)ndim * sizeof *shape); /* a 0-d array's may be NULL */
  a->itemsize = itemsize;
  kpy_strides_contiguous(ndim, shape, itemsize, 0, a->strides);
  kpy_array_update_flags(a);
  a->size = size;
  a->nbytes = size * itemsize;
  a->device = kiln_device_current();
  return 0;
}

/* An instance of tp (DeviceArray or a subclass): dtype and shape checked, C-contiguous
 * strides, on the current device, no memory. */
static kpy_array *kpy_array_alloc(PyTypeObject *tp, PyArray_Descr *dtype, int ndim,
                                  const Py_ssize_t *shape) {
  kpy_array *a = (kpy_array *)tp->tp_alloc(tp, 0);
  if (a && kpy_array_set_layout(a, dtype, ndim, shape) < 0) Py_CLEAR(a);
  return a;
}

/* a as an empty float64 array of shape (0,): what a subclass's array is until its __init__
 * makes it (no memory, nothing to misread). */
static int kpy_array_set_empty(kpy_array *a) {
  PyArray_Descr *f8 = PyArray_DescrFromType(NPY_FLOAT64);
  Py_ssize_t none = 0;
  int rc = f8 ? kpy_array_set_layout(a, f8, 1, &none) : -1;
  Py_XDECREF(f8);
  return rc;
}

kpy_array *kpy_array_blank(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape) {
  return kpy_array_alloc(st->ref.DeviceArray_type, dtype, ndim, shape);
}

/* kpy_array_blank in Fortran order when fortran is nonzero. */
static kpy_array *kpy_array_blank_order(kpy_state *st, PyArray_Descr *dtype, int ndim,
                                        const Py_ssize_t *shape, int fortran) {
  kpy_array *a = kpy_array_blank(st, dtype, ndim, shape);
  if (a && fortran) {
    kpy_strides_contiguous(ndim, shape, a->itemsize, 1, a->strides);
    kpy_array_update_flags(a);
  }
  return a;
}

kpy_array *kpy_array_new_order(kpy_state *st, PyArray_Descr *dtype, int ndim,
                               const Py_ssize_t *shape, int fortran, kiln_stream stream,
                               PyObject *owner) {
  kpy_array *a = kpy_array_blank_order(st, dtype, ndim, shape, fortran);
  if (!a) return NULL;
  if (!a->nbytes) return a;
  a->gpudata = kpy_allocation_pooled(st, (size_t)a->nbytes, stream, owner);
  if (!a->gpudata) {
    Py_DECREF(a);
    return NULL;
  }
  a->ptr = ((kpy_allocation *)a->gpudata)->ptr;
  a->stream = stream;
  return a;
}

kpy_array *kpy_array_new(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape,
                         kiln_stream stream, PyObject *owner) {
  return kpy_array_new_order(st, dtype, ndim, shape, 0, stream, owner);
}

void kpy_array_address_out(kpy_array *a) {
  if (!a->mirror.slot) return;
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  kpy_mirror_drop(st, &a->mirror); /* without st, the slot is left to the process's end */
  if (!st) PyErr_Clear();          /* not for a kiln type, which always finds it */
}

kpy_array *kpy_array_view(kpy_array *a, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape,
                          const Py_ssize_t *strides, kiln_deviceptr ptr) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(a));
  if (!st) return NULL;
  kpy_array_address_out(a); /* the view's address is a way to write a's memory */
  kpy_array *v = kpy_array_blank(st, dtype ? dtype : a->dtype, ndim, shape);
  if (!v) return NULL;
  if (ndim) memcpy(v->strides, strides, (size_t)ndim * sizeof *strides);
  kpy_array_update_flags(v);
  v->ptr = ptr;
  v->device = a->device;
  v->stream = a->stream; /* where the memory is ordered: the consumers of its interface wait */
  /* A view of a view leans on the array that owns the memory, not on the chain between. */
  PyObject *owner = (PyObject *)a;
  if (!a->gpudata && !a->dlpack && a->base && kpy_array_check(st, a->base)) owner = a->base;
  v->base = Py_NewRef(owner);
  v->allocator = Py_XNewRef(a->allocator);
  return v;
}

int kpy_array_check_device(kpy_array *a) {
  int current = kiln_device_current();
  if (a->device == current) return 0;
  PyErr_Format(PyExc_ValueError,
               "the array is on device %d; the current device is %d (make it current with "
               "kiln.Device(%d) as a context manager first)",
               a->device, current, a->device);
  return -1;
}

/* ---- PyCUDA's constructor ----------------------------------------------------------------- */

/* The device address obj stands for: an int, a kiln.DeviceAllocation, or any object int()
 * turns into one (what a PyCUDA allocator returns). Arrays and numbers that are not integers
 * are refused: int() of a one-element array is its value, not an address. */
static int kpy_address_of(kpy_state *st, PyObject *obj, const char *what, kiln_deviceptr *out) {
  if (Py_IS_TYPE(obj, st->ref.DeviceAllocation_type)) {
    *out = ((kpy_allocation *)obj)->ptr;
    if (!*out) {
      PyErr_Format(PyExc_ValueError, "%s is a DeviceAllocation that was freed", what);
      return -1;
    }
    return 0;
  }
  PyNumberMethods *nb = Py_TYPE(obj)->tp_as_number;
  PyObject *v = NULL;
  int number = !PyBool_Check(obj) && !PyFloat_Check(obj) && !PyComplex_Check(obj) &&
               !PyArray_Check(obj) && !PyArray_IsScalar(obj, Inexact) && !kpy_array_check(st, obj);
  if (number && PyIndex_Check(obj)) v = PyNumber_Index(obj);
  else if (number && nb && nb->nb_int) v = PyNumber_Long(obj);
  else {
    PyErr_Format(PyExc_TypeError,
                 "%s must be a device address: an int, or an object int() turns into one (a "
                 "kiln.DeviceAllocation, what an allocator returns), not %.100s",
                 what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  if (!v) return -1;
  unsigned long long p = PyLong_AsUnsignedLongLong(v);
  if (p == (unsigned long long)-1 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_OverflowError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "%s is %R, which is no address (0 to 2**64-1)", what, v);
    }
    Py_DECREF(v);
    return -1;
  }
  Py_DECREF(v);
  *out = (kiln_deviceptr)p;
  return 0;
}

/* What the constructor read from its arguments. */
typedef struct kpy_array_spec {
  PyArray_Descr *dtype; /* borrowed */
  int ndim, fortran, has_strides;
  Py_ssize_t shape[KPY_MAX_DIMS], strides[KPY_MAX_DIMS];
  PyObject *allocator, *base, *gpudata; /* borrowed; None when not given */
} kpy_array_spec;

int kpy_array_memory_freed(kpy_state *st, const kpy_array *a) {
  /* A view leans on the array it views (an address of its, for kiln's own strided views), a
   * few arrays up at most. */
  for (int up = 0; up < 8; up++) {
    PyObject *g = a->gpudata;
    if (g && Py_IS_TYPE(g, st->ref.DeviceAllocation_type)) return !((kpy_allocation *)g)->ptr;
    if (!a->base || !kpy_array_check(st, a->base)) return 0;
    a = (const kpy_array *)a->base;
  }
  return 0;
}

int kpy_array_check_memory(kpy_state *st, const kpy_array *a) {
  if (!kpy_array_memory_freed(st, a)) return 0;
  PyErr_SetString(PyExc_ValueError, "the array's memory was freed (its gpudata.free()); give it "
                                    "new memory (a.gpudata = kiln.mem_alloc(a.nbytes)) first");
  return -1;
}

int kpy_array_put_memory(kpy_state *st, kpy_array *a, PyObject *gpudata) {
  Py_ssize_t lo, hi;
  if (kpy_layout_extent(a->ndim, a->shape, a->strides, a->itemsize, &lo, &hi) < 0) return -1;
  kiln_deviceptr p = 0;
  if (gpudata == Py_None) {
    if (a->size) {
      PyErr_Format(PyExc_ValueError, "gpudata is None, but the array has %zd elements", a->size);
      return -1;
    }
  } else if (kpy_address_of(st, gpudata, "gpudata", &p) < 0) {
    return -1;
  }
  if (a->size && !p) {
    PyErr_Format(PyExc_ValueError, "gpudata is address 0, but the array has %zd elements", a->size);
    return -1;
  }
  /* Memory of the caller's: only a kiln.DeviceAllocation says how large it is. */
  int allocation = Py_IS_TYPE(gpudata, st->ref.DeviceAllocation_type);
  size_t room = allocation ? ((kpy_allocation *)gpudata)->size : 0;
  if (allocation && a->size && (lo < 0 || (size_t)hi > room) && kpy_array_memory_freed(st, a)) {
    /* scikit-cuda's set_realloc frees an array's memory, puts smaller memory under it, then
     * assigns the shape of that memory: the old layout is dead, and until the new shape comes
     * the array is the elements the new memory holds, in a row. */
    Py_ssize_t count = (Py_ssize_t)(room / (size_t)a->itemsize);
    if (kpy_array_set_layout(a, a->dtype, 1, &count) < 0) return -1;
    lo = 0;
    hi = count * a->itemsize;
  }
  if (allocation && a->size && (lo < 0 || (size_t)hi > room)) {
    PyErr_Format(PyExc_ValueError,
                 "the array reaches from byte %zd to byte %zd of gpudata, outside the %zu "
                 "bytes of the allocation",
                 lo, hi, ((kpy_allocation *)gpudata)->size);
    return -1;
  }
  if (kpy_array_check_span(a, p, "gpudata") < 0) return -1;
  kpy_array_address_out(a); /* a reduction's host mirror is of the memory being let go */
  a->ptr = p;
  a->stream = NULL;
  if (allocation && ((kpy_allocation *)gpudata)->pooled) { /* ordered on its own stream */
    a->device = ((kpy_allocation *)gpudata)->device;
    a->stream = ((kpy_allocation *)gpudata)->stream;
  }
  Py_XSETREF(a->gpudata, gpudata == Py_None ? NULL : Py_NewRef(gpudata));
  return 0;
}

int kpy_array_check_span(const kpy_array *a, kiln_deviceptr p, const char *from) {
  Py_ssize_t lo, hi;
  if (kpy_layout_extent(a->ndim, a->shape, a->strides, a->itemsize, &lo, &hi) < 0) return -1;
  if (!a->size || ((kiln_deviceptr)-lo <= p && (kiln_deviceptr)hi - 1 <= UINT64_MAX - p)) return 0;
  PyErr_Format(PyExc_ValueError, "the strides reach past the ends of the address space from %s",
               from);
  return -1;
}

int kpy_array_room(kpy_state *st, const kpy_array *a, Py_ssize_t *lo, Py_ssize_t *hi) {
  if (!a->gpudata || !Py_IS_TYPE(a->gpudata, st->ref.DeviceAllocation_type)) return 0;
  const kpy_allocation *m = (const kpy_allocation *)a->gpudata;
  if (!m->ptr || m->ptr > a->ptr || a->ptr - m->ptr > m->size || m->size > (size_t)PY_SSIZE_T_MAX)
    return 0;
  *lo = -(Py_ssize_t)(a->ptr - m->ptr);
  *hi = (Py_ssize_t)m->size + *lo;
  return 1;
}

/* a's memory from a program's allocator, PyCUDA's allocator(nbytes): what it returns is held
 * as gpudata first, so that a refused address is still freed by its owner. */
static int kpy_array_allocate(kpy_state *st, kpy_array *a, PyObject *allocator) {
  PyObject *mem = PyObject_CallFunction(allocator, "n", a->nbytes);
  if (!mem) return -1;
  a->gpudata = mem;
  return kpy_address_of(st, mem, "what allocator returned", &a->ptr);
}

/* The memory of a constructed array: checks that its layout is sane and, where it can, that
 * it stays inside the memory; then takes gpudata or allocates. */
static int kpy_array_take_memory(kpy_state *st, kpy_array *a, const kpy_array_spec *sp) {
  if (sp->gpudata != Py_None) return kpy_array_put_memory(st, a, sp->gpudata);
  Py_ssize_t lo, hi;
  if (kpy_layout_extent(a->ndim, a->shape, a->strides, a->itemsize, &lo, &hi) < 0) return -1;
  if (!a->nbytes) return 0; /* PyCUDA's rule: no memory, no allocator call, gpudata None */
  if (lo < 0 || hi > a->nbytes) {
    PyErr_Format(PyExc_ValueError,
                 "the strides reach from byte %zd to byte %zd, outside the %zd bytes of a new "
                 "array of this shape; pass gpudata= for memory of your own",
                 lo, hi, a->nbytes);
    return -1;
  }
  if (sp->allocator == Py_None || kpy_is_pool_alloc(sp->allocator)) {
    a->gpudata = kpy_allocation_pooled(st, (size_t)a->nbytes, NULL, NULL);
    if (!a->gpudata) return -1;
    a->ptr = ((kpy_allocation *)a->gpudata)->ptr;
    return 0;
  }
  return kpy_array_allocate(st, a, sp->allocator);
}

kpy_array *kpy_array_new_from(kpy_state *st, PyObject *allocator, PyArray_Descr *dtype, int ndim,
                              const Py_ssize_t *shape, int fortran, kiln_stream stream,
                              PyObject *owner) {
  if (!allocator) return kpy_array_new_order(st, dtype, ndim, shape, fortran, stream, owner);
  kpy_array *a = kpy_array_blank_order(st, dtype, ndim, shape, fortran);
  if (!a) return NULL;
  a->allocator = Py_NewRef(allocator);
  /* PyCUDA's rule: no memory, no allocator call */
  if (a->nbytes && kpy_array_allocate(st, a, allocator) < 0) Py_CLEAR(a);
  return a;
}

/* a, fresh from tp_alloc or awaiting its __init__, made as sp says. */
static int kpy_array_build(kpy_state *st, kpy_array *a, const kpy_array_spec *sp) {
  if (kpy_array_set_layout(a, sp->dtype, sp->ndim, sp->shape) < 0) return -1;
  if (sp->has_strides || sp->fortran) {
    if (sp->has_strides) memcpy(a->strides, sp->strides, (size_t)a->ndim * sizeof *a->strides);
    else kpy_strides_contiguous(a->ndim, a->shape, a->itemsize, 1, a->strides);
    kpy_array_update_flags(a);
  }
  if (kpy_array_take_memory(st, a, sp) < 0) return -1;
  Py_XSETREF(a->base, sp->base == Py_None ? NULL : Py_NewRef(sp->base));
  Py_XSETREF(a->allocator, sp->allocator == Py_None || kpy_is_pool_alloc(sp->allocator)
                               ? NULL
                               : Py_NewRef(sp->allocator));
  return 0;
}

/* PyCUDA's constructor's arguments into *sp, with a new reference to the dtype in *dtype (the
 * caller's to release, also on failure). */
static int kpy_array_spec_read(PyObject *args, PyObject *kwargs, kpy_array_spec *sp,
                               PyArray_Descr **dtype_out);

/* A subclass with an __init__ of its own gets its array made there, when that __init__ calls
 * DeviceArray.__init__, as PyCUDA's GPUArray is made in __init__: its own arguments may be
 * anything (reikna's Array(thread, shape, dtype)). Until then it is an empty float64 array
 * with no memory. */
static PyObject *kpy_array_awaiting_init(PyTypeObject *tp) {
  kpy_array *a = (kpy_array *)tp->tp_alloc(tp, 0);
  if (a && kpy_array_set_empty(a) < 0) Py_CLEAR(a);
  if (a) a->awaiting_init = 1;
  return (PyObject *)a;
}

PyObject *kpy_array_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  if (tp != st->ref.DeviceArray_type && tp->tp_init != kpy_array_tp_init)
    return kpy_array_awaiting_init(tp);
  kpy_array_spec sp;
  PyArray_Descr *dtype = NULL;
  PyObject *r = NULL;
  if (kpy_array_spec_read(args, kwargs, &sp, &dtype) == 0) {
    kpy_array *a = (kpy_array *)tp->tp_alloc(tp, 0);
    if (a && kpy_array_build(st, a, &sp) < 0) Py_CLEAR(a);
    r = (PyObject *)a;
  }
  Py_XDECREF(dtype);
  return r;
}

int kpy_array_tp_init(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_array *a = (kpy_array *)op;
  if (!a->awaiting_init) return 0; /* tp_new did the work */
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return -1;
  kpy_array_spec sp;
  PyArray_Descr *dtype = NULL;
  int rc = kpy_array_spec_read(args, kwargs, &sp, &dtype);
  if (rc == 0) rc = kpy_array_build(st, a, &sp);
  Py_XDECREF(dtype);
  if (rc == 0) {
    a->awaiting_init = 0;
  } else if (a->size) { /* a layout without its memory: empty again, for a caller that goes on */
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
#endif
    Py_CLEAR(a->gpudata);
    a->ptr = 0;
    if (kpy_array_set_empty(a) < 0) PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(exc);
#else
    PyErr_Restore(exc_type, exc, tb);
#endif
  }
  return rc;
}

static int kpy_array_spec_read(PyObject *args, PyObject *kwargs, kpy_array_spec *sp_out,
                               PyArray_Descr **dtype_out) {
  static char *kwlist[] = {
      (char *)"shape",   (char *)"dtype",   (char *)"allocator", (char *)"base",
      (char *)"gpudata", (char *)"strides", (char *)"order",     NULL};
  kpy_array_spec sp = {.allocator = Py_None, .base = Py_None, .gpudata = Py_None};
  PyObject *shape_obj, *strides_obj = Py_None, *order = NULL;
  PyArray_Descr *dtype = NULL;
  *dtype_out = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO&|OOOOO:DeviceArray", kwlist, &shape_obj,
                                   PyArray_DescrConverter, &dtype, &sp.allocator, &sp.base,
                                   &sp.gpudata, &strides_obj, &order))
    return -1;
  *dtype_out = dtype;
  int r = -1;
  sp.dtype = dtype;
  if (kpy_shape_parse(shape_obj, &sp.ndim, sp.shape) < 0) goto done;
  if (order) {
    const char *o = PyUnicode_Check(order) ? kpy_cstring(order, "order") : NULL;
    if (!o || (strcmp(o, "C") && strcmp(o, "F"))) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError, "order must be 'C' or 'F', not %R", order);
      goto done;
    }
    sp.fortran = o[0] == 'F';
  }
  if (sp.allocator != Py_None && !PyCallable_Check(sp.allocator)) {
    PyErr_Format(PyExc_TypeError,
                 "allocator must be callable (allocator(nbytes) gives the memory), not %.100s",
                 Py_TYPE(sp.allocator)->tp_name);
    goto done;
  }
  if (strides_obj != Py_None) {
    int n = -1;
    if (kpy_shape_parse(strides_obj, &n, sp.strides) < 0) goto done;
    if (n != sp.ndim) {
      PyErr_Format(PyExc_ValueError, "strides has %d entries; the shape has %d", n, sp.ndim);
      goto done;
    }
    Py_ssize_t itemsize = PyDataType_ELSIZE(dtype);
    for (int i = 0; i < n; i++) {
      if (itemsize && sp.strides[i] % itemsize) {
        PyErr_Format(PyExc_ValueError,
                     "strides are in bytes and must be multiples of the itemsize, %zd; "
                     "%R is not",
                     itemsize, strides_obj);
        goto done;
      }
    }
    sp.has_strides = 1;
  }
  *sp_out = sp;
  r = 0;
done:
  return r;
}

/* ---- Lifetime ----------------------------------------------------------------------------- */

int kpy_array_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_array *a = (kpy_array *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(a->gpudata);
  Py_VISIT(a->base);
  Py_VISIT(a->allocator);
  Py_VISIT(a->dict);
  return 0;
}

int kpy_array_clear(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  Py_CLEAR(a->gpudata);
  Py_CLEAR(a->base);
  Py_CLEAR(a->allocator);
  Py_CLEAR(a->dict);
  return 0;
}

void kpy_array_dealloc(PyObject *op) {
  kpy_array *a = (kpy_array *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  if (a->weakrefs) PyObject_ClearWeakRefs(op);
  if (a->mirror.slot) {
    /* The type holds the module, so its state is found; the lookup's error is kept out of any
     * exception in flight all the same. */
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    kpy_state *st = kpy_state_of_type(tp);
    kpy_mirror_drop(st, &a->mirror);
    if (!st) PyErr_Clear();
    PyErr_Restore(type, value, tb);
  }
  if (a->dlpack && a->dlpack->deleter) a->dlpack->deleter(a->dlpack);
  kpy_array_clear(op); /* the allocation frees the memory where it was made */
  Py_XDECREF(a->dtype);
  tp->tp_free(op);
  Py_DECREF(tp);
}
