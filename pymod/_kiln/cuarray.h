/* PyCUDA's CUDA arrays: the Array type (kiln.driver.Array's base) and the copies between an
 * array and host memory, device memory or another array (memcpy_htoa and kin). */
#ifndef KPY_CUARRAY_H
#define KPY_CUARRAY_H

#include "state.h"

int kpy_cuarray_init(PyObject *module, kpy_state *st);

/* The engine's array behind obj, an Array not freed, leased: until kpy_cuarray_put(obj) the
 * Array stays alive and its free() (from Python code the copy runs, or from another thread
 * while the GIL is released) puts off destroying the array until the last lease ends. -1 with
 * TypeError or ValueError naming `what` ("destination"), and no lease, otherwise. */
int kpy_cuarray_get(kpy_state *st, PyObject *obj, const char *what, kiln_array **out);
void kpy_cuarray_put(PyObject *obj);

#endif
