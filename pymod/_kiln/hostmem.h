/* Host memory: page-locked numpy arrays (pagelocked_empty, pagelocked_zeros) and how pageable
 * copies are staged (staging_info). */
#ifndef KPY_HOSTMEM_H
#define KPY_HOSTMEM_H

#include "state.h"

int kpy_hostmem_init(PyObject *module, kpy_state *st);

#endif
