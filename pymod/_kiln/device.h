/* kiln.Device and kiln.synchronize. */
#ifndef KPY_DEVICE_H
#define KPY_DEVICE_H

#include "state.h"

int kpy_device_init(PyObject *module, kpy_state *st);

#endif
