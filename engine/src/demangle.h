/* Itanium-mangled kernel names: the plain name, integer signs and pointers. */
#ifndef KILN_DEMANGLE_H
#define KILN_DEMANGLE_H

#include "internal.h"

/* From an Itanium-mangled name, mangled[0..len) (no NUL needed), the plain name and, when every
 * parameter type could be read, one class per parameter (the builtin's sign, or
 * KILN_PARAM_PTR; -1 where the PTX class stands). Returns the plain name (owned) or NULL when
 * the name is not mangled; *n_types is -1 when the parameter types could not be read. Reads
 * nothing outside the range; its recursion is bounded, whatever the name. */
char *kiln__demangle(const char *mangled, size_t len, int *types, int max_types, int *n_types);

/* The kernel as its source declares it, from its Itanium-mangled name: "cpp(float *, const
 * float *, int, int, double)", "axpy<float, 128>(float, const float *)". NULL (never a wrong
 * text) when the name is not mangled or uses what this reader does not know. Owned. */
char *kiln__demangle_signature(const char *mangled);

#endif
