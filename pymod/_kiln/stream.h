/* kiln.Stream and kiln.Event, and reading stream= wherever it is taken. */
#ifndef KPY_STREAM_H
#define KPY_STREAM_H

#include "state.h"

typedef struct kpy_stream {
  PyObject_HEAD
  kiln_stream handle; /* NULL is the legacy default stream */
  int owned;          /* made by kiln: destroyed with the object */
  PyObject *keep;     /* list: what queued copies read or write, released once it is done */
} kpy_stream;

typedef struct kpy_event {
  PyObject_HEAD
  kiln_event handle; /* owned */
  int timing;
} kpy_event;

int kpy_stream_init(PyObject *module, kpy_state *st);

/* stream= : None (the legacy default stream, NULL), an int CUstream handle, or an object that
 * names its stream (kiln, PyTorch, CuPy, cuda.core). */
int kpy_stream_parse(kpy_state *st, PyObject *obj, kiln_stream *out);

/* The handle of a kiln.Stream. */
static inline kiln_stream kpy_stream_handle(PyObject *stream) {
  return ((kpy_stream *)stream)->handle;
}

/* Keeps obj alive until the kiln.Stream is seen to be done (synchronize, query, dealloc):
 * what a queued copy reads or writes. */
int kpy_stream_keep(PyObject *stream, PyObject *obj);

#endif
