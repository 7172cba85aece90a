/* Device memory: DeviceAllocation (kiln.mem_alloc), the blocking memcpy calls, and the pool's
 * figures and upkeep (mem_info, pool_stats, pool_trim). */
#ifndef KPY_MEMORY_H
#define KPY_MEMORY_H

#include "state.h"

typedef struct kpy_allocation {
  PyObject_HEAD
  kiln_deviceptr ptr; /* 0 once freed */
  size_t size;
  /* Pool memory (kpy_allocation_pooled) is freed in stream order, on the device and stream it
   * was made on; pooled is 0 for kiln.mem_alloc's. */
  int pooled, device;
  kiln_stream stream;
  PyObject *stream_owner; /* strong: what keeps that stream alive, or NULL */
} kpy_allocation;

int kpy_memory_init(PyObject *module, kpy_state *st);

/* A DeviceAllocation of nbytes (> 0) from the current device's pool, in stream order on stream,
 * where it is also freed; it keeps stream_owner (kpy_stream_owner of a stream=, or NULL) so the
 * stream outlives the memory. A new reference, or NULL with the error raised. */
PyObject *kpy_allocation_pooled(kpy_state *st, size_t nbytes, kiln_stream stream,
                                PyObject *stream_owner);

#endif
