/* Exchange with other GPU libraries, both ways: the CUDA array interface and DLPack of a
 * DeviceArray, and kiln.asarray. */
#ifndef KPY_INTEROP_H
#define KPY_INTEROP_H

#include "state.h"

/* Adds kiln.asarray. */
int kpy_interop_init(PyObject *module, kpy_state *st);

/* A DeviceArray's __cuda_array_interface__ (a getter), __dlpack__ and __dlpack_device__. */
PyObject *kpy_array_cai(PyObject *op, void *closure);
PyObject *kpy_array_dlpack(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_dlpack_device(PyObject *op, PyObject *unused);

#endif
