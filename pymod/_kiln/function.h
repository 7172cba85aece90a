/* kiln.Function: one kernel, called with vectorcall. */
#ifndef KPY_FUNCTION_H
#define KPY_FUNCTION_H

#include "args.h"
#include "state.h"

/* The last launch shape a Function read, and what it read: a program launches with the same
 * tuple again and again, and a tuple of ints cannot change, so while the Function holds it
 * the same object gives the same dimensions without reading them again. */
typedef struct kpy_shape_memo {
  PyObject *obj; /* strong: an exact tuple or int, or NULL */
  unsigned dims[3];
} kpy_shape_memo;

typedef struct kpy_function {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  kiln_function *fn; /* borrowed from the SourceModule's module, kept alive by `owner` */
  PyObject *owner;   /* the SourceModule, strong */
  kpy_state *st;     /* the module state, alive while this type is */
  int n_params;
  size_t storage_size;       /* bytes for all parameters at their alignments */
  kpy_slot *slots;           /* owned: how each parameter is packed, and where in that storage */
  PyObject *arg_format;      /* the types prepare() was given (str), or NULL before it */
  PyObject *prepare_refusal; /* why those types do not fit the kernel (str), or NULL: raised by
                              * the prepared calls */
  unsigned prepared_shared;  /* prepare(shared=): the dynamic shared memory of prepared calls */
  char *prepared_bits;       /* owned, one a parameter, or NULL: 'u' where prepare() named an
                              * integer parameter unsigned and the kernel has it signed ('I' for
                              * an int), 's' the other way round; those arguments of prepared
                              * calls are taken as their bits, as PyCUDA's struct.pack gives them.
                              * 'c' or 'z' where it named a struct parameter of 8 or 16 bytes
                              * complex ('F', 'D'): a number there is packed as that complex */
  kpy_shape_memo block_memo, grid_memo;
  PyObject *dict; /* attributes a program sets (func.block = ...), as on PyCUDA's, or NULL */
} kpy_function;

int kpy_function_init(PyObject *module, kpy_state *st);

/* A new Function for kernel fn of owner (a Module, kept alive by the Function). */
PyObject *kpy_function_new(kpy_state *st, PyObject *owner, kiln_function *fn);

#endif
