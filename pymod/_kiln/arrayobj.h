/* The DeviceArray object's core: its struct, the constructors every maker and wrapper uses, and
 * its lifetime. The type's methods and attributes are assembled in array.c, above interop.c. */
#ifndef KPY_ARRAYOBJ_H
#define KPY_ARRAYOBJ_H

#include "dlpack.h"
#include "shape.h"
#include "state.h"

typedef struct kpy_array {
  PyObject_HEAD
  kiln_deviceptr ptr;   /* the first element; 0 for an empty array */
  PyArray_Descr *dtype; /* strong */
  int ndim;
  Py_ssize_t shape[KPY_MAX_DIMS];
  Py_ssize_t size, nbytes;
  int device;
  kiln_deviceptr alloc;    /* memory it owns and frees; 0 for a view or a foreign array */
  kiln_stream stream;      /* the stream its memory is ordered on (NULL: legacy default) */
  PyObject *stream_owner;  /* strong: what keeps that stream alive (a kiln.Stream or another
                              library's stream object), or NULL */
  PyObject *base;          /* what a view keeps alive: the array it views, or the owner */
  DLManagedTensor *dlpack; /* an imported DLPack tensor, released with the array */
} kpy_array;

/* A DeviceArray of dtype and shape on the current device, with no memory: the caller sets ptr
 * and what keeps it valid (alloc, base or dlpack). Checks the dtype and the shape. */
kpy_array *kpy_array_blank(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape);

/* A DeviceArray with memory of its own, allocated in stream order on stream, where it is also
 * freed; the array keeps owner (kpy_stream_owner of stream=, or NULL) so the stream outlives
 * the memory. */
kpy_array *kpy_array_new(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape,
                         kiln_stream stream, PyObject *owner);

static inline kiln_deviceptr kpy_array_ptr(PyObject *array) { return ((kpy_array *)array)->ptr; }
static inline int kpy_array_device(PyObject *array) { return ((kpy_array *)array)->device; }

/* The type's lifetime slots. */
int kpy_array_traverse(PyObject *op, visitproc visit, void *arg);
int kpy_array_clear(PyObject *op);
void kpy_array_dealloc(PyObject *op);

#endif
