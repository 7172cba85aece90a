/* PyCUDA's CUDA arrays: the Array type (kiln.driver.Array's base) and the copies between an
 * array and host memory, device memory or another array (memcpy_htoa and kin). */
#ifndef KPY_CUARRAY_H
#define KPY_CUARRAY_H

#include "state.h"

int kpy_cuarray_init(PyObject *module, kpy_state *st);

/* The engine's array behind obj, an Array not freed; -1 with TypeError or ValueError naming
 * `what` ("destination") otherwise. Borrowed: valid while obj is alive and not freed. */
int kpy_cuarray_get(kpy_state *st, PyObject *obj, const char *what, kiln_array **out);

#endif
