/* Kernel arguments into parameters, by the kernel's signature. */
#ifndef KPY_ARGS_H
#define KPY_ARGS_H

#include "state.h"

/* What packing found besides the parameters' bytes: the In/Out/InOut arrays to move. */
typedef struct kpy_packed {
  kiln_transfer transfers[KILN_MAX_TRANSFERS];
  int n_transfers;
} kpy_packed;

/* Writes argument `index` of f into slot (the parameter's size and alignment), or records a
 * transfer in packed. -1 with an exception naming the argument on failure. */
int kpy_pack_arg(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                 kpy_packed *packed);

#endif
