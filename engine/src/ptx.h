/* Kernel signatures from PTX: each .entry's parameters, sharpened by the mangled name. */
#ifndef KILN_PTX_H
#define KILN_PTX_H

#include "internal.h"

/* One kernel: its name and parameters, as its PTX .entry (or the driver) describes them. */
typedef struct kiln__kernel {
  char *name;         /* the PTX entry name, mangled or not; owned */
  char *plain;        /* the name a user writes: "multiply_them", "ns::scale"; owned */
  kiln_param *params; /* owned */
  int n_params;
  int by_size; /* the parameters were described by their sizes alone (the driver's account of a
                  binary's kernel): a b32 one may be a float as well as an int */
} kiln__kernel;

/* Parses every .entry in ptx[0..len). Malformed PTX is KILN_ERROR_PTX naming the entry and
 * what was unexpected; nothing outside the buffer is read. */
kiln_status kiln__ptx_parse(const char *ptx, size_t len, kiln__kernel **out, int *n_out);
void kiln__ptx_free_kernels(kiln__kernel *kernels, int n);

/* The rules every signature kiln uses must keep, however it was read (the PTX, a cache entry,
 * the driver): a PTX name, a plain name, each parameter's size the one its class implies (any
 * size for a struct), a power-of-two alignment up to 4096, all within the 32764-byte parameter
 * space. The packer trusts them. NULL when k keeps them, else which it breaks (static text). */
const char *kiln__ptx_check_kernel(const kiln__kernel *k);

/* Gives k its plain name and, from its mangled name, integer signs and which 64-bit
 * parameters are pointers. With sizes_only (parameters known only by size, as the driver
 * reports them for a CUBIN), the name also tells integers from floats. */
kiln_status kiln__ptx_refine(kiln__kernel *k, int sizes_only);

/* The module-scope variables of ptx[0..len) (__device__, __constant__, and statics of device
 * functions), by PTX name: string literals ($str) and variables defined elsewhere (.extern) are
 * left out. *names (malloc'd, each name too) is freed with kiln__ptx_free_names. */
kiln_status kiln__ptx_globals(const char *ptx, size_t len, char ***names, int *n);
void kiln__ptx_free_names(char **names, int n);

#endif
