/* The DeviceArray object's core: its struct, its layout (strides and contiguity flags), the
 * constructors every maker, view and wrapper uses, PyCUDA's constructor (tp_new), and its
 * lifetime. The type's methods and attributes are assembled in array.c. */
#ifndef KPY_ARRAYOBJ_H
#define KPY_ARRAYOBJ_H

#include "dlpack.h"
#include "mirror.h"
#include "shape.h"
#include "state.h"

/* The contiguity flags, NumPy's rules: axes of length 1 do not count, an empty array is both. */
enum { KPY_C_CONTIGUOUS = 1, KPY_F_CONTIGUOUS = 2 };

typedef struct kpy_array {
  PyObject_HEAD
  kiln_deviceptr ptr;   /* element [0, ..., 0]; 0 for an empty array with no memory */
  PyArray_Descr *dtype; /* strong */
  int ndim;
  int flags; /* KPY_C_CONTIGUOUS | KPY_F_CONTIGUOUS, as shape and strides say */
  Py_ssize_t itemsize, size, nbytes;
  Py_ssize_t shape[KPY_MAX_DIMS];
  Py_ssize_t strides[KPY_MAX_DIMS]; /* bytes, any value: 0 broadcasts, negative reverses */
  int device;
  kiln_stream stream; /* the stream its memory is ordered on (NULL: legacy default) */
  /* Strong, or NULL. gpudata owns the memory of an array that has it: a kiln.DeviceAllocation
   * (pool memory, freed in stream order when the last holder lets go), what allocator=
   * returned, or the gpudata= given. base is what a view or a wrapper keeps alive: the array
   * that owns the memory it views, or the foreign object it wraps. allocator is the one the
   * array was made with, handed on to its views. */
  PyObject *gpudata, *base, *allocator;
  DLManagedTensor *dlpack; /* an imported DLPack tensor, released with the array */
  kpy_mirror mirror;       /* a reduction result's host copy (mirror.h); slot 0 for none */
  /* Attributes a program sets on an array, as on PyCUDA's GPUArray (a plain Python object):
   * made at the first one, NULL until then. */
  PyObject *dict;
  PyObject *weakrefs; /* weak references to it, which a Python object takes */
  int awaiting_init;  /* a subclass's, made empty by tp_new, to be made by DeviceArray.__init__ */
} kpy_array;

/* Whether a is contiguous in Fortran order alone: the order kiln and PyCUDA give a copy of it
 * (to the host, or of its parts), C order otherwise. */
static inline int kpy_array_fortran_only(const kpy_array *a) {
  return a->flags == KPY_F_CONTIGUOUS;
}

static inline int kpy_array_check(kpy_state *st, PyObject *obj) {
  return PyObject_TypeCheck(obj, st->ref.DeviceArray_type);
}

/* For any file: a DeviceArray's address, device and layout without a call. */
static inline kiln_deviceptr kpy_array_ptr(PyObject *array) { return ((kpy_array *)array)->ptr; }
static inline int kpy_array_device(PyObject *array) { return ((kpy_array *)array)->device; }
static inline int kpy_array_is_c_contiguous(PyObject *array) {
  return ((kpy_array *)array)->flags & KPY_C_CONTIGUOUS;
}
static inline int kpy_array_is_contiguous(PyObject *array) { /* C or F */
  return ((kpy_array *)array)->flags != 0;
}

/* Notes that work just queued on stream uses a's memory, so that pool memory goes back to the
 * pool only once that work is over (kpy_allocation_used_on); nothing to do, and no call, when
 * stream is a's own. Every launch and copy on a stream calls it for each array it uses. -1
 * with the error raised. */
int kpy_array_used_on_other(kpy_state *st, kpy_array *a, kiln_stream stream);
static inline int kpy_array_used_on(kpy_state *st, PyObject *array, kiln_stream stream) {
  kpy_array *a = (kpy_array *)array;
  return a->stream == stream || !a->ptr ? 0 : kpy_array_used_on_other(st, a, stream);
}

/* The contiguous strides of shape in bytes, C order or Fortran order (fortran nonzero); an
 * axis of length 0 counts as 1, as in NumPy. */
void kpy_strides_contiguous(int ndim, const Py_ssize_t *shape, Py_ssize_t itemsize, int fortran,
                            Py_ssize_t *strides);

/* Sets a->flags from a->shape and a->strides; whoever changes those calls it. */
void kpy_array_update_flags(kpy_array *a);

/* For the setters of the layout attributes (shape, dtype, strides): -1 with AttributeError when
 * value is NULL (a deletion), which none of them allows; else 0. */
int kpy_array_refuse_deletion(PyObject *value, const char *attribute);

/* The lowest and highest byte offsets, from element [0, ..., 0], that a layout touches: *lo <= 0
 * and *hi >= itemsize (the end of the last byte), both 0 for an empty array. -1 with
 * ValueError when they do not fit a Py_ssize_t. */
int kpy_layout_extent(int ndim, const Py_ssize_t *shape, const Py_ssize_t *strides,
                      Py_ssize_t itemsize, Py_ssize_t *lo, Py_ssize_t *hi);

/* Whether the memory under a was freed: the kiln.DeviceAllocation it holds, or the array it
 * views holds, was given back by free(), and its address may be another allocation's now.
 * PyCUDA's GPUArray would launch on it; kiln refuses every launch and copy of such an array. */
int kpy_array_memory_freed(kpy_state *st, const kpy_array *a);
/* 0 while a's memory is there; -1 with ValueError once it was freed. */
int kpy_array_check_memory(kpy_state *st, const kpy_array *a);

/* 0 where a's layout, from address p, stays inside the address space; -1 with ValueError
 * (naming where p came from) where its strides reach past either end or its extent does not
 * fit a Py_ssize_t. */
int kpy_array_check_span(const kpy_array *a, kiln_deviceptr p, const char *from);

/* 0 for a dtype whose items can live in device memory; -1 with TypeError for one that holds
 * Python objects or has no size. */
int kpy_dtype_check(PyArray_Descr *dtype);

/* The bytes, from element [0, ..., 0], of the allocation a holds as its gpudata: *lo <= 0 where
 * the allocation begins and *hi where it ends. 1 where a holds a kiln.DeviceAllocation (the
 * one kind of memory whose size kiln knows) that contains its first element, else 0 and
 * nothing set. PyCUDA's layout attributes are plain, and programs relay an array out inside the
 * memory they gave it; these are the bounds a new layout is checked against. */
int kpy_array_room(kpy_state *st, const kpy_array *a, Py_ssize_t *lo, Py_ssize_t *hi);

/* A C-contiguous DeviceArray of dtype and shape on the current device, with no memory: the
 * caller sets ptr and what keeps it valid (gpudata, base or dlpack). Checks the dtype and the
 * shape. */
kpy_array *kpy_array_blank(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape);

/* A C-contiguous DeviceArray with memory of its own from the pool, allocated in stream order on
 * stream, where it is also freed; its allocation keeps owner (kpy_stream_owner of stream=, or
 * NULL) so the stream outlives the memory. */
kpy_array *kpy_array_new(kpy_state *st, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape,
                         kiln_stream stream, PyObject *owner);
/* The same in Fortran order when fortran is nonzero. */
kpy_array *kpy_array_new_order(kpy_state *st, PyArray_Descr *dtype, int ndim,
                               const Py_ssize_t *shape, int fortran, kiln_stream stream,
                               PyObject *owner);

/* The same from allocator's memory when allocator is not NULL (PyCUDA's allocator(nbytes), the
 * array keeping it as its allocator), as PyCUDA makes the results of an array with one. */
kpy_array *kpy_array_new_from(kpy_state *st, PyObject *allocator, PyArray_Descr *dtype, int ndim,
                              const Py_ssize_t *shape, int fortran, kiln_stream stream,
                              PyObject *owner);

/* A view of a's memory: dtype (NULL: a's), shape, strides (bytes) and the address of its
 * element [0, ..., 0]; on a's device and stream, keeping alive what owns the memory (a, or the
 * array a views: views of views lean on the owner, as in NumPy). The caller has checked that
 * the layout stays inside a's. Always a kiln.DeviceArray, whatever a's class. */
kpy_array *kpy_array_view(kpy_array *a, PyArray_Descr *dtype, int ndim, const Py_ssize_t *shape,
                          const Py_ssize_t *strides, kiln_deviceptr ptr);

/* Puts the memory gpudata under a, keeping its layout, as PyCUDA's gpudata= does and as a
 * program's `a.gpudata = memory` does: an address, an object int() turns into one, or None for
 * an empty array. The layout must stay inside the memory where its size is known (a
 * kiln.DeviceAllocation); pool memory brings its device and stream. -1 with ValueError or
 * TypeError, a unchanged. */
int kpy_array_put_memory(kpy_state *st, kpy_array *a, PyObject *gpudata);

/* a's address goes out (ptr, gpudata, __cuda_array_interface__, __dlpack__, a view): anything
 * may write its memory from now on, so a reduction result's host mirror (mirror.h) no longer
 * holds. */
void kpy_array_address_out(kpy_array *a);

/* 0 when a is on the current device, where its new arrays and kernels go; else -1 with a
 * ValueError saying how to make its device current. */
int kpy_array_check_device(kpy_array *a);

/* PyCUDA's constructor, DeviceArray(shape, dtype, allocator=None, base=None, gpudata=None,
 * strides=None, order="C"), and a no-op __init__ so that subclasses may call it. */
PyObject *kpy_array_tp_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs);
int kpy_array_tp_init(PyObject *op, PyObject *args, PyObject *kwargs);

/* The type's lifetime slots. */
int kpy_array_traverse(PyObject *op, visitproc visit, void *arg);
int kpy_array_clear(PyObject *op);
void kpy_array_dealloc(PyObject *op);

#endif
