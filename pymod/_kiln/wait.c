/* Waits for the GPU that Ctrl-C and a timeout can end. The driver's synchronize calls block
 * in the driver until the work is done, where no signal handler can run: a kernel that never
 * ends would hold the interpreter for ever. Here the work is polled instead, and the GIL taken
 * back often enough to run Python's signal handlers. */
#include "wait.h"

#include "errors.h"

#include <math.h>
#include <time.h>

/* Spinning at first keeps a short wait as quick as the driver's spinning synchronize; after
 * that a nap between queries costs at most its length in latency and almost no CPU. */
#define KPY_WAIT_SPIN_S 2e-3
#define KPY_WAIT_NAP_NS 100000L
/* How long a stretch without the GIL lasts: Ctrl-C is seen within about this. */
#define KPY_WAIT_SLICE_S 10e-3

static double kpy_wait_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static kiln_status kpy_poll_stream(void *what, int *done) {
  return kiln_stream_query((kiln_stream)what, done);
}

/* Polls without the GIL until done, a failure, or slice_end; *now is kept current. */
static kiln_status kpy_wait_slice(kpy_poll poll, void *what, double start, double *now,
                                  double slice_end, int *done) {
  kiln_status s;
  do {
    if (*now - start >= KPY_WAIT_SPIN_S) {
      struct timespec nap = {0, KPY_WAIT_NAP_NS};
      nanosleep(&nap, NULL); /* a signal cuts it short, which is what is wanted */
    }
    s = poll(what, done);
    *now = kpy_wait_now();
  } while (!s && !*done && *now < slice_end);
  return s;
}

/* After a signal handler raised: a KeyboardInterrupt says what was left running. */
static void kpy_wait_interrupted(const char *what_name) {
  if (!PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)) return;
  PyErr_Clear();
  PyErr_Format(PyExc_KeyboardInterrupt,
               "interrupted while waiting for %s; the work queued on the GPU goes on running (a "
               "kernel that never ends holds the GPU until the process exits)",
               what_name);
}

int kpy_wait(kpy_state *st, kpy_poll poll, void *what, double timeout, const char *what_name) {
  int done = 0;
  kiln_status s = poll(what, &done);
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  double start = kpy_wait_now(), now = start;
  double deadline = timeout < 0 ? INFINITY : start + timeout;
  while (!done) {
    if (now >= deadline) {
      char seconds[32];
      PyOS_snprintf(seconds, sizeof seconds, "%g", timeout);
      PyErr_Format(PyExc_TimeoutError,
                   "%s did not finish within %s s; the work queued on the GPU goes on running",
                   what_name, seconds);
      return -1;
    }
    Py_BEGIN_ALLOW_THREADS
      s = kpy_wait_slice(poll, what, start, &now, fmin(now + KPY_WAIT_SLICE_S, deadline), &done);
    Py_END_ALLOW_THREADS
    if (s) {
      kpy_raise(st, s);
      return -1;
    }
    if (!done && PyErr_CheckSignals() < 0) {
      kpy_wait_interrupted(what_name);
      return -1;
    }
  }
  return 0;
}

/* What a call with In/Out was waiting for, in the KeyboardInterrupt that ends it. */
#define KPY_WAIT_CALL_NAME "the kernel (nothing is copied back into its Out and InOut arrays)"

/* kpy_wait's loop for a caller that has released the GIL (r->ts): it is taken back only to run
 * the signal handlers, every slice. KILN_ERROR_INTERRUPTED with the handler's exception set
 * when one raised. */
static kiln_status kpy_wait_released(kpy_released *r, kpy_poll poll, void *what,
                                     const char *what_name) {
  int done = 0;
  double start = kpy_wait_now(), now = start;
  for (;;) {
    kiln_status s = kpy_wait_slice(poll, what, start, &now, now + KPY_WAIT_SLICE_S, &done);
    if (s || done) return s;
    PyEval_RestoreThread(r->ts);
    int failed = PyErr_CheckSignals() < 0;
    if (failed) kpy_wait_interrupted(what_name);
    r->ts = PyEval_SaveThread();
    if (failed) return KILN_ERROR_INTERRUPTED;
  }
}

kiln_status kpy_wait_hook(void *arg, kiln_stream stream) {
  return kpy_wait_released(arg, kpy_poll_stream, stream, KPY_WAIT_CALL_NAME);
}

static kiln_status kpy_poll_event(void *what, int *done) {
  return kiln_event_query((kiln_event)what, done);
}

/* The event that waits for the legacy default stream on the current device (made on first use,
 * one per device), or a new one in *own past the devices the state keeps; recorded there. -1
 * with an exception. */
static int kpy_wait_legacy_event(kpy_state *st, kiln_event *own, kiln_event **event) {
  int device = kiln_device_current();
  *own = NULL;
  *event = device >= 0 && device < KPY_ORDER_DEVICES ? &st->device_wait_event[device] : own;
  kiln_status s = **event ? KILN_OK : kiln_event_create(0, *event);
  if (!s) s = kiln_event_record(**event, NULL);
  if (s) {
    kpy_raise(st, s);
    kiln_event_destroy(*own);
    return -1;
  }
  return 0;
}

int kpy_wait_stream(kpy_state *st, kiln_stream stream, double timeout) {
  if (stream) return kpy_wait(st, kpy_poll_stream, stream, timeout, "the stream");
  /* A copy or synchronize on the legacy default stream also waits for the work of every
   * blocking stream, which the stream's own query does not see; an event recorded there does. */
  kiln_event own, *event;
  if (kpy_wait_legacy_event(st, &own, &event) < 0) return -1;
  int r = kpy_wait(st, kpy_poll_event, *event, timeout, "the default stream");
  kiln_event_destroy(own);
  return r;
}

int kpy_wait_before_copy(kpy_state *st, kiln_stream stream) {
  if (stream) return kpy_wait_stream(st, stream, -1);
  int device = kiln_device_current();
  /* Read with the GIL held, as the event is recorded: with no call queuing without the GIL,
   * the work counted by then was queued before the event (work is counted, then queued). */
  int kept = device >= 0 && device < KPY_ORDER_DEVICES && !st->queuing;
  unsigned long long work = kiln_work_count();
  if (kept && st->device_done_work[device] == work + 1) return 0;
  if (kpy_wait_stream(st, NULL, -1) < 0) return -1;
  if (kept) st->device_done_work[device] = work + 1;
  return 0;
}

void kpy_wait_copied(kpy_state *st, int device, unsigned long long work_before) {
  if (device >= 0 && device < KPY_ORDER_DEVICES && !st->queuing &&
      kiln_work_count() == work_before + 1)
    st->device_done_work[device] = work_before + 2;
}

int kpy_wait_event(kpy_state *st, kiln_event event, double timeout) {
  return kpy_wait(st, kpy_poll_event, event, timeout, "the event");
}

/* ---- All the work of a device ------------------------------------------------------------- */

/* The driver cannot be asked whether a whole context is idle, and its synchronize blocks where
 * no signal handler runs. So the wait polls what it can see: an event recorded on the legacy
 * default stream, which completes after all the work queued before it on every blocking stream
 * (the legacy stream waits for them: the default stream, the per-thread one, kiln.Streams made
 * without STREAM_NON_BLOCKING), and each live kiln.Stream itself (non-blocking ones included);
 * Ctrl-C and the timeout end that part. Then cuCtxSynchronize waits for what other libraries'
 * non-blocking streams still hold, which is quick unless their work never ends. One event per
 * device, made on first use: no thread per call, so a short wait costs about what the driver's
 * own synchronize does. Recorded again by another thread while this one polls, it only ends
 * the wait later than needed. */
typedef struct kpy_device_poll {
  kiln_event event;
  kiln_stream *streams; /* the kiln.Streams when the wait began, those not yet seen idle */
  int n;
} kpy_device_poll;

static kiln_status kpy_poll_device(void *what, int *done) {
  kpy_device_poll *p = what;
  kiln_status s = kiln_event_query(p->event, done);
  while (!s && *done && p->n) {
    int idle = 0;
    s = kiln_stream_query(p->streams[p->n - 1], &idle);
    if (!s && !idle) *done = 0;
    else p->n--;
  }
  return s;
}

int kpy_wait_device(kpy_state *st, double timeout) {
  kiln_event own, *event;
  if (kpy_wait_legacy_event(st, &own, &event) < 0) return -1;
  kiln_status s;
  /* A copy of the handles: the list may change while the GIL is released. A collected
   * kiln.Stream's handle is parked, never destroyed, so a copied one stays valid. */
  kpy_device_poll poll = {*event, NULL, 0};
  if (st->n_streams && !(poll.streams = PyMem_Malloc(sizeof *poll.streams * st->n_streams))) {
    kiln_event_destroy(own);
    PyErr_NoMemory();
    return -1;
  }
  for (int i = 0; i < st->n_streams; i++) poll.streams[poll.n++] = st->streams[i].handle;
  int r = kpy_wait(st, kpy_poll_device, &poll, timeout, "the device");
  PyMem_Free(poll.streams);
  kiln_event_destroy(own);
  if (r < 0) return -1;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_synchronize();
  Py_END_ALLOW_THREADS
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  return 0;
}

int kpy_wait_timeout(PyObject *obj, double *out) {
  *out = -1;
  if (obj == Py_None) return 0;
  if (!PyLong_Check(obj) && !PyFloat_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "timeout must be None or a number of seconds, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return -1;
  }
  double t = PyFloat_AsDouble(obj);
  if (t == -1 && PyErr_Occurred()) return -1;
  if (!(t >= 0)) { /* NaN too */
    PyErr_Format(PyExc_ValueError, "timeout must be None or 0 seconds or more, not %R", obj);
    return -1;
  }
  *out = t;
  return 0;
}

/* ---- What tests the loop without a GPU ---------------------------------------------------- */

static kiln_status kpy_poll_clock(void *what, int *done) {
  *done = kpy_wait_now() >= *(double *)what;
  return KILN_OK;
}

/* _wait_until(seconds, timeout=None): waits as a synchronize does for work that ends after
 * seconds; the loop's timing, signals and timeout, testable anywhere. */
static PyObject *kpy_wait_until(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"seconds", (char *)"timeout", NULL};
  double seconds = 0;
  PyObject *timeout_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "d|O:_wait_until", kwlist, &seconds, &timeout_obj))
    return NULL;
  double timeout;
  if (kpy_wait_timeout(timeout_obj, &timeout) < 0) return NULL;
  double until = kpy_wait_now() + seconds;
  if (kpy_wait(kpy_state_of_module(module), kpy_poll_clock, &until, timeout, "the clock") < 0)
    return NULL;
  Py_RETURN_NONE;
}

/* _wait_released_until(seconds): the wait of a call with In/Out inside the engine (the GIL
 * released around it), for work that ends after seconds. */
static PyObject *kpy_wait_released_until(PyObject *module, PyObject *arg) {
  double seconds = PyFloat_AsDouble(arg);
  if (seconds == -1 && PyErr_Occurred()) return NULL;
  double until = kpy_wait_now() + seconds;
  kpy_released r = {PyEval_SaveThread()};
  kiln_status s = kpy_wait_released(&r, kpy_poll_clock, &until, KPY_WAIT_CALL_NAME);
  PyEval_RestoreThread(r.ts);
  if (s) {
    if (!PyErr_Occurred()) kpy_raise(kpy_state_of_module(module), s);
    return NULL;
  }
  Py_RETURN_NONE;
}

static PyMethodDef kpy_wait_functions[] = {
    {"_wait_until", (PyCFunction)(void (*)(void))kpy_wait_until, METH_VARARGS | METH_KEYWORDS,
     "_wait_until(seconds, timeout=None): the wait of a synchronize, for work that ends after "
     "seconds (for tests)."},
    {"_wait_released_until", kpy_wait_released_until, METH_O,
     "_wait_released_until(seconds): the wait of a call with In/Out, for work that ends after "
     "seconds (for tests)."},
    {NULL, NULL, 0, NULL},
};

int kpy_wait_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_wait_functions);
}
