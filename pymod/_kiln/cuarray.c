/* CUDA arrays as PyCUDA has them: Array(descriptor) from an ArrayDescriptor or
 * ArrayDescriptor3D (any object with their attributes), freed when collected or by free();
 * kiln.driver.Array adds get_descriptor and get_descriptor_3d over _descriptor. The copies
 * memcpy_htoa, memcpy_atoh, memcpy_dtoa, memcpy_atod and memcpy_atoa, with PyCUDA's arguments;
 * the engine checks each against the array's bytes before the device. */
#include "cuarray.h"

#include "errors.h"
#include "memory.h"
#include "wait.h"

typedef struct kpy_cuarray {
  PyObject_HEAD
  kiln_array *array;  /* owned; NULL once freed */
  int leases;         /* copies using it now (kpy_cuarray_get) */
  kiln_array *doomed; /* owned: freed while leased, destroyed when the last lease ends */
} kpy_cuarray;

static void kpy_cuarray_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  kiln_array_free(((kpy_cuarray *)op)->array); /* nothing to tell of a failure here */
  tp->tp_free(op);
  Py_DECREF(tp);
}

/* A field of the descriptor: a count >= 0 (size_t) or an unsigned int. 0 when it is missing
 * and optional (*present cleared), -1 with the error raised. */
static int kpy_cuarray_field(PyObject *desc, const char *name, int optional, size_t max,
                             size_t *out, int *present) {
  *out = 0;
  PyObject *v = PyObject_GetAttrString(desc, name);
  if (!v) {
    if (optional && PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      *present = 0;
      return 0;
    }
    if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "Array takes an ArrayDescriptor or ArrayDescriptor3D; %.100s has no %s",
                   Py_TYPE(desc)->tp_name, name);
    }
    return -1;
  }
  PyObject *i =
      PyLong_Check(v) || (PyIndex_Check(v) && !PyFloat_Check(v)) ? PyNumber_Index(v) : NULL;
  size_t value = i ? PyLong_AsSize_t(i) : (size_t)-1;
  int bad = !i || (value == (size_t)-1 && PyErr_Occurred()) || value > max;
  Py_XDECREF(i);
  if (bad) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "the descriptor's %s is an int from 0 to %zu, not %R", name, max,
                 v);
    Py_DECREF(v);
    return -1;
  }
  Py_DECREF(v);
  *out = value;
  return 0;
}

/* Array(descriptor) */
static PyObject *kpy_cuarray_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(type);
  if (!st) return NULL;
  static char *kwlist[] = {(char *)"descriptor", NULL};
  PyObject *desc;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Array", kwlist, &desc)) return NULL;
  kiln_array_desc d = {0};
  size_t format = 0, channels = 0, flags = 0;
  int three_d = 1, has_flags = 1, always = 1;
  if (kpy_cuarray_field(desc, "width", 0, SIZE_MAX, &d.width, &always) < 0 ||
      kpy_cuarray_field(desc, "height", 0, SIZE_MAX, &d.height, &always) < 0 ||
      kpy_cuarray_field(desc, "depth", 1, SIZE_MAX, &d.depth, &three_d) < 0 ||
      kpy_cuarray_field(desc, "format", 0, UINT_MAX, &format, &always) < 0 ||
      kpy_cuarray_field(desc, "num_channels", 0, UINT_MAX, &channels, &always) < 0 ||
      kpy_cuarray_field(desc, "flags", 1, UINT_MAX, &flags, &has_flags) < 0)
    return NULL;
  d.format = (unsigned)format;
  d.num_channels = (unsigned)channels;
  d.flags = three_d ? (unsigned)flags : 0;
  kpy_cuarray *self = (kpy_cuarray *)type->tp_alloc(type, 0);
  if (!self) return NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_array_create(&d, &self->array);
  Py_END_ALLOW_THREADS
  if (s) {
    Py_DECREF(self);
    return kpy_raise(st, s);
  }
  return (PyObject *)self;
}

int kpy_cuarray_get(kpy_state *st, PyObject *obj, const char *what, kiln_array **out) {
  if (!PyObject_TypeCheck(obj, st->ref.Array_type)) {
    PyErr_Format(PyExc_TypeError, "the %s must be a kiln.driver.Array, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  kpy_cuarray *self = (kpy_cuarray *)obj;
  if (!(*out = self->array)) {
    PyErr_Format(PyExc_ValueError, "the %s Array was freed", what);
    return -1;
  }
  self->leases++;
  Py_INCREF(obj);
  return 0;
}

void kpy_cuarray_put(PyObject *obj) {
  kpy_cuarray *self = (kpy_cuarray *)obj;
  if (--self->leases == 0 && self->doomed) {
    kiln_array *a = self->doomed;
    self->doomed = NULL;
    kiln_array_free(a); /* free() returned long ago: nothing to tell of a failure */
  }
  Py_DECREF(obj);
}

/* The array, or NULL with ValueError once it was freed. */
static kiln_array *kpy_cuarray_live(PyObject *op) {
  kiln_array *a = ((kpy_cuarray *)op)->array;
  if (!a) PyErr_SetString(PyExc_ValueError, "the Array was freed");
  return a;
}

static PyObject *kpy_cuarray_free(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_cuarray *self = (kpy_cuarray *)op;
  kiln_array *a = self->array;
  self->array = NULL; /* a second free() does nothing, as PyCUDA's */
  if (self->leases) { /* a copy uses it: the last one's end destroys it */
    if (a) self->doomed = a;
    Py_RETURN_NONE;
  }
  kiln_status s = kiln_array_free(a);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_cuarray_get_handle(PyObject *op, void *closure) {
  (void)closure;
  kiln_array *a = kpy_cuarray_live(op);
  return a ? PyLong_FromSize_t((size_t)kiln_array_handle(a)) : NULL;
}

/* (width, height, depth, format, num_channels, flags), as the array was made. */
static PyObject *kpy_cuarray_get_descriptor(PyObject *op, void *closure) {
  (void)closure;
  kiln_array *a = kpy_cuarray_live(op);
  if (!a) return NULL;
  const kiln_array_desc *d = kiln_array_descriptor(a);
  return Py_BuildValue("(nnnIII)", (Py_ssize_t)d->width, (Py_ssize_t)d->height,
                       (Py_ssize_t)d->depth, d->format, d->num_channels, d->flags);
}

static PyObject *kpy_cuarray_repr(PyObject *op) {
  kiln_array *a = ((kpy_cuarray *)op)->array;
  const char *name = Py_TYPE(op)->tp_name;
  if (!a) return PyUnicode_FromFormat("<%s (freed)>", name);
  const kiln_array_desc *d = kiln_array_descriptor(a);
  return PyUnicode_FromFormat("<%s of %zu x %zu x %zu elements, format 0x%x x %u channels>", name,
                              d->width, d->height, d->depth, d->format, d->num_channels);
}

/* ---- Copies ------------------------------------------------------------------------------ */

/* A byte offset into an array, or a length: an int >= 0. */
static int kpy_cuarray_count(Py_ssize_t v, const char *name) {
  if (v >= 0) return 0;
  PyErr_Format(PyExc_ValueError, "%s is a number of bytes >= 0, not %zd", name, v);
  return -1;
}

/* memcpy_htoa(ary, index, src) and memcpy_atoh(dest, ary, index): the host buffer's bytes. */
static PyObject *kpy_cuarray_host_copy(PyObject *module, PyObject *args, PyObject *kwargs,
                                       int to_array) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kw_htoa[] = {(char *)"ary", (char *)"index", (char *)"src", NULL};
  static char *kw_atoh[] = {(char *)"dest", (char *)"ary", (char *)"index", NULL};
  PyObject *ary, *host;
  Py_ssize_t index;
  int ok = to_array ? PyArg_ParseTupleAndKeywords(args, kwargs, "OnO:memcpy_htoa", kw_htoa, &ary,
                                                  &index, &host)
                    : PyArg_ParseTupleAndKeywords(args, kwargs, "OOn:memcpy_atoh", kw_atoh, &host,
                                                  &ary, &index);
  kiln_array *a;
  if (!ok || kpy_cuarray_count(index, "index") < 0 ||
      kpy_cuarray_get(st, ary, to_array ? "destination" : "source", &a) < 0)
    return NULL;
  Py_buffer view;
  if (kpy_host_side(host, !to_array, to_array ? "source" : "destination", &view) < 0) {
    kpy_cuarray_put(ary);
    return NULL;
  }
  kiln_status s = KILN_OK;
  int waited = kpy_wait_before_copy(st, NULL); /* behind the work before it, Ctrl-C can end it */
  if (waited == 0) {
    Py_BEGIN_ALLOW_THREADS
      s = to_array ? kiln_memcpy_htoa(a, (size_t)index, view.buf, (size_t)view.len)
                   : kiln_memcpy_atoh(view.buf, a, (size_t)index, (size_t)view.len);
    Py_END_ALLOW_THREADS
  }
  PyBuffer_Release(&view);
  kpy_cuarray_put(ary);
  if (waited < 0) return NULL;
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_memcpy_htoa(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_cuarray_host_copy(module, args, kwargs, 1);
}

static PyObject *kpy_memcpy_atoh(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_cuarray_host_copy(module, args, kwargs, 0);
}

/* memcpy_dtoa(ary, index, src, len) and memcpy_atod(dest, ary, index, len). */
static PyObject *kpy_cuarray_device_copy(PyObject *module, PyObject *args, PyObject *kwargs,
                                         int to_array) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kw_dtoa[] = {(char *)"ary", (char *)"index", (char *)"src", (char *)"len", NULL};
  static char *kw_atod[] = {(char *)"dest", (char *)"ary", (char *)"index", (char *)"len", NULL};
  PyObject *ary, *dev_obj;
  Py_ssize_t index, len;
  int ok = to_array ? PyArg_ParseTupleAndKeywords(args, kwargs, "OnOn:memcpy_dtoa", kw_dtoa, &ary,
                                                  &index, &dev_obj, &len)
                    : PyArg_ParseTupleAndKeywords(args, kwargs, "OOnn:memcpy_atod", kw_atod,
                                                  &dev_obj, &ary, &index, &len);
  kiln_array *a;
  kiln_deviceptr dev;
  if (!ok || kpy_cuarray_count(index, "index") < 0 || kpy_cuarray_count(len, "len") < 0 ||
      kpy_cuarray_get(st, ary, to_array ? "destination" : "source", &a) < 0)
    return NULL;
  if (kpy_device_pointer(st, dev_obj, (size_t)len, to_array ? "source" : "destination", &dev) < 0) {
    kpy_cuarray_put(ary);
    return NULL;
  }
  kiln_status s;
  kpy_copies_begin(st);
  Py_BEGIN_ALLOW_THREADS
    s = to_array ? kiln_memcpy_dtoa(a, (size_t)index, dev, (size_t)len)
                 : kiln_memcpy_atod(dev, a, (size_t)index, (size_t)len);
  Py_END_ALLOW_THREADS
  kpy_copies_end(st);
  kpy_cuarray_put(ary);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_memcpy_dtoa(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_cuarray_device_copy(module, args, kwargs, 1);
}

static PyObject *kpy_memcpy_atod(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_cuarray_device_copy(module, args, kwargs, 0);
}

/* memcpy_atoa(dest, dest_index, src, src_index, len) */
static PyObject *kpy_memcpy_atoa(PyObject *module, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kwlist[] = {(char *)"dest",      (char *)"dest_index", (char *)"src",
                           (char *)"src_index", (char *)"len",        NULL};
  PyObject *dst_obj, *src_obj;
  Py_ssize_t dst_index, src_index, len;
  kiln_array *dst, *src;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OnOnn:memcpy_atoa", kwlist, &dst_obj, &dst_index,
                                   &src_obj, &src_index, &len) ||
      kpy_cuarray_count(dst_index, "dest_index") < 0 ||
      kpy_cuarray_count(src_index, "src_index") < 0 || kpy_cuarray_count(len, "len") < 0 ||
      kpy_cuarray_get(st, dst_obj, "destination", &dst) < 0)
    return NULL;
  if (kpy_cuarray_get(st, src_obj, "source", &src) < 0) {
    kpy_cuarray_put(dst_obj);
    return NULL;
  }
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_memcpy_atoa(dst, (size_t)dst_index, src, (size_t)src_index, (size_t)len);
  Py_END_ALLOW_THREADS
  kpy_cuarray_put(src_obj);
  kpy_cuarray_put(dst_obj);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyMethodDef kpy_cuarray_methods[] = {
    {"free", kpy_cuarray_free, METH_NOARGS,
     "free($self, /)\n--\n\nDestroys the array now rather than when it is collected; a later use "
     "is a ValueError, a second free() nothing."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_cuarray_getset[] = {
    {"handle", kpy_cuarray_get_handle, NULL, "The driver's CUarray, as an int.", NULL},
    {"_descriptor", kpy_cuarray_get_descriptor, NULL,
     "(width, height, depth, format, num_channels, flags) as the array was made.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_cuarray_slots[] = {
    {Py_tp_new, kpy_cuarray_new},
    {Py_tp_dealloc, kpy_cuarray_dealloc},
    {Py_tp_repr, kpy_cuarray_repr},
    {Py_tp_methods, kpy_cuarray_methods},
    {Py_tp_getset, kpy_cuarray_getset},
    {Py_tp_doc, (void *)"Array(descriptor)\n--\n\nA CUDA array of the descriptor's shape (an "
                        "ArrayDescriptor or ArrayDescriptor3D), in the current device's context; "
                        "destroyed when collected or by free()."},
    {0, NULL},
};

static PyType_Spec kpy_cuarray_spec = {
    "kiln._kiln.Array", sizeof(kpy_cuarray), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE, kpy_cuarray_slots};

static PyMethodDef kpy_cuarray_functions[] = {
    {"memcpy_htoa", (PyCFunction)(void (*)(void))kpy_memcpy_htoa, METH_VARARGS | METH_KEYWORDS,
     "memcpy_htoa($module, ary, index, src)\n--\n\nThe bytes of src (a contiguous buffer) into "
     "the Array ary from byte index."},
    {"memcpy_atoh", (PyCFunction)(void (*)(void))kpy_memcpy_atoh, METH_VARARGS | METH_KEYWORDS,
     "memcpy_atoh($module, dest, ary, index)\n--\n\nThe bytes of the Array ary from byte index "
     "into dest (a writeable contiguous buffer), as many as dest holds."},
    {"memcpy_dtoa", (PyCFunction)(void (*)(void))kpy_memcpy_dtoa, METH_VARARGS | METH_KEYWORDS,
     "memcpy_dtoa($module, ary, index, src, len)\n--\n\nlen bytes of device memory at src into "
     "the Array ary from byte index."},
    {"memcpy_atod", (PyCFunction)(void (*)(void))kpy_memcpy_atod, METH_VARARGS | METH_KEYWORDS,
     "memcpy_atod($module, dest, ary, index, len)\n--\n\nlen bytes of the Array ary from byte "
     "index into device memory at dest."},
    {"memcpy_atoa", (PyCFunction)(void (*)(void))kpy_memcpy_atoa, METH_VARARGS | METH_KEYWORDS,
     "memcpy_atoa($module, dest, dest_index, src, src_index, len)\n--\n\nlen bytes of the Array "
     "src from byte src_index into the Array dest from byte dest_index."},
    {NULL, NULL, 0, NULL},
};

int kpy_cuarray_init(PyObject *module, kpy_state *st) {
  if (!(st->ref.Array_type = kpy_add_type(module, &kpy_cuarray_spec, NULL))) return -1;
  return PyModule_AddFunctions(module, kpy_cuarray_functions);
}
