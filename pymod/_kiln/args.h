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
  int arrays;            /* set by kpy_pack_args: a DeviceArray is among the arguments */
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

/* How a parameter is packed: worked out once, when its Function is made, so that a Python int
 * or float reaches its slot without asking the signature again. */
enum { KPY_SLOT_INT, KPY_SLOT_F32, KPY_SLOT_F64, KPY_SLOT_OTHER };
typedef struct kpy_slot {
  size_t offset; /* in the parameters' storage, at the parameter's alignment */
  unsigned size; /* bytes */
  int kind;      /* KPY_SLOT_*: what a Python int (INT) or float (F32, F64) goes into */
  long long lo;  /* KPY_SLOT_INT: the range a Python int must be in */
  unsigned long long hi;
} kpy_slot;

/* Fills the n slots of f's parameters; returns the bytes of storage they need (at least 1). */
size_t kpy_slots_fill(const kiln_function *f, kpy_slot *slots, int n);

/* Packs args into storage (aligned to 16) and points params at each, by slots: Python ints
 * and floats first, in one pass, then every other argument, those whose conversion may run
 * Python code before the ones whose device address is read (an allocation's address is read
 * after any code that could free it has run). packed->arrays says whether a DeviceArray was
 * among them. -1 with an exception naming the argument on failure. */
int kpy_pack_args(kpy_state *st, const kiln_function *f, const kpy_slot *slots, int n,
                  PyObject *const *args, unsigned char *storage, void **params, kpy_packed *packed);

/* Writes argument `index` of f into slot (the parameter's size and alignment), or records a
 * transfer in packed. -1 with an exception naming the argument on failure. */
int kpy_pack_arg(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                 kpy_packed *packed);

#endif
