/* ElementwiseBase: the launcher under kiln.elementwise.ElementwiseKernel. The Python subclass
 * generates and compiles the kernel and binds it here (_bind); a call whose arrays are kiln
 * arrays laid out in C order is then read in place (vectorcall), packed on the stack and
 * launched without entering Python: the shape of the launch comes from the first array's size.
 * Any other call (range= or slice=, strided views, raw pointers, a variant not yet compiled)
 * goes to the subclass's _call_general. */
#include "ewise.h"

#include "args.h"
#include "arrayobj.h"
#include "errors.h"
#include "launches.h"
#include "stream.h"

#include <string.h>

/* Parameters of up to this many bytes in all are packed on the stack; more take the heap. */
#define KPY_EWISE_STACK 512

/* Arrays whose elements the kernel's flat index walks in order: C-contiguous ones. */
static int kpy_ewise_plain(kpy_array *a) { return kpy_array_is_c_contiguous((PyObject *)a); }

/* 1 when two of the n spans [lo, hi) overlap (unless they are the same span and same_ok). */
static int kpy_ewise_overlap(const kiln_deviceptr *lo, const kiln_deviceptr *hi, int n,
                             int same_ok) {
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (lo[i] < hi[j] && lo[j] < hi[i] && !(same_ok && lo[i] == lo[j] && hi[i] == hi[j]))
        return 1;
  return 0;
}

int kpy_ewise_launch(kpy_ewise *k, PyObject *const *objs, kiln_stream stream) {
  kpy_state *st = k->st;
  if (!k->fn) return 0; /* not bound: _call_general takes every call */
  kiln_deviceptr lo[KPY_EWISE_MAX_ARGS], hi[KPY_EWISE_MAX_ARGS];
  int spans = 0, device = kiln_device_current();
  Py_ssize_t n = 0;
  for (int i = 0; i < k->nargs; i++) {
    if (!k->vector[i]) continue;
    if (!PyObject_TypeCheck(objs[i], st->ref.DeviceArray_type)) return 0;
    kpy_array *a = (kpy_array *)objs[i];
    if (!kpy_ewise_plain(a) || a->device != device) return 0;
    if (i == k->first_vector) n = a->size;
    if (a->nbytes) {
      lo[spans] = a->ptr;
      hi[spans++] = a->ptr + (kiln_deviceptr)a->nbytes;
    }
  }
  if (n == 0) return 1;
  kpy_function *f = k->fn;
  if (spans > 1 && kpy_ewise_overlap(lo, hi, spans, k->same_ok)) {
    if (!k->fn_alias) return 0; /* _call_general compiles it */
    f = k->fn_alias;
  }

  /* Owned for the call: packing a scalar can run Python code (__index__), which could rebind
   * the kernel's variants. */
  Py_INCREF(f);
  _Alignas(16) unsigned char stack_storage[KPY_EWISE_STACK];
  void *params[KPY_EWISE_MAX_ARGS + 1];
  unsigned char *storage = stack_storage;
  if (f->storage_size > sizeof stack_storage && !(storage = PyMem_Malloc(f->storage_size))) {
    Py_DECREF(f);
    PyErr_NoMemory();
    return -1;
  }
  kpy_packed packed;
  packed.stream = stream;
  packed.n_transfers = 0;
  packed.waited = 0;
  packed.waited_on = NULL;
  packed.n_pointers = 0;
  int rc = -1;
  for (int i = 0; i <= k->nargs; i++) params[i] = storage + f->slots[i].offset;
  for (int i = 0; i < k->nargs; i++)
    if (!k->vector[i] && kpy_pack_arg(st, f->fn, i, objs[i], params[i], &packed) < 0) goto done;
  /* The arrays' addresses after the scalars, whose __index__ (Python code) could free the
   * memory under one. */
  for (int i = 0; i < k->nargs; i++)
    if (k->vector[i]) {
      if (kpy_array_check_memory(st, (kpy_array *)objs[i]) < 0) goto done;
      memcpy(params[i], &((kpy_array *)objs[i])->ptr, sizeof(kiln_deviceptr));
    }
  if (kpy_packed_check_pointers(st, f->fn, &packed) < 0) goto done;
  if (packed.n_transfers) {
    PyErr_Format(PyExc_TypeError,
                 "%s: In, Out and InOut are for kernels called directly; "
                 "an elementwise kernel takes arrays on the device",
                 kiln_function_signature(f->fn));
    goto done;
  }
  unsigned long long count = (unsigned long long)n;
  memcpy(params[k->nargs], &count, sizeof count);
  unsigned long long per_block = (unsigned long long)k->block * k->per_thread;
  unsigned long long grid = (count + per_block - 1) / per_block;
  kiln_launch_config cfg = {
      {grid > 0x7fffffffu ? 0x7fffffffu : (unsigned)grid, 1, 1}, {k->block, 1, 1}, 0, stream};
  kpy_launches_record((PyObject *)f, stream);
  kiln_status s = kiln_function_launch(f->fn, &cfg, params);
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  for (int i = 0; i < k->nargs; i++)
    if (k->vector[i] && kpy_array_used_on(st, objs[i], stream) < 0) goto done;
  rc = 1;
done:
  if (storage != stack_storage) PyMem_Free(storage);
  Py_DECREF(f);
  return rc;
}

static PyObject *kpy_ewise_call(PyObject *op, PyObject *const *args, size_t nargsf,
                                PyObject *kwnames) {
  kpy_ewise *k = (kpy_ewise *)op;
  kpy_state *st = k->st;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (!k->fn || nargs != k->nargs) goto general;
  kiln_stream stream = NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i);
    if (key != st->str.stream && PyUnicode_Compare(key, st->str.stream) != 0)
      goto general; /* range=, slice=, or a mistake */
    if (kpy_stream_parse(st, args[nargs + i], &stream) < 0) return NULL;
  }
  int r = kpy_ewise_launch(k, args, stream);
  if (r < 0) return NULL;
  if (r > 0) Py_RETURN_NONE;
general: /* arguments and keywords as they came */
  return kpy_call_method(op, st->str.call_general, args, nargs, kwnames);
}

static int kpy_ewise_function(kpy_state *st, PyObject *obj, kpy_function **out) {
  if (!PyObject_TypeCheck(obj, st->ref.Function_type)) {
    PyErr_Format(PyExc_TypeError, "expected a kiln.Function, not %.100s", Py_TYPE(obj)->tp_name);
    return -1;
  }
  *out = (kpy_function *)obj;
  return 0;
}

/* _bind(function, vector_mask, block, per_thread, same_ok=False): the compiled contiguous
 * variant, which arguments are arrays (a bytes or tuple of truth values), the launch shape it
 * assumes, and whether arrays that are the same memory may share it. */
static PyObject *kpy_ewise_bind(PyObject *op, PyObject *args) {
  kpy_ewise *k = (kpy_ewise *)op;
  kpy_state *st = k->st;
  PyObject *fn, *mask;
  unsigned block, per_thread;
  int same_ok = 0;
  if (!PyArg_ParseTuple(args, "OOII|p:_bind", &fn, &mask, &block, &per_thread, &same_ok))
    return NULL;
  kpy_function *f;
  if (kpy_ewise_function(st, fn, &f) < 0) return NULL;
  /* A tuple copy: an item's __bool__ may change the caller's list. */
  PyObject *fast = PySequence_Tuple(mask);
  if (!fast) return NULL;
  Py_ssize_t n = PyTuple_GET_SIZE(fast);
  int first = -1,
      ok = n <= KPY_EWISE_MAX_ARGS && f->n_params == n + 1 && block > 0 && per_thread > 0;
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    int v = PyObject_IsTrue(PyTuple_GET_ITEM(fast, i));
    if (v < 0) {
      Py_DECREF(fast);
      return NULL;
    }
    k->vector[i] = (unsigned char)v;
    if (v && first < 0) first = (int)i;
  }
  Py_DECREF(fast);
  if (!ok || first < 0) {
    /* Not an error: such a kernel is called through _call_general alone. */
    Py_RETURN_FALSE;
  }
  k->nargs = (int)n;
  k->first_vector = first;
  k->block = block;
  k->per_thread = per_thread;
  k->same_ok = same_ok;
  Py_XSETREF(k->fn, (kpy_function *)Py_NewRef(fn));
  Py_RETURN_TRUE;
}

/* _bind_alias(function): the variant without __restrict__, once compiled. */
static PyObject *kpy_ewise_bind_alias(PyObject *op, PyObject *fn) {
  kpy_ewise *k = (kpy_ewise *)op;
  kpy_function *f;
  if (kpy_ewise_function(k->st, fn, &f) < 0) return NULL;
  if (!k->fn || f->n_params != k->fn->n_params) {
    PyErr_SetString(PyExc_ValueError, "the alias variant must take the same parameters");
    return NULL;
  }
  Py_XSETREF(k->fn_alias, (kpy_function *)Py_NewRef(fn));
  Py_RETURN_NONE;
}

static PyObject *kpy_ewise_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  (void)args, (void)kwargs; /* the subclass's __init__ takes them */
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  kpy_ewise *k = (kpy_ewise *)tp->tp_alloc(tp, 0);
  if (!k) return NULL;
  k->vectorcall = kpy_ewise_call;
  k->st = st;
  return (PyObject *)k;
}

static int kpy_ewise_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_ewise *k = (kpy_ewise *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(k->fn);
  Py_VISIT(k->fn_alias);
  return 0;
}

static int kpy_ewise_clear(PyObject *op) {
  kpy_ewise *k = (kpy_ewise *)op;
  Py_CLEAR(k->fn);
  Py_CLEAR(k->fn_alias);
  return 0;
}

static void kpy_ewise_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  kpy_ewise_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyMethodDef kpy_ewise_methods[] = {
    {"_bind", kpy_ewise_bind, METH_VARARGS,
     "_bind($self, function, vector_mask, block, per_thread, same_ok=False)\n--\n\nThe "
     "compiled kernel calls take in C."},
    {"_bind_alias", kpy_ewise_bind_alias, METH_O,
     "_bind_alias($self, function, /)\n--\n\nThe variant for arrays that overlap."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef kpy_ewise_members[] = {
    {"__vectorcalloffset__", KPY_T_PYSSIZET, offsetof(kpy_ewise, vectorcall), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot kpy_ewise_slots[] = {
    {Py_tp_new, kpy_ewise_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, kpy_ewise_dealloc},
    {Py_tp_traverse, kpy_ewise_traverse},
    {Py_tp_clear, kpy_ewise_clear},
    {Py_tp_methods, kpy_ewise_methods},
    {Py_tp_members, kpy_ewise_members},
    {Py_tp_doc, (void *)"The launcher under kiln.elementwise.ElementwiseKernel."},
    {0, NULL},
};

static PyType_Spec kpy_ewise_spec = {"kiln._kiln.ElementwiseBase", sizeof(kpy_ewise), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE |
                                         Py_TPFLAGS_HAVE_VECTORCALL,
                                     kpy_ewise_slots};

int kpy_ewise_init(PyObject *module, kpy_state *st) {
  st->ref.ElementwiseBase_type = kpy_add_type(module, &kpy_ewise_spec, NULL);
  return st->ref.ElementwiseBase_type ? 0 : -1;
}
