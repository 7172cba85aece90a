/* Copies into fresh malloc'd memory: a string, a byte range. */
#ifndef KILN_DUP_H
#define KILN_DUP_H

#include <stddef.h>

/* NULL when out of memory. */
char *kiln__dup_str(const char *s);

/* n bytes of p; at least one byte is allocated, so n may be 0. NULL when out of memory. */
char *kiln__dup_mem(const void *p, size_t n);

#endif
