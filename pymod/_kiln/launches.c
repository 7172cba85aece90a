/* The recent launches per stream. A fault inside a kernel (an illegal address, a trap, a
 * device-side assert) is not reported by its launch, which returned long before, but by the
 * next call that waits for the GPU; by then the Python line that launched it is gone. So each
 * launch leaves a note here: the Function, the code object of the frame that launched it and
 * that frame's last instruction. Turning those into a file and line costs a walk of the line
 * table, so that waits for a fault.
 *
 * The table is small and fixed: KPY_LAUNCH_STREAMS slots chosen by the stream's handle, each a
 * ring of the last KPY_LAUNCH_DEPTH launches. A stream that lands on a slot another stream
 * holds takes it over (its notes are dropped, which only makes a later message vaguer). Every
 * note carries a sequence number; a synchronizing call that succeeded on a stream moves that
 * slot's `settled` mark up to the newest, since those launches are then known to have run
 * cleanly. What a fault names is what lies above the marks: when that is one launch, it is the
 * kernel that faulted.
 *
 * The GIL guards the table, as every launch and every raise holds it. */
#include "launches.h"

#define KPY_LAUNCH_STREAMS 8
#define KPY_LAUNCH_DEPTH 8

typedef struct kpy_launch {
  PyObject *function; /* strong: the kiln.Function launched, or NULL for an empty note */
  PyObject *code;     /* strong: the code object of the frame that launched it, or NULL */
  int where;          /* that frame's last instruction (3.11+), else its line */
  unsigned long long seq;
} kpy_launch;

typedef struct kpy_launch_stream {
  kiln_stream stream;
  int used;
  unsigned next;              /* the ring's next note */
  unsigned long long settled; /* launches up to this number have finished cleanly */
  kpy_launch ring[KPY_LAUNCH_DEPTH];
} kpy_launch_stream;

static kpy_launch_stream kpy_launch_table[KPY_LAUNCH_STREAMS];
static unsigned long long kpy_launch_seq;
/* A note not known to have finished was overwritten since the device last settled: the list of
 * what may have faulted is then not whole. */
static int kpy_launch_dropped;

void kpy_launches_record(PyObject *function, kiln_stream stream) {
  /* Handles are pointers to aligned driver objects: the low bits carry nothing. */
  kpy_launch_stream *s = &kpy_launch_table[((uintptr_t)stream >> 6) % KPY_LAUNCH_STREAMS];
  if (!s->used || s->stream != stream) {
    for (int i = 0; s->used && i < KPY_LAUNCH_DEPTH; i++)
      if (s->ring[i].function && s->ring[i].seq > s->settled) kpy_launch_dropped = 1;
    s->stream = stream;
    s->used = 1;
    s->settled = kpy_launch_seq; /* the other stream's notes no longer count */
  }
  kpy_launch *l = &s->ring[s->next++ % KPY_LAUNCH_DEPTH];
  if (l->function && l->seq > s->settled) kpy_launch_dropped = 1;
  PyFrameObject *frame = PyEval_GetFrame();
  PyObject *code = frame ? (PyObject *)PyFrame_GetCode(frame) : NULL;
#if PY_VERSION_HEX >= 0x030B0000
  l->where = frame ? PyFrame_GetLasti(frame) : -1;
#else
  l->where = frame ? PyFrame_GetLineNumber(frame) : -1;
#endif
  l->seq = ++kpy_launch_seq;
  /* The old references go last: their deallocation may run a finalizer, which may launch. */
  PyObject *old_function = l->function, *old_code = l->code;
  l->function = Py_NewRef(function);
  l->code = code;
  Py_XDECREF(old_function);
  Py_XDECREF(old_code);
}

void kpy_launches_settle(kiln_stream stream) {
  kpy_launch_stream *s = &kpy_launch_table[((uintptr_t)stream >> 6) % KPY_LAUNCH_STREAMS];
  if (s->used && s->stream == stream) s->settled = kpy_launch_seq;
}

void kpy_launches_settle_all(void) {
  for (int i = 0; i < KPY_LAUNCH_STREAMS; i++) kpy_launch_table[i].settled = kpy_launch_seq;
  kpy_launch_dropped = 0;
}

int kpy_launches_complete(void) { return !kpy_launch_dropped; }

unsigned long long kpy_launches_count(void) { return kpy_launch_seq; }

void kpy_launches_clear(void) {
  for (int i = 0; i < KPY_LAUNCH_STREAMS; i++) {
    kpy_launch_stream *s = &kpy_launch_table[i];
    s->used = 0;
    for (int j = 0; j < KPY_LAUNCH_DEPTH; j++) {
      /* Emptied before the references go: a deallocation may launch, and so record. */
      PyObject *function = s->ring[j].function, *code = s->ring[j].code;
      s->ring[j].function = s->ring[j].code = NULL;
      Py_XDECREF(function);
      Py_XDECREF(code);
    }
  }
}

/* The kernel's name as its source has it: its declaration ("far_sum(float *, ...)" for a C++
 * kernel, whose entry is mangled; the name alone for an extern "C" one) up to the parenthesis. */
static PyObject *kpy_launch_name(PyObject *function) {
  PyObject *declaration = PyObject_GetAttrString(function, "declaration");
  if (!declaration) return NULL;
  Py_ssize_t paren = PyUnicode_FindChar(declaration, '(', 0, PyUnicode_GET_LENGTH(declaration), 1);
  if (paren < 0) {
    if (PyErr_Occurred()) Py_CLEAR(declaration);
    return declaration;
  }
  PyObject *name = PyUnicode_Substring(declaration, 0, paren);
  Py_DECREF(declaration);
  return name;
}

/* (name, file, line) of one note. */
static PyObject *kpy_launch_describe(const kpy_launch *l) {
  PyObject *name = kpy_launch_name(l->function);
  if (!name) return NULL;
  PyObject *file = NULL, *line = NULL;
  if (l->code) {
    file = PyObject_GetAttrString(l->code, "co_filename");
#if PY_VERSION_HEX >= 0x030B0000
    int n = l->where >= 0 ? PyCode_Addr2Line((PyCodeObject *)l->code, l->where) : -1;
#else
    int n = l->where;
#endif
    line = n >= 0 ? PyLong_FromLong(n) : Py_NewRef(Py_None);
  } else {
    file = Py_NewRef(Py_None);
    line = Py_NewRef(Py_None);
  }
  PyObject *t = file && line ? PyTuple_Pack(3, name, file, line) : NULL;
  Py_DECREF(name);
  Py_XDECREF(file);
  Py_XDECREF(line);
  return t;
}

PyObject *kpy_launches_unsettled(void) {
  /* Every note above its slot's mark, newest first: a merge by sequence number, small enough
   * to pick the largest each time. */
  const kpy_launch *picked[KPY_LAUNCH_STREAMS * KPY_LAUNCH_DEPTH];
  int n = 0;
  for (int i = 0; i < KPY_LAUNCH_STREAMS; i++) {
    const kpy_launch_stream *s = &kpy_launch_table[i];
    for (int j = 0; s->used && j < KPY_LAUNCH_DEPTH; j++)
      if (s->ring[j].function && s->ring[j].seq > s->settled) picked[n++] = &s->ring[j];
  }
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++)
      if (picked[j]->seq > picked[i]->seq) {
        const kpy_launch *t = picked[i];
        picked[i] = picked[j];
        picked[j] = t;
      }
  PyObject *list = PyList_New(n);
  for (int i = 0; list && i < n; i++) {
    PyObject *item = kpy_launch_describe(picked[i]);
    if (!item) Py_CLEAR(list);
    else PyList_SET_ITEM(list, i, item);
  }
  return list;
}

static PyObject *kpy_launches_list(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return kpy_launches_unsettled();
}

static PyObject *kpy_launches_counter(PyObject *module, PyObject *unused) {
  (void)module;
  (void)unused;
  return PyLong_FromUnsignedLongLong(kpy_launch_seq);
}

static PyMethodDef kpy_launches_functions[] = {
    {"_launches", kpy_launches_list, METH_NOARGS,
     "The kernel launches not yet known to have finished, newest first: (name, file, line)."},
    {"_launch_count", kpy_launches_counter, METH_NOARGS,
     "How many kernels kiln.Function calls have launched in this process."},
    {NULL, NULL, 0, NULL},
};

int kpy_launches_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_launches_functions);
}
