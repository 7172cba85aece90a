/* The call path of generated reductions: kiln.reduction.ReductionKernel (a Python subclass of
 * ReductionBase) and the sums, maxima and dot products of kiln.gpuarray. */
#ifndef KPY_REDUCE_H
#define KPY_REDUCE_H

#include "function.h"
#include "state.h"

#define KPY_REDUCE_MAX_ARGS 48

typedef struct kpy_reduce {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  kpy_state *st;        /* the module state, alive while this type is */
  kpy_function *fn;     /* the one-launch kernel: (out, scratch, mirror, arguments..., n); strong */
  PyArray_Descr *dtype; /* of the result; strong */
  int nargs, first_vector; /* the declared arguments; the array whose size is n */
  unsigned block, per_thread, blocks_per_sm;
  unsigned char vector[KPY_REDUCE_MAX_ARGS]; /* 1 where the argument is an array */
} kpy_reduce;

int kpy_reduce_init(PyObject *module, kpy_state *st);

/* Frees the scratch memory the reductions keep per device and stream (the module's m_free). */
void kpy_reduce_free(kpy_state *st);

#endif
