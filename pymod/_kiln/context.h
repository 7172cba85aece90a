/* kiln.Context: a device's primary context in PyCUDA's terms (push, pop, detach, get_current,
 * limits and cache configuration). */
#ifndef KPY_CONTEXT_H
#define KPY_CONTEXT_H

#include "state.h"

int kpy_context_init(PyObject *module, kpy_state *st);

#endif
