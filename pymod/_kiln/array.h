/* kiln.DeviceArray, the type, and its makers kiln.to_device, empty and zeros. */
#ifndef KPY_ARRAY_H
#define KPY_ARRAY_H

#include "state.h"

int kpy_array_init(PyObject *module, kpy_state *st);

#endif
