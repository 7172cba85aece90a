/* kiln.Stream and kiln.Event; stream= read one way wherever it is taken; one stream ordered
 * after another. A Stream also keeps alive the host arrays of asynchronous copies queued on it,
 * until it is seen to be done. */
#include "stream.h"

#include "errors.h"
#include "launches.h"
#include "wait.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- Handles from outside kiln ------------------------------------------------------------ */

/* Whether the n (up to 16) bytes at addr are readable host memory: the kernel copies them,
 * and a bad address is EFAULT rather than a fault. Where process_vm_readv is not allowed
 * (seccomp), whether the pages are mapped at all. */
static int kpy_readable(uintptr_t addr, size_t n) {
  unsigned char buf[16];
  struct iovec local = {buf, n}, remote = {(void *)addr, n};
  ssize_t got = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
  if (got >= 0 || errno == EFAULT) return got == (ssize_t)n;
  uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
  uintptr_t start = addr & ~(page - 1);
  unsigned char pages[2];
  return mincore((void *)start, addr + n - start, pages) == 0;
}

int kpy_stream_lasts(kpy_state *st, kiln_stream handle) {
  if ((uintptr_t)handle <= 1) return 1;
  for (int i = 0; i < st->n_streams; i++)
    if (st->streams[i].handle == handle) return 1;
  for (int i = 0; i < st->n_parked; i++)
    if (st->parked[i].handle == handle) return 1;
  return 0;
}

int kpy_stream_check(kpy_state *st, kiln_stream handle, const char *what) {
  uintptr_t v = (uintptr_t)handle;
  if (v <= 2 || v == st->foreign_checked) return 0;
  for (int i = 0; i < st->n_streams; i++)
    if (st->streams[i].handle == handle) return 0;
  char hex[32]; /* PyErr_Format has no %llx */
  PyOS_snprintf(hex, sizeof hex, "0x%llx", (unsigned long long)v);
  for (int i = 0; i < st->n_parked; i++)
    if (st->parked[i].handle == handle) {
      PyErr_Format(PyExc_ValueError,
                   "%s %s is the handle of a kiln.Stream that has been collected; keep the "
                   "kiln.Stream alive while its handle is in use",
                   what, hex);
      return -1;
    }
  /* A CUstream the driver made is a pointer into this process's heap: aligned, below the
   * top of user space, readable. Anything else would be dereferenced by the driver. */
  const char *why = (v & 7)                ? "it is not an aligned address"
                    : ((uint64_t)v >> 47)  ? "it is above this process's address space"
                    : !kpy_readable(v, 16) ? "no readable memory is mapped there"
                                           : NULL;
  if (why) {
    PyErr_Format(PyExc_ValueError,
                 "%s %s is not a CUstream handle: %s. A stream is 0 or 1 (the legacy "
                 "default stream), 2 (the per-thread one), a kiln.Stream, or the handle of a "
                 "live stream another library made",
                 what, hex, why);
    return -1;
  }
  st->foreign_checked = v;
  return 0;
}

int kpy_stream_parse(kpy_state *st, PyObject *obj, kiln_stream *out) {
  *out = NULL;
  if (obj == Py_None) return 0;
  if (kpy_stream_is_kiln(st, obj)) {
    *out = kpy_stream_handle(obj);
    return 0;
  }
  PyObject *handle = NULL;
  if (PyLong_Check(obj)) {
    handle = Py_NewRef(obj);
  } else {
    /* cuda.core's protocol, then the attribute PyCUDA, PyTorch or CuPy use for it. */
    PyObject *proto = NULL;
    if (kpy_get_optional_attr(obj, st->str.cuda_stream_protocol, &proto) < 0) return -1;
    if (proto) {
      PyObject *t = PyObject_CallNoArgs(proto);
      Py_DECREF(proto);
      if (!t) return -1;
      if (PyTuple_Check(t) && PyTuple_GET_SIZE(t) == 2) handle = Py_NewRef(PyTuple_GET_ITEM(t, 1));
      Py_DECREF(t);
    }
    PyObject *names[] = {st->str.handle, st->str.cuda_stream, st->str.ptr};
    for (size_t i = 0; !handle && i < sizeof names / sizeof names[0]; i++)
      if (kpy_get_optional_attr(obj, names[i], &handle) < 0) return -1;
  }
  if (!handle || !PyLong_Check(handle)) {
    Py_XDECREF(handle);
    PyErr_Format(PyExc_TypeError,
                 "stream must be None, an int CUstream handle, or a stream "
                 "object (a kiln.Stream; PyTorch's, CuPy's or cuda.core's), not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  unsigned long long v = PyLong_AsUnsignedLongLong(handle);
  Py_DECREF(handle);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  if (kpy_stream_check(st, (kiln_stream)(uintptr_t)v, "stream") < 0) return -1;
  *out = (kiln_stream)(uintptr_t)v;
  return 0;
}

static int kpy_stream_same(kiln_stream a, kiln_stream b) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return (x == 1 ? 0 : x) == (y == 1 ? 0 : y);
}

int kpy_stream_order(kpy_state *st, kiln_stream waiter, kiln_stream producer) {
  if (kpy_stream_same(waiter, producer)) return 0;
  /* One event per device, reused: a wait takes the event's record as it is when the wait is
   * queued, so recording it again later changes no wait already queued, and the GIL, held from
   * the record to the wait, keeps threads from interleaving theirs. */
  int device = kiln_device_current();
  kiln_event own = NULL;
  kiln_event *event = device >= 0 && device < KPY_ORDER_DEVICES ? &st->order_event[device] : &own;
  kiln_status s = *event ? KILN_OK : kiln_event_create(0, event);
  if (!s) s = kiln_event_record(*event, producer);
  if (!s) s = kiln_stream_wait_event(waiter, *event);
  if (s) kpy_raise(st, s); /* before another engine call replaces the message */
  kiln_event_destroy(own); /* a queued wait still holds its record */
  return s ? -1 : 0;
}

void kpy_stream_free(kpy_state *st) {
  for (int i = 0; i < KPY_ORDER_DEVICES; i++) {
    kiln_event_destroy(st->order_event[i]);
    st->order_event[i] = NULL;
    kiln_event_destroy(st->device_wait_event[i]);
    st->device_wait_event[i] = NULL;
  }
  PyMem_Free(st->streams);
  st->streams = NULL;
  st->n_streams = st->cap_streams = 0;
  int current = kiln_device_current();
  for (int i = 0; i < st->n_parked; i++) {
    kiln_device_set_current(st->parked[i].device);
    kiln_stream_destroy(st->parked[i].handle);
  }
  if (st->n_parked) kiln_device_set_current(current);
  PyMem_Free(st->parked);
  st->parked = NULL;
  st->n_parked = st->cap_parked = 0;
}

int kpy_stream_keep(PyObject *stream, PyObject *obj) {
  kpy_stream *s = (kpy_stream *)stream;
  if (!s->keep && !(s->keep = PyList_New(0))) return -1;
  return PyList_Append(s->keep, obj);
}

static int kpy_stream_sync(kpy_stream *self, double timeout) {
  if (kpy_wait_stream(kpy_state_of_type(Py_TYPE(self)), self->handle, timeout) < 0) return -1;
  kpy_launches_settle(self->handle);
  Py_CLEAR(self->keep);
  return 0;
}

/* ---- The streams kiln made, by handle ------------------------------------------------------ */

static int kpy_streams_add(kpy_state *st, PyObject *stream, kiln_stream handle) {
  if (st->n_streams == st->cap_streams) {
    int cap = st->cap_streams ? 2 * st->cap_streams : 16;
    void *p = PyMem_Realloc(st->streams, (size_t)cap * sizeof *st->streams);
    if (!p) {
      PyErr_NoMemory();
      return -1;
    }
    st->streams = p;
    st->cap_streams = cap;
  }
  st->streams[st->n_streams].handle = handle;
  st->streams[st->n_streams++].stream = stream;
  return 0;
}

/* Keeps the stream of a collected kiln.Stream for the next one (kpy_state's parked); 0, or
 * -1 when there is no memory for it. */
static int kpy_streams_park(kpy_state *st, const kpy_stream *s) {
  /* Checked once as another library's, at an address since reused: refused from now on. */
  if ((uintptr_t)s->handle == st->foreign_checked) st->foreign_checked = 0;
  if (st->n_parked == st->cap_parked) {
    int cap = st->cap_parked ? 2 * st->cap_parked : 16;
    void *p = PyMem_Realloc(st->parked, (size_t)cap * sizeof *st->parked);
    if (!p) return -1;
    st->parked = p;
    st->cap_parked = cap;
  }
  st->parked[st->n_parked++] =
      (struct kpy_parked_stream){s->handle, s->device, s->priority, s->flags};
  return 0;
}

/* The oldest parked stream of the current device with these flags and priority, taken out
 * of the list; NULL when there is none. The oldest, so that a stale handle keeps being
 * refused as long as it can. */
static kiln_stream kpy_streams_unpark(kpy_state *st, unsigned flags, int priority) {
  int device = kiln_device_current();
  for (int i = 0; i < st->n_parked; i++)
    if (st->parked[i].device == device && st->parked[i].flags == flags &&
        st->parked[i].priority == priority) {
      kiln_stream h = st->parked[i].handle;
      memmove(&st->parked[i], &st->parked[i + 1],
              (size_t)(st->n_parked - i - 1) * sizeof *st->parked);
      st->n_parked--;
      return h;
    }
  return NULL;
}

static void kpy_streams_remove(kpy_state *st, PyObject *stream) {
  for (int i = 0; i < st->n_streams; i++)
    if (st->streams[i].stream == stream) {
      st->streams[i] = st->streams[--st->n_streams];
      return;
    }
}

PyObject *kpy_stream_owner(kpy_state *st, PyObject *obj, kiln_stream handle) {
  if (obj == Py_None) return NULL;
  if (kpy_stream_is_kiln(st, obj)) return obj;
  for (int i = 0; handle && i < st->n_streams; i++)
    if (st->streams[i].handle == handle) return st->streams[i].stream;
  return PyLong_Check(obj) ? NULL : obj;
}

static PyObject *kpy_stream_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"flags", (char *)"priority", NULL};
  unsigned flags = 0;
  int priority = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|Ii:Stream", kwlist, &flags, &priority))
    return NULL;
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  kiln_stream handle = kpy_streams_unpark(st, flags, priority);
  if (!handle) {
    kiln_status s = kiln_stream_create(flags, priority, &handle);
    if (s) return kpy_raise(st, s);
  }
  kpy_stream *self = (kpy_stream *)tp->tp_alloc(tp, 0);
  if (!self) {
    kiln_stream_destroy(handle);
    return NULL;
  }
  self->handle = handle;
  self->device = kiln_device_current();
  self->flags = flags;
  self->priority = priority;
  if (kpy_streams_add(st, (PyObject *)self, handle) < 0) {
    Py_DECREF(self); /* not owned yet: the stream is destroyed here, not parked */
    kiln_stream_destroy(handle);
    return NULL;
  }
  self->owned = 1;
  return (PyObject *)self;
}

static PyObject *kpy_stream_from_handle(PyObject *cls, PyObject *arg) {
  PyTypeObject *tp = (PyTypeObject *)cls;
  kpy_state *st = kpy_state_of_type(tp);
  kiln_stream handle = NULL;
  if (!st || kpy_stream_parse(st, arg, &handle) < 0) return NULL;
  /* A kiln.Stream's handle gives that Stream: a second object over it would not keep it. */
  for (int i = 0; handle && i < st->n_streams; i++)
    if (st->streams[i].handle == handle) return Py_NewRef(st->streams[i].stream);
  kpy_stream *self = (kpy_stream *)tp->tp_alloc(tp, 0);
  if (self) self->handle = handle; /* another library's: it destroys it */
  return (PyObject *)self;
}

static int kpy_stream_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((kpy_stream *)op)->keep);
  return 0;
}

static int kpy_stream_clear(PyObject *op) {
  Py_CLEAR(((kpy_stream *)op)->keep);
  return 0;
}

static void kpy_stream_dealloc(PyObject *op) {
  kpy_stream *self = (kpy_stream *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  /* Copies still queued write into or read from what keep holds: they finish first. */
  if (self->keep && PyList_GET_SIZE(self->keep)) {
    Py_BEGIN_ALLOW_THREADS
      kiln_stream_synchronize(self->handle);
    Py_END_ALLOW_THREADS
  }
  if (self->weakrefs) PyObject_ClearWeakRefs(op);
  kpy_stream_clear(op);
  if (self->owned) {
    kpy_state *st = kpy_state_of_type(tp);
    if (st) kpy_streams_remove(st, op);
    /* Kept, not destroyed: a handle of it still held somewhere is refused, never given to
     * the driver dangling. */
    if (!st || kpy_streams_park(st, self) < 0) kiln_stream_destroy(self->handle);
  }
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_stream_synchronize(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"timeout", NULL};
  PyObject *timeout_obj = Py_None;
  double timeout;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:synchronize", kwlist, &timeout_obj) ||
      kpy_wait_timeout(timeout_obj, &timeout) < 0 || kpy_stream_sync((kpy_stream *)op, timeout) < 0)
    return NULL;
  Py_RETURN_NONE;
}

static PyObject *kpy_stream_query(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_stream *self = (kpy_stream *)op;
  int done = 0;
  kiln_status s = kiln_stream_query(self->handle, &done);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  if (done) Py_CLEAR(self->keep);
  return PyBool_FromLong(done);
}

static PyObject *kpy_stream_wait(PyObject *op, PyObject *event) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!PyObject_TypeCheck(event, st->ref.Event_type)) {
    PyErr_Format(PyExc_TypeError, "wait() takes a kiln.Event, not %.100s", Py_TYPE(event)->tp_name);
    return NULL;
  }
  kiln_status s = kiln_stream_wait_event(((kpy_stream *)op)->handle, ((kpy_event *)event)->handle);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_stream_cuda_stream(PyObject *op, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("(iK)", 0, (unsigned long long)(uintptr_t)((kpy_stream *)op)->handle);
}

static PyObject *kpy_stream_get_handle(PyObject *op, void *closure) {
  (void)closure;
  return PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)((kpy_stream *)op)->handle);
}

static PyObject *kpy_stream_priority_range(PyObject *cls, PyObject *unused) {
  (void)unused;
  int least = 0, greatest = 0;
  kiln_status s = kiln_stream_priority_range(&least, &greatest);
  if (s) return kpy_raise(kpy_state_of_type((PyTypeObject *)cls), s);
  return Py_BuildValue("(ii)", least, greatest);
}

static PyObject *kpy_stream_repr(PyObject *op) {
  kpy_stream *self = (kpy_stream *)op;
  return PyUnicode_FromFormat("<kiln.Stream %p%s>", self->handle, self->owned ? "" : " (borrowed)");
}

/* capture(): kiln.Graph.capture(self), for `with stream.capture() as g:`. */
static PyObject *kpy_stream_capture(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return NULL;
  return PyObject_CallMethod((PyObject *)st->ref.Graph_type, "capture", "O", op);
}

static PyMethodDef kpy_stream_methods[] = {
    {"capture", kpy_stream_capture, METH_NOARGS,
     "capture($self, /)\n--\n\nA kiln.Graph recording what is queued on the stream inside "
     "`with`."},
    {"synchronize", (PyCFunction)(void (*)(void))kpy_stream_synchronize,
     METH_VARARGS | METH_KEYWORDS,
     "synchronize($self, /, timeout=None)\n--\n\nWaits for all work queued on it; Ctrl-C ends "
     "the wait (KeyboardInterrupt) and so does the timeout in seconds (TimeoutError), the work "
     "going on on the GPU."},
    {"query", kpy_stream_query, METH_NOARGS,
     "query($self, /)\n--\n\nTrue when all work queued on it has finished."},
    {"wait", kpy_stream_wait, METH_O,
     "wait($self, event, /)\n--\n\nLater work on it waits for the event."},
    {"is_done", kpy_stream_query, METH_NOARGS,
     "is_done($self, /)\n--\n\nPyCUDA's spelling of query()."},
    {"wait_for_event", kpy_stream_wait, METH_O,
     "wait_for_event($self, event, /)\n--\n\nPyCUDA's spelling of wait(event)."},
    {"__cuda_stream__", kpy_stream_cuda_stream, METH_NOARGS,
     "__cuda_stream__($self, /)\n--\n\n(0, handle): the stream protocol."},
    {"from_handle", kpy_stream_from_handle, METH_O | METH_CLASS,
     "from_handle($type, h, /)\n--\n\nA Stream over another library's stream (an int CUstream, "
     "or an object that names one, e.g. torch.cuda.current_stream()); not destroyed by kiln."},
    {"priority_range", kpy_stream_priority_range, METH_NOARGS | METH_CLASS,
     "priority_range($type, /)\n--\n\n(least, greatest): the priorities this device allows; "
     "greatest is the lowest number."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef kpy_stream_members[] = {
    {"__weaklistoffset__", KPY_T_PYSSIZET, offsetof(kpy_stream, weakrefs), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyGetSetDef kpy_stream_getset[] = {
    {"handle", kpy_stream_get_handle, NULL, "The CUstream, as an int.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_stream_slots[] = {
    {Py_tp_new, kpy_stream_new},
    {Py_tp_dealloc, kpy_stream_dealloc},
    {Py_tp_traverse, kpy_stream_traverse},
    {Py_tp_clear, kpy_stream_clear},
    {Py_tp_repr, kpy_stream_repr},
    {Py_tp_methods, kpy_stream_methods},
    {Py_tp_getset, kpy_stream_getset},
    {Py_tp_members, kpy_stream_members},
    {Py_tp_doc, (void *)"Stream(flags=0, priority=0)\n--\n\nA CUDA stream of the current device. "
                        "flags=kiln.STREAM_NON_BLOCKING does not wait for the default stream."},
    {0, NULL},
};

static PyType_Spec kpy_stream_spec = {
    "kiln.Stream", sizeof(kpy_stream), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_IMMUTABLETYPE, kpy_stream_slots};

/* ---- Event -------------------------------------------------------------------------------- */

/* Event(timing=True, *, flags=None): flags are the driver's (kiln.driver.event_flags), which
 * PyCUDA's Event(flags) takes; they decide timing when given. */
/* The driver's event flags in flags_obj, checked. */
static int kpy_event_flags(PyObject *flags_obj, unsigned *flags) {
  unsigned long v = PyLong_Check(flags_obj) ? PyLong_AsUnsignedLong(flags_obj) : (unsigned long)-1;
  if (v == (unsigned long)-1 || v > 0xffff) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError,
                 "flags must be a sum of kiln.driver.event_flags (BLOCKING_SYNC 1, "
                 "DISABLE_TIMING 2, INTERPROCESS 4), not %R",
                 flags_obj);
    return -1;
  }
  *flags = (unsigned)v;
  return 0;
}

static PyObject *kpy_event_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp); /* kiln.driver.Event is a Python subclass */
  if (!st) return NULL;
  static char *kwlist[] = {(char *)"timing", (char *)"flags", NULL};
  int timing = 1;
  PyObject *flags_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|p$O:Event", kwlist, &timing, &flags_obj))
    return NULL;
  unsigned flags = timing ? 0 : KILN_EVENT_DISABLE_TIMING;
  if (flags_obj != Py_None && kpy_event_flags(flags_obj, &flags) < 0) return NULL;
  kiln_event handle = NULL;
  kiln_status s = kiln_event_create_with_flags(flags, &handle);
  if (s) return kpy_raise(st, s);
  kpy_event *self = (kpy_event *)tp->tp_alloc(tp, 0);
  if (!self) {
    kiln_event_destroy(handle);
    return NULL;
  }
  self->handle = handle;
  self->timing = !(flags & KILN_EVENT_DISABLE_TIMING);
  self->flags = flags;
  return (PyObject *)self;
}

/* _remake(flags): the event made again with these flags, for a subclass of PyCUDA's Event whose
 * __init__ gives them (its __new__ made the event before they were known). */
static PyObject *kpy_event_remake(PyObject *op, PyObject *flags_obj) {
  kpy_event *self = (kpy_event *)op;
  unsigned flags;
  if (kpy_event_flags(flags_obj, &flags) < 0) return NULL;
  kiln_event handle = NULL;
  kiln_status s = kiln_event_create_with_flags(flags, &handle);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  kiln_event_destroy(self->handle);
  self->handle = handle;
  self->timing = !(flags & KILN_EVENT_DISABLE_TIMING);
  self->flags = flags;
  Py_RETURN_NONE;
}

static void kpy_event_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  kiln_event_destroy(((kpy_event *)op)->handle);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_event_record(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"stream", NULL};
  PyObject *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:record", kwlist, &stream)) return NULL;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  kiln_stream handle = NULL;
  if (kpy_stream_parse(st, stream, &handle) < 0) return NULL;
  kiln_status s = kiln_event_record(((kpy_event *)op)->handle, handle);
  if (s) return kpy_raise(st, s);
  return Py_NewRef(op);
}

static PyObject *kpy_event_synchronize(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"timeout", NULL};
  PyObject *timeout_obj = Py_None;
  double timeout;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:synchronize", kwlist, &timeout_obj) ||
      kpy_wait_timeout(timeout_obj, &timeout) < 0)
    return NULL;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st || kpy_wait_event(st, ((kpy_event *)op)->handle, timeout) < 0) return NULL;
  return Py_NewRef(op);
}

static PyObject *kpy_event_query(PyObject *op, PyObject *unused) {
  (void)unused;
  int done = 0;
  kiln_status s = kiln_event_query(((kpy_event *)op)->handle, &done);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return PyBool_FromLong(done);
}

/* Milliseconds from start to end, one of which is self: the module's state is read from self's
 * type, as the other may be any object. */
static PyObject *kpy_event_between(PyObject *self, PyObject *start, PyObject *end) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(self));
  PyObject *other = self == start ? end : start;
  if (!PyObject_TypeCheck(other, st->ref.Event_type)) {
    PyErr_Format(PyExc_TypeError, "expected a kiln.Event, not %.100s", Py_TYPE(other)->tp_name);
    return NULL;
  }
  float ms = 0;
  kiln_status s =
      kiln_event_elapsed_ms(((kpy_event *)start)->handle, ((kpy_event *)end)->handle, &ms);
  if (s) return kpy_raise(st, s);
  return PyFloat_FromDouble(ms);
}

static PyObject *kpy_event_elapsed(PyObject *op, PyObject *end) {
  return kpy_event_between(op, op, end);
}
static PyObject *kpy_event_time_since(PyObject *op, PyObject *start) {
  return kpy_event_between(op, start, op);
}
static PyObject *kpy_event_time_till(PyObject *op, PyObject *end) {
  return kpy_event_between(op, op, end);
}

/* The flags an event needs for another process to see it. */
#define KPY_EVENT_IPC (KILN_EVENT_INTERPROCESS | KILN_EVENT_DISABLE_TIMING)

static PyObject *kpy_event_ipc_handle(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_event *self = (kpy_event *)op;
  if ((self->flags & KPY_EVENT_IPC) != KPY_EVENT_IPC) {
    PyErr_Format(PyExc_ValueError,
                 "ipc_handle() needs an event made with event_flags.INTERPROCESS | "
                 "event_flags.DISABLE_TIMING (Event(flags=6)); this one's flags are %u",
                 self->flags);
    return NULL;
  }
  kiln_ipc_event_handle h;
  kiln_status s = kiln_ipc_event_get_handle(self->handle, &h);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return PyBytes_FromStringAndSize((const char *)h.bytes, sizeof h.bytes);
}

/* Event.from_ipc_handle(handle): an event of the class it is called on (kiln.driver.Event's
 * gives a kiln.driver.Event), made by another process. */
static PyObject *kpy_event_from_ipc_handle(PyObject *cls, PyObject *handle) {
  PyTypeObject *tp = (PyTypeObject *)cls;
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  kiln_ipc_event_handle h;
  if (kpy_handle_bytes(handle, h.bytes, sizeof h.bytes, "an IPC event handle",
                       "Event.ipc_handle()") < 0)
    return NULL;
  kiln_event e = NULL;
  kiln_status s = kiln_ipc_event_open(&h, &e);
  if (s) return kpy_raise(st, s);
  kpy_event *self = (kpy_event *)tp->tp_alloc(tp, 0);
  if (!self) {
    kiln_event_destroy(e);
    return NULL;
  }
  self->handle = e;
  self->flags = KPY_EVENT_IPC;
  return (PyObject *)self;
}

static PyMethodDef kpy_event_methods[] = {
    {"_remake", kpy_event_remake, METH_O,
     "_remake($self, flags, /)\n--\n\nThe event made again with these flags (event_flags)."},
    {"ipc_handle", kpy_event_ipc_handle, METH_NOARGS,
     "ipc_handle($self, /)\n--\n\nThe 64-byte handle (bytes) another process opens with "
     "Event.from_ipc_handle; the event must be made with event_flags.INTERPROCESS | "
     "DISABLE_TIMING."},
    {"from_ipc_handle", kpy_event_from_ipc_handle, METH_O | METH_CLASS,
     "from_ipc_handle($type, handle, /)\n--\n\nThe event another process shared (its "
     "ipc_handle() bytes): record, wait for and query it as an event of this process."},
    {"record", (PyCFunction)(void (*)(void))kpy_event_record, METH_VARARGS | METH_KEYWORDS,
     "record($self, stream=None)\n--\n\nMarks this point of the stream; returns the event."},
    {"synchronize", (PyCFunction)(void (*)(void))kpy_event_synchronize,
     METH_VARARGS | METH_KEYWORDS,
     "synchronize($self, /, timeout=None)\n--\n\nWaits until the event has happened; Ctrl-C "
     "and the timeout end the wait as Stream.synchronize's do. Returns the event."},
    {"query", kpy_event_query, METH_NOARGS,
     "query($self, /)\n--\n\nTrue when the event has happened."},
    {"elapsed", kpy_event_elapsed, METH_O,
     "elapsed($self, end, /)\n--\n\nstart.elapsed(end): milliseconds from start to end."},
    {"time_since", kpy_event_time_since, METH_O,
     "time_since($self, start, /)\n--\n\nend.time_since(start): PyCUDA's spelling of "
     "start.elapsed(end)."},
    {"time_till", kpy_event_time_till, METH_O,
     "time_till($self, end, /)\n--\n\nstart.time_till(end): PyCUDA's other spelling of "
     "start.elapsed(end)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot kpy_event_slots[] = {
    {Py_tp_new, kpy_event_new},
    {Py_tp_dealloc, kpy_event_dealloc},
    {Py_tp_methods, kpy_event_methods},
    {Py_tp_doc, (void *)"Event(timing=True, *, flags=None)\n--\n\nA point in a stream's work, for "
                        "waiting and timing; flags are kiln.driver.event_flags."},
    {0, NULL},
};

/* A base type: kiln.driver.Event is PyCUDA's Event(flags=0) over it. */
static PyType_Spec kpy_event_spec = {
    "kiln.Event", sizeof(kpy_event), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE, kpy_event_slots};

int kpy_stream_init(PyObject *module, kpy_state *st) {
  if (!(st->ref.Stream_type = kpy_add_type(module, &kpy_stream_spec, NULL)) ||
      !(st->ref.Event_type = kpy_add_type(module, &kpy_event_spec, NULL)))
    return -1;
  return PyModule_AddIntConstant(module, "STREAM_NON_BLOCKING", KILN_STREAM_NON_BLOCKING);
}
