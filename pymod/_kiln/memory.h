/* Device memory: DeviceAllocation (kiln.mem_alloc), the blocking memcpy calls, and the pool's
 * figures and upkeep (mem_info, pool_stats, pool_trim). */
#ifndef KPY_MEMORY_H
#define KPY_MEMORY_H

#include "state.h"

typedef struct kpy_allocation {
  PyObject_HEAD
  kiln_deviceptr ptr; /* 0 once freed */
  size_t size;
} kpy_allocation;

int kpy_memory_init(PyObject *module, kpy_state *st);

#endif
