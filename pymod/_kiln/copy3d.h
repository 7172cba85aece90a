/* PyCUDA's Memcpy2D and Memcpy3D: _memcpy_3d, the copy their call makes (kiln/_memcpy.py). */
#ifndef KPY_COPY3D_H
#define KPY_COPY3D_H

#include "state.h"

int kpy_copy3d_init(PyObject *module, kpy_state *st);

#endif
