/* kiln.Function: one kernel, called with vectorcall. Arguments are read in place (no tuple or
 * dict is built) and packed on the stack by the kernel's signature; a launch without In/Out
 * keeps the GIL, as it does not block. PyCUDA's prepared calls (prepare, prepared_call,
 * prepared_async_call, prepared_timed_call) take the same path after reading grid and block
 * positionally; the kernel's attributes are read through the engine. */
#include "function.h"

#include <strings.h>

#include "args.h"
#include "argtypes.h"
#include "arrayobj.h"
#include "errors.h"
#include "launches.h"
#include "pin.h"
#include "stream.h"
#include "transfer.h"
#include "wait.h"

#ifdef Py_T_PYSSIZET
#define KPY_T_PYSSIZET Py_T_PYSSIZET
#define KPY_READONLY Py_READONLY
#else
#include <structmember.h>
#define KPY_T_PYSSIZET T_PYSSIZET
#define KPY_READONLY READONLY
#endif

/* Parameters of up to this many bytes in all, and this many parameters, are packed on the
 * stack: 4 KiB is what a kernel could take before CUDA 12.1. */
#define KPY_STACK_STORAGE 4096
#define KPY_STACK_PARAMS 256

static const char *kpy_kw_names =
    "block, grid, shared, stream, time_kernel, cooperative, cluster and programmatic";

enum {
  KPY_KW_BLOCK,
  KPY_KW_GRID,
  KPY_KW_SHARED,
  KPY_KW_STREAM,
  KPY_KW_TIME_KERNEL,
  KPY_KW_COUNT, /* the keywords of the plain call, compared first */
  KPY_KW_COOPERATIVE = KPY_KW_COUNT,
  KPY_KW_CLUSTER,
  KPY_KW_PROGRAMMATIC,
  KPY_KW_ALL
};

/* PyCUDA's texrefs= of a call or prepare(): None or an empty list, for CUDA 12 has no texture
 * references to bind. -1 with NotImplementedError for any. */
static int kpy_texrefs_none(PyObject *texrefs) {
  if (texrefs == Py_None) return 0;
  Py_ssize_t n = PyObject_Length(texrefs);
  if (n < 0) return -1;
  if (n > 0) {
    PyErr_SetString(PyExc_NotImplementedError,
                    "texrefs: texture references were removed in CUDA 12, which kiln needs; "
                    "pass a texture object (cudaTextureObject_t) as a kernel argument instead");
    return -1;
  }
  return 0;
}

/* A launch dimension that is a small Python int (0 to 2**30 - 1), read without a call. */
static inline int kpy_small_dim(PyObject *obj, unsigned *out) {
  if (!PyLong_CheckExact(obj)) return 0;
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact((PyLongObject *)obj)) return 0;
  Py_ssize_t v = PyUnstable_Long_CompactValue((PyLongObject *)obj);
  if (v < 0) return 0;
  *out = (unsigned)v;
#else
  Py_ssize_t size = Py_SIZE(obj);
  if (size < 0 || size > 1) return 0;
  *out = size ? (unsigned)((PyLongObject *)obj)->ob_digit[0] : 0;
#endif
  return 1;
}

/* Reads a launch shape (an int or a tuple of 1 to 3 ints) into dims, missing ones 1. */
static int kpy_parse_dims(PyObject *obj, const char *what, unsigned dims[3]) {
  dims[0] = dims[1] = dims[2] = 1;
  /* The usual shape first: a tuple of small ints; anything else is read and checked below. */
  if (PyTuple_CheckExact(obj)) {
    Py_ssize_t n = PyTuple_GET_SIZE(obj), i = 0;
    if (n >= 1 && n <= 3) {
      while (i < n && kpy_small_dim(PyTuple_GET_ITEM(obj, i), &dims[i])) i++;
      if (i == n) return 0;
      dims[0] = dims[1] = dims[2] = 1;
    }
  } else if (kpy_small_dim(obj, &dims[0])) {
    return 0;
  }
  if (PyLong_Check(obj)) {
    long v = PyLong_AsLong(obj);
    if (v == -1 && PyErr_Occurred()) PyErr_Clear();
    if (v < 0 || v > (long)UINT32_MAX) goto bad;
    dims[0] = (unsigned)v;
    return 0;
  }
  if (PyList_Check(obj)) { /* a copy: a NumPy integer's __index__ may change the list */
    PyObject *t = PyList_AsTuple(obj);
    if (!t) return -1;
    int rc = kpy_parse_dims(t, what, dims);
    Py_DECREF(t);
    return rc;
  }
  if (!PyTuple_Check(obj)) goto bad;
  Py_ssize_t n = PyTuple_GET_SIZE(obj);
  if (n < 1 || n > 3) goto bad;
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PyTuple_GET_ITEM(obj, i);
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

/* kpy_parse_dims, answered from memo when obj is the object it last read. */
static int kpy_parse_dims_memo(kpy_shape_memo *memo, PyObject *obj, const char *what,
                               unsigned dims[3]) {
  if (obj == memo->obj) {
    memcpy(dims, memo->dims, sizeof memo->dims);
    return 0;
  }
  if (kpy_parse_dims(obj, what, dims) < 0) return -1;
  /* A tuple's items are ints or NumPy integers (what kpy_parse_dims takes), which cannot
   * change either; a list can, and is read every time. */
  if (PyTuple_CheckExact(obj) || PyLong_CheckExact(obj)) {
    PyObject *old = memo->obj;
    memo->obj = Py_NewRef(obj);
    memcpy(memo->dims, dims, sizeof memo->dims);
    Py_XDECREF(old);
  }
  return 0;
}

/* Which keyword `key` is, or -1. Keyword names are interned, so the address compares settle
 * the usual call before any string is compared. */
static int kpy_keyword(kpy_state *st, PyObject *key) {
  PyObject *names[KPY_KW_COUNT] = {st->str.block, st->str.grid, st->str.shared, st->str.stream,
                                   st->str.time_kernel};
  for (int i = 0; i < KPY_KW_COUNT; i++)
    if (key == names[i]) return i;
  /* The extended launch's keywords only after the plain call's have been passed over. */
  PyObject *more[KPY_KW_ALL - KPY_KW_COUNT] = {st->str.cooperative, st->str.cluster,
                                               st->str.programmatic};
  for (int i = 0; i < KPY_KW_ALL - KPY_KW_COUNT; i++)
    if (key == more[i]) return KPY_KW_COUNT + i;
  for (int i = 0; i < KPY_KW_ALL; i++)
    if (PyUnicode_Compare(key, i < KPY_KW_COUNT ? names[i] : more[i - KPY_KW_COUNT]) == 0) return i;
  return -1;
}

/* cooperative=, cluster= or programmatic= into opts. cluster=None and False flags leave the
 * plain launch. */
static int kpy_parse_launch_option(int kw, PyObject *value, kiln_launch_options *opts) {
  if (kw == KPY_KW_CLUSTER) {
    if (value == Py_None) return 0;
    if (kpy_parse_dims(value, "cluster", opts->cluster) < 0) return -1;
    for (int i = 0; i < 3; i++)
      if (opts->cluster[i] == 0) {
        PyErr_Format(PyExc_ValueError,
                     "cluster must have every dimension at least 1 (cluster=(2, 1, 1), say), "
                     "not %R",
                     value);
        return -1;
      }
    return 0;
  }
  int on = PyObject_IsTrue(value);
  if (on < 0) return -1;
  if (kw == KPY_KW_COOPERATIVE) opts->cooperative = on;
  else opts->programmatic = on;
  return 0;
}

/* A count of bytes (shared=, shared_size=) from an int or any other integer, a NumPy one say,
 * as block= and grid= take theirs: 0 with *out set, or -1 with a ValueError naming `what`
 * when obj is no integer from 0 to limit. */
static int kpy_byte_count(PyObject *obj, const char *what, unsigned long long limit,
                          unsigned long long *out) {
  unsigned long long v = (unsigned long long)-1;
  if (PyLong_Check(obj)) {
    v = PyLong_AsUnsignedLongLong(obj);
  } else if (PyIndex_Check(obj)) {
    PyObject *i = PyNumber_Index(obj);
    v = i ? PyLong_AsUnsignedLongLong(i) : (unsigned long long)-1;
    Py_XDECREF(i);
  }
  if (v == (unsigned long long)-1 || v > limit) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "%s must be a number of bytes, not %R", what, obj);
    return -1;
  }
  *out = v;
  return 0;
}

/* Pool memory used on another stream than its own is freed only once the launch on stream is
 * over: the DeviceArrays among the n arguments at args are noted as used there. */
static int kpy_function_note_arrays(kpy_state *st, PyObject *const *args, int n,
                                    kiln_stream stream) {
  for (int i = 0; i < n; i++)
    if (kpy_array_check(st, args[i]) && kpy_array_used_on(st, args[i], stream) < 0) return -1;
  return 0;
}

/* Packs the n_params arguments at args and launches with cfg: the work of the call and of the
 * prepared calls. stream_obj is the kiln.Stream cfg->stream came from, or NULL; opts the
 * extended launch's options, or NULL for the plain launch. */
static PyObject *kpy_function_run(kpy_function *self, PyObject *const *args,
                                  const kiln_launch_config *cfg_in, PyObject *stream_obj,
                                  int time_kernel, const kiln_launch_options *opts) {
  kpy_state *st = self->st;
  kiln_launch_config cfg = *cfg_in;
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
  packed.n_transfers = packed.waited = packed.n_pointers = 0;
  PyObject *result = NULL;
  if (kpy_pack_args(st, self->fn, self->slots, self->n_params, args, storage, params, &packed) < 0)
    goto done;
  kiln_status s;
  if (packed.n_pointers) {
    if ((s = kiln_function_check_launch(self->fn, &cfg))) {
      kpy_raise(st, s);
      goto done;
    }
    if (kpy_packed_check_pointers(st, self->fn, &packed) < 0) goto done;
  }
  double elapsed = 0;
  /* In/Out copies block unless queued on a kiln.Stream (below). */
  for (int t = 0; (!stream_obj || time_kernel) && t < packed.n_transfers; t++)
    kpy_pin_reused(st, (PyArrayObject *)((kpy_transfer *)args[packed.transfers[t].param])->array,
                   packed.transfers[t].nbytes);
  kpy_launches_record((PyObject *)self, cfg.stream);
  if (packed.n_transfers == 0 && !time_kernel) {
    s = opts ? kiln_function_launch_ex(self->fn, &cfg, opts, params)
             : kiln_function_launch(self->fn, &cfg, params);
    /* A capture keeps what its kernels use alive, and numbers them for replacing. */
    if (!s && __builtin_expect(st->capture != NULL, 0) &&
        st->capture_note(st->capture, (PyObject *)self, args, self->n_params, cfg.stream) < 0)
      goto done;
  } else if (opts) {
    PyErr_Format(PyExc_ValueError,
                 "%s: cooperative=, cluster= and programmatic= launches take device arrays and "
                 "scalars; In/Out/InOut and time_kernel= are for the plain launch",
                 kiln_function_name(self->fn));
    goto done;
  } else if (stream_obj && !time_kernel) {
    /* On a kiln.Stream, In/Out are queued: the stream keeps the arrays until it is done. */
    for (int i = 0; i < self->n_params; i++)
      if (PyObject_TypeCheck(args[i], st->ref.In_type) ||
          PyObject_TypeCheck(args[i], st->ref.Out_type) ||
          PyObject_TypeCheck(args[i], st->ref.InOut_type))
        if (kpy_stream_keep(stream_obj, args[i]) < 0) goto done;
    /* An output in pageable memory makes the call wait for the kernel: where Ctrl-C ends it. */
    st->queuing++;
    kpy_released r = {PyEval_SaveThread()};
    s = kiln_function_call_async_waiting(self->fn, &cfg, params, packed.transfers,
                                         packed.n_transfers, kpy_wait_hook, &r);
    PyEval_RestoreThread(r.ts);
    st->queuing--;
  } else {
    /* The arrays stay alive: the caller holds them for the length of the call, which waits for
     * the kernel where Ctrl-C ends the wait. Interrupted, the call has not copied back and
     * never will: the kernel goes on, but nothing it does reaches the host arrays. */
    st->queuing++;
    kpy_released r = {PyEval_SaveThread()};
    s = kiln_function_call_waiting(self->fn, &cfg, params, packed.transfers, packed.n_transfers,
                                   time_kernel ? &elapsed : NULL, kpy_wait_hook, &r);
    PyEval_RestoreThread(r.ts);
    st->queuing--;
    if (!s) kpy_launches_settle(cfg.stream); /* the call waited for its stream */
  }
  if (s == KILN_ERROR_INTERRUPTED && PyErr_Occurred()) {
    /* The kernel runs on: the arrays it uses are noted as for any launch (below), with the
     * signal handler's exception (KeyboardInterrupt), the one to give, kept aside meanwhile. */
    kpy_raised raised;
    kpy_raised_set_aside(&raised);
    if (packed.arrays) kpy_function_note_arrays(st, args, self->n_params, cfg.stream);
    kpy_raised_put_back(&raised);
    goto done;
  }
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  if (packed.arrays && kpy_function_note_arrays(st, args, self->n_params, cfg.stream) < 0)
    goto done;
  result = time_kernel ? PyFloat_FromDouble(elapsed) : Py_NewRef(Py_None);
done:
  if (storage != stack_storage) {
    PyMem_Free(storage);
    PyMem_Free(params);
  }
  return result;
}

static PyObject *kpy_function_call(PyObject *op, PyObject *const *args, size_t nargsf,
                                   PyObject *kwnames) {
  kpy_function *self = (kpy_function *)op;
  kpy_state *st = self->st;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (__builtin_expect(nargs != self->n_params, 0)) {
    PyErr_Format(PyExc_TypeError, "%s takes %d argument%s (%zd given)",
                 kiln_function_signature(self->fn), self->n_params, self->n_params == 1 ? "" : "s",
                 nargs);
    return NULL;
  }
  kiln_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  int have_block = 0, time_kernel = 0;
  PyObject *stream_obj = NULL;                  /* the kiln.Stream given, if one was */
  kiln_launch_options opts, *opts_given = NULL; /* set by the extended launch's keywords */
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
    int kw = kpy_keyword(st, key);
    if (kw == KPY_KW_BLOCK) {
      if (kpy_parse_dims_memo(&self->block_memo, value, "block", cfg.block) < 0) return NULL;
      have_block = 1;
    } else if (kw == KPY_KW_GRID) {
      if (kpy_parse_dims_memo(&self->grid_memo, value, "grid", cfg.grid) < 0) return NULL;
    } else if (kw == KPY_KW_SHARED) {
      unsigned long long v;
      if (kpy_byte_count(value, "shared", UINT32_MAX, &v) < 0) return NULL;
      cfg.shared = (unsigned)v;
    } else if (kw == KPY_KW_STREAM) {
      if (kpy_stream_parse(st, value, &cfg.stream) < 0) return NULL;
      if (kpy_stream_is_kiln(st, value)) stream_obj = value;
    } else if (kw == KPY_KW_TIME_KERNEL) {
      if ((time_kernel = PyObject_IsTrue(value)) < 0) return NULL;
    } else if (kw >= KPY_KW_COUNT) {
      if (!opts_given) {
        memset(&opts, 0, sizeof opts);
        opts_given = &opts;
      }
      if (kpy_parse_launch_option(kw, value, &opts) < 0) return NULL;
    } else if (PyUnicode_Check(key) && PyUnicode_CompareWithASCIIString(key, "texrefs") == 0) {
      if (kpy_texrefs_none(value) < 0) return NULL; /* PyCUDA's texrefs=[]: nothing to bind */
    } else {
      PyErr_Format(PyExc_TypeError, "%s got an unexpected keyword argument %R; it takes %s",
                   kiln_function_signature(self->fn), key, kpy_kw_names);
      return NULL;
    }
  }
  if (!have_block) {
    PyErr_Format(PyExc_TypeError, "%s needs block=(x, y, z)", kiln_function_signature(self->fn));
    return NULL;
  }

  /* cooperative=False, cluster=None and programmatic=False are the plain launch. */
  if (opts_given && !opts.cooperative && !opts.programmatic &&
      !(opts.cluster[0] | opts.cluster[1] | opts.cluster[2]))
    opts_given = NULL;
  return kpy_function_run(self, args, &cfg, stream_obj, time_kernel, opts_given);
}

/* ---- PyCUDA's prepared calls ---------------------------------------------------------------- */

static int kpy_param_is_signed(kiln_param_class c) {
  return c == KILN_PARAM_I8 || c == KILN_PARAM_I16 || c == KILN_PARAM_I32 || c == KILN_PARAM_I64;
}

static int kpy_param_is_unsigned(kiln_param_class c) {
  return c == KILN_PARAM_U8 || c == KILN_PARAM_U16 || c == KILN_PARAM_U32 || c == KILN_PARAM_U64;
}

static void kpy_prepared_bits_free(kpy_function *self, PyObject **owned);

/* *owned made a copy of args (new references) if it is not one yet; -1 when memory ran out. */
static int kpy_prepared_own(kpy_function *self, PyObject *const *args, PyObject ***owned) {
  if (*owned) return 0;
  *owned = PyMem_Calloc((size_t)self->n_params, sizeof **owned);
  if (!*owned) {
    PyErr_NoMemory();
    return -1;
  }
  for (int j = 0; j < self->n_params; j++) (*owned)[j] = Py_NewRef(args[j]);
  return 0;
}

/* A number as the NumPy complex scalar of a complex struct parameter (two doubles when wide,
 * two floats otherwise), as PyCUDA's struct.pack('D' or 'F') packs it: whatever Python's
 * complex() takes (a Python or NumPy number, NumPy's bool, a 0-d array, an object with
 * __complex__, __float__ or __index__). NULL without an exception for what the parameter's own
 * packing takes as it is (a complex scalar of that type, bytes, a structured scalar) or
 * refuses; NULL with one when the conversion itself failed otherwise. It may run Python code. */
static PyObject *kpy_prepared_complex(PyObject *arg, int wide) {
  if (wide ? PyArray_IsScalar(arg, CDouble) : PyArray_IsScalar(arg, CFloat)) return NULL;
  int numeric = PyArray_IsScalar(arg, Number) || PyArray_IsScalar(arg, Bool) ||
                (PyArray_Check(arg) && PyArray_NDIM((PyArrayObject *)arg) == 0 &&
                 (PyArray_ISNUMBER((PyArrayObject *)arg) || PyArray_ISBOOL((PyArrayObject *)arg)));
  if (!numeric && PyObject_CheckBuffer(arg)) return NULL; /* bytes: the struct as it is */
  Py_complex c = PyComplex_AsCComplex(arg);
  if (c.real == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return NULL;
    PyErr_Clear(); /* not a number: refused by the parameter's packing, which names it */
    return NULL;
  }
  PyArray_Descr *d = PyArray_DescrFromType(wide ? NPY_CDOUBLE : NPY_CFLOAT);
  if (!d) return NULL;
  double both[2] = {c.real, c.imag};
  float narrow[2] = {(float)c.real, (float)c.imag};
  PyObject *scalar = PyArray_Scalar(wide ? (void *)both : (void *)narrow, d, NULL);
  Py_DECREF(d);
  return scalar;
}

/* The arguments of a prepared call, args[0..n_params), with each integer that prepare() named
 * with the other signedness and that is out of the parameter's range but in that type's (an
 * int given 2863311531 under 'I') replaced by the same bits in the parameter's type. *owned is
 * a new array holding new references (free it with kpy_prepared_bits_free) when any was
 * replaced; args itself otherwise. NULL with an exception set when memory ran out. */
static PyObject *const *kpy_prepared_bits(kpy_function *self, PyObject *const *args,
                                          PyObject ***owned) {
  *owned = NULL;
  if (!self->prepared_bits) return args;
  const kiln_param *p = kiln_function_params(self->fn);
  /* A copy: a number's __complex__ or __index__ below is Python code, which may prepare the
   * function again and free self->prepared_bits. On the stack for the usual parameter count,
   * so a prepared call allocates nothing for it. */
  char stack[64],
      *marks = self->n_params <= (int)sizeof stack ? stack : PyMem_Malloc((size_t)self->n_params);
  if (!marks) {
    PyErr_NoMemory();
    return NULL;
  }
  memcpy(marks, self->prepared_bits, (size_t)self->n_params);
  for (int i = 0; i < self->n_params; i++) {
    char other = marks[i];
    PyObject *arg = args[i];
    if (other == 'c' || other == 'z') { /* a number into a complex struct parameter */
      PyObject *wrapped = kpy_prepared_complex(arg, other == 'z');
      if (!wrapped) {
        if (PyErr_Occurred()) goto fail;
        continue;
      }
      if (kpy_prepared_own(self, args, owned) < 0) {
        Py_DECREF(wrapped);
        goto fail;
      }
      Py_SETREF((*owned)[i], wrapped);
      continue;
    }
    if (!other || PyBool_Check(arg) || (!PyLong_Check(arg) && !PyArray_IsScalar(arg, Integer)))
      continue;
    PyObject *value = PyNumber_Index(arg);
    if (!value) {
      PyErr_Clear();
      continue;
    }
    unsigned bits = 8 * p[i].size;
    unsigned long long mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    PyObject *wrapped = NULL;
    if (other == 'u') { /* an unsigned value for a signed parameter: its top half goes negative */
      unsigned long long v = PyLong_AsUnsignedLongLong(value);
      if (!PyErr_Occurred() && v <= mask && v > (mask >> 1))
        wrapped =
            PyLong_FromLongLong(bits == 64 ? (long long)v : (long long)v - (long long)mask - 1);
    } else { /* a negative value for an unsigned parameter */
      long long v = PyLong_AsLongLong(value);
      if (!PyErr_Occurred() && v < 0 && (bits == 64 || v >= -(long long)(mask >> 1) - 1))
        wrapped = PyLong_FromUnsignedLongLong((unsigned long long)v & mask);
    }
    PyErr_Clear();
    Py_DECREF(value);
    if (!wrapped) continue;
    if (kpy_prepared_own(self, args, owned) < 0) {
      Py_DECREF(wrapped);
      goto fail;
    }
    Py_SETREF((*owned)[i], wrapped);
  }
  if (marks != stack) PyMem_Free(marks);
  return *owned ? (PyObject *const *)*owned : args;
fail:
  if (marks != stack) PyMem_Free(marks);
  kpy_prepared_bits_free(self, *owned);
  *owned = NULL;
  return NULL;
}

static void kpy_prepared_bits_free(kpy_function *self, PyObject **owned) {
  if (!owned) return;
  for (int i = 0; i < self->n_params; i++) Py_XDECREF(owned[i]);
  PyMem_Free(owned);
}

/* prepare(arg_types, shared=None, texrefs=()): checks the types against the kernel's
 * parameters (as many, each of its size) and returns the function. kiln packs every call by
 * the kernel's signature, so the types only guard against a kernel that is not the one the
 * program was written for; prepared_call works without prepare too. */
static PyObject *kpy_function_prepare(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_function *self = (kpy_function *)op;
  static char *kwlist[] = {(char *)"arg_types", (char *)"shared", (char *)"texrefs", NULL};
  PyObject *types, *shared = Py_None, *texrefs = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:prepare", kwlist, &types, &shared, &texrefs))
    return NULL;
  /* PyCUDA's prepare is (arg_types, texrefs=[]) now and was (arg_types, shared, texrefs)
   * before: a list second is today's texrefs. */
  if (!texrefs && PyList_Check(shared) && PyTuple_GET_SIZE(args) == 2) {
    texrefs = shared;
    shared = Py_None;
  }
  if (texrefs && kpy_texrefs_none(texrefs) < 0) return NULL;
  if (PyTuple_Check(shared)) {
    PyErr_Format(PyExc_TypeError,
                 "prepare(arg_types, %R): a block given to prepare is PyCUDA's before CUDA 4; "
                 "give it to prepared_call(grid, block, *args)",
                 shared);
    return NULL;
  }
  unsigned shared_bytes = 0;
  if (shared != Py_None) {
    unsigned long long v;
    if (kpy_byte_count(shared, "shared", UINT32_MAX, &v) < 0) return NULL;
    shared_bytes = (unsigned)v;
  }
  enum { CAP = 256 };
  kpy_argtype *named = PyMem_Malloc(CAP * sizeof *named);
  if (!named) return PyErr_NoMemory();
  int n = 0;
  PyObject *format = NULL;
  if (kpy_argtypes_parse(types, named, CAP, &n, &format) < 0) {
    PyMem_Free(named);
    return NULL;
  }
  const kiln_param *p = kiln_function_params(self->fn);
  const char *name = kiln_function_signature(self->fn);
  int bad = -1;
  if (n == self->n_params)
    for (int i = 0; i < n && bad < 0; i++)
      if (named[i].size != p[i].size) bad = i;
  char *bits = NULL;
  for (int i = 0; n == self->n_params && bad < 0 && i < n; i++) {
    char other =
        kpy_param_is_signed(p[i].cls)     ? 'u'
        : kpy_param_is_unsigned(p[i].cls) ? 's'
        : p[i].cls == KILN_PARAM_AGGREGATE && (named[i].sign == 'c' || named[i].sign == 'z')
            ? named[i].sign
            : 0;
    if (!other || named[i].sign != other) continue;
    if (!bits && !(bits = PyMem_Calloc((size_t)n, 1))) {
      PyMem_Free(named);
      Py_DECREF(format);
      return PyErr_NoMemory();
    }
    bits[i] = other;
  }
  PyObject *sig = NULL;
  if (n != self->n_params || bad >= 0) {
    PyObject *f_sig = PyObject_GetAttrString(op, "signature");
    PyObject *sep = f_sig ? PyUnicode_FromString(", ") : NULL;
    sig = sep ? PyUnicode_Join(sep, f_sig) : NULL;
    Py_XDECREF(sep);
    Py_XDECREF(f_sig);
    if (!sig) {
      PyMem_Free(named);
      Py_DECREF(format);
      return NULL;
    }
  }
  /* Types that do not fit the kernel are refused by its prepared calls, not here: PyCUDA's
   * prepare takes any, and a program may prepare a kernel it never calls that way. */
  PyObject *refusal = NULL;
  if (n != self->n_params)
    refusal = PyUnicode_FromFormat(
        "prepare(%R): kernel %s takes %d parameter%s (%U) and the types name %d; a struct or "
        "vector parameter (float2, int4, a struct) is one type of its size, such as '16s' or a "
        "NumPy dtype",
        types, name, self->n_params, self->n_params == 1 ? "" : "s", sig, n);
  else if (bad >= 0)
    refusal = PyUnicode_FromFormat(
        "prepare(%R): parameter %d of kernel %s is %s, %u bytes, but the types give it %s, "
        "%u bytes (its parameters: %U)",
        types, bad, name,
        p[bad].cls == KILN_PARAM_AGGREGATE ? "a struct" : kiln_param_class_name(p[bad].cls),
        p[bad].size, named[bad].what, named[bad].size, sig);
  PyMem_Free(named);
  Py_XDECREF(sig);
  if (PyErr_Occurred()) {
    PyMem_Free(bits);
    Py_DECREF(format);
    return NULL;
  }
  PyMem_Free(self->prepared_bits);
  self->prepared_bits = bits;
  Py_XSETREF(self->arg_format, format);
  Py_XSETREF(self->prepare_refusal, refusal);
  self->prepared_shared = shared_bytes;
  return Py_NewRef(op);
}

/* shared_size= of a prepared call: the only keyword it takes. */
static int kpy_prepared_keywords(kpy_function *self, PyObject *const *args, Py_ssize_t nargs,
                                 PyObject *kwnames, const char *what, unsigned *shared) {
  *shared = self->prepared_shared;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i), *value = args[nargs + i];
    if (key != self->st->str.shared_size && PyUnicode_Compare(key, self->st->str.shared_size)) {
      PyErr_Format(PyExc_TypeError,
                   "%s() got an unexpected keyword argument %R; it takes "
                   "shared_size",
                   what, key);
      return -1;
    }
    unsigned long long v;
    if (kpy_byte_count(value, "shared_size", UINT32_MAX, &v) < 0) return -1;
    *shared = (unsigned)v;
  }
  return 0;
}

/* (grid, block[, stream], *args): reads the launch shape and checks the count. `lead` is how
 * many come before the kernel's arguments. */
static int kpy_prepared_shape(kpy_function *self, PyObject *const *args, Py_ssize_t nargs, int lead,
                              const char *what, kiln_launch_config *cfg) {
  if (self->prepare_refusal) {
    PyErr_SetObject(PyExc_ValueError, self->prepare_refusal);
    return -1;
  }
  if (nargs - lead != self->n_params) {
    PyErr_Format(PyExc_TypeError, "%s(grid, block%s, *args): %s takes %d argument%s (%zd given)",
                 what, lead == 3 ? ", stream" : "", kiln_function_signature(self->fn),
                 self->n_params, self->n_params == 1 ? "" : "s",
                 nargs < lead ? (Py_ssize_t)0 : nargs - lead);
    return -1;
  }
  if (kpy_parse_dims_memo(&self->grid_memo, args[0], "grid", cfg->grid) < 0 ||
      kpy_parse_dims_memo(&self->block_memo, args[1], "block", cfg->block) < 0)
    return -1;
  return 0;
}

static PyObject *kpy_function_prepared_call(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                            PyObject *kwnames) {
  kpy_function *self = (kpy_function *)op;
  kiln_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  if (kpy_prepared_shape(self, args, nargs, 2, "prepared_call", &cfg) < 0 ||
      kpy_prepared_keywords(self, args, nargs, kwnames, "prepared_call", &cfg.shared) < 0)
    return NULL;
  PyObject **owned;
  PyObject *const *kernel_args = kpy_prepared_bits(self, args + 2, &owned);
  PyObject *r = kernel_args ? kpy_function_run(self, kernel_args, &cfg, NULL, 0, NULL) : NULL;
  kpy_prepared_bits_free(self, owned);
  return r;
}

static PyObject *kpy_function_prepared_async_call(PyObject *op, PyObject *const *args,
                                                  Py_ssize_t nargs, PyObject *kwnames) {
  kpy_function *self = (kpy_function *)op;
  kiln_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  if (kpy_prepared_shape(self, args, nargs, 3, "prepared_async_call", &cfg) < 0 ||
      kpy_prepared_keywords(self, args, nargs, kwnames, "prepared_async_call", &cfg.shared) < 0 ||
      kpy_stream_parse(self->st, args[2], &cfg.stream) < 0)
    return NULL;
  PyObject *stream_obj = kpy_stream_is_kiln(self->st, args[2]) ? args[2] : NULL;
  PyObject **owned;
  PyObject *const *kernel_args = kpy_prepared_bits(self, args + 3, &owned);
  PyObject *r = kernel_args ? kpy_function_run(self, kernel_args, &cfg, stream_obj, 0, NULL) : NULL;
  kpy_prepared_bits_free(self, owned);
  return r;
}

/* What prepared_timed_call returns: called, it waits for the end event and gives the seconds
 * from the start event. Bound to the pair (start, end) of kiln.Events. */
static PyObject *kpy_timer_seconds(PyObject *pair, PyObject *unused) {
  (void)unused;
  kpy_event *start = (kpy_event *)PyTuple_GET_ITEM(pair, 0);
  kpy_event *end = (kpy_event *)PyTuple_GET_ITEM(pair, 1);
  kpy_state *st = kpy_state_of_type(Py_TYPE(start));
  float ms = 0;
  if (kpy_wait_event(st, end->handle, -1) < 0) return NULL;
  kiln_status s = kiln_event_elapsed_ms(start->handle, end->handle, &ms);
  if (s) return kpy_raise(st, s);
  return PyFloat_FromDouble(ms / 1e3);
}

static PyMethodDef kpy_timer_def = {
    "get_call_time", kpy_timer_seconds, METH_NOARGS,
    "The seconds the prepared call took on the GPU; waits for it to finish first."};

/* prepared_timed_call(grid, block, *args, shared_size=0): the launch between two events on the
 * default stream, and a callable giving the seconds between them. With In/Out arguments the
 * call waits for its copies, which then count in the time. */
static PyObject *kpy_function_prepared_timed_call(PyObject *op, PyObject *const *args,
                                                  Py_ssize_t nargs, PyObject *kwnames) {
  kpy_function *self = (kpy_function *)op;
  kpy_state *st = self->st;
  kiln_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  if (kpy_prepared_shape(self, args, nargs, 2, "prepared_timed_call", &cfg) < 0 ||
      kpy_prepared_keywords(self, args, nargs, kwnames, "prepared_timed_call", &cfg.shared) < 0)
    return NULL;
  PyObject *start = PyObject_CallNoArgs((PyObject *)st->ref.Event_type), *end = NULL;
  if (start) end = PyObject_CallNoArgs((PyObject *)st->ref.Event_type);
  PyObject *pair = end ? PyTuple_Pack(2, start, end) : NULL, *ran = NULL, *timer = NULL;
  kiln_status s = pair ? kiln_event_record(((kpy_event *)start)->handle, NULL) : KILN_OK;
  PyObject **owned = NULL;
  PyObject *const *kernel_args = pair && !s ? kpy_prepared_bits(self, args + 2, &owned) : NULL;
  if (s) kpy_raise(st, s);
  else if (kernel_args && (ran = kpy_function_run(self, kernel_args, &cfg, NULL, 0, NULL))) {
    if ((s = kiln_event_record(((kpy_event *)end)->handle, NULL))) kpy_raise(st, s);
    else timer = PyCFunction_NewEx(&kpy_timer_def, pair, NULL);
  }
  kpy_prepared_bits_free(self, owned);
  Py_XDECREF(ran);
  Py_XDECREF(pair);
  Py_XDECREF(start);
  Py_XDECREF(end);
  return timer;
}

/* ---- Occupancy ------------------------------------------------------------------------------- */

/* A block (an int or a tuple) as its number of threads. */
static int kpy_block_threads(PyObject *obj, const char *what, unsigned *threads) {
  unsigned dims[3];
  if (kpy_parse_dims(obj, what, dims) < 0) return -1;
  unsigned long long n = (unsigned long long)dims[0] * dims[1] * dims[2];
  if (n < 1 || n > 1024) {
    PyErr_Format(PyExc_ValueError, "%s %R has %llu threads; a block has from 1 to 1024", what, obj,
                 n);
    return -1;
  }
  *threads = (unsigned)n;
  return 0;
}

static int kpy_shared_bytes(PyObject *obj, const char *what, size_t *out) {
  unsigned long long v;
  if (kpy_byte_count(obj, what, SIZE_MAX, &v) < 0) return -1;
  *out = (size_t)v;
  return 0;
}

/* max_active_blocks(block, shared=0): blocks resident on one multiprocessor at once. */
static PyObject *kpy_occupancy_blocks(kpy_function *self, PyObject *block, PyObject *shared,
                                      const char *block_what, const char *shared_what) {
  unsigned threads;
  size_t bytes = 0;
  if (kpy_block_threads(block, block_what, &threads) < 0 ||
      (shared && kpy_shared_bytes(shared, shared_what, &bytes) < 0))
    return NULL;
  int blocks = 0;
  kiln_status s = kiln_function_max_active_blocks(self->fn, threads, bytes, &blocks);
  if (s) return kpy_raise(self->st, s);
  return PyLong_FromLong(blocks);
}

static PyObject *kpy_function_max_active_blocks(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"block", (char *)"shared", NULL};
  PyObject *block, *shared = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:max_active_blocks", kwlist, &block, &shared))
    return NULL;
  return kpy_occupancy_blocks((kpy_function *)op, block, shared, "block", "shared");
}

static PyObject *kpy_function_max_active_blocks_per_mp(PyObject *op, PyObject *args,
                                                       PyObject *kwargs) {
  static char *kwlist[] = {(char *)"block_size", (char *)"dynamic_shared_memory_size", NULL};
  PyObject *block, *shared = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:max_active_blocks_per_multiprocessor", kwlist,
                                   &block, &shared))
    return NULL;
  return kpy_occupancy_blocks((kpy_function *)op, block, shared, "block_size",
                              "dynamic_shared_memory_size");
}

/* (min_grid, block) from the driver's calculator. */
static int kpy_occupancy_suggest(kpy_function *self, PyObject *shared, PyObject *limit,
                                 const char *shared_what, int *min_grid, int *block) {
  size_t bytes = 0;
  long lim = 0;
  if (shared && kpy_shared_bytes(shared, shared_what, &bytes) < 0) return -1;
  if (limit && limit != Py_None) {
    lim = PyLong_Check(limit) ? PyLong_AsLong(limit) : -1;
    if (lim == -1 && PyErr_Occurred()) PyErr_Clear();
    if (lim < 0 || lim > 1024) {
      PyErr_Format(PyExc_ValueError, "the block size limit must be from 0 (none) to 1024, not %R",
                   limit);
      return -1;
    }
  }
  kiln_status s = kiln_function_suggested_block_size(self->fn, bytes, (int)lim, min_grid, block);
  if (s) {
    kpy_raise(self->st, s);
    return -1;
  }
  return 0;
}

static PyObject *kpy_function_suggested_block_size(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"shared", (char *)"block_limit", NULL};
  PyObject *shared = NULL, *limit = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:suggested_block_size", kwlist, &shared,
                                   &limit))
    return NULL;
  int min_grid, block;
  if (kpy_occupancy_suggest((kpy_function *)op, shared, limit, "shared", &min_grid, &block) < 0)
    return NULL;
  return PyLong_FromLong(block);
}

static PyObject *kpy_function_max_potential_block_size(PyObject *op, PyObject *args,
                                                       PyObject *kwargs) {
  static char *kwlist[] = {(char *)"dynamic_shared_memory_needed", (char *)"block_size_limit",
                           NULL};
  PyObject *shared = NULL, *limit = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:max_potential_block_size", kwlist, &shared,
                                   &limit))
    return NULL;
  int min_grid, block;
  if (kpy_occupancy_suggest((kpy_function *)op, shared, limit, "dynamic_shared_memory_needed",
                            &min_grid, &block) < 0)
    return NULL;
  return Py_BuildValue("(ii)", min_grid, block);
}

static PyObject *kpy_occupancy_shared(kpy_function *self, PyObject *blocks, PyObject *block,
                                      const char *block_what) {
  unsigned threads;
  long n = PyLong_Check(blocks) ? PyLong_AsLong(blocks) : -1;
  if (n == -1 && PyErr_Occurred()) PyErr_Clear();
  if (n < 1 || n > INT_MAX) {
    PyErr_Format(PyExc_ValueError,
                 "the blocks per multiprocessor must be an int of at least 1, "
                 "not %R",
                 blocks);
    return NULL;
  }
  if (kpy_block_threads(block, block_what, &threads) < 0) return NULL;
  size_t bytes = 0;
  kiln_status s = kiln_function_available_dynamic_shared(self->fn, (int)n, threads, &bytes);
  if (s) return kpy_raise(self->st, s);
  return PyLong_FromSize_t(bytes);
}

static PyObject *kpy_function_available_dynamic_shared(PyObject *op, PyObject *args,
                                                       PyObject *kwargs) {
  static char *kwlist[] = {(char *)"blocks", (char *)"block", NULL};
  PyObject *blocks, *block;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:available_dynamic_shared", kwlist, &blocks,
                                   &block))
    return NULL;
  return kpy_occupancy_shared((kpy_function *)op, blocks, block, "block");
}

static PyObject *kpy_function_available_dynamic_shared_per_block(PyObject *op, PyObject *args,
                                                                 PyObject *kwargs) {
  static char *kwlist[] = {(char *)"num_blocks_per_multiprocessor", (char *)"block_size", NULL};
  PyObject *blocks, *block;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO:available_dynamic_shared_memory_per_block",
                                   kwlist, &blocks, &block))
    return NULL;
  return kpy_occupancy_shared((kpy_function *)op, blocks, block, "block_size");
}

/* max_active_clusters(cluster, block, shared=0, grid=None): clusters resident at once. */
static PyObject *kpy_function_max_active_clusters(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_function *self = (kpy_function *)op;
  static char *kwlist[] = {(char *)"cluster", (char *)"block", (char *)"shared", (char *)"grid",
                           NULL};
  PyObject *cluster, *block, *shared = NULL, *grid = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "OO|OO:max_active_clusters", kwlist, &cluster,
                                   &block, &shared, &grid))
    return NULL;
  kiln_launch_config cfg = {{1, 1, 1}, {1, 1, 1}, 0, NULL};
  kiln_launch_options opts;
  memset(&opts, 0, sizeof opts);
  size_t bytes = 0;
  if (kpy_parse_launch_option(KPY_KW_CLUSTER, cluster, &opts) < 0 ||
      kpy_parse_dims(block, "block", cfg.block) < 0 ||
      (shared && kpy_shared_bytes(shared, "shared", &bytes) < 0))
    return NULL;
  if (bytes > UINT32_MAX) {
    PyErr_Format(PyExc_ValueError, "shared must be a number of bytes, not %R", shared);
    return NULL;
  }
  cfg.shared = (unsigned)bytes;
  if (grid != Py_None) {
    if (kpy_parse_dims(grid, "grid", cfg.grid) < 0) return NULL;
  } else {
    /* One cluster's worth of grid: the calculator asks only that the grid be whole clusters. */
    for (int i = 0; i < 3; i++) cfg.grid[i] = opts.cluster[i] ? opts.cluster[i] : 1;
  }
  int clusters = 0;
  kiln_status s = kiln_function_max_active_clusters(self->fn, &cfg, &opts, &clusters);
  if (s) return kpy_raise(self->st, s);
  return PyLong_FromLong(clusters);
}

/* cuda.core's Kernel.occupancy: here the function itself, which has its methods. */
static PyObject *kpy_function_get_occupancy(PyObject *op, void *closure) {
  (void)closure;
  return Py_NewRef(op);
}

/* ---- Attributes ------------------------------------------------------------------------------ */

/* CUfunction_attribute by the lower-case names PyCUDA reads them as (func.num_regs), in the
 * driver's order: the closure of each getter is its number. */
static const char *const kpy_attribute_names[] = {
    "max_threads_per_block",
    "shared_size_bytes",
    "const_size_bytes",
    "local_size_bytes",
    "num_regs",
    "ptx_version",
    "binary_version",
    "cache_mode_ca",
    "max_dynamic_shared_size_bytes",
    "preferred_shared_memory_carveout",
    "cluster_size_must_be_set",
    "required_cluster_width",
    "required_cluster_height",
    "required_cluster_depth",
    "non_portable_cluster_size_allowed",
    "cluster_scheduling_policy_preference",
};
/* CuPy's Function.attributes has the first ten. */
#define KPY_CUPY_ATTRIBUTES 10

static PyObject *kpy_function_attribute(kpy_function *self, int attribute) {
  int v = 0;
  kiln_status s = kiln_function_get_attribute(self->fn, attribute, &v);
  if (s) return kpy_raise(self->st, s);
  return PyLong_FromLong(v);
}

/* func.MAX_THREADS_PER_BLOCK: PyCUDA upper-cases the name it is asked for, so an attribute's
 * own upper-case spelling reads it too. Looked for only once the usual lookup has failed. */
/* The type's read-only attribute of that name (a getset with no setter), borrowed, or NULL.
 * PyCUDA's Function has none of kiln's (its attributes come from __getattr__), so what a
 * program sets of that name is its own attribute there (neon names its kernels:
 * kernel.name = "lut_bprop"): such a value is kept in the function's __dict__ and read back
 * from there, while kiln reads its own values from the C side. */
static PyObject *kpy_function_read_only(PyTypeObject *tp, PyObject *name) {
  PyObject *d = PyUnicode_Check(name) ? _PyType_Lookup(tp, name) : NULL;
  return d && Py_IS_TYPE(d, &PyGetSetDescr_Type) && !((PyGetSetDescrObject *)d)->d_getset->set
             ? d
             : NULL;
}

static int kpy_function_setattro(PyObject *op, PyObject *name, PyObject *value) {
  kpy_function *self = (kpy_function *)op;
  if (!kpy_function_read_only(Py_TYPE(op), name)) return PyObject_GenericSetAttr(op, name, value);
  if (!self->dict && !(self->dict = PyDict_New())) return -1;
  if (value) return PyDict_SetItem(self->dict, name, value);
  if (PyDict_DelItem(self->dict, name) == 0) return 0; /* kiln's value shows again */
  if (PyErr_ExceptionMatches(PyExc_KeyError)) {
    PyErr_Clear();
    PyErr_Format(PyExc_AttributeError, "'kiln.Function' object has no attribute '%U' set", name);
  }
  return -1;
}

static PyObject *kpy_function_getattro(PyObject *op, PyObject *name) {
  PyObject *dict = ((kpy_function *)op)->dict;
  if (dict && PyDict_GET_SIZE(dict) && kpy_function_read_only(Py_TYPE(op), name)) {
    PyObject *own = PyDict_GetItemWithError(dict, name);
    if (own || PyErr_Occurred()) return Py_XNewRef(own);
  }
  PyObject *found = PyObject_GenericGetAttr(op, name);
  if (found || !PyErr_ExceptionMatches(PyExc_AttributeError) || !PyUnicode_Check(name))
    return found;
  const char *text = PyUnicode_AsUTF8(name);
  if (!text) return NULL;
  for (size_t i = 0; i < sizeof kpy_attribute_names / sizeof kpy_attribute_names[0]; i++)
    if (strcasecmp(text, kpy_attribute_names[i]) == 0) {
      PyErr_Clear();
      return kpy_function_attribute((kpy_function *)op, (int)i);
    }
  return NULL; /* the first error stands */
}

/* An int attribute number or value (a function_attribute or func_cache member is one). */
static int kpy_function_int(PyObject *obj, const char *what, int *out) {
  if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  long v = PyLong_AsLong(obj);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_Format(PyExc_ValueError, "%s %ld is out of range", what, v);
    return -1;
  }
  *out = (int)v;
  return 0;
}

static PyObject *kpy_function_get_attribute(PyObject *op, PyObject *attr) {
  int a;
  if (kpy_function_int(attr, "function_attribute", &a) < 0) return NULL;
  return kpy_function_attribute((kpy_function *)op, a);
}

static PyObject *kpy_function_set_attribute(PyObject *op, PyObject *const *args, Py_ssize_t n) {
  kpy_function *self = (kpy_function *)op;
  int a, v;
  if (n != 2) {
    PyErr_Format(PyExc_TypeError, "set_attribute(attr, value) takes 2 arguments (%zd given)", n);
    return NULL;
  }
  if (kpy_function_int(args[0], "function_attribute", &a) < 0 ||
      kpy_function_int(args[1], "the attribute's value", &v) < 0)
    return NULL;
  kiln_status s = kiln_function_set_attribute(self->fn, a, v);
  if (s) return kpy_raise(self->st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_function_set_cache_config(PyObject *op, PyObject *config) {
  kpy_function *self = (kpy_function *)op;
  int c;
  if (kpy_function_int(config, "func_cache", &c) < 0) return NULL;
  kiln_status s = kiln_function_set_cache_config(self->fn, c);
  if (s) return kpy_raise(self->st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_function_get_named_attribute(PyObject *op, void *closure) {
  return kpy_function_attribute((kpy_function *)op, (int)(intptr_t)closure);
}

/* CuPy's RawKernel.attributes: {name: value} of the first ten. */
static PyObject *kpy_function_get_attributes(PyObject *op, void *closure) {
  (void)closure;
  PyObject *out = PyDict_New();
  for (int i = 0; out && i < KPY_CUPY_ATTRIBUTES; i++) {
    PyObject *v = kpy_function_attribute((kpy_function *)op, i);
    if (!v || PyDict_SetItemString(out, kpy_attribute_names[i], v) < 0) Py_CLEAR(out);
    Py_XDECREF(v);
  }
  return out;
}

static PyObject *kpy_function_get_arg_format(PyObject *op, void *closure) {
  (void)closure;
  PyObject *f = ((kpy_function *)op)->arg_format;
  return Py_NewRef(f ? f : Py_None);
}

PyObject *kpy_function_new(kpy_state *st, PyObject *owner, kiln_function *fn) {
  PyTypeObject *tp = st->ref.Function_type;
  int n = kiln_function_param_count(fn);
  kpy_slot *slots = PyMem_Calloc((size_t)(n ? n : 1), sizeof *slots);
  if (!slots) return PyErr_NoMemory();
  size_t storage_size = kpy_slots_fill(fn, slots, n);
  kpy_function *self = PyObject_GC_New(kpy_function, tp);
  if (!self) {
    PyMem_Free(slots);
    return NULL;
  }
  self->vectorcall = kpy_function_call;
  self->fn = fn;
  self->owner = Py_NewRef(owner);
  self->st = st;
  self->n_params = n;
  self->storage_size = storage_size;
  self->slots = slots;
  self->arg_format = NULL;
  self->prepare_refusal = NULL;
  self->prepared_shared = 0;
  self->prepared_bits = NULL;
  self->block_memo.obj = self->grid_memo.obj = NULL;
  self->dict = NULL;
  PyObject_GC_Track(self);
  return (PyObject *)self;
}

static int kpy_function_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((kpy_function *)op)->owner);
  Py_VISIT(((kpy_function *)op)->block_memo.obj);
  Py_VISIT(((kpy_function *)op)->grid_memo.obj);
  Py_VISIT(((kpy_function *)op)->dict);
  return 0;
}

static int kpy_function_clear(PyObject *op) {
  Py_CLEAR(((kpy_function *)op)->owner);
  Py_CLEAR(((kpy_function *)op)->arg_format);
  Py_CLEAR(((kpy_function *)op)->prepare_refusal);
  Py_CLEAR(((kpy_function *)op)->block_memo.obj);
  Py_CLEAR(((kpy_function *)op)->grid_memo.obj);
  Py_CLEAR(((kpy_function *)op)->dict);
  return 0;
}

static void kpy_function_dealloc(PyObject *op) {
  kpy_function *self = (kpy_function *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  PyMem_Free(self->slots);
  PyMem_Free(self->prepared_bits);
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

/* "<kiln.Function cpp(float *, const float *, int) (ptr, ptr, i32): 32 registers, 0 B shared>":
 * the kernel as declared, its parameter classes, and where a GPU can say, its registers and
 * static shared memory (no GPU, no failure: repr must always work). */
static PyObject *kpy_function_repr(PyObject *op) {
  kpy_function *self = (kpy_function *)op;
  PyObject *sig = kpy_function_get_signature(op, NULL);
  if (!sig) return NULL;
  PyObject *joined = NULL, *sep = PyUnicode_FromString(", ");
  if (sep) joined = PyUnicode_Join(sep, sig);
  Py_XDECREF(sep);
  Py_DECREF(sig);
  if (!joined) return NULL;
  int regs = -1, shared = -1, count = 0;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_device_count(&count);
    if (!s && count > 0 && !kiln_function_get_attribute(self->fn, 4, &regs))
      kiln_function_get_attribute(self->fn, 1, &shared);
  Py_END_ALLOW_THREADS(void)
  s;
  if (kpy_flush_warnings(self->st) < 0) {
    Py_DECREF(joined);
    return NULL;
  }
  PyObject *r = regs >= 0 && shared >= 0
                    ? PyUnicode_FromFormat("<kiln.Function %s (%U): %d registers, %d B shared>",
                                           kiln_function_signature(self->fn), joined, regs, shared)
                    : PyUnicode_FromFormat("<kiln.Function %s (%U)>",
                                           kiln_function_signature(self->fn), joined);
  Py_DECREF(joined);
  return r;
}

/* inspect.signature(f): built by kiln._signature, imported on first use (never on the call's
 * path). */
static PyObject *kpy_function_get_py_signature(PyObject *op, void *closure) {
  (void)closure;
  PyObject *mod = PyImport_ImportModule("kiln._signature");
  if (!mod) return NULL;
  PyObject *r = PyObject_CallMethod(mod, "function_signature", "O", op);
  Py_DECREF(mod);
  return r;
}

static PyObject *kpy_function_get_declaration(PyObject *op, void *closure) {
  (void)closure;
  return PyUnicode_FromString(kiln_function_signature(((kpy_function *)op)->fn));
}

static PyMemberDef kpy_function_members[] = {
    {"__vectorcalloffset__", KPY_T_PYSSIZET, offsetof(kpy_function, vectorcall), KPY_READONLY,
     NULL},
    {"__dictoffset__", KPY_T_PYSSIZET, offsetof(kpy_function, dict), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyMethodDef kpy_function_methods[] = {
    {"prepare", (PyCFunction)(void (*)(void))kpy_function_prepare, METH_VARARGS | METH_KEYWORDS,
     "prepare($self, arg_types, shared=None, texrefs=None)\n--\n\nChecks PyCUDA's argument types "
     "(a "
     "struct format such as 'PiiP', or a list of characters and NumPy dtypes) against the "
     "kernel's parameters and returns the function. Optional in kiln, which packs by the "
     "kernel's signature. texrefs, for PyCUDA's texture references, may only be empty; a list "
     "as the second argument is texrefs, as in PyCUDA's prepare(arg_types, texrefs=[])."},
    {"prepared_call", (PyCFunction)(void (*)(void))kpy_function_prepared_call,
     METH_FASTCALL | METH_KEYWORDS,
     "prepared_call($self, grid, block, *args, shared_size=0)\n--\n\nThe launch, as "
     "f(*args, grid=, block=) is."},
    {"prepared_async_call", (PyCFunction)(void (*)(void))kpy_function_prepared_async_call,
     METH_FASTCALL | METH_KEYWORDS,
     "prepared_async_call($self, grid, block, stream, *args, shared_size=0)\n--\n\nOn "
     "stream (None: the default stream)."},
    {"prepared_timed_call", (PyCFunction)(void (*)(void))kpy_function_prepared_timed_call,
     METH_FASTCALL | METH_KEYWORDS,
     "prepared_timed_call($self, grid, block, *args, shared_size=0)\n--\n\nLaunches between "
     "two events and returns a callable giving the seconds between them (it waits for the "
     "kernel)."},
    {"get_attribute", kpy_function_get_attribute, METH_O,
     "get_attribute($self, attr, /)\n--\n\nA kiln.driver.function_attribute of the kernel on "
     "the current device."},
    {"set_attribute", (PyCFunction)(void (*)(void))kpy_function_set_attribute, METH_FASTCALL,
     "set_attribute($self, attr, value)\n--\n\nMAX_DYNAMIC_SHARED_SIZE_BYTES, "
     "PREFERRED_SHARED_MEMORY_CARVEOUT or a cluster attribute."},
    {"set_cache_config", kpy_function_set_cache_config, METH_O,
     "set_cache_config($self, func_cache, /)\n--\n\nThe kernel's preferred split of L1 and "
     "shared memory."},
#define KPY_OCCUPANCY_METHOD(name, fn, doc) \
  {name, (PyCFunction)(void (*)(void))fn, METH_VARARGS | METH_KEYWORDS, doc}
    KPY_OCCUPANCY_METHOD(
        "max_active_blocks", kpy_function_max_active_blocks,
        "max_active_blocks($self, block, shared=0)\n--\n\nBlocks of that shape resident on "
        "one multiprocessor at once (the driver's occupancy calculator)."),
    KPY_OCCUPANCY_METHOD(
        "suggested_block_size", kpy_function_suggested_block_size,
        "suggested_block_size($self, shared=0, block_limit=0)\n--\n\nThe block size giving "
        "the most resident threads."),
    KPY_OCCUPANCY_METHOD(
        "available_dynamic_shared", kpy_function_available_dynamic_shared,
        "available_dynamic_shared($self, blocks, block)\n--\n\nThe most dynamic shared "
        "memory per block with that many blocks resident per multiprocessor."),
    KPY_OCCUPANCY_METHOD(
        "max_active_clusters", kpy_function_max_active_clusters,
        "max_active_clusters($self, cluster, block, shared=0, grid=None)\n--\n\nClusters "
        "of that shape resident on the device at once (0: one does not fit)."),
    KPY_OCCUPANCY_METHOD("max_active_blocks_per_multiprocessor",
                         kpy_function_max_active_blocks_per_mp,
                         "max_active_blocks_per_multiprocessor($self, block_size, "
                         "dynamic_shared_memory_size)\n--\n\ncuda.core's name of "
                         "max_active_blocks."),
    KPY_OCCUPANCY_METHOD("max_potential_block_size", kpy_function_max_potential_block_size,
                         "max_potential_block_size($self, dynamic_shared_memory_needed, "
                         "block_size_limit=0)\n--\n\ncuda.core's: (min_grid_size, "
                         "max_block_size)."),
    KPY_OCCUPANCY_METHOD("available_dynamic_shared_memory_per_block",
                         kpy_function_available_dynamic_shared_per_block,
                         "available_dynamic_shared_memory_per_block($self, "
                         "num_blocks_per_multiprocessor, block_size)\n--\n\ncuda.core's name "
                         "of available_dynamic_shared."),
#undef KPY_OCCUPANCY_METHOD
    {NULL, NULL, 0, NULL},
};

#define KPY_ATTRIBUTE_GETTER(name, number)       \
  {name, kpy_function_get_named_attribute, NULL, \
   "function_attribute " #number " on the current device.", (void *)(intptr_t)(number)}

static PyGetSetDef kpy_function_getset[] = {
    {"name", kpy_function_get_name, NULL, "The kernel's PTX entry name.", NULL},
    {"__signature__", kpy_function_get_py_signature, NULL,
     "inspect.signature(f): the kernel's parameters, annotated with their declared types, "
     "then the launch keywords.",
     NULL},
    {"declaration", kpy_function_get_declaration, NULL,
     "The kernel as its source declares it, 'cpp(float *, const float *, int)', as messages "
     "name it; the plain name of an extern \"C\" kernel.",
     NULL},
    {"signature", kpy_function_get_signature, NULL,
     "One class per parameter: i32, u32, b32 (sign unknown), f32, f64, ptr, b64 (a pointer "
     "or 64-bit int), struct[size]/align, ...",
     NULL},
    {"attributes", kpy_function_get_attributes, NULL,
     "{name: value} of the kernel's attributes on the current device (CuPy's "
     "RawKernel.attributes).",
     NULL},
    {"arg_format", kpy_function_get_arg_format, NULL,
     "PyCUDA's struct format of the argument types prepare() was given (a list of them "
     "spelled as one string), or None.",
     NULL},
    {"occupancy", kpy_function_get_occupancy, NULL,
     "cuda.core's Kernel.occupancy: the function itself, which has its occupancy methods.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    KPY_ATTRIBUTE_GETTER("max_threads_per_block", 0),
    KPY_ATTRIBUTE_GETTER("shared_size_bytes", 1),
    KPY_ATTRIBUTE_GETTER("const_size_bytes", 2),
    KPY_ATTRIBUTE_GETTER("local_size_bytes", 3),
    KPY_ATTRIBUTE_GETTER("num_regs", 4),
    KPY_ATTRIBUTE_GETTER("ptx_version", 5),
    KPY_ATTRIBUTE_GETTER("binary_version", 6),
    KPY_ATTRIBUTE_GETTER("cache_mode_ca", 7),
    KPY_ATTRIBUTE_GETTER("max_dynamic_shared_size_bytes", 8),
    KPY_ATTRIBUTE_GETTER("preferred_shared_memory_carveout", 9),
    KPY_ATTRIBUTE_GETTER("cluster_size_must_be_set", 10),
    KPY_ATTRIBUTE_GETTER("required_cluster_width", 11),
    KPY_ATTRIBUTE_GETTER("required_cluster_height", 12),
    KPY_ATTRIBUTE_GETTER("required_cluster_depth", 13),
    KPY_ATTRIBUTE_GETTER("non_portable_cluster_size_allowed", 14),
    KPY_ATTRIBUTE_GETTER("cluster_scheduling_policy_preference", 15),
    {NULL, NULL, NULL, NULL, NULL},
};
#undef KPY_ATTRIBUTE_GETTER

static PyType_Slot kpy_function_slots[] = {
    {Py_tp_call, PyVectorcall_Call},
    {Py_tp_dealloc, kpy_function_dealloc},
    {Py_tp_traverse, kpy_function_traverse},
    {Py_tp_clear, kpy_function_clear},
    {Py_tp_repr, kpy_function_repr},
    {Py_tp_members, kpy_function_members},
    {Py_tp_methods, kpy_function_methods},
    {Py_tp_getset, kpy_function_getset},
    {Py_tp_getattro, kpy_function_getattro},
    {Py_tp_setattro, kpy_function_setattro},
    {Py_tp_doc, (void *)"A kernel: f(*args, block, grid=(1, 1), shared=0, stream=None, "
                        "time_kernel=False, cooperative=False, cluster=None, "
                        "programmatic=False)."},
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
