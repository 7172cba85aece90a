/* kiln.DeviceArray (PyCUDA's GPUArray), the type: its attributes, its conversions to Python
 * values and text, and the methods and slots assembled from the core (arrayobj.c), the views
 * (views.c), the copies (arraycopy.c) and the exchange with other libraries (interop.c); its
 * flags' type; and the makers kiln.empty and zeros. */
#include "array.h"

#include "arraycopy.h"
#include "arrayobj.h"
#include "arrayops.h"
#include "errors.h"
#include "interop.h"
#include "memory.h"
#include "shape.h"
#include "stream.h"
#include "views.h"

#include <string.h>

/* ---- Making arrays ------------------------------------------------------------------------ */

static PyObject *kpy_empty_or_zeros(PyObject *module, PyObject *args, PyObject *kwargs, int zero,
                                    const char *fmt) {
  static char *kwlist[] = {(char *)"shape", (char *)"dtype", (char *)"stream", (char *)"order",
                           NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *shape_obj, *stream_obj = Py_None;
  PyArray_Descr *dtype = NULL;
  const char *order = "C";
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, PyArray_DescrConverter,
                                   &dtype, &stream_obj, &order))
    return NULL;
  Py_ssize_t shape[KPY_MAX_DIMS];
  int ndim = 0;
  kpy_array *a = NULL;
  if (!dtype) dtype = PyArray_DescrFromType(NPY_DOUBLE);
  if (strcmp(order, "C") && strcmp(order, "F"))
    PyErr_Format(PyExc_ValueError, "order must be 'C' or 'F', not '%.20s'", order);
  else if (kpy_shape_parse(shape_obj, &ndim, shape) == 0 && kpy_on_parse(st, stream_obj, &on) == 0)
    a = kpy_array_new_order(st, dtype, ndim, shape, order[0] == 'F', on.handle,
                            kpy_stream_owner(st, stream_obj, on.handle));
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
  return kpy_empty_or_zeros(module, args, kwargs, 0, "O|O&Os:empty");
}

static PyObject *kpy_zeros(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_empty_or_zeros(module, args, kwargs, 1, "O|O&Os:zeros");
}

/* ---- Flags -------------------------------------------------------------------------------- */

/* a.flags: what NumPy's and PyCUDA's flags say of the layout when read; a layout assigned
 * after (shape, dtype, strides) shows in the next a.flags, not in this one. c_contiguous and
 * f_contiguous may be assigned, as on PyCUDA's flags object (programs set them beside the
 * strides they assign): the value is this object's, and the array's own flags still follow
 * its strides, so no operation is misled by it. */
typedef struct kpy_flags {
  PyObject_HEAD
  int flags;
} kpy_flags;

static PyObject *kpy_flags_get(PyObject *op, void *closure) {
  int want = (int)(intptr_t)closure, flags = ((kpy_flags *)op)->flags;
  return PyBool_FromLong(want ? (flags & want) != 0 : flags != 0); /* 0: forc */
}

static int kpy_flags_set(PyObject *op, PyObject *value, void *closure) {
  int bit = (int)(intptr_t)closure, truth;
  if (!value) {
    PyErr_SetString(PyExc_AttributeError, "an array's flags cannot be deleted");
    return -1;
  }
  if ((truth = PyObject_IsTrue(value)) < 0) return -1;
  kpy_flags *f = (kpy_flags *)op;
  f->flags = truth ? f->flags | bit : f->flags & ~bit;
  return 0;
}

static PyObject *kpy_flags_item(PyObject *op, PyObject *key) {
  static const struct {
    const char *name;
    int want;
  } keys[] = {{"C_CONTIGUOUS", KPY_C_CONTIGUOUS},
              {"C", KPY_C_CONTIGUOUS},
              {"F_CONTIGUOUS", KPY_F_CONTIGUOUS},
              {"F", KPY_F_CONTIGUOUS},
              {"FORC", 0}};
  const char *k = PyUnicode_Check(key) ? kpy_cstring(key, "a flag's name") : NULL;
  for (size_t i = 0; k && i < sizeof keys / sizeof keys[0]; i++)
    if (!strcmp(k, keys[i].name)) return kpy_flags_get(op, (void *)(intptr_t)keys[i].want);
  PyErr_Clear();
  PyErr_Format(PyExc_KeyError, "%R: a DeviceArray's flags are C_CONTIGUOUS, F_CONTIGUOUS, FORC",
               key);
  return NULL;
}

static PyObject *kpy_flags_repr(PyObject *op) {
  int flags = ((kpy_flags *)op)->flags;
  return PyUnicode_FromFormat("  C_CONTIGUOUS : %s\n  F_CONTIGUOUS : %s",
                              flags & KPY_C_CONTIGUOUS ? "True" : "False",
                              flags & KPY_F_CONTIGUOUS ? "True" : "False");
}

static void kpy_flags_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyGetSetDef kpy_flags_getset[] = {
    {"c_contiguous", kpy_flags_get, kpy_flags_set, "C-contiguous.",
     (void *)(intptr_t)KPY_C_CONTIGUOUS},
    {"f_contiguous", kpy_flags_get, kpy_flags_set, "Fortran-contiguous.",
     (void *)(intptr_t)KPY_F_CONTIGUOUS},
    {"forc", kpy_flags_get, NULL, "C- or Fortran-contiguous.", (void *)(intptr_t)0},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_flags_slots[] = {
    {Py_tp_dealloc, kpy_flags_dealloc},
    {Py_tp_getset, kpy_flags_getset},
    {Py_tp_repr, kpy_flags_repr},
    {Py_mp_subscript, kpy_flags_item},
    {Py_tp_doc, (void *)"A DeviceArray's layout: c_contiguous, f_contiguous, forc."},
    {0, NULL},
};

static PyType_Spec kpy_flags_spec = {"kiln.ArrayFlags", sizeof(kpy_flags), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
                                         Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                     kpy_flags_slots};

/* ---- Attributes --------------------------------------------------------------------------- */

#define KPY_ARRAY(op) ((kpy_array *)(op))

static PyObject *kpy_array_get_shape(PyObject *op, void *c) {
  (void)c;
  return kpy_shape_tuple(KPY_ARRAY(op)->shape, KPY_ARRAY(op)->ndim);
}

static PyObject *kpy_array_get_strides(PyObject *op, void *c) {
  (void)c;
  return kpy_shape_tuple(KPY_ARRAY(op)->strides, KPY_ARRAY(op)->ndim);
}

/* a.strides = (...): PyCUDA's GPUArray keeps strides as a plain attribute, and programs assign
 * another array's (a copy made like an F-ordered original). Taken when the new layout reaches
 * no byte outside the array's memory: its allocation, where it holds a kiln.DeviceAllocation
 * (whose size is known), else the bytes it reaches now. The contiguity flags follow. */
static int kpy_array_set_strides(PyObject *op, PyObject *value, void *c) {
  (void)c;
  kpy_array *a = KPY_ARRAY(op);
  if (kpy_array_refuse_deletion(value, "strides") < 0) return -1;
  Py_ssize_t strides[KPY_MAX_DIMS];
  int n = -1;
  if (kpy_shape_parse(value, &n, strides) < 0) return -1;
  if (n != a->ndim) {
    PyErr_Format(PyExc_ValueError, "strides has %d entries; the array has %d dimensions", n,
                 a->ndim);
    return -1;
  }
  for (int i = 0; i < n; i++)
    if (a->itemsize && strides[i] % a->itemsize) {
      PyErr_Format(PyExc_ValueError,
                   "strides are in bytes and must be multiples of the itemsize, %zd; %R is not",
                   a->itemsize, value);
      return -1;
    }
  Py_ssize_t lo, hi, new_lo, new_hi;
  if (kpy_layout_extent(a->ndim, a->shape, a->strides, a->itemsize, &lo, &hi) < 0 ||
      kpy_layout_extent(n, a->shape, strides, a->itemsize, &new_lo, &new_hi) < 0)
    return -1;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return -1;
  kpy_array_room(st, a, &lo, &hi); /* else the bytes it reaches now */
  if (new_lo < lo || new_hi > hi) {
    PyErr_Format(PyExc_ValueError,
                 "strides %R would reach bytes %zd to %zd from the first element, outside the "
                 "%zd to %zd the array's memory holds",
                 value, new_lo, new_hi, lo, hi);
    return -1;
  }
  memcpy(a->strides, strides, sizeof strides[0] * (size_t)n);
  kpy_array_update_flags(a);
  return 0;
}

static PyObject *kpy_array_get_flags(PyObject *op, void *c) {
  (void)c;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return NULL;
  kpy_flags *f = (kpy_flags *)st->ref.ArrayFlags_type->tp_alloc(st->ref.ArrayFlags_type, 0);
  if (f) f->flags = KPY_ARRAY(op)->flags;
  return (PyObject *)f;
}

static PyObject *kpy_array_get_dtype(PyObject *op, void *c) {
  (void)c;
  return Py_NewRef((PyObject *)KPY_ARRAY(op)->dtype);
}

static PyObject *kpy_array_get_size(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromSsize_t(KPY_ARRAY(op)->size);
}

/* PyCUDA's launch shape for the array's elements, which programs pass to kernels of their
 * own (f.prepared_call(a._grid, a._block, ...)): one thread an element, 256 a block, as
 * kiln.gpuarray.splay gives it. */
enum { KPY_SPLAY_BLOCK = 256 };

static PyObject *kpy_array_get_grid(PyObject *op, void *c) {
  (void)c;
  Py_ssize_t n = KPY_ARRAY(op)->size, blocks = n / KPY_SPLAY_BLOCK + (n % KPY_SPLAY_BLOCK != 0);
  if (blocks < 1) blocks = 1;
  if (blocks > 0x7fffffff) blocks = 0x7fffffff;
  return Py_BuildValue("(ni)", blocks, 1);
}

static PyObject *kpy_array_get_block(PyObject *op, void *c) {
  (void)op, (void)c;
  return Py_BuildValue("(iii)", KPY_SPLAY_BLOCK, 1, 1);
}

/* _new_like_me(dtype=None, order="C"): PyCUDA's name for an uninitialized array of this shape,
 * which programs extending GPUArray call: of this array's type and allocator, and, with the
 * same dtype, its strides (so a Fortran-ordered array gives one). A view that is neither C- nor
 * F-contiguous gives a contiguous array in `order`: its strides would reach past a new block
 * of its size. */
static PyObject *kpy_array_new_like_me(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"dtype", (char *)"order", NULL};
  kpy_array *a = KPY_ARRAY(op);
  PyObject *dtype = Py_None, *order = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:_new_like_me", kwlist, &dtype, &order))
    return NULL;
  int same = 1;
  if (dtype != Py_None) {
    PyArray_Descr *d = NULL;
    if (!PyArray_DescrConverter(dtype, &d)) return NULL;
    same = PyArray_EquivTypes(d, a->dtype);
    Py_DECREF(d);
  }
  PyObject *shape = PyObject_GetAttrString(op, "shape");
  PyObject *allocator = PyObject_GetAttrString(op, "allocator");
  PyObject *strides = same && a->flags ? PyObject_GetAttrString(op, "strides") : Py_NewRef(Py_None);
  PyObject *call_args =
      shape ? Py_BuildValue("(OO)", shape, dtype == Py_None ? (PyObject *)a->dtype : dtype) : NULL;
  PyObject *call_kw =
      call_args && allocator && strides
          ? Py_BuildValue("{sOsOss}", "allocator", allocator, "strides", strides, "order", "C")
          : NULL;
  if (call_kw && order && PyDict_SetItemString(call_kw, "order", order) < 0) Py_CLEAR(call_kw);
  PyObject *res = call_kw ? PyObject_Call((PyObject *)Py_TYPE(op), call_args, call_kw) : NULL;
  Py_XDECREF(call_kw);
  Py_XDECREF(call_args);
  Py_XDECREF(strides);
  Py_XDECREF(allocator);
  Py_XDECREF(shape);
  return res;
}

/* nbytes is size * itemsize, itemsize the dtype's and mem_size the size, unless a program set
 * its own: PyCUDA's are plain attributes, and a GPUArray subclass may give the bytes of the
 * buffer it spans (reikna's Array, its offset included) or set itemsize in its __init__ (FiPy's),
 * or a program the elements of a view it made (tgv_pycuda's mem_size). The value is
 * kept in the array's __dict__ and given back; kiln's own copies and launches go by the array's
 * shape and dtype, never by it. */
static PyObject *kpy_array_told(PyObject *op, const char *name, Py_ssize_t own) {
  PyObject *dict = KPY_ARRAY(op)->dict;
  if (dict && PyDict_GET_SIZE(dict)) {
    PyObject *told = PyDict_GetItemString(dict, name); /* borrowed, returned at once */
    if (told) return Py_NewRef(told);
  }
  return PyLong_FromSsize_t(own);
}

static PyObject *kpy_array_get_itemsize(PyObject *op, void *c) {
  return kpy_array_told(op, c, KPY_ARRAY(op)->itemsize);
}

static PyObject *kpy_array_get_nbytes(PyObject *op, void *c) {
  return kpy_array_told(op, c, KPY_ARRAY(op)->nbytes);
}

static PyObject *kpy_array_get_mem_size(PyObject *op, void *c) {
  return kpy_array_told(op, c, KPY_ARRAY(op)->size);
}

/* Sets (or, deleted, forgets) the program's own value of the attribute named c: a count, or None
 * as PyCUDA's plain attribute takes it. */
static int kpy_array_set_told(PyObject *op, PyObject *value, void *c) {
  const char *name = c;
  PyObject *dict = PyObject_GenericGetDict(op, NULL);
  if (!dict) return -1;
  int rc;
  if (!value) {
    rc = PyDict_DelItemString(dict, name);
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_KeyError)) {
      PyErr_Clear();
      rc = 0; /* nothing was set: the array's own value stays */
    }
  } else if (value == Py_None) { /* reikna's Array(thr, shape, dtype) sets its nbytes=None */
    rc = PyDict_SetItemString(dict, name, value);
  } else {
    PyObject *n = PyNumber_Index(value);
    Py_ssize_t v = n ? PyLong_AsSsize_t(n) : -1;
    if (v >= 0) {
      rc = PyDict_SetItemString(dict, name, n);
    } else {
      if (n && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "%s must be a non-negative int, not %R", name, value);
      rc = -1;
    }
    Py_XDECREF(n);
  }
  Py_DECREF(dict);
  return rc;
}

static PyObject *kpy_array_get_ndim(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromLong(KPY_ARRAY(op)->ndim);
}

static PyObject *kpy_array_get_ptr(PyObject *op, void *c) {
  (void)c;
  kpy_array_address_out(KPY_ARRAY(op));
  return PyLong_FromUnsignedLongLong(KPY_ARRAY(op)->ptr);
}

static PyObject *kpy_array_get_device(PyObject *op, void *c) {
  (void)c;
  return PyLong_FromLong(KPY_ARRAY(op)->device);
}

static PyObject *kpy_array_get_base(PyObject *op, void *c) {
  (void)c;
  PyObject *base = KPY_ARRAY(op)->base;
  return Py_NewRef(base ? base : Py_None);
}

/* PyCUDA's gpudata is a plain attribute, and programs put other memory under an array
 * (`a.gpudata, b.gpudata = b.gpudata, a.gpudata` to swap two buffers): taken as the
 * constructor's gpudata= is, the layout kept. */
static int kpy_array_set_gpudata(PyObject *op, PyObject *value, void *c) {
  (void)c;
  if (kpy_array_refuse_deletion(value, "gpudata") < 0) return -1;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  return st ? kpy_array_put_memory(st, KPY_ARRAY(op), value) : -1;
}

/* PyCUDA's size is a plain attribute too, which scikit-cuda's set_realloc sets after giving an
 * array new memory and the shape of it; kiln's size is the shape's, so the one value taken is
 * the size the array has, and any other is refused saying what to do instead. */
static int kpy_array_set_size(PyObject *op, PyObject *value, void *c) {
  (void)c;
  if (kpy_array_refuse_deletion(value, "size") < 0) return -1;
  Py_ssize_t size = KPY_ARRAY(op)->size;
  PyObject *n = PyIndex_Check(value) ? PyNumber_Index(value) : NULL;
  Py_ssize_t v = n ? PyLong_AsSsize_t(n) : -1;
  Py_XDECREF(n);
  if (v == size) return 0;
  PyErr_Clear();
  PyErr_Format(PyExc_AttributeError,
               "a DeviceArray's number of elements is its shape's, %zd, so size cannot be "
               "assigned %R: assign shape first (where the array's allocation holds the new "
               "shape), or make a new array, GPUArray(shape, dtype, gpudata=memory), "
               "gpuarray.empty(shape, dtype) or gpuarray.to_gpu(data)",
               size, value);
  return -1;
}

static PyObject *kpy_array_check_memory_method(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st || kpy_array_check_memory(st, KPY_ARRAY(op)) < 0) return NULL;
  Py_RETURN_NONE;
}

/* The allocator a program gave, or kiln's pool_alloc for an array made without one: PyCUDA's
 * arrays always have one, and programs call it for memory like the array's (nabu's
 * replace_array_memory). */
static PyObject *kpy_array_get_allocator(PyObject *op, void *c) {
  (void)c;
  PyObject *allocator = KPY_ARRAY(op)->allocator;
  if (allocator) return Py_NewRef(allocator);
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *module = st ? PyType_GetModule(st->ref.DeviceArray_type) : NULL;
  return module ? PyObject_GetAttrString(module, "pool_alloc") : NULL;
}

/* The allocator a program gave, or None for kiln's pool: what kiln's own code asks. */
static PyObject *kpy_array_get_own_allocator(PyObject *op, void *c) {
  (void)c;
  PyObject *allocator = KPY_ARRAY(op)->allocator;
  return Py_NewRef(allocator ? allocator : Py_None);
}

/* What owns the memory, PyCUDA's way: the allocation object of an array that has one, and of
 * a view that starts where it does; the address, an int, for a view that starts elsewhere (or
 * an array wrapped from another library); None for an empty array with no memory. */
static PyObject *kpy_array_get_gpudata(PyObject *op, void *c) {
  (void)c;
  kpy_array *a = KPY_ARRAY(op);
  kpy_array_address_out(KPY_ARRAY(op));
  if (a->gpudata) return Py_NewRef(a->gpudata);
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return NULL;
  if (a->base && kpy_array_check(st, a->base)) {
    kpy_array *owner = KPY_ARRAY(a->base);
    if (owner->gpudata && owner->ptr == a->ptr) return Py_NewRef(owner->gpudata);
  }
  if (!a->ptr && !a->size) Py_RETURN_NONE;
  return PyLong_FromUnsignedLongLong(a->ptr);
}

/* ---- Conversions -------------------------------------------------------------------------- */

/* The host copy of a one-element array, for NumPy to convert as it converts its own; NULL with
 * NumPy's TypeError for any other size, before anything is copied. */
static PyObject *kpy_array_single(PyObject *op) {
  kpy_array *a = KPY_ARRAY(op);
  if (a->size != 1) {
    PyErr_SetString(PyExc_TypeError, "only 0-dimensional arrays can be converted to Python "
                                     "scalars");
    return NULL;
  }
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  return st ? kpy_array_to_host(st, a) : NULL;
}

static int kpy_array_bool(PyObject *op) {
  kpy_array *a = KPY_ARRAY(op);
  if (a->size != 1) {
    PyErr_SetString(PyExc_ValueError,
                    a->size ? "The truth value of an array with more than one element is "
                              "ambiguous. Use a.any() or a.all()"
                            : "The truth value of an empty array is ambiguous. Use `array.size "
                              "> 0` to check that an array is not empty.");
    return -1;
  }
  PyObject *h = kpy_array_single(op);
  int r = h ? PyObject_IsTrue(h) : -1;
  Py_XDECREF(h);
  return r;
}

static PyObject *kpy_array_int(PyObject *op) {
  PyObject *h = kpy_array_single(op), *r = h ? PyNumber_Long(h) : NULL;
  Py_XDECREF(h);
  return r;
}

static PyObject *kpy_array_float(PyObject *op) {
  PyObject *h = kpy_array_single(op), *r = h ? PyNumber_Float(h) : NULL;
  Py_XDECREF(h);
  return r;
}

static PyObject *kpy_array_complex(PyObject *op, PyObject *unused) {
  (void)unused;
  PyObject *h = kpy_array_single(op);
  PyObject *r = h ? PyObject_CallOneArg((PyObject *)&PyComplex_Type, h) : NULL;
  Py_XDECREF(h);
  return r;
}

static PyObject *kpy_array_index(PyObject *op) {
  kpy_array *a = KPY_ARRAY(op);
  if (a->ndim || !PyTypeNum_ISINTEGER(a->dtype->type_num)) {
    PyErr_SetString(PyExc_TypeError, "only integer scalar arrays can be converted to a scalar "
                                     "index");
    return NULL;
  }
  PyObject *h = kpy_array_single(op), *r = h ? PyNumber_Index(h) : NULL;
  Py_XDECREF(h);
  return r;
}

static PyObject *kpy_array_tolist(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *h = st ? kpy_array_to_host(st, KPY_ARRAY(op)) : NULL;
  PyObject *r = h ? PyObject_CallMethod(h, "tolist", NULL) : NULL;
  Py_XDECREF(h);
  return r;
}

/* NumPy must not copy a DeviceArray to the host behind the caller's back (np.asarray(a), a host
 * array built from a list of them): it asks for __array__, which says what to call. */
static PyObject *kpy_array_array(PyObject *op, PyObject *args, PyObject *kwargs) {
  (void)op, (void)args, (void)kwargs;
  PyErr_SetString(PyExc_TypeError, "a DeviceArray is in device memory and NumPy does not copy it "
                                   "implicitly; a.get() gives a numpy array of its values");
  return NULL;
}

/* Iteration over the first axis, by index. */
static PyObject *kpy_array_item(PyObject *op, Py_ssize_t i) {
  kpy_array *a = KPY_ARRAY(op);
  if (a->ndim == 0 || i < 0 || i >= a->shape[0]) {
    PyErr_SetString(a->ndim ? PyExc_IndexError : PyExc_TypeError,
                    a->ndim ? "index out of range" : "a 0-d array has no items");
    return NULL;
  }
  PyObject *k = PyLong_FromSsize_t(i), *r = k ? kpy_array_subscript(op, k) : NULL;
  Py_XDECREF(k);
  return r;
}

static PyObject *kpy_array_iter(PyObject *op) {
  if (KPY_ARRAY(op)->ndim == 0) {
    PyErr_SetString(PyExc_TypeError, "iteration over a 0-d array");
    return NULL;
  }
  return PySeqIter_New(op);
}

/* NumPy's repr r, "array(...)", as name(...), its continuation lines indented to match. */
static PyObject *kpy_renamed(PyObject *r, PyObject *name) {
  PyObject *prefix = PyUnicode_FromString("array("), *old = PyUnicode_FromString("\n      ");
  PyObject *space = PyUnicode_FromString(" "), *rest = NULL, *pad = NULL, *indent = NULL,
           *body = NULL, *out = NULL;
  Py_ssize_t match = prefix ? PyUnicode_Tailmatch(r, prefix, 0, 6, -1) : -1;
  if (match == 0) out = Py_NewRef(r);
  else if (match > 0 && old && space && (rest = PyUnicode_Substring(r, 6, PY_SSIZE_T_MAX)) &&
           (pad = PySequence_Repeat(space, PyUnicode_GET_LENGTH(name) + 1)) &&
           (indent = PyUnicode_FromFormat("\n%U", pad)) &&
           (body = PyUnicode_Replace(rest, old, indent, -1)))
    out = PyUnicode_FromFormat("%U(%U", name, body);
  Py_XDECREF(prefix);
  Py_XDECREF(old);
  Py_XDECREF(space);
  Py_XDECREF(rest);
  Py_XDECREF(pad);
  Py_XDECREF(indent);
  Py_XDECREF(body);
  return out;
}

/* Text: NumPy's, of the values copied to the host, under the class's name. An array whose
 * values cannot be read (no device, or kiln._ops missing for a strided one) still has a
 * repr, which says why. */
static PyObject *kpy_array_text(PyObject *op, int repr) {
  kpy_array *a = KPY_ARRAY(op);
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *name = PyObject_GetAttrString((PyObject *)Py_TYPE(op), "__name__");
  PyObject *h = st && name ? kpy_array_to_host(st, a) : NULL, *r = NULL;
  if (!h) {
    if (!name || !PyErr_ExceptionMatches(PyExc_Exception)) goto done;
    PyObject *shape = kpy_shape_tuple(a->shape, a->ndim), *why = NULL;
#if PY_VERSION_HEX >= 0x030C0000
    PyObject *exc = PyErr_GetRaisedException();
#else
    PyObject *exc_type, *exc, *tb;
    PyErr_Fetch(&exc_type, &exc, &tb);
    PyErr_NormalizeException(&exc_type, &exc, &tb);
    Py_XDECREF(exc_type);
    Py_XDECREF(tb);
#endif
    why = exc ? PyObject_Str(exc) : NULL;
    if (shape && why)
      r = PyUnicode_FromFormat("<%U shape=%R dtype=%S on device %d; its values could not be read: "
                               "%s: %U>",
                               name, shape, (PyObject *)a->dtype, a->device, Py_TYPE(exc)->tp_name,
                               why);
    Py_XDECREF(exc);
    Py_XDECREF(why);
    Py_XDECREF(shape);
    goto done;
  }
  r = repr ? PyObject_Repr(h) : PyObject_Str(h);
  if (repr && r) Py_SETREF(r, kpy_renamed(r, name));
done:
  Py_XDECREF(h);
  Py_XDECREF(name);
  return r;
}

static PyObject *kpy_array_repr(PyObject *op) { return kpy_array_text(op, 1); }
static PyObject *kpy_array_str(PyObject *op) { return kpy_array_text(op, 0); }

/* bind_to_texref and bind_to_texref_ext: PyCUDA's bindings to texture references, which CUDA 12
 * removed. */
static PyObject *kpy_array_texref(const char *name) {
  PyErr_Format(PyExc_NotImplementedError,
               "GPUArray.%s: texture references were removed in CUDA 12, which kiln needs; "
               "make a texture object (cuTexObjectCreate) over the array's memory or a "
               "kiln.driver.Array and pass it to the kernel as a cudaTextureObject_t argument",
               name);
  return NULL;
}

static PyObject *kpy_array_bind_to_texref(PyObject *op, PyObject *args, PyObject *kwargs) {
  (void)op, (void)args, (void)kwargs;
  return kpy_array_texref("bind_to_texref");
}

static PyObject *kpy_array_bind_to_texref_ext(PyObject *op, PyObject *args, PyObject *kwargs) {
  (void)op, (void)args, (void)kwargs;
  return kpy_array_texref("bind_to_texref_ext");
}

/* ---- The type ----------------------------------------------------------------------------- */

#define KPY_KW(f) ((PyCFunction)(void (*)(void))(f)), METH_VARARGS | METH_KEYWORDS

static PyMethodDef kpy_array_methods[] = {
    {"bind_to_texref", KPY_KW(kpy_array_bind_to_texref),
     "bind_to_texref($self, texref, allow_offset=False)\n--\n\nRaises NotImplementedError: CUDA "
     "12 removed texture references."},
    {"bind_to_texref_ext", KPY_KW(kpy_array_bind_to_texref_ext),
     "bind_to_texref_ext($self, texref, channels=1, allow_double_hack=False, "
     "allow_complex_hack=False, allow_offset=False)\n--\n\nRaises NotImplementedError: CUDA 12 "
     "removed texture references."},
    /* Copies (arraycopy.c) */
    {"get", KPY_KW(kpy_array_get),
     "get($self, ary=None, pagelocked=False, async_=False, stream=None, *, out=None)\n--\n\nThe "
     "values as a "
     "numpy array: a new one (page-locked when asked), or into ary (out is another name for "
     "it), which has the array's dtype and size. Done on return, as PyCUDA's; with async_=True "
     "on a kiln.Stream the copy is queued."},
    {"get_async", KPY_KW(kpy_array_get_async),
     "get_async($self, stream=None, ary=None)\n--\n\nget() on a "
     "stream."},
    {"set", KPY_KW(kpy_array_set),
     "set($self, ary, async_=False, stream=None)\n--\n\nThe values of the numpy array ary (the "
     "array's dtype "
     "and size) copied in: read on return, as PyCUDA's; with async_=True on a kiln.Stream the "
     "copy is queued."},
    {"set_async", KPY_KW(kpy_array_set_async),
     "set_async($self, ary, stream=None)\n--\n\nset() on a stream."},
    {"copy", KPY_KW(kpy_array_copy),
     "copy($self, stream=None)\n--\n\nA new contiguous array of the values."},
    {"_check_memory", kpy_array_check_memory_method, METH_NOARGS,
     "_check_memory($self)\n--\n\nRaises ValueError once the array's memory was freed (its "
     "gpudata.free()): for kiln's own launches that pass its address as an int."},
    {"_parts", kpy_array_parts, METH_NOARGS,
     "_parts($self)\n--\n\nA complex array's real and imaginary parts as views, strided as "
     "NumPy's (kiln's own kernels read them in place)."},
    {"copy_to", KPY_KW(kpy_array_copy_to),
     "copy_to($self, host, stream=None)\n--\n\nInto a numpy array of the same dtype and size."},
    {"copy_from", KPY_KW(kpy_array_copy_from),
     "copy_from($self, source, stream=None)\n--\n\nFrom a numpy array or a DeviceArray of the same "
     "dtype and "
     "size."},
    /* Views (views.c) */
    {"reshape", KPY_KW(kpy_array_reshape),
     "reshape($self, *shape, order='C')\n--\n\nThe same elements in another shape (one entry may "
     "be -1); a "
     "view when the layout allows, else a contiguous copy."},
    {"ravel", KPY_KW(kpy_array_ravel),
     "ravel($self, order='C')\n--\n\nThe elements along one contiguous axis: reshape(size), "
     "copied when that is a strided view, as NumPy's."},
    {"view", KPY_KW(kpy_array_view_as),
     "view($self, dtype=None)\n--\n\nThe same bytes as another dtype (the last axis takes a change "
     "of size)."},
    {"squeeze", KPY_KW(kpy_array_squeeze),
     "squeeze($self, axis=None)\n--\n\nA view without the axes of length 1 (or those named)."},
    {"transpose", KPY_KW(kpy_array_transpose),
     "transpose($self, *axes)\n--\n\nA view with the axes permuted (reversed by default); the "
     "axes may be given as axes= too."},
    {"swapaxes", kpy_array_swapaxes, METH_VARARGS,
     "swapaxes($self, axis1, axis2)\n--\n\nA view with two axes exchanged."},
    /* Conversions */
    {"_new_like_me", KPY_KW(kpy_array_new_like_me),
     "_new_like_me($self, dtype=None, order='C')\n--\n\nAn uninitialized array of this shape "
     "(PyCUDA's name; gpuarray.empty_like)."},
    {"__complex__", kpy_array_complex, METH_NOARGS,
     "__complex__($self, /)\n--\n\ncomplex() of a one-element array."},
    {"tolist", kpy_array_tolist, METH_NOARGS,
     "tolist($self, /)\n--\n\nThe values as nested Python lists (via get())."},
    {"__array__", KPY_KW(kpy_array_array), "Refused: a.get() copies the values to the host."},
    /* Exchange (interop.c) */
    {"__dlpack__", KPY_KW(kpy_array_dlpack),
     "The DLPack protocol: a capsule over the array's memory, no copy."},
    {"__dlpack_device__", kpy_array_dlpack_device, METH_NOARGS,
     "__dlpack_device__($self, /)\n--\n\n(kDLCUDA, device)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_array_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict,
     "The attributes a program set on the array.", NULL},
    {"shape", kpy_array_get_shape, kpy_array_set_shape,
     "Its shape. Assignable as NumPy's: in place, where the memory is laid out for it.", NULL},
    {"dtype", kpy_array_get_dtype, kpy_array_set_dtype,
     "Its numpy dtype. Assignable as NumPy's: the array takes the layout of view(dtype).", NULL},
    {"strides", kpy_array_get_strides, kpy_array_set_strides,
     "The bytes from one element to the next, per axis. Assignable, as PyCUDA's, with strides "
     "that keep every element inside the memory the array reaches now.",
     NULL},
    {"flags", kpy_array_get_flags, NULL, "c_contiguous, f_contiguous, forc.", NULL},
    {"size", kpy_array_get_size, kpy_array_set_size, "Its number of elements.", NULL},
    {"mem_size", kpy_array_get_mem_size, kpy_array_set_told,
     "Its number of elements (PyCUDA's name). Assignable, as PyCUDA's plain attribute: the value "
     "set is given back.",
     (void *)"mem_size"},
    {"_grid", kpy_array_get_grid, NULL,
     "PyCUDA's grid for a kernel over its elements: (blocks, 1), one thread an element.", NULL},
    {"_block", kpy_array_get_block, NULL, "PyCUDA's block for the same: (256, 1, 1).", NULL},
    {"itemsize", kpy_array_get_itemsize, kpy_array_set_told,
     "The bytes of one element. Assignable, as PyCUDA's plain attribute: the value set is given "
     "back.",
     (void *)"itemsize"},
    {"nbytes", kpy_array_get_nbytes, kpy_array_set_told,
     "size * itemsize. Assignable, as PyCUDA's plain attribute: the value set is given back.",
     (void *)"nbytes"},
    {"ndim", kpy_array_get_ndim, NULL, "Its number of dimensions.", NULL},
    {"ptr", kpy_array_get_ptr, NULL, "The device address of its element [0, ..., 0].", NULL},
    {"device", kpy_array_get_device, NULL, "The ordinal of its device.", NULL},
    {"base", kpy_array_get_base, NULL, "What a view keeps alive: the array it views.", NULL},
    {"gpudata", kpy_array_get_gpudata, kpy_array_set_gpudata,
     "What owns its memory (a DeviceAllocation, or what the allocator gave); the address (an "
     "int) of a view that starts elsewhere.",
     NULL},
    {"allocator", kpy_array_get_allocator, NULL,
     "The allocator it was made with; kiln.pool_alloc for one made without.", NULL},
    {"_allocator", kpy_array_get_own_allocator, NULL,
     "The allocator it was made with, or None for kiln's pool.", NULL},
    {"T", kpy_array_get_T, NULL, "transpose().", NULL},
    {"real", kpy_array_get_real, kpy_array_set_real,
     "The real parts, PyCUDA's way: a new contiguous array of a complex array's (the array "
     "itself if real). Assigning to it writes into the parts, as in NumPy.",
     NULL},
    {"imag", kpy_array_get_imag, kpy_array_set_imag,
     "The imaginary parts, PyCUDA's way: a new contiguous array of a complex array's (new "
     "zeros if real). Assigning to it writes into the parts, as in NumPy.",
     NULL},
    {"__cuda_array_interface__", kpy_array_cai, NULL, "The CUDA array interface, v3.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef kpy_array_members[] = {
    {"__dictoffset__", KPY_T_PYSSIZET, offsetof(kpy_array, dict), KPY_READONLY, NULL},
    {"__weaklistoffset__", KPY_T_PYSSIZET, offsetof(kpy_array, weakrefs), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot kpy_array_slots[] = {
    {Py_tp_new, kpy_array_tp_new},
    {Py_tp_members, kpy_array_members},
    {Py_tp_init, kpy_array_tp_init},
    {Py_tp_dealloc, kpy_array_dealloc},
    {Py_tp_traverse, kpy_array_traverse},
    {Py_tp_clear, kpy_array_clear},
    {Py_tp_repr, kpy_array_repr},
    {Py_tp_str, kpy_array_str},
    {Py_tp_hash, PyObject_HashNotImplemented},
    {Py_tp_iter, kpy_array_iter},
    {Py_tp_methods, kpy_array_methods},
    {Py_tp_getset, kpy_array_getset},
    {Py_mp_subscript, kpy_array_subscript},
    {Py_mp_ass_subscript, kpy_array_ass_subscript},
    {Py_mp_length, kpy_array_length},
    {Py_sq_length, kpy_array_length},
    {Py_sq_item, kpy_array_item},
    {Py_nb_bool, kpy_array_bool},
    {Py_nb_int, kpy_array_int},
    {Py_nb_float, kpy_array_float},
    {Py_nb_index, kpy_array_index},
    {Py_tp_doc,
     (void
          *)"DeviceArray(shape, dtype, allocator=None, base=None, gpudata=None, strides=None, "
            "order='C')\n--\n\nAn array in device memory, PyCUDA's GPUArray; passed to a kernel as "
            "its pointer. Made also by kiln.to_device, empty, zeros, asarray."},
    {0, NULL},
};

/* Not immutable: PyCUDA's GPUArray is a Python class, and libraries built on it replace its
 * methods (chainer's copy and operators). */
static PyType_Spec kpy_array_spec = {"kiln.DeviceArray", sizeof(kpy_array), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE,
                                     kpy_array_slots};

static PyMethodDef kpy_array_functions[] = {
    {"empty", (PyCFunction)(void (*)(void))kpy_empty, METH_VARARGS | METH_KEYWORDS,
     "empty($module, shape, dtype='float64', stream=None, order='C')\n--\n\nAn uninitialized "
     "DeviceArray."},
    {"zeros", (PyCFunction)(void (*)(void))kpy_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros($module, shape, dtype='float64', stream=None, order='C')\n--\n\nA DeviceArray of "
     "zeros."},
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
  if (!(st->ref.ArrayFlags_type = kpy_add_type(module, &kpy_flags_spec, NULL)) ||
      !(st->ref.DeviceArray_type = kpy_add_type(module, &kpy_array_spec, NULL)))
    return -1;
  /* NumPy defers to the array in mixed operations: no ufunc takes it, and its reflected
   * operators run instead of NumPy's. Class attributes, set before anyone sees the type. */
  PyObject *dict = st->ref.DeviceArray_type->tp_dict, *priority = PyFloat_FromDouble(100.0);
  int rc = priority && PyDict_SetItemString(dict, "__array_ufunc__", Py_None) == 0 &&
                   PyDict_SetItemString(dict, "__array_priority__", priority) == 0
               ? 0
               : -1;
  Py_XDECREF(priority);
  PyType_Modified(st->ref.DeviceArray_type);
  if (rc < 0 || kpy_arraycopy_init(module, st) < 0) return -1;
  return PyModule_AddFunctions(module, kpy_array_functions);
}
