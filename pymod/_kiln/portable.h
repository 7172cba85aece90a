/* Pickling's C half (a Module as bytes and back, a Function's module) and where NVRTC was
 * found; kiln/_pickle.py registers the reducers. */
#ifndef KPY_PORTABLE_H
#define KPY_PORTABLE_H

#include "state.h"

int kpy_portable_init(PyObject *module, kpy_state *st);

#endif
