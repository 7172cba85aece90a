/* Kernel signatures: each PTX .entry's parameters, sharpened by the mangled name. */
#ifndef KILN_SIGNATURE_H
#define KILN_SIGNATURE_H

#include "internal.h"

typedef struct kiln__entry {
  char *name;         /* the PTX entry name, mangled or not; owned */
  char *plain;        /* the name a user writes: "multiply_them", "ns::scale"; owned */
  kiln_param *params; /* owned */
  int n_params;
} kiln__entry;

/* Parses every .entry in ptx[0..len). Malformed PTX is KILN_ERROR_PTX naming the entry and
 * what was unexpected; nothing outside the buffer is read. */
kiln_status kiln__ptx_parse(const char *ptx, size_t len, kiln__entry **out, int *n_out);
void kiln__entries_free(kiln__entry *entries, int n);

/* Gives e its plain name and, from its mangled name, integer signs and which 64-bit
 * parameters are pointers. With sizes_only (parameters known only by size, as the driver
 * reports them for a CUBIN), the name also tells integers from floats. */
kiln_status kiln__entry_refine(kiln__entry *e, int sizes_only);

/* From an Itanium-mangled name, the plain name and, when every parameter type could be read,
 * one class per parameter (the builtin's sign, or KILN_PARAM_PTR; -1 where the PTX class
 * stands). Returns the plain name (owned) or NULL when the name is not mangled; *n_types is
 * -1 when the parameter types could not be read. */
char *kiln__demangle(const char *mangled, int *types, int max_types, int *n_types);

#endif
