/* Arithmetic and comparisons of DeviceArray: its number slots and rich comparison. */
#ifndef KPY_ARRAYOPS_H
#define KPY_ARRAYOPS_H

#include "state.h"

/* The slots the DeviceArray type takes from this file, the last one {0, NULL}. */
#define KPY_ARRAYOPS_SLOTS 30
extern PyType_Slot kpy_arrayops_slots[KPY_ARRAYOPS_SLOTS];

/* Its methods that run kernels (fill, astype, conj, sum, ...), the last one {NULL}. */
#define KPY_ARRAYOPS_METHODS 19
extern PyMethodDef kpy_arrayops_methods[KPY_ARRAYOPS_METHODS];

#endif
