/* ReductionBase: the launcher under kiln.reduction.ReductionKernel. Its kernel reduces in one
 * launch (kiln/_reduce_src.py): every block writes one partial value into a scratch buffer and
 * the last block to finish, told by a counter at the buffer's start, folds them. The counter
 * goes back to 0 at the end of every launch, so each (device, stream) keeps one zeroed buffer
 * and reuses it with no memset: launches on one stream run one after another, and launches on
 * two streams never share a buffer. */
#include "reduce.h"

#include "args.h"
#include "arrayobj.h"
#include "errors.h"
#include "launches.h"
#include "stream.h"
#include "wait.h"

#include <string.h>

/* The scratch buffer: the counter (16 bytes, keeping what follows aligned), then up to
 * KPY_REDUCE_MAX_BLOCKS partial values of up to 16 bytes. _reduce_src.py lays it out so. */
#define KPY_REDUCE_MAX_BLOCKS 1024
#define KPY_REDUCE_SCRATCH (16 + KPY_REDUCE_MAX_BLOCKS * 16)
#define KPY_REDUCE_STACK 512
#define KPY_REDUCE_MIN_BLOCK 256

/* Arrays whose elements the kernel's flat index walks in order: C-contiguous ones. */
static int kpy_reduce_plain(kpy_array *a) { return kpy_array_is_c_contiguous((PyObject *)a); }

/* The zeroed scratch buffer of (device, stream), made on first use. Evicting one (past
 * KPY_SCRATCH_SLOTS streams) waits for the device first: a launch may still use it. */
static int kpy_reduce_scratch(kpy_state *st, int device, kiln_stream stream, kiln_deviceptr *out) {
  unsigned long thread = stream == (kiln_stream)2 ? PyThread_get_thread_ident() : 0;
  for (int i = 0; i < st->n_scratch; i++)
    if (st->scratch[i].device == device && st->scratch[i].stream == stream &&
        st->scratch[i].thread == thread) {
      *out = st->scratch[i].ptr;
      return 0;
    }
  kiln_status s;
  if (st->n_scratch == KPY_SCRATCH_SLOTS) {
    int current = kiln_device_current();
    kiln_device_set_current(st->scratch[0].device);
    /* Where Ctrl-C can end the wait; the buffer is then kept, as it may still be in use. */
    int r = kpy_wait_device(st, -1);
    s = r < 0 ? KILN_OK : kiln_mem_free(st->scratch[0].ptr);
    kiln_device_set_current(current);
    if (r < 0) return -1;
    if (s) {
      kpy_raise(st, s);
      return -1;
    }
    memmove(st->scratch, st->scratch + 1, sizeof st->scratch[0] * (KPY_SCRATCH_SLOTS - 1));
    st->n_scratch--;
  }
  kiln_deviceptr p = 0;
  s = kiln_mem_alloc(KPY_REDUCE_SCRATCH, &p);
  if (!s) s = kiln_memset_async(p, 0, KPY_REDUCE_SCRATCH, stream);
  if (s) {
    kpy_raise(st, s); /* first: a free that succeeds clears the failure's sentence */
    if (p) kiln_mem_free(p);
    return -1;
  }
  st->scratch[st->n_scratch].device = device;
  st->scratch[st->n_scratch].stream = stream;
  st->scratch[st->n_scratch].thread = thread;
  st->scratch[st->n_scratch++].ptr = p;
  *out = p;
  return 0;
}

void kpy_reduce_free(kpy_state *st) {
  if (!st->n_scratch) return;
  int current = kiln_device_current();
  for (int i = 0; i < st->n_scratch; i++) {
    kiln_device_set_current(st->scratch[i].device);
    kiln_synchronize();
    kiln_mem_free(st->scratch[i].ptr);
  }
  kiln_device_set_current(current);
  st->n_scratch = 0;
}

/* The blocks that fill device: its multiprocessors times blocks_per_sm. */
static int kpy_reduce_max_grid(kpy_reduce *r, int device, unsigned *out) {
  kpy_state *st = r->st;
  int sms = device >= 0 && device < KPY_ORDER_DEVICES ? st->sm_count[device] : 0;
  if (!sms) {
    kiln_device_info info;
    kiln_status s = kiln_device_get_info(device, &info);
    if (s) {
      kpy_raise(st, s);
      return -1;
    }
    sms = info.multiprocessors > 0 ? info.multiprocessors : 1;
    if (device >= 0 && device < KPY_ORDER_DEVICES) st->sm_count[device] = sms;
  }
  unsigned long long g = (unsigned long long)sms * r->blocks_per_sm;
  *out = g > KPY_REDUCE_MAX_BLOCKS ? KPY_REDUCE_MAX_BLOCKS : (unsigned)g;
  return 0;
}

/* The block a launch over n elements uses: the kernel's own, halved (down to
 * KPY_REDUCE_MIN_BLOCK) while one block of half the threads still covers the input, since a
 * smaller block folds sooner (on an H200 a float32 sum of 10^3 to the host: 13.3 µs with 256
 * threads, 14.2 with 512). _reduce_src.launch_block is the same rule for the general path. */
static unsigned kpy_reduce_block(unsigned block, unsigned per_thread, unsigned long long n) {
  while (block / 2 >= KPY_REDUCE_MIN_BLOCK && n <= (unsigned long long)(block / 2) * per_thread)
    block /= 2;
  return block;
}

/* The result: `out` when given (a DeviceArray of the result's dtype with room for one value),
 * else a new 0-d array on stream. NULL with an exception set, or with none when the call must
 * take the general path. */
static kpy_array *kpy_reduce_out(kpy_reduce *r, PyObject *out, kiln_stream stream,
                                 PyObject *stream_owner) {
  kpy_state *st = r->st;
  if (!out || out == Py_None) return kpy_array_new(st, r->dtype, 0, NULL, stream, stream_owner);
  if (!PyObject_TypeCheck(out, st->ref.DeviceArray_type)) return NULL;
  kpy_array *a = (kpy_array *)out;
  if (!PyArray_EquivTypes(a->dtype, r->dtype) || a->size < 1 || !kpy_reduce_plain(a)) {
    PyErr_Format(PyExc_ValueError,
                 "out must be a DeviceArray of dtype %R with room for the one result, not %R "
                 "of %zd elements",
                 (PyObject *)r->dtype, (PyObject *)a->dtype, a->size);
    return NULL;
  }
  return (kpy_array *)Py_NewRef(out);
}

/* The C path: the result array, or NULL with an exception set, or NULL with none when the
 * call must take the general path. */
static PyObject *kpy_reduce_launch(kpy_reduce *r, PyObject *const *objs, PyObject *out_obj,
                                   kiln_stream stream, PyObject *stream_owner) {
  kpy_state *st = r->st;
  int device = kiln_device_current();
  Py_ssize_t n = 0;
  for (int i = 0; i < r->nargs; i++) {
    if (!r->vector[i]) continue;
    if (!PyObject_TypeCheck(objs[i], st->ref.DeviceArray_type)) return NULL;
    kpy_array *a = (kpy_array *)objs[i];
    if (!kpy_reduce_plain(a) || a->device != device) return NULL;
    if (i == r->first_vector) {
      n = a->size;
      /* a new result from its allocator, as PyCUDA's: the general path makes it */
      if (a->allocator && (!out_obj || out_obj == Py_None)) return NULL;
    }
  }
  unsigned max_grid;
  if (kpy_reduce_max_grid(r, device, &max_grid) < 0) return NULL;
  unsigned block = kpy_reduce_block(r->block, r->per_thread, (unsigned long long)n);
  unsigned long long per_block = (unsigned long long)block * r->per_thread;
  unsigned long long want = ((unsigned long long)n + per_block - 1) / per_block;
  unsigned grid = want < 1 ? 1 : want > max_grid ? max_grid : (unsigned)want;
  kiln_deviceptr scratch = 0;
  if (grid > 1 && kpy_reduce_scratch(st, device, stream, &scratch) < 0) return NULL;
  kpy_array *out = kpy_reduce_out(r, out_obj, stream, stream_owner);
  if (!out) return NULL;
  /* A new result gets a host mirror, which a read of it on the host waits for. */
  kiln_deviceptr mirror =
      out_obj && out_obj != Py_None
          ? 0
          : kpy_mirror_take(st, &out->mirror, (size_t)out->nbytes, stream, !stream || stream_owner);

  /* Owned for the call: packing a scalar can run Python code, which could rebind it. */
  kpy_function *f = (kpy_function *)Py_NewRef(r->fn);
  _Alignas(16) unsigned char stack_storage[KPY_REDUCE_STACK];
  void *params[KPY_REDUCE_MAX_ARGS + 4];
  unsigned char *storage = stack_storage;
  if (f->storage_size > sizeof stack_storage && !(storage = PyMem_Malloc(f->storage_size))) {
    Py_DECREF(out);
    Py_DECREF(f);
    return PyErr_NoMemory();
  }
  kpy_packed packed;
  packed.stream = stream;
  packed.n_transfers = 0;
  packed.waited = 0;
  packed.waited_on = NULL;
  packed.n_pointers = 0;
  PyObject *result = NULL;
  for (int i = 0; i < r->nargs + 4; i++) params[i] = storage + f->slots[i].offset;
  memcpy(params[0], &out->ptr, sizeof out->ptr);
  memcpy(params[1], &scratch, sizeof scratch);
  memcpy(params[2], &mirror, sizeof mirror);
  for (int i = 0; i < r->nargs; i++)
    if (!r->vector[i] && kpy_pack_arg(st, f->fn, 3 + i, objs[i], params[3 + i], &packed) < 0)
      goto done;
  /* The arrays' addresses after the scalars, whose __index__ (Python code) could free the
   * memory under one. */
  for (int i = 0; i < r->nargs; i++)
    if (r->vector[i]) {
      if (kpy_array_check_memory(st, (kpy_array *)objs[i]) < 0) goto done;
      memcpy(params[3 + i], &((kpy_array *)objs[i])->ptr, sizeof(kiln_deviceptr));
    }
  if (kpy_packed_check_pointers(st, f->fn, &packed) < 0) goto done;
  if (packed.n_transfers) {
    PyErr_Format(PyExc_TypeError,
                 "%s: In, Out and InOut are for kernels called directly; a "
                 "reduction takes arrays on the device",
                 kiln_function_signature(f->fn));
    goto done;
  }
  unsigned long long count = (unsigned long long)n;
  memcpy(params[r->nargs + 3], &count, sizeof count);
  kiln_launch_config cfg = {{grid, 1, 1}, {block, 1, 1}, 0, stream};
  kpy_launches_record((PyObject *)f, stream);
  kiln_status s = kiln_function_launch(f->fn, &cfg, params);
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  if (mirror) kpy_mirror_queued(&out->mirror);
  if (kpy_array_used_on(st, (PyObject *)out, stream) < 0) goto done;
  for (int i = 0; i < r->nargs; i++)
    if (r->vector[i] && kpy_array_used_on(st, objs[i], stream) < 0) goto done;
  result = (PyObject *)out;
  out = NULL;
done:
  if (storage != stack_storage) PyMem_Free(storage);
  if (out && mirror) kpy_mirror_drop(st, &out->mirror); /* not queued, or a failure after */
  Py_XDECREF(out);
  Py_DECREF(f);
  return result;
}

static PyObject *kpy_reduce_call(PyObject *op, PyObject *const *args, size_t nargsf,
                                 PyObject *kwnames) {
  kpy_reduce *r = (kpy_reduce *)op;
  kpy_state *st = r->st;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (!r->fn || nargs != r->nargs) goto general;
  kiln_stream stream = NULL;
  PyObject *stream_owner = NULL, *out = NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
    if (key == st->str.stream || PyUnicode_Compare(key, st->str.stream) == 0) {
      if (kpy_stream_parse(st, value, &stream) < 0) return NULL;
      stream_owner = kpy_stream_owner(st, value, stream);
    } else if (key == st->str.out || PyUnicode_Compare(key, st->str.out) == 0) {
      out = value;
    } else {
      goto general; /* allocator=, range=, ... */
    }
  }
  PyObject *result = kpy_reduce_launch(r, args, out, stream, stream_owner);
  if (result || PyErr_Occurred()) return result;
general: /* arguments and keywords as they came */
  return kpy_call_method(op, st->str.call_general, args, nargs, kwnames);
}

/* _bind(function, dtype, vector_mask, block, per_thread, blocks_per_sm). */
static PyObject *kpy_reduce_bind(PyObject *op, PyObject *args) {
  kpy_reduce *r = (kpy_reduce *)op;
  PyObject *fn, *mask;
  PyArray_Descr *dtype = NULL;
  unsigned block, per_thread, blocks_per_sm;
  if (!PyArg_ParseTuple(args, "OO&OIII:_bind", &fn, PyArray_DescrConverter, &dtype, &mask, &block,
                        &per_thread, &blocks_per_sm))
    return NULL;
  if (!PyObject_TypeCheck(fn, r->st->ref.Function_type)) {
    Py_DECREF(dtype);
    PyErr_Format(PyExc_TypeError, "expected a kiln.Function, not %.100s", Py_TYPE(fn)->tp_name);
    return NULL;
  }
  /* A tuple copy: an item's __bool__ may change the caller's list. */
  PyObject *fast = PySequence_Tuple(mask);
  if (!fast) {
    Py_DECREF(dtype);
    return NULL;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(fast);
  int first = -1;
  int ok = n <= KPY_REDUCE_MAX_ARGS && ((kpy_function *)fn)->n_params == n + 4 && block > 0 &&
           per_thread > 0 && blocks_per_sm > 0 && PyDataType_ELSIZE(dtype) <= 16;
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    int v = PyObject_IsTrue(PyTuple_GET_ITEM(fast, i));
    if (v < 0) {
      Py_DECREF(fast);
      Py_DECREF(dtype);
      return NULL;
    }
    r->vector[i] = (unsigned char)v;
    if (v && first < 0) first = (int)i;
  }
  Py_DECREF(fast);
  if (!ok || first < 0) {
    Py_DECREF(dtype);
    Py_RETURN_FALSE; /* called through _call_general alone */
  }
  r->nargs = (int)n;
  r->first_vector = first;
  r->block = block;
  r->per_thread = per_thread;
  r->blocks_per_sm = blocks_per_sm;
  Py_XSETREF(r->dtype, dtype);
  Py_XSETREF(r->fn, (kpy_function *)Py_NewRef(fn));
  Py_RETURN_TRUE;
}

/* The scratch buffer of the current device and a stream (for the general path's launches). */
static PyObject *kpy_reduce_get_scratch(PyObject *op, PyObject *stream_obj) {
  kpy_reduce *r = (kpy_reduce *)op;
  kiln_stream stream = NULL;
  kiln_deviceptr p = 0;
  if (kpy_stream_parse(r->st, stream_obj, &stream) < 0 ||
      kpy_reduce_scratch(r->st, kiln_device_current(), stream, &p) < 0)
    return NULL;
  return PyLong_FromUnsignedLongLong(p);
}

static PyObject *kpy_reduce_get_max_grid(PyObject *op, PyObject *unused) {
  (void)unused;
  unsigned g;
  if (kpy_reduce_max_grid((kpy_reduce *)op, kiln_device_current(), &g) < 0) return NULL;
  return PyLong_FromUnsignedLong(g);
}

static PyObject *kpy_reduce_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  (void)args, (void)kwargs;
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  kpy_reduce *r = (kpy_reduce *)tp->tp_alloc(tp, 0);
  if (!r) return NULL;
  r->vectorcall = kpy_reduce_call;
  r->st = st;
  return (PyObject *)r;
}

static int kpy_reduce_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_reduce *r = (kpy_reduce *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(r->fn);
  return 0;
}

static int kpy_reduce_clear(PyObject *op) {
  kpy_reduce *r = (kpy_reduce *)op;
  Py_CLEAR(r->fn);
  Py_CLEAR(r->dtype);
  return 0;
}

static void kpy_reduce_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  kpy_reduce_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyMethodDef kpy_reduce_methods[] = {
    {"_bind", kpy_reduce_bind, METH_VARARGS,
     "_bind($self, function, dtype, vector_mask, block, per_thread, blocks_per_sm)\n--\n\n"},
    {"_scratch", kpy_reduce_get_scratch, METH_O,
     "_scratch($self, stream, /)\n--\n\nThe address of the zeroed scratch buffer of this device "
     "and stream."},
    {"_max_grid", kpy_reduce_get_max_grid, METH_NOARGS,
     "_max_grid($self, /)\n--\n\nThe most blocks a launch on the current device uses."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef kpy_reduce_members[] = {
    {"__vectorcalloffset__", KPY_T_PYSSIZET, offsetof(kpy_reduce, vectorcall), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot kpy_reduce_slots[] = {
    {Py_tp_new, kpy_reduce_new},
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, kpy_reduce_dealloc},
    {Py_tp_traverse, kpy_reduce_traverse},
    {Py_tp_clear, kpy_reduce_clear},
    {Py_tp_methods, kpy_reduce_methods},
    {Py_tp_members, kpy_reduce_members},
    {Py_tp_doc, (void *)"The launcher under kiln.reduction.ReductionKernel."},
    {0, NULL},
};

static PyType_Spec kpy_reduce_spec = {"kiln._kiln.ReductionBase", sizeof(kpy_reduce), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                          Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_VECTORCALL,
                                      kpy_reduce_slots};

int kpy_reduce_init(PyObject *module, kpy_state *st) {
  st->ref.ReductionBase_type = kpy_add_type(module, &kpy_reduce_spec, NULL);
  if (!st->ref.ReductionBase_type) return -1;
  return PyModule_AddIntConstant(module, "REDUCE_MAX_BLOCKS", KPY_REDUCE_MAX_BLOCKS);
}
