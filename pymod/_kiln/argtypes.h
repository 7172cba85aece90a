/* PyCUDA's argument types for Function.prepare: a struct-module format ("PiiP", "P16s") or a
 * list of format characters and NumPy dtypes, read into one size per parameter. */
#ifndef KPY_ARGTYPES_H
#define KPY_ARGTYPES_H

#include "state.h"

/* One parameter the types name. */
typedef struct kpy_argtype {
  unsigned size; /* bytes */
  char sign;     /* 's' a signed integer, 'u' an unsigned one ('I', dtype uint32), 'c' a complex
                  * of two floats ('F', complex64), 'z' of two doubles ('D'), 0 otherwise */
  char what[48]; /* how the types named it, for messages: "'P'", "'16s'", "dtype float32" */
} kpy_argtype;

/* Reads types into out[0..cap); *n is how many parameters they name (it may exceed cap, which
 * the caller reports). *format is a new reference to PyCUDA's arg_format for them: the struct
 * format they are, or that a list of them spells (a dtype as its character, a struct dtype as
 * '<size>s'). -1 with TypeError or ValueError naming the character or item that is wrong. */
int kpy_argtypes_parse(PyObject *types, kpy_argtype *out, int cap, int *n, PyObject **format);

#endif
