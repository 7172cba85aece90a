/* Copies into fresh malloc'd memory: a string, a byte range. */
#ifndef KILN_DUP_H
#define KILN_DUP_H

#include <stddef.h>

/* NULL when out of memory. */
char *kiln__dup_str(const char *s);

/* n bytes of p; at least one byte is allocated, so n may be 0. NULL when out of memory. */
char *kiln__dup_mem(const void *p, size_t n);

/* The n bytes at s as a string: n + 1 allocated, n read, the NUL written. For a token or a
 * buffer that has no NUL of its own: copying n + 1 bytes of it would read one past its end. */
char *kiln__dup_range(const char *s, size_t n);

#endif
