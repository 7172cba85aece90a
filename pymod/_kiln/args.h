/* Kernel arguments into parameters, by the kernel's signature. */
#ifndef KPY_ARGS_H
#define KPY_ARGS_H

#include "state.h"

/* What packing needs and finds besides the parameters' bytes. */
/* The pointers a launch checks after its shape; any more are checked as they are packed. */
#define KPY_MAX_POINTER_CHECKS 8

typedef struct kpy_packed {
  kiln_stream stream;                          /* set by the caller: the launch's stream */
  kiln_transfer transfers[KILN_MAX_TRANSFERS]; /* found: the In/Out/InOut arrays to move */
  int n_transfers;                             /* set to 0 by the caller */
  int waited;            /* set to 0 by the caller; 1 once stream waits for waited_on, the */
  kiln_stream waited_on; /* producer stream of a __cuda_array_interface__ argument */
  int n_pointers;        /* set to 0 by the caller; the pointers below, for kpy_packed_check */
  struct {
    int index;          /* the argument */
    kiln_deviceptr ptr; /* what its __cuda_array_interface__ gave */
  } pointers[KPY_MAX_POINTER_CHECKS];
} kpy_packed;

/* Refuses (TypeError naming the argument) a pointer from a __cuda_array_interface__ that the
 * GPU cannot reach, asked of the driver (kiln_pointer_reachable): call once the launch's shape
 * has been checked. 0, or -1 with the exception. */
int kpy_packed_check_pointers(kpy_state *st, const kiln_function *f, const kpy_packed *packed);

/* 0 when packing obj runs no Python code (an int, a float, In/Out/InOut, a DeviceAllocation, a
 * DeviceArray, of exactly those types); 1 when it may. */
int kpy_arg_runs_code(kpy_state *st, PyObject *obj);

/* Writes argument `index` of f into slot (the parameter's size and alignment), or records a
 * transfer in packed. -1 with an exception naming the argument on failure. */
int kpy_pack_arg(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                 kpy_packed *packed);

#endif
