/* kiln.Graph: `with stream.capture() as g:` records the kernel calls, device-to-device copies,
 * memsets and page-locked copies queued on the stream; g.launch() replays them with one
 * cuGraphLaunch; g.update(i, *args) replaces the arguments of the i-th kernel call, packed as
 * the call packs them, without instantiating the graph again. The graph keeps alive every
 * function and argument its kernels were given (the kernel call hands them over while a
 * capture is open, through st->capture_note). */
#include "graph.h"

#include "args.h"
#include "errors.h"
#include "function.h"
#include "stream.h"

/* Parameters of up to this many bytes in all are packed on the stack, as the call packs them. */
#define KPY_GRAPH_STACK_STORAGE 1024
#define KPY_GRAPH_STACK_PARAMS 32

enum { KPY_GRAPH_NEW, KPY_GRAPH_CAPTURING, KPY_GRAPH_READY, KPY_GRAPH_FAILED };

typedef struct kpy_graph {
  PyObject_HEAD
  kpy_state *st;
  kiln_graph *g;           /* owned; NULL before the capture begins and after it failed */
  int phase;               /* KPY_GRAPH_* */
  kiln_stream handle;      /* the stream captured, and replayed on by default */
  PyObject *stream;        /* what keeps that stream alive (the object given), or NULL */
  PyObject *kernels;       /* list: per kernel, (Function, args) of a kernel call, or None */
  PyObject *replay_stream; /* the last other stream replayed on, strong, or NULL */
  kiln_stream replay_handle;
  int replayed; /* launched at least once: its kernels may still run at dealloc */
} kpy_graph;

static PyObject *kpy_graph_error(kpy_graph *self, kiln_status s) { return kpy_raise(self->st, s); }

/* ---- Capture -------------------------------------------------------------------------------- */

/* Called by every kernel call while a capture is open (st->capture_note): a launch on the
 * captured stream is kernel number count - 1 of the engine's graph; the graph keeps (function,
 * arguments) there. */
static int kpy_graph_note(PyObject *op, PyObject *function, PyObject *const *args, int n,
                          kiln_stream stream) {
  kpy_graph *self = (kpy_graph *)op;
  if (stream != self->handle || !self->g) return 0;
  Py_ssize_t index = kiln_graph_kernel_count(self->g) - 1;
  if (index < 0) return 0;
  PyObject *argt = PyTuple_New(n);
  if (!argt) return -1;
  for (int i = 0; i < n; i++) PyTuple_SET_ITEM(argt, i, Py_NewRef(args[i]));
  PyObject *entry = PyTuple_Pack(2, function, argt);
  Py_DECREF(argt);
  if (!entry) return -1;
  while (PyList_GET_SIZE(self->kernels) <= index)
    if (PyList_Append(self->kernels, Py_None) < 0) {
      Py_DECREF(entry);
      return -1;
    }
  return PyList_SetItem(self->kernels, index, entry); /* steals entry */
}

/* Graph.capture(stream): a graph that records stream inside `with`. */
static PyObject *kpy_graph_capture(PyObject *cls, PyObject *stream) {
  PyTypeObject *tp = (PyTypeObject *)cls;
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  kiln_stream handle = NULL;
  if (kpy_stream_parse(st, stream, &handle) < 0) return NULL;
  if (stream == Py_None || !handle || handle == (kiln_stream)(uintptr_t)1) {
    PyErr_SetString(PyExc_ValueError,
                    "the legacy default stream cannot be captured; capture a stream of its own "
                    "(kiln.Stream())");
    return NULL;
  }
  kpy_graph *self = PyObject_GC_New(kpy_graph, tp);
  if (!self) return NULL;
  self->st = st;
  self->g = NULL;
  self->phase = KPY_GRAPH_NEW;
  self->handle = handle;
  PyObject *owner = kpy_stream_owner(st, stream, handle);
  self->stream = owner ? Py_NewRef(owner) : NULL;
  self->kernels = PyList_New(0);
  self->replay_stream = NULL;
  self->replay_handle = NULL;
  self->replayed = 0;
  PyObject_GC_Track(self);
  if (!self->kernels) {
    Py_DECREF(self);
    return NULL;
  }
  return (PyObject *)self;
}

static PyObject *kpy_graph_enter(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_graph *self = (kpy_graph *)op;
  kpy_state *st = self->st;
  if (self->phase != KPY_GRAPH_NEW) {
    PyErr_SetString(PyExc_RuntimeError,
                    "a Graph records once; capture again with stream.capture() for another");
    return NULL;
  }
  if (st->capture) {
    PyErr_SetString(PyExc_RuntimeError,
                    "another kiln capture is open; kiln records one capture at a time");
    return NULL;
  }
  PyObject *deferred = PyList_New(0);
  if (!deferred) return NULL;
  kiln_status s = kiln_graph_begin_capture(self->handle, &self->g);
  if (s) {
    Py_DECREF(deferred);
    return kpy_graph_error(self, s);
  }
  self->phase = KPY_GRAPH_CAPTURING;
  Py_XSETREF(st->deferred, deferred);
  st->capture = op;
  st->capture_note = kpy_graph_note;
  return Py_NewRef(op);
}

/* The capture of op is over: what was let go during it is released now (st->deferred). */
static void kpy_graph_capture_over(kpy_state *st, PyObject *op) {
  if (st->capture != op) return;
  st->capture = NULL;
  Py_CLEAR(st->deferred);
}

/* Ends the capture: instantiated when the block ran through, dropped when it raised. */
static PyObject *kpy_graph_exit(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
  kpy_graph *self = (kpy_graph *)op;
  if (self->phase != KPY_GRAPH_CAPTURING) Py_RETURN_FALSE;
  int raised = nargs > 0 && args[0] != Py_None;
  kiln_status s = raised ? KILN_OK : kiln_graph_end_capture(self->g);
  kpy_graph_capture_over(self->st, op);
  if (raised || s) {
    kiln_graph_free(self->g);
    self->g = NULL;
    self->phase = KPY_GRAPH_FAILED;
    if (s) return kpy_graph_error(self, s);
    Py_RETURN_FALSE;
  }
  self->phase = KPY_GRAPH_READY;
  while (PyList_GET_SIZE(self->kernels) < kiln_graph_kernel_count(self->g))
    if (PyList_Append(self->kernels, Py_None) < 0) return NULL;
  Py_RETURN_FALSE;
}

/* ---- Replay and update ---------------------------------------------------------------------- */

static int kpy_graph_ready(kpy_graph *self, const char *what) {
  if (__builtin_expect(self->phase == KPY_GRAPH_READY, 1)) return 0;
  PyErr_Format(PyExc_RuntimeError, "%s: %s", what,
               self->phase == KPY_GRAPH_NEW         ? "the graph has not been captured yet (use "
                                                      "`with stream.capture() as g:`)"
               : self->phase == KPY_GRAPH_CAPTURING ? "the graph is still capturing"
                                                    : "the graph's capture failed; capture "
                                                      "again");
  return -1;
}

/* launch(stream=None): one replay, on the captured stream or the one given. */
static PyObject *kpy_graph_launch(PyObject *op, PyObject *const *args, Py_ssize_t nargsf,
                                  PyObject *kwnames) {
  kpy_graph *self = (kpy_graph *)op;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (kpy_graph_ready(self, "launch") < 0) return NULL;
  kiln_stream handle = self->handle;
  if (nargs + nkw) {
    if (nargs + nkw > 1 ||
        (nkw && PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, 0), self->st->str.stream))) {
      PyErr_SetString(PyExc_TypeError, "launch(stream=None) takes only the stream");
      return NULL;
    }
    PyObject *obj = args[0];
    if (obj != Py_None) {
      if (kpy_stream_parse(self->st, obj, &handle) < 0) return NULL;
      if (handle != self->handle && handle != self->replay_handle) {
        PyObject *owner = kpy_stream_owner(self->st, obj, handle);
        Py_XSETREF(self->replay_stream, owner ? Py_NewRef(owner) : NULL);
        self->replay_handle = handle;
      }
    }
  }
  kiln_status s = kiln_graph_launch(self->g, handle);
  if (s) return kpy_graph_error(self, s);
  self->replayed = 1;
  Py_RETURN_NONE;
}

/* update(i, *args): kernel i's new arguments, packed by its signature. */
static PyObject *kpy_graph_update_kernel(kpy_graph *self, PyObject *const *args, Py_ssize_t nargs) {
  kpy_state *st = self->st;
  Py_ssize_t n_kernels = PyList_GET_SIZE(self->kernels);
  Py_ssize_t index = PyNumber_AsSsize_t(args[0], PyExc_IndexError);
  if (index == -1 && PyErr_Occurred()) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "update(index, *args) or update(graph): the first argument must be a "
                   "kernel's number or a kiln.Graph, not %.100s",
                   Py_TYPE(args[0])->tp_name);
    }
    return NULL;
  }
  if (index < 0) index += n_kernels;
  if (index < 0 || index >= n_kernels) {
    PyErr_Format(PyExc_IndexError, "kernel %R: the graph has %zd kernel%s", args[0], n_kernels,
                 n_kernels == 1 ? "" : "s");
    return NULL;
  }
  PyObject *entry = PyList_GET_ITEM(self->kernels, index);
  if (entry == Py_None) {
    PyErr_Format(PyExc_ValueError,
                 "kernel %zd of the graph was not launched by calling a kiln.Function (an array "
                 "operation's kernel, say), so its arguments cannot be replaced",
                 index);
    return NULL;
  }
  Py_INCREF(entry); /* packing can run Python code that replaces it */
  kpy_function *fn = (kpy_function *)PyTuple_GET_ITEM(entry, 0);
  PyObject *result = NULL;
  if (nargs - 1 != fn->n_params) {
    PyErr_Format(PyExc_TypeError, "update(%zd, *args): %s takes %d argument%s (%zd given)", index,
                 kiln_function_name(fn->fn), fn->n_params, fn->n_params == 1 ? "" : "s", nargs - 1);
    Py_DECREF(entry);
    return NULL;
  }
  _Alignas(16) unsigned char stack_storage[KPY_GRAPH_STACK_STORAGE];
  void *stack_params[KPY_GRAPH_STACK_PARAMS];
  unsigned char *storage = stack_storage;
  void **params = stack_params;
  if (fn->storage_size > sizeof stack_storage || fn->n_params > KPY_GRAPH_STACK_PARAMS) {
    storage = PyMem_Malloc(fn->storage_size);
    params = PyMem_Malloc(sizeof(void *) * (size_t)(fn->n_params ? fn->n_params : 1));
    if (!storage || !params) {
      PyErr_NoMemory();
      goto done;
    }
  }
  kpy_packed packed;
  packed.stream = self->handle;
  packed.n_transfers = packed.waited = packed.n_pointers = 0;
  if (kpy_pack_args(st, fn->fn, fn->slots, fn->n_params, args + 1, storage, params, &packed) < 0)
    goto done;
  if (kpy_packed_check_pointers(st, fn->fn, &packed) < 0) goto done;
  if (packed.n_transfers) {
    PyErr_Format(PyExc_ValueError,
                 "update(%zd, *args): In/Out/InOut cannot be a graph's arguments (a replay would "
                 "copy between memory that no longer exists); pass device arrays",
                 index);
    goto done;
  }
  kiln_status s = kiln_graph_set_kernel_params(self->g, (int)index, params);
  if (s) {
    kpy_graph_error(self, s);
    goto done;
  }
  PyObject *argt = PyTuple_New(nargs - 1);
  if (!argt) goto done;
  for (Py_ssize_t i = 1; i < nargs; i++) PyTuple_SET_ITEM(argt, i - 1, Py_NewRef(args[i]));
  PyObject *fresh = PyTuple_Pack(2, (PyObject *)fn, argt);
  Py_DECREF(argt);
  if (!fresh || PyList_SetItem(self->kernels, index, fresh) < 0) goto done;
  result = Py_NewRef(Py_None);
done:
  if (storage != stack_storage) {
    PyMem_Free(storage);
    PyMem_Free(params);
  }
  Py_DECREF(entry);
  return result;
}

/* update(graph): every node's arguments from a capture of the same shape (cuGraphExecUpdate). */
static PyObject *kpy_graph_update_from(kpy_graph *self, kpy_graph *other) {
  if (kpy_graph_ready(other, "update(graph): the other graph") < 0) return NULL;
  kiln_status s = kiln_graph_update(self->g, other->g);
  if (s) return kpy_graph_error(self, s);
  /* What the replays now read is what other's kernels were given. */
  PyObject *copy = PyList_GetSlice(other->kernels, 0, PyList_GET_SIZE(other->kernels));
  if (!copy) return NULL;
  Py_SETREF(self->kernels, copy);
  Py_RETURN_NONE;
}

static PyObject *kpy_graph_update(PyObject *op, PyObject *const *args, Py_ssize_t nargs) {
  kpy_graph *self = (kpy_graph *)op;
  if (kpy_graph_ready(self, "update") < 0) return NULL;
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError,
                    "update(index, *args) replaces a kernel's arguments; update(graph) takes "
                    "every argument of a capture of the same shape");
    return NULL;
  }
  if (nargs == 1 && Py_IS_TYPE(args[0], Py_TYPE(op)))
    return kpy_graph_update_from(self, (kpy_graph *)args[0]);
  return kpy_graph_update_kernel(self, args, nargs);
}

/* ---- The type ------------------------------------------------------------------------------- */

static PyObject *kpy_graph_get_kernel_count(PyObject *op, void *closure) {
  (void)closure;
  kpy_graph *self = (kpy_graph *)op;
  return PyLong_FromLong(self->g ? kiln_graph_kernel_count(self->g) : 0);
}

static PyObject *kpy_graph_get_joined(PyObject *op, void *closure) {
  (void)closure;
  kpy_graph *self = (kpy_graph *)op;
  return PyBool_FromLong(self->g && kiln_graph_joined(self->g));
}

static PyObject *kpy_graph_get_kernels(PyObject *op, void *closure) {
  (void)closure;
  return PyList_AsTuple(((kpy_graph *)op)->kernels);
}

static PyObject *kpy_graph_get_stream(PyObject *op, void *closure) {
  (void)closure;
  kpy_graph *self = (kpy_graph *)op;
  if (self->stream) return Py_NewRef(self->stream);
  return PyLong_FromVoidPtr((void *)self->handle);
}

static Py_ssize_t kpy_graph_len(PyObject *op) {
  kpy_graph *self = (kpy_graph *)op;
  return self->g ? kiln_graph_kernel_count(self->g) : 0;
}

static PyObject *kpy_graph_repr(PyObject *op) {
  kpy_graph *self = (kpy_graph *)op;
  static const char *phases[] = {"not captured", "capturing", "ready", "failed"};
  return PyUnicode_FromFormat("<kiln.Graph %s, %zd kernel calls%s>", phases[self->phase],
                              kpy_graph_len(op),
                              self->g && kiln_graph_joined(self->g) ? ", joined" : "");
}

static int kpy_graph_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_graph *self = (kpy_graph *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(self->stream);
  Py_VISIT(self->kernels);
  Py_VISIT(self->replay_stream);
  return 0;
}

static int kpy_graph_clear(PyObject *op) {
  kpy_graph *self = (kpy_graph *)op;
  Py_CLEAR(self->kernels);
  Py_CLEAR(self->replay_stream);
  Py_CLEAR(self->stream);
  return 0;
}

/* While another graph's capture is open, a replayed graph's arguments and streams go to an
 * heir kept until that capture ends (st->deferred), which waits for the replays then: waiting
 * now could touch the legacy default stream and fail the capture. 1 when handed over. */
static int kpy_graph_defer(kpy_graph *self) {
  kpy_state *st = self->st;
  if (!self->replayed || !st || !st->deferred) return 0;
  int handed = 0;
  kpy_raised raised;
  kpy_raised_set_aside(&raised);
  kpy_graph *heir = PyObject_GC_New(kpy_graph, Py_TYPE(self));
  if (heir) {
    heir->st = st;
    heir->g = NULL;
    heir->phase = KPY_GRAPH_FAILED;
    heir->handle = self->handle;
    heir->stream = self->stream;
    heir->kernels = self->kernels;
    heir->replay_stream = self->replay_stream;
    heir->replay_handle = self->replay_handle;
    heir->replayed = 1;
    PyObject_GC_Track(heir);
    if (PyList_Append(st->deferred, (PyObject *)heir) == 0) {
      self->stream = self->kernels = self->replay_stream = NULL;
      handed = 1;
    } else {
      heir->stream = heir->kernels = heir->replay_stream = NULL;
      heir->replayed = 0;
    }
    Py_DECREF(heir);
  }
  kpy_raised_put_back(&raised);
  return handed;
}

static void kpy_graph_dealloc(PyObject *op) {
  kpy_graph *self = (kpy_graph *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  if (self->st) kpy_graph_capture_over(self->st, op);
  /* Replays still queued read the arrays the graph keeps: they finish before those go. */
  if (self->replayed && !kpy_graph_defer(self)) {
    kiln_stream a = self->handle, b = self->replay_handle;
    Py_BEGIN_ALLOW_THREADS
      kiln_stream_synchronize(a);
      if (b && b != a) kiln_stream_synchronize(b);
    Py_END_ALLOW_THREADS
  }
  kiln_graph_free(self->g);
  kpy_graph_clear(op);
  PyObject_GC_Del(op);
  Py_DECREF(tp);
}

static PyMethodDef kpy_graph_methods[] = {
    {"capture", kpy_graph_capture, METH_O | METH_CLASS,
     "capture($type, stream, /)\n--\n\nA graph that records what is queued on stream inside "
     "`with`."},
    {"__enter__", kpy_graph_enter, METH_NOARGS, "__enter__($self, /)\n--\n\nBegins the capture."},
    {"__exit__", (PyCFunction)(void (*)(void))kpy_graph_exit, METH_FASTCALL,
     "__exit__($self, *exc_info)\n--\n\nEnds the capture and instantiates the graph (dropped "
     "when the block raised)."},
    {"launch", (PyCFunction)(void (*)(void))kpy_graph_launch, METH_FASTCALL | METH_KEYWORDS,
     "launch($self, /, stream=None)\n--\n\nReplays the graph, on the captured stream or the "
     "one given."},
    {"update", (PyCFunction)(void (*)(void))kpy_graph_update, METH_FASTCALL,
     "update($self, index_or_graph, *args)\n--\n\nupdate(index, *args): new arguments for the "
     "index-th kernel call of the capture, for the replays after it. update(graph): every "
     "argument of a capture of the same sequence (cuGraphExecUpdate)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_graph_getset[] = {
    {"kernel_count", kpy_graph_get_kernel_count, NULL,
     "The kernels kiln launched on the stream during the capture.", NULL},
    {"kernels", kpy_graph_get_kernels, NULL,
     "(function, args) of each kernel call, in launch order; None for a kernel launched "
     "otherwise (an array operation's).",
     NULL},
    {"joined", kpy_graph_get_joined, NULL,
     "True when the capture joined one another library began (torch.cuda.graph): that one "
     "replays.",
     NULL},
    {"stream", kpy_graph_get_stream, NULL, "The stream captured.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_graph_slots[] = {
    {Py_tp_dealloc, kpy_graph_dealloc},
    {Py_tp_traverse, kpy_graph_traverse},
    {Py_tp_clear, kpy_graph_clear},
    {Py_tp_repr, kpy_graph_repr},
    {Py_tp_methods, kpy_graph_methods},
    {Py_tp_getset, kpy_graph_getset},
    {Py_sq_length, kpy_graph_len},
    {Py_tp_doc, (void *)"A recorded sequence of kernel calls, copies and memsets: `with "
                        "stream.capture() as g: ...`, then g.launch() and g.update(i, *args)."},
    {0, NULL},
};

static PyType_Spec kpy_graph_spec = {"kiln.Graph", sizeof(kpy_graph), 0,
                                     Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                         Py_TPFLAGS_IMMUTABLETYPE |
                                         Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                     kpy_graph_slots};

int kpy_graph_init(PyObject *module, kpy_state *st) {
  st->ref.Graph_type = kpy_add_type(module, &kpy_graph_spec, NULL);
  return st->ref.Graph_type ? 0 : -1;
}
