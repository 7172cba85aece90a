/* The call path of generated elementwise kernels: kiln.elementwise.ElementwiseKernel (a Python
 * subclass of ElementwiseBase) and the kernels behind array arithmetic. */
#ifndef KPY_EWISE_H
#define KPY_EWISE_H

#include "function.h"
#include "state.h"

/* Arguments an elementwise kernel may declare and still take the C path. */
#define KPY_EWISE_MAX_ARGS 48

typedef struct kpy_ewise {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  kpy_state *st;          /* the module state, alive while this type is */
  kpy_function *fn;       /* the contiguous variant (with __restrict__), strong; NULL before
                             _bind */
  kpy_function *fn_alias; /* the same without __restrict__, for overlapping arrays; strong,
                             NULL until a call needs it */
  int nargs;              /* the declared arguments; the kernel takes n after them */
  int first_vector;       /* the array whose size is n */
  unsigned block;         /* threads a block */
  unsigned per_thread;    /* elements a thread takes in one step of its loop */
  int same_ok;            /* the kernel reads an element before it writes that element and
                             touches no other: arrays that are the very same memory may share
                             the __restrict__ variant (kiln's own operations) */
  unsigned char vector[KPY_EWISE_MAX_ARGS]; /* 1 where the argument is an array */
} kpy_ewise;

int kpy_ewise_init(PyObject *module, kpy_state *st);

/* Launches k over objs[0..k->nargs) on stream when every array argument is a DeviceArray of
 * the current device laid out in C order (and, when two of them overlap, the variant for that
 * has been compiled). 1 when it launched (or had nothing to do: n == 0), 0 when the call must
 * take the general path (Python's _call_general), -1 with an exception set. */
int kpy_ewise_launch(kpy_ewise *k, PyObject *const *objs, kiln_stream stream);

#endif
