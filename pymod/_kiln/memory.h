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

/* A device pointer from obj: a DeviceAllocation (whose size must hold nbytes), an int, or an
 * object with __index__ (a PointerHolderBase). -1 with TypeError or ValueError naming `what`. */
int kpy_device_pointer(kpy_state *st, PyObject *obj, size_t nbytes, const char *what,
                       kiln_deviceptr *out);

#endif
