/* Kernel arguments into parameters, by the kernel's signature. */
#ifndef KPY_ARGS_H
#define KPY_ARGS_H

#include "state.h"

/* What packing needs and finds besides the parameters' bytes. */
typedef struct kpy_packed {
  kiln_stream stream;                          /* set by the caller: the launch's stream */
  kiln_transfer transfers[KILN_MAX_TRANSFERS]; /* found: the In/Out/InOut arrays to move */
  int n_transfers;                             /* set to 0 by the caller */
  int waited;            /* set to 0 by the caller; 1 once stream waits for waited_on, the */
  kiln_stream waited_on; /* producer stream of a __cuda_array_interface__ argument */
} kpy_packed;

/* 0 when packing obj runs no Python code (an int, a float, In/Out/InOut, a DeviceAllocation, a
 * DeviceArray, of exactly those types); 1 when it may. */
int kpy_arg_runs_code(kpy_state *st, PyObject *obj);

/* Writes argument `index` of f into slot (the parameter's size and alignment), or records a
 * transfer in packed. -1 with an exception naming the argument on failure. */
int kpy_pack_arg(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                 kpy_packed *packed);

#endif
