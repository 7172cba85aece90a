/* kiln.Device, kiln.synchronize, and the driver-wide calls of PyCUDA's driver module (init,
 * get_version, get_driver_version). */
#ifndef KPY_DEVICE_H
#define KPY_DEVICE_H

#include "state.h"

typedef struct kpy_device {
  PyObject_HEAD
  int ordinal;
  int previous[8]; /* the devices current before each `with`, innermost last */
  int depth;
} kpy_device;

int kpy_device_init(PyObject *module, kpy_state *st);

/* A new kiln.Device for an ordinal the engine has checked. */
PyObject *kpy_device_of(kpy_state *st, int ordinal);

#endif
