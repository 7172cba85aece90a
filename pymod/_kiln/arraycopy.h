/* Copies of a DeviceArray's elements: between host and device (kiln.to_device, get, set and
 * their async forms, copy_to, copy_from), device to device (copy), and assignment a[key] =
 * value. Non-contiguous arrays go through a contiguous temporary and kiln._ops.copy. */
#ifndef KPY_ARRAYCOPY_H
#define KPY_ARRAYCOPY_H

#include "arrayobj.h"

/* stream= of an array call, read once. */
typedef struct kpy_on {
  PyObject *arg;      /* borrowed: None, a kiln.Stream, an int handle or another library's */
  kiln_stream handle; /* what kpy_stream_parse read from it */
  int wait;           /* a copy between host and device returns done even on a kiln.Stream:
                       * PyCUDA's get and set with async_=False, whose stream counts only with
                       * async_=True (0 from kpy_on_parse) */
} kpy_on;

int kpy_on_parse(kpy_state *st, PyObject *arg, kpy_on *on);

/* The methods: get(ary=None, pagelocked=False, async_=False, stream=None, *, out=None),
 * get_async(stream=None, ary=None), set(ary, async_=False, stream=None), set_async(ary,
 * stream=None), copy(stream=None), copy_to(host, stream=None), copy_from(source, stream=None). */
PyObject *kpy_array_get(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_get_async(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_set(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_set_async(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_copy(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_copy_to(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_copy_from(PyObject *op, PyObject *args, PyObject *kwargs);

/* a[key] = value: a scalar (kiln._ops.fill), a DeviceArray (broadcast, then a device copy or
 * kiln._ops.copy), or anything numpy makes an array of (copied to the device first). */
int kpy_array_ass_subscript(PyObject *op, PyObject *key, PyObject *value);

/* A new NumPy array holding a's elements, on the legacy default stream: what repr, str and the
 * conversions to Python numbers read. */
PyObject *kpy_array_to_host(kpy_state *st, kpy_array *a);

/* Adds kiln.to_device. */
int kpy_arraycopy_init(PyObject *module, kpy_state *st);

#endif
