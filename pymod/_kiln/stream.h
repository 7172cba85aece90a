/* kiln.Stream and kiln.Event; reading stream= wherever it is taken; ordering one stream after
 * another. */
#ifndef KPY_STREAM_H
#define KPY_STREAM_H

#include "state.h"

typedef struct kpy_stream {
  PyObject_HEAD
  PyObject *weakrefs; /* so arrays' owners can be watched (weakref.ref(stream)) */
  kiln_stream handle; /* NULL is the legacy default stream */
  int owned;          /* made by kiln: parked when the object goes (kpy_state's parked) */
  int device, priority;
  unsigned flags;
  PyObject *keep; /* list: what queued copies read or write, released once it is done */
} kpy_stream;

typedef struct kpy_event {
  PyObject_HEAD
  kiln_event handle; /* owned */
  int timing;
  unsigned flags; /* kiln.driver.event_flags it was made with */
} kpy_event;

int kpy_stream_init(PyObject *module, kpy_state *st);

/* Reads stream= wherever it is taken: None (the legacy default stream, NULL), a kiln.Stream, an
 * int CUstream handle (1 and 2 are the driver's legacy and per-thread default streams), or
 * another library's stream object that names its handle: cuda.core's __cuda_stream__ protocol,
 * .handle (PyCUDA), .cuda_stream (PyTorch) or .ptr (CuPy). None, a kiln.Stream and an int cost
 * no allocation and no attribute lookup. -1 with TypeError for anything else (OverflowError
 * for an int no handle can be). */
int kpy_stream_parse(kpy_state *st, PyObject *obj, kiln_stream *out);

/* Whether the driver may be given handle, an int CUstream from outside kiln (a stream=, an
 * interface's "stream"): 0, 1 and 2 (the default streams) and the handles of kiln.Streams
 * alive are; a kiln.Stream's that has been collected is refused; any other is another
 * library's, and must be a pointer to readable host memory, which is checked without reading
 * it through a pointer (a garbage handle is refused, never crashes the driver). A stream
 * another library destroyed, whose memory is still mapped, cannot be told from a live one.
 * what names the argument in the message. 0, or -1 with ValueError. */
int kpy_stream_check(kpy_state *st, kiln_stream handle, const char *what);

/* Whether handle names the same stream from any thread for as long as kiln is loaded: the
 * legacy default stream, and kiln.Streams' (alive, or parked once collected: never destroyed
 * before the module). Not the per-thread default stream (2), another stream on each thread, nor
 * another library's, which it may destroy at any time. */
int kpy_stream_lasts(kpy_state *st, kiln_stream handle);

/* Whether a parsed stream= is a kiln.Stream, which can keep host arrays alive for queued
 * copies (kpy_stream_keep). */
static inline int kpy_stream_is_kiln(kpy_state *st, PyObject *obj) {
  return Py_IS_TYPE(obj, st->ref.Stream_type);
}

/* What keeps the stream a parsed stream= (obj, whose handle is handle) names alive: a
 * kiln.Stream given, or the kiln.Stream whose handle an int or another library's object names
 * (so memory ordered on it never outlives it), else the stream object given; NULL for None or
 * the int handle of a stream kiln did not make, which the caller vouches for. Borrowed. */
PyObject *kpy_stream_owner(kpy_state *st, PyObject *obj, kiln_stream handle);

/* The handle of a kiln.Stream. */
static inline kiln_stream kpy_stream_handle(PyObject *stream) {
  return ((kpy_stream *)stream)->handle;
}

/* Makes the work queued later on waiter wait for the work queued so far on producer: an event
 * recorded on producer and waited for on waiter, queued without blocking. Nothing is done when
 * they are the same stream (1, the driver's name of the legacy default stream, is NULL). -1
 * with the error raised. */
int kpy_stream_order(kpy_state *st, kiln_stream waiter, kiln_stream producer);

/* Destroys the events kpy_stream_order kept; the module's m_free calls it. */
void kpy_stream_free(kpy_state *st);

/* Keeps obj alive until the kiln.Stream is seen to be done (synchronize, query, dealloc):
 * what a queued copy reads or writes. */
int kpy_stream_keep(PyObject *stream, PyObject *obj);

#endif
