/* PyCUDA's managed memory: ManagedAllocation and managed_empty / managed_zeros, NumPy arrays
 * over memory the host and the GPU both reach. */
#ifndef KPY_MANAGED_H
#define KPY_MANAGED_H

#include "state.h"

int kpy_managed_init(PyObject *module, kpy_state *st);

/* Whether the NumPy array arr stands on a ManagedAllocation (its base, or its base's base, ...):
 * its data pointer is then an address kernels can use. */
int kpy_managed_array(kpy_state *st, PyObject *arr);

#endif
