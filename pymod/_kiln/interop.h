/* Exchange with other GPU libraries, both ways: the CUDA array interface and DLPack of a
 * DeviceArray, and kiln.asarray. */
#ifndef KPY_INTEROP_H
#define KPY_INTEROP_H

#include "shape.h"
#include "state.h"

/* What kpy_cai_read took from an object's __cuda_array_interface__. All of it is owned: nothing
 * points into the interface, which a producer may build afresh at every access (PyTorch does),
 * so it is gone once read. */
typedef struct kpy_cai {
  kiln_deviceptr ptr; /* "data"[0] */
  int readonly;       /* "data"[1] */
  int has_stream;     /* "stream" named the stream the producer last used: order after it */
  kiln_stream stream; /* that stream: 1 the legacy default stream, 2 the per-thread one */
  /* With KPY_CAI_LAYOUT, or KPY_CAI_POINTER where "strides" is given; zero otherwise. */
  PyArray_Descr *dtype; /* strong, from "typestr": kpy_cai_release drops it */
  int ndim;
  Py_ssize_t shape[KPY_MAX_DIMS];
  int has_strides;                  /* 0: C-contiguous ("strides" absent or None) */
  Py_ssize_t strides[KPY_MAX_DIMS]; /* bytes */
} kpy_cai;

enum {
  KPY_CAI_POINTER, /* "data" and "stream": what a kernel argument needs; the layout too when
                      "strides" is given, to tell whether it is C-contiguous */
  KPY_CAI_LAYOUT   /* also "typestr", "shape" and "strides": what a DeviceArray over it needs */
};

/* The one reader of the CUDA array interface (v0 to v3): 1 with *out filled when obj offers
 * one, 0 when it does not, -1 on failure: a TypeError or ValueError that names the entry that
 * is wrong, raised before any GPU work. */
int kpy_cai_read(kpy_state *st, PyObject *obj, int what, kpy_cai *out);
void kpy_cai_release(kpy_cai *cai);

/* 1 when the elements lie in C order from the pointer, as a kernel indexes them ("strides"
 * absent or None, or strides that say the same); 0 for a strided view. */
int kpy_cai_is_c_contiguous(const kpy_cai *cai);

/* Adds kiln.asarray. */
int kpy_interop_init(PyObject *module, kpy_state *st);

/* A DeviceArray's __cuda_array_interface__ (a getter), __dlpack__ and __dlpack_device__. */
PyObject *kpy_array_cai(PyObject *op, void *closure);
PyObject *kpy_array_dlpack(PyObject *op, PyObject *args, PyObject *kwargs);
PyObject *kpy_array_dlpack_device(PyObject *op, PyObject *unused);

#endif
