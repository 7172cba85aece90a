/* kiln.Context: PyCUDA's Context over the one context each device has, its primary context
 * (the one PyTorch, CuPy and the CUDA runtime use). A Context names a device; push() makes that
 * device current on this thread, remembering the one before, and pop() returns to it, through
 * the engine's per-thread stack (kiln_context_push/pop). detach() pops it when it is the one
 * pushed last; no context is ever destroyed. The static calls (synchronize, limits, cache
 * configuration) work on the current device's context, as PyCUDA's work on the current one. */
#include "context.h"

#include "device.h"
#include "errors.h"
#include "launches.h"
#include "wait.h"

typedef struct kpy_context {
  PyObject_HEAD
  int ordinal;
  int detached;
} kpy_context;

/* Context(device): the primary context of a kiln.Device, not made current. */
static PyObject *kpy_context_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  static char *kwlist[] = {(char *)"device", NULL};
  PyObject *device;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O:Context", kwlist, &device)) return NULL;
  if (!PyObject_TypeCheck(device, st->ref.Device_type)) {
    PyErr_Format(PyExc_TypeError,
                 "Context() takes a kiln.Device (or use Device.make_context()), not %.100s",
                 Py_TYPE(device)->tp_name);
    return NULL;
  }
  kpy_context *self = (kpy_context *)tp->tp_alloc(tp, 0);
  if (self) self->ordinal = ((kpy_device *)device)->ordinal;
  return (PyObject *)self;
}

static PyObject *kpy_context_of(kpy_state *st, int ordinal) {
  PyTypeObject *tp = st->ref.Context_type;
  kpy_context *self = (kpy_context *)tp->tp_alloc(tp, 0);
  if (self) self->ordinal = ordinal;
  return (PyObject *)self;
}

static void kpy_context_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static kpy_state *kpy_context_state(PyObject *self_or_cls) {
  PyTypeObject *tp = PyType_Check(self_or_cls) ? (PyTypeObject *)self_or_cls : Py_TYPE(self_or_cls);
  return kpy_state_of_type(tp);
}

/* Whether this thread has pushed a context (here, or by make_context, which calls push):
 * PyCUDA's get_current() is None where nothing is pushed, and code that pops "while
 * Context.get_current() is not None" must see the end. */
static _Thread_local int kpy_context_pushed;

static PyObject *kpy_context_push(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_context *self = (kpy_context *)op;
  kiln_status s = kiln_context_push(self->ordinal);
  if (s) return kpy_raise(kpy_context_state(op), s);
  kpy_context_pushed = 1;
  self->detached = 0;
  Py_RETURN_NONE;
}

/* Context.pop(): a static method in PyCUDA, callable on an instance as well. Popping with none
 * pushed is PyCUDA's LogicError (its driver's CUDA_ERROR_INVALID_CONTEXT), which clean-up code
 * popping "whatever is left" catches. */
static PyObject *kpy_context_pop(PyObject *cls, PyObject *unused) {
  (void)unused;
  int popped = -1;
  kiln_status s = kiln_context_pop(&popped);
  /* KILN_ERROR_INVALID is pop's one refusal of its own: nothing pushed */
  if (s == KILN_ERROR_INVALID)
    return kpy_raise_logic(kpy_context_state(cls), s, 201 /* INVALID_CONTEXT */);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_context_detach(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_context *self = (kpy_context *)op;
  if (!self->detached && kiln_context_depth() > 0 && kiln_device_current() == self->ordinal) {
    int popped;
    kiln_status s = kiln_context_pop(&popped);
    if (s) return kpy_raise(kpy_context_state(op), s);
  }
  self->detached = 1;
  Py_RETURN_NONE;
}

/* The current device's context; None when there is no device to have one, or when this thread
 * has popped every context it pushed (as PyCUDA's, whose stack is then empty). A thread that
 * never pushed one has the context kiln works in. */
static PyObject *kpy_context_get_current(PyObject *cls, PyObject *unused) {
  (void)unused;
  int n = 0;
  if (kiln_device_count(&n) != KILN_OK || n == 0) Py_RETURN_NONE;
  if (kpy_context_pushed && kiln_context_depth() == 0) Py_RETURN_NONE;
  return kpy_context_of(kpy_context_state(cls), kiln_device_current());
}

/* Context.attach(flags=0): PyCUDA's hold on the current context (cuCtxAttach), how libraries
 * take the context PyTorch made current. kiln's is the current device's primary context, made
 * ready here; this thread pushed nothing for it, so its detach() pops nothing. */
static PyObject *kpy_context_attach(PyObject *cls, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"flags", NULL};
  unsigned flags = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|I:attach", kwlist, &flags)) return NULL;
  (void)flags; /* the primary context's flags are the driver's (see make_context) */
  kpy_state *st = kpy_context_state(cls);
  int ordinal = kiln_device_current();
  uintptr_t handle;
  kiln_status s = kiln_context_handle(ordinal, &handle);
  if (s) return kpy_raise(st, s);
  kpy_context *self = (kpy_context *)kpy_context_of(st, ordinal);
  if (self) self->detached = 1; /* nothing to pop */
  return (PyObject *)self;
}

/* PyCUDA's Context.handle: the CUcontext, as an int. */
static PyObject *kpy_context_handle(PyObject *op, void *closure) {
  (void)closure;
  uintptr_t handle;
  kiln_status s = kiln_context_handle(((kpy_context *)op)->ordinal, &handle);
  if (s) return kpy_raise(kpy_context_state(op), s);
  return PyLong_FromSize_t((size_t)handle);
}

static PyObject *kpy_context_get_device(PyObject *cls, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_context_state(cls);
  kiln_device_info info;
  int ordinal = kiln_device_current();
  kiln_status s = kiln_device_get_info(ordinal, &info);
  if (s) return kpy_raise(st, s);
  return kpy_device_of(st, ordinal);
}

static PyObject *kpy_context_synchronize(PyObject *cls, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"timeout", NULL};
  PyObject *timeout_obj = Py_None;
  double timeout;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:synchronize", kwlist, &timeout_obj) ||
      kpy_wait_timeout(timeout_obj, &timeout) < 0 ||
      kpy_wait_device(kpy_context_state(cls), timeout) < 0)
    return NULL;
  kpy_launches_settle_all();
  Py_RETURN_NONE;
}

/* An int argument (a limit or func_cache member is one). */
static int kpy_context_int(PyObject *obj, const char *what, long long lo, long long hi,
                           long long *out) {
  if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  long long v = PyLong_AsLongLong(obj);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < lo || v > hi) {
    PyErr_Format(PyExc_ValueError, "%s %lld is out of range", what, v);
    return -1;
  }
  *out = v;
  return 0;
}

static PyObject *kpy_context_get_limit(PyObject *cls, PyObject *limit) {
  long long l;
  if (kpy_context_int(limit, "limit", INT_MIN, INT_MAX, &l) < 0) return NULL;
  size_t v = 0;
  kiln_status s = kiln_context_get_limit((int)l, &v);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  return PyLong_FromSize_t(v);
}

static PyObject *kpy_context_set_limit(PyObject *cls, PyObject *const *args, Py_ssize_t n) {
  long long l, v;
  if (n != 2) {
    PyErr_Format(PyExc_TypeError, "set_limit(limit, value) takes 2 arguments (%zd given)", n);
    return NULL;
  }
  if (kpy_context_int(args[0], "limit", INT_MIN, INT_MAX, &l) < 0 ||
      kpy_context_int(args[1], "the limit's value", 0, LLONG_MAX, &v) < 0)
    return NULL;
  kiln_status s = kiln_context_set_limit((int)l, (size_t)v);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_context_get_cache_config(PyObject *cls, PyObject *unused) {
  (void)unused;
  int c = 0;
  kiln_status s = kiln_context_get_cache_config(&c);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  return PyLong_FromLong(c);
}

static PyObject *kpy_context_set_cache_config(PyObject *cls, PyObject *config) {
  long long c;
  if (kpy_context_int(config, "cache config", INT_MIN, INT_MAX, &c) < 0) return NULL;
  kiln_status s = kiln_context_set_cache_config((int)c);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_context_get_shared_config(PyObject *cls, PyObject *unused) {
  (void)unused;
  int c = 0;
  kiln_status s = kiln_context_get_shared_config(&c);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  return PyLong_FromLong(c);
}

static PyObject *kpy_context_set_shared_config(PyObject *cls, PyObject *config) {
  long long c;
  if (kpy_context_int(config, "shared config", INT_MIN, INT_MAX, &c) < 0) return NULL;
  kiln_status s = kiln_context_set_shared_config((int)c);
  if (s) return kpy_raise(kpy_context_state(cls), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_context_get_api_version(PyObject *op, PyObject *unused) {
  (void)unused;
  unsigned v = 0;
  kiln_status s = kiln_context_api_version(&v);
  if (s) return kpy_raise(kpy_context_state(op), s);
  return PyLong_FromUnsignedLong(v);
}

int kpy_context_device(kpy_state *st, PyObject *obj, int none_ok, const char *what, int *ordinal) {
  if (none_ok && obj == Py_None) *ordinal = kiln_device_current();
  else if (PyObject_TypeCheck(obj, st->ref.Context_type)) *ordinal = ((kpy_context *)obj)->ordinal;
  else if (PyObject_TypeCheck(obj, st->ref.Device_type)) *ordinal = ((kpy_device *)obj)->ordinal;
  else {
    PyErr_Format(PyExc_TypeError, "%s must be a kiln.Context or kiln.Device%s, not %.100s", what,
                 none_ok ? ", or None for the current context" : "", Py_TYPE(obj)->tp_name);
    return -1;
  }
  return 0;
}

/* Context.enable_peer_access(peer, flags=0) and disable_peer_access(peer): static methods in
 * PyCUDA, of the current context whatever they are called on; so here. */
static PyObject *kpy_context_peer_access(PyObject *cls, PyObject *args, PyObject *kwargs,
                                         int enable) {
  static char *kwlist[] = {(char *)"peer", (char *)"flags", NULL};
  PyObject *peer;
  unsigned flags = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs,
                                   enable ? "O|I:enable_peer_access" : "O|I:disable_peer_access",
                                   kwlist, &peer, &flags))
    return NULL;
  kpy_state *st = kpy_context_state(cls);
  int ordinal;
  if (kpy_context_device(st, peer, 0, "peer", &ordinal) < 0) return NULL;
  if (!enable && flags) {
    PyErr_Format(PyExc_ValueError, "disable_peer_access() takes flags 0, not %u", flags);
    return NULL;
  }
  kiln_status s = enable ? kiln_context_enable_peer_access(ordinal, flags)
                         : kiln_context_disable_peer_access(ordinal);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_context_enable_peer_access(PyObject *cls, PyObject *args, PyObject *kwargs) {
  return kpy_context_peer_access(cls, args, kwargs, 1);
}

static PyObject *kpy_context_disable_peer_access(PyObject *cls, PyObject *args, PyObject *kwargs) {
  return kpy_context_peer_access(cls, args, kwargs, 0);
}

static PyObject *kpy_context_richcompare(PyObject *a, PyObject *b, int op) {
  if (!PyObject_TypeCheck(b, Py_TYPE(a)) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  int same = ((kpy_context *)a)->ordinal == ((kpy_context *)b)->ordinal;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t kpy_context_hash(PyObject *op) { return ((kpy_context *)op)->ordinal + 1; }

static PyObject *kpy_context_repr(PyObject *op) {
  return PyUnicode_FromFormat("<kiln.Context: the primary context of device %d>",
                              ((kpy_context *)op)->ordinal);
}

static PyMethodDef kpy_context_methods[] = {
    {"push", kpy_context_push, METH_NOARGS,
     "push($self, /)\n--\n\nMakes this context's device current on this thread; pop() returns "
     "to the one before."},
    {"pop", kpy_context_pop, METH_NOARGS | METH_CLASS,
     "pop($type, /)\n--\n\nContext.pop(): undoes this thread's last push() or make_context()."},
    {"detach", kpy_context_detach, METH_NOARGS,
     "detach($self, /)\n--\n\nPops this context when it is the one pushed last; the primary "
     "context itself stays, shared with the process's other libraries."},
    {"attach", (PyCFunction)(void (*)(void))kpy_context_attach,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "attach($type, /, flags=0)\n--\n\nThe current device's context, as PyCUDA's attach() gives "
     "the current one; its detach() pops nothing."},
    {"get_current", kpy_context_get_current, METH_NOARGS | METH_CLASS,
     "get_current($type, /)\n--\n\nThe current device's context; None when there is no "
     "CUDA device, or once this thread has popped every context it pushed."},
    {"get_device", kpy_context_get_device, METH_NOARGS | METH_CLASS,
     "get_device($type, /)\n--\n\nThe current device."},
    {"synchronize", (PyCFunction)(void (*)(void))kpy_context_synchronize,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "synchronize($type, /, timeout=None)\n--\n\nWaits for all work on the current device; "
     "Ctrl-C and the timeout end the wait as Stream.synchronize's do."},
    {"get_limit", kpy_context_get_limit, METH_O | METH_CLASS,
     "get_limit($type, limit, /)\n--\n\nA kiln.driver.limit of the current context."},
    {"set_limit", (PyCFunction)(void (*)(void))kpy_context_set_limit, METH_FASTCALL | METH_CLASS,
     "set_limit($type, limit, value)\n--\n\nFor every library sharing the primary context."},
    {"get_cache_config", kpy_context_get_cache_config, METH_NOARGS | METH_CLASS,
     "get_cache_config($type, /)\n--\n\nThe preferred cache configuration, a "
     "kiln.driver.func_cache value."},
    {"set_cache_config", kpy_context_set_cache_config, METH_O | METH_CLASS,
     "set_cache_config($type, func_cache, /)\n--\n\nSets the preferred split of L1 and shared "
     "memory (a kiln.driver.func_cache)."},
    {"get_shared_config", kpy_context_get_shared_config, METH_NOARGS | METH_CLASS,
     "get_shared_config($type, /)\n--\n\nThe shared memory bank size, a "
     "kiln.driver.shared_config value."},
    {"set_shared_config", kpy_context_set_shared_config, METH_O | METH_CLASS,
     "set_shared_config($type, shared_config, /)\n--\n\nSets the shared memory bank size (a "
     "kiln.driver.shared_config)."},
    {"enable_peer_access", (PyCFunction)(void (*)(void))kpy_context_enable_peer_access,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "enable_peer_access($type, /, peer, flags=0)\n--\n\nGives the current context (as "
     "PyCUDA's, whatever Context it is called on) access to the memory of peer, a Context "
     "(or Device); for every library sharing the primary context."},
    {"disable_peer_access", (PyCFunction)(void (*)(void))kpy_context_disable_peer_access,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "disable_peer_access($type, /, peer, flags=0)\n--\n\nTakes back what "
     "enable_peer_access(peer) gave the current context."},
    {"get_api_version", kpy_context_get_api_version, METH_NOARGS,
     "get_api_version($self, /)\n--\n\nThe context's API version (cuCtxGetApiVersion)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_context_getset[] = {
    {"handle", kpy_context_handle, NULL,
     "The driver's handle of this primary context (a CUcontext), as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_context_slots[] = {
    {Py_tp_new, kpy_context_new},
    {Py_tp_dealloc, kpy_context_dealloc},
    {Py_tp_repr, kpy_context_repr},
    {Py_tp_richcompare, kpy_context_richcompare},
    {Py_tp_hash, kpy_context_hash},
    {Py_tp_methods, kpy_context_methods},
    {Py_tp_getset, kpy_context_getset},
    {Py_tp_doc,
     (void *)"Context(device)\n--\n\nA device's primary context, shared with PyTorch, CuPy "
             "and the CUDA runtime. Device.make_context() gives one made current."},
    {0, NULL},
};

static PyType_Spec kpy_context_spec = {"kiln.Context", sizeof(kpy_context), 0,
                                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
                                       kpy_context_slots};

int kpy_context_init(PyObject *module, kpy_state *st) {
  st->ref.Context_type = kpy_add_type(module, &kpy_context_spec, NULL);
  return st->ref.Context_type ? 0 : -1;
}
