/* Views of a DeviceArray, made without copying and laid out as NumPy lays out the same view of
 * a host array: indexing, reshaping, transposing, reinterpreting, broadcasting. */
#ifndef KPY_VIEWS_H
#define KPY_VIEWS_H

#include "arrayobj.h"

/* a[key]: ints (negative too), slices with any step, None, Ellipsis, and tuples of these. */
PyObject *kpy_array_subscript(PyObject *op, PyObject *key);
Py_ssize_t kpy_array_length(PyObject *op);

/* The strides that broadcast a layout of n axes (strides NULL: only the shape is checked) to
 * shape[ndim], NumPy's rules: 0 on a new or a stretched axis. -1 with ValueError naming both
 * shapes when they do not broadcast. */
int kpy_broadcast_strides(int n, const Py_ssize_t *from, const Py_ssize_t *strides, int ndim,
                          const Py_ssize_t *shape, Py_ssize_t *out);

/* a seen with shape[ndim], by broadcasting; a itself (a new reference) when the shape is a's. */
kpy_array *kpy_array_broadcast(kpy_array *a, int ndim, const Py_ssize_t *shape);

/* a with another shape of the same size, in C or Fortran order: a view when the layout allows,
 * else a contiguous copy (kiln._ops.copy). */
PyObject *kpy_array_reshaped(kpy_array *a, int ndim, const Py_ssize_t *shape, int fortran);

/* The methods and attributes: reshape(*shape, order="C"), shape assigned, ravel(order="C"),
 * view(dtype=None), squeeze(axis=None), transpose(*axes), swapaxes(axis1, axis2), T, real and
 * imag (PyCUDA's copies of a complex array's parts, assignable as NumPy's), _parts() (the
 * parts as views). */
PyObject *kpy_array_reshape(PyObject *op, PyObject *args, PyObject *kwargs);
int kpy_array_set_shape(PyObject *op, PyObject *value, void *closure);
PyObject *kpy_array_ravel(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_view_as(PyObject *op, PyObject *args, PyObject *kwargs);
int kpy_array_set_dtype(PyObject *op, PyObject *value, void *closure);
PyObject *kpy_array_squeeze(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_transpose(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_swapaxes(PyObject *op, PyObject *args);
PyObject *kpy_array_get_T(PyObject *op, void *closure);
PyObject *kpy_array_get_real(PyObject *op, void *closure);
PyObject *kpy_array_get_imag(PyObject *op, void *closure);
int kpy_array_set_real(PyObject *op, PyObject *value, void *closure);
int kpy_array_set_imag(PyObject *op, PyObject *value, void *closure);
PyObject *kpy_array_parts(PyObject *op, PyObject *unused);

#endif
