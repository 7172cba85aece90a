/* kiln.DeviceArray and its makers, asarray, page-locked host arrays. */
#ifndef KPY_ARRAY_H
#define KPY_ARRAY_H

#include "state.h"

int kpy_array_init(PyObject *module, kpy_state *st);
kiln_deviceptr kpy_array_ptr(PyObject *array);
int kpy_array_device(PyObject *array);

#endif
