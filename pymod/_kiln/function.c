/* kiln.Function: one kernel, called with vectorcall. Arguments are read in place (no tuple or
 * dict is built) and packed on the stack by the kernel's signature; a launch without In/Out
 * keeps the GIL, as it does not block. */
#include "function.h"

#include "args.h"
#include "errors.h"
#include "stream.h"

#ifdef Py_T_PYSSIZET
#define KPY_T_PYSSIZET Py_T_PYSSIZET
#define KPY_READONLY Py_READONLY
#else
#include <structmember.h>
#define KPY_T_PYSSIZET T_PYSSIZET
#define KPY_READONLY READONLY
#endif

/* Parameters of up to this many bytes in all are packed on the stack. */
#define KPY_STACK_STORAGE 1024
#define KPY_STACK_PARAMS 32

static const char *kpy_kw_names = "block, grid, shared, stream and time_kernel";

enum { KPY_KW_BLOCK, KPY_KW_GRID, KPY_KW_SHARED, KPY_KW_STREAM, KPY_KW_TIME_KERNEL, KPY_KW_COUNT };

/* Reads a launch shape (an int or a tuple of 1 to 3 ints) into dims, missing ones 1. */
static int kpy_parse_dims(PyObject *obj, const char *what, unsigned dims[3]) {
  dims[0] = dims[1] = dims[2] = 1;
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 0 || v > (long)UINT32_MAX) goto bad;
    dims[0] = (unsigned)v;
    return 0;
  }
  if (!PyTuple_Check(obj) && !PyList_Check(obj)) goto bad;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(obj);
  if (n < 1 || n > 3) goto bad;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PySequence_Fast_GET_ITEM(obj, i);
    if (!PyLong_Check(item) && !PyArray_IsScalar(item, Integer)) goto bad;
    long long v = PyLong_AsLongLong(item);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 0 || v > (long long)UINT32_MAX) goto bad;
    dims[i] = (unsigned)v;
  }
  return 0;
bad:
  PyErr_Format(PyExc_ValueError,
               "%s must be an int or a tuple of 1 to 3 ints from 1 to "
               "2**32-1, not %R",
               what, obj);
  return -1;
}

/* Which keyword `key` is, or -1. Keyword names are interned, so the address compares settle
 * the usual call before any string is compared. */
static int kpy_keyword(kpy_state *st, PyObject *key) {
  PyObject *names[KPY_KW_COUNT] = {st->str.block, st->str.grid, st->str.shared, st->str.stream,
                                   st->str.time_kernel};
  for (int i = 0; i < KPY_KW_COUNT; i++)
    if (key == names[i]) return i;
  for (int i = 0; i < KPY_KW_COUNT; i++)
    if (PyUnicode_Compare(key, names[i]) == 0) return i;
  return -1;
}

static PyObject *kpy_function_call(PyObject *op, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
  kpy_function *self = (kpy_function *)op;
  kpy_state *st = self->st;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (__builtin_expect(nargs != self->n_params, 0)) {
    PyErr_Format(PyExc_TypeError, "%s takes %d argument%s (%zd given)",
                 kiln_function_name(self->fn), self->n_params, self->n_params == 1 ? "" : "s",
                 nargs);
    return NULL;
  }
  kiln_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  int have_block = 0, time_kernel = 0;
  PyObject *stream_obj = NULL; /* the kiln.Stream given, if one was */
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
    int kw = kpy_keyword(st, key);
    if (kw == KPY_KW_BLOCK) {
      if (kpy_parse_dims(value, "block", cfg.block) < 0) return NULL;
      have_block = 1;
    } else if (kw == KPY_KW_GRID) {
      if (kpy_parse_dims(value, "grid", cfg.grid) < 0) return NULL;
    } else if (kw == KPY_KW_SHARED) {
      long v = PyLong_Check(value) ? PyLong_AsLong(value) : -1;
      if (v == -1 && PyErr_Occurred()) PyErr_Clear();
      if (v < 0 || v > (long)UINT32_MAX) {
        PyErr_Format(PyExc_ValueError, "shared must be a number of bytes, not %R", value);
        return NULL;
      }
      cfg.shared = (unsigned)v;
    } else if (kw == KPY_KW_STREAM) {
      if (kpy_stream_parse(st, value, &cfg.stream) < 0) return NULL;
      if (kpy_stream_is_kiln(st, value)) stream_obj = value;
    } else if (kw == KPY_KW_TIME_KERNEL) {
      if ((time_kernel = PyObject_IsTrue(value)) < 0) return NULL;
    } else {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument %R; it takes %s",
                   kiln_function_name(self->fn), key, kpy_kw_names);
      return NULL;
    }
  }
  if (!have_block) {
    PyErr_Format(PyExc_TypeError, "%s needs block=(x, y, z)", kiln_function_name(self->fn));
    return NULL;
  }

  _Alignas(16) unsigned char stack_storage[KPY_STACK_STORAGE];
  void *stack_params[KPY_STACK_PARAMS];
  unsigned char *storage = stack_storage;
  void **params = stack_params;
  if (self->storage_size > sizeof stack_storage || self->n_params > KPY_STACK_PARAMS) {
    /* Alignment beyond 16 is rare; the heap's 16 is what the driver needs to read from. */
    storage = PyMem_Malloc(self->storage_size);
    params = PyMem_Malloc(sizeof(void *) * (size_t)(self->n_params ? self->n_params : 1));
    if (!storage || !params) {
      PyMem_Free(storage);
      PyMem_Free(params);
      return PyErr_NoMemory();
    }
  }
  kpy_packed packed;
  packed.stream = cfg.stream;
  packed.n_transfers = packed.waited = 0;
  PyObject *result = NULL;
  for (int i = 0; i < self->n_params; i++) {
    params[i] = storage + self->offsets[i];
    if (kpy_pack_arg(st, self->fn, i, args[i], params[i], &packed) < 0) goto done;
  }
  kiln_status s;
  double elapsed = 0;
  if (packed.n_transfers == 0 && !time_kernel) {
    s = kiln_function_launch(self->fn, &cfg, params);
  } else if (stream_obj && !time_kernel) {
    /* On a kiln.Stream, In/Out are queued: the stream keeps the arrays until it is done. */
    for (int i = 0; i < self->n_params; i++)
      if (PyObject_TypeCheck(args[i], st->ref.In_type) ||
          PyObject_TypeCheck(args[i], st->ref.Out_type) ||
          PyObject_TypeCheck(args[i], st->ref.InOut_type))
        if (kpy_stream_keep(stream_obj, args[i]) < 0) goto done;
    Py_BEGIN_ALLOW_THREADS
      s = kiln_function_call_async(self->fn, &cfg, params, packed.transfers, packed.n_transfers);
    Py_END_ALLOW_THREADS
  } else {
    /* The arrays stay alive: the caller holds them for the length of the call. */
    Py_BEGIN_ALLOW_THREADS
      s = kiln_function_call(self->fn, &cfg, params, packed.transfers, packed.n_transfers,
                             time_kernel ? &elapsed : NULL);
    Py_END_ALLOW_THREADS
  }
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  result = time_kernel ? PyFloat_FromDouble(elapsed) : Py_NewRef(Py_None);
done:
  if (storage != stack_storage) {
    PyMem_Free(storage);
    PyMem_Free(params);
  }
  return result;
}

PyObject *kpy_function_new(kpy_state *st, PyObject *owner, kiln_function *fn) {
  PyTypeObject *tp = st->ref.Function_type;
  int n = kiln_function_param_count(fn);
  const kiln_param *p = kiln_function_params(fn);
  size_t *offsets = PyMem_Calloc((size_t)(n ? n : 1), sizeof *offsets);
  if (!offsets) return PyErr_NoMemory();
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    off = (off + p[i].align - 1) / p[i].align * p[i].align;
    offsets[i] = off;
    off += p[i].size;
  }
  kpy_function *self = PyObject_GC_New(kpy_function, tp);
  if (!self) {
    PyMem_Free(offsets);
    return NULL;
  }
  self->vectorcall = kpy_function_call;
  self->fn = fn;
  self->owner = Py_NewRef(owner);
  self->st = st;
  self->n_params = n;
  self->storage_size = off ? off : 1;
  self->offsets = offsets;
  PyObject_GC_Track(self);
  return (PyObject *)self;
}

static int kpy_function_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((kpy_function *)op)->owner);
  return 0;
}

static int kpy_function_clear(PyObject *op) {
  Py_CLEAR(((kpy_function *)op)->owner);
  return 0;
}

static void kpy_function_dealloc(PyObject *op) {
  kpy_function *self = (kpy_function *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  PyMem_Free(self->offsets);
  kpy_function_clear(op);
  PyObject_GC_Del(op);
  Py_DECREF(tp);
}

static PyObject *kpy_function_get_name(PyObject *op, void *closure) {
  (void)closure;
  return PyUnicode_FromString(kiln_function_name(((kpy_function *)op)->fn));
}

/* ('ptr', 'ptr', 'ptr', 'i32'); a struct reads 'struct[16]/16' (size/alignment). */
static PyObject *kpy_function_get_signature(PyObject *op, void *closure) {
  (void)closure;
  kpy_function *self = (kpy_function *)op;
  const kiln_param *p = kiln_function_params(self->fn);
  PyObject *t = PyTuple_New(self->n_params);
  for (int i = 0; t && i < self->n_params; i++) {
    PyObject *item = p[i].cls == KILN_PARAM_AGGREGATE
                         ? PyUnicode_FromFormat("struct[%u]/%u", p[i].size, p[i].align)
                         : PyUnicode_FromString(kiln_param_class_name(p[i].cls));
    if (!item) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, item);
  }
  return t;
}

static PyObject *kpy_function_repr(PyObject *op) {
  PyObject *sig = kpy_function_get_signature(op, NULL);
  if (!sig) return NULL;
  PyObject *joined = NULL, *sep = PyUnicode_FromString(", ");
  if (sep) joined = PyUnicode_Join(sep, sig);
  Py_XDECREF(sep);
  Py_DECREF(sig);
  if (!joined) return NULL;
  PyObject *r = PyUnicode_FromFormat("<kiln.Function %s(%U)>",
                                     kiln_function_name(((kpy_function *)op)->fn), joined);
  Py_DECREF(joined);
  return r;
}

static PyMemberDef kpy_function_members[] = {
    {"__vectorcalloffset__", KPY_T_PYSSIZET, offsetof(kpy_function, vectorcall), KPY_READONLY,
     NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef kpy_function_getset[] = {
    {"name", kpy_function_get_name, NULL, "The kernel's PTX entry name.", NULL},
    {"signature", kpy_function_get_signature, NULL,
     "One class per parameter: i32, u32, b32 (sign unknown), f32, f64, ptr, b64 (a pointer "
     "or 64-bit int), struct[size]/align, ...",
     NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_function_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, kpy_function_dealloc},
    {Py_tp_traverse, kpy_function_traverse},
    {Py_tp_clear, kpy_function_clear},
    {Py_tp_repr, kpy_function_repr},
    {Py_tp_members, kpy_function_members},
    {Py_tp_getset, kpy_function_getset},
    {Py_tp_doc, (void *)"A kernel: f(*args, block, grid=(1, 1), shared=0, stream=None, "
                        "time_kernel=False)."},
    {0, NULL},
};

static PyType_Spec kpy_function_spec = {"kiln.Function", sizeof(kpy_function), 0,
                                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                            Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_HAVE_VECTORCALL |
                                            Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                        kpy_function_slots};

int kpy_function_init(PyObject *module, kpy_state *st) {
  st->ref.Function_type = kpy_add_type(module, &kpy_function_spec, NULL);
  return st->ref.Function_type ? 0 : -1;
}
