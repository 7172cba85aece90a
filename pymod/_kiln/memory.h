/* Device memory: DeviceAllocation (kiln.mem_alloc), the blocking memcpy calls, and the pool's
 * figures and upkeep (mem_info, pool_stats, pool_trim). */
#ifndef KPY_MEMORY_H
#define KPY_MEMORY_H

#include "state.h"

typedef struct kpy_allocation {
  PyObject_HEAD
  kpy_state *st;      /* the module's, which outlives it */
  kiln_deviceptr ptr; /* 0 once freed */
  size_t size;
  /* Attributes a program sets, as on PyCUDA's Boost.Python allocation (quantumsim keeps its
   * own `size` there), or NULL. */
  PyObject *dict;
  /* Pool memory (kpy_allocation_pooled) is freed in stream order, on the device and stream it
   * was made on; pooled is 0 for kiln.mem_alloc's. */
  int pooled, device;
  kiln_stream stream;
  PyObject *stream_owner; /* strong: what keeps that stream alive, or NULL */
  /* Pool memory used on another stream than its own: an event recorded there after the use
   * (owned, or NULL), which the free waits for, so that the block goes back to the pool only
   * once that use is over. used_on is the stream it was last recorded on, only compared. */
  kiln_event used;
  kiln_stream used_on;
  /* The use on used_on is not in used yet: that stream lasts (kpy_stream_lasts), so the event
   * is recorded there only when it matters, when the memory is freed or used on a third
   * stream, rather than after every kernel call. */
  int used_later;
} kpy_allocation;

int kpy_memory_init(PyObject *module, kpy_state *st);

/* Whether obj is a DeviceAllocation of pool memory. */
int kpy_allocation_is_pooled(kpy_state *st, PyObject *obj);

/* Notes that work queued on stream (just now, after everything else queued there) uses the
 * pool memory of alloc: when stream is not the memory's own, an event is recorded on it, and
 * the free is ordered after that event. A use on a third stream first orders the memory's own
 * stream after the event so far, so no use is forgotten. -1 with the error raised. */
int kpy_allocation_used_on(kpy_state *st, PyObject *alloc, kiln_stream stream);

/* The host side of a copy: a contiguous numpy array (any dtype: the bytes are what move), or
 * any object with the buffer protocol (bytes, a memoryview, a NumPy scalar), writeable when it
 * is the destination; `what` names it in the errors. Release with PyBuffer_Release. */
int kpy_host_side(PyObject *obj, int writeable, const char *what, Py_buffer *view);

/* stream= of a copy: None, a kiln.Stream, an int handle or another library's stream. */
typedef struct kpy_copy_stream {
  PyObject *obj;
  kiln_stream handle;
  int given; /* stream= was given (even None): the call is PyCUDA's _async form */
} kpy_copy_stream;

/* After a copy was queued on stream: a kiln.Stream keeps keep (the host buffer, an array)
 * alive until it is seen to be done; any other stream has nothing that could, so the copy is
 * waited for there, as kiln's array copies are. -1 with the error raised. */
int kpy_copy_queued(kpy_state *st, const kpy_copy_stream *on, PyObject *keep);

/* The two sides of a device-to-device copy of nbytes, dest then src, read last of a call's
 * arguments: src's __index__ may run Python code that frees the allocation dest is, so an
 * allocation's address is read again after it. -1 with the error raised. */
int kpy_device_pointers(kpy_state *st, PyObject *dest, PyObject *src, size_t nbytes,
                        kiln_deviceptr *d, kiln_deviceptr *s);

/* A copy that reads a device address and then lets the GIL go (to copy, or to wait for the
 * stream's work first) is between these two: memory freed meanwhile (free(), or the last
 * reference to a DeviceAllocation let go by another thread) is freed when the last such copy
 * ends, never under it. Called with the GIL held; end runs what those frees run. */
void kpy_copies_begin(kpy_state *st);
void kpy_copies_end(kpy_state *st);

/* A device pointer from obj: a DeviceAllocation (whose size must hold nbytes), an int, or an
 * object with __index__ (a PointerHolderBase). -1 with TypeError or ValueError naming `what`. */
int kpy_device_pointer(kpy_state *st, PyObject *obj, size_t nbytes, const char *what,
                       kiln_deviceptr *out);
/* A DeviceAllocation of nbytes (> 0) from the current device's pool, in stream order on stream,
 * where it is also freed; it keeps stream_owner (kpy_stream_owner of a stream=, or NULL) so the
 * stream outlives the memory. A new reference, or NULL with the error raised. */
PyObject *kpy_allocation_pooled(kpy_state *st, size_t nbytes, kiln_stream stream,
                                PyObject *stream_owner);

/* pool_alloc(nbytes): kpy_allocation_pooled on the legacy default stream, as a module function,
 * which is the .allocator of an array made without one (PyCUDA's arrays always have one, which
 * programs call); kpy_is_pool_alloc tells it apart, an allocator that means none. */
PyObject *kpy_pool_alloc(PyObject *module, PyObject *arg);
int kpy_is_pool_alloc(PyObject *allocator);

#endif
