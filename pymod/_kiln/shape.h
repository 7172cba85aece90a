/* Shapes of device and host arrays: the most dimensions kiln takes, reading a shape from
 * Python, and giving one back as a tuple. */
#ifndef KPY_SHAPE_H
#define KPY_SHAPE_H

#include "state.h"

#define KPY_MAX_DIMS 32

/* An int or a sequence of ints (numpy's rules) into *ndim and shape[KPY_MAX_DIMS]. Negative
 * entries are left for the caller to refuse. */
int kpy_shape_parse(PyObject *obj, int *ndim, Py_ssize_t *shape);

/* (v[0], ..., v[n-1]) as a tuple of ints. */
PyObject *kpy_shape_tuple(const Py_ssize_t *v, int n);

#endif
