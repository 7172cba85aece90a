/* kiln.Context: a device's primary context in PyCUDA's terms (push, pop, detach, get_current,
 * limits and cache configuration). */
#ifndef KPY_CONTEXT_H
#define KPY_CONTEXT_H

#include "state.h"

int kpy_context_init(PyObject *module, kpy_state *st);

/* The device a context argument names: a kiln.Context or a kiln.Device, or with none_ok, None
 * for the current device. -1 with TypeError naming `what` otherwise. */
int kpy_context_device(kpy_state *st, PyObject *obj, int none_ok, const char *what, int *ordinal);

#endif
