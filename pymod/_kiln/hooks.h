/* What the array object needs a kernel for, done by the Python module kiln._ops (generated
 * kernels): imported on first use and kept in the module state. And the one operation built on
 * it that several files use: a contiguous copy of an array. */
#ifndef KPY_HOOKS_H
#define KPY_HOOKS_H

#include "arrayobj.h"

/* kiln._ops, imported the first time and kept in st->ref.ops_module; borrowed. NULL with the
 * ImportError while it is not there. */
PyObject *kpy_ops_module(kpy_state *st);

/* kiln._ops.copy(dst, src, stream): src's elements into dst's, converted to dst's dtype; both
 * DeviceArrays of one shape, any strides. stream is what the caller's stream= was (None, a
 * kiln.Stream, an int handle, another library's stream). -1 with the error raised (an
 * ImportError while kiln._ops is not there). */
int kpy_ops_copy(kpy_state *st, PyObject *dst, PyObject *src, PyObject *stream);

/* kiln._ops.fill(dst, value, stream): every element of the DeviceArray dst set to the scalar
 * value. */
int kpy_ops_fill(kpy_state *st, PyObject *dst, PyObject *value, PyObject *stream);

/* A new array holding a's elements, contiguous in C or Fortran order, made on the current
 * device (which must be a's) in stream order on stream (what stream_obj, the caller's stream=,
 * names): one device-to-device copy when a is contiguous in that order, else kiln._ops.copy. */
kpy_array *kpy_array_copy_order(kpy_state *st, kpy_array *a, int fortran, PyObject *stream_obj,
                                kiln_stream stream);
/* The same in memory from allocator (NULL: the pool's), for the copies a program is given
 * (copy(), real, imag), which PyCUDA makes with the array's allocator. */
kpy_array *kpy_array_copy_alloc(kpy_state *st, kpy_array *a, PyObject *allocator, int fortran,
                                PyObject *stream_obj, kiln_stream stream);

#endif
