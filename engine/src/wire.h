/* Flat little-endian fields in a byte buffer: what a cache entry (entry.c) and a request to the
 * compile helper (remote.c) are written in. The reader trusts nothing: every count and length
 * is checked against the bytes left, and the first thing found wrong is kept as a reason. */
#ifndef KILN_WIRE_H
#define KILN_WIRE_H

#include <stddef.h>
#include <stdint.h>

/* A growing buffer; oom once a write could not be made (the rest are then dropped). */
typedef struct kiln__wire_out {
  unsigned char *p;
  size_t n, cap;
  int oom;
} kiln__wire_out;

void kiln__wire_put(kiln__wire_out *w, const void *data, size_t n);
void kiln__wire_put_u32(kiln__wire_out *w, uint32_t v);
void kiln__wire_put_u64(kiln__wire_out *w, uint64_t v);
/* A u64 length, then the bytes. */
void kiln__wire_put_blob(kiln__wire_out *w, const void *data, size_t n);
/* A blob of the string's bytes; NULL writes "". */
void kiln__wire_put_str(kiln__wire_out *w, const char *s);

/* Bytes still to read; why: the first thing found wrong (static text), NULL while all is well.
 * Once why is set, every read gives zero or NULL. */
typedef struct kiln__wire_in {
  const unsigned char *p;
  size_t left;
  const char *why;
} kiln__wire_in;

/* Records why (unless something was found before); returns 0. */
int kiln__wire_bad(kiln__wire_in *r, const char *why);
/* n bytes into out; 1, or 0 when they are not there. */
int kiln__wire_get(kiln__wire_in *r, void *out, size_t n);
uint32_t kiln__wire_get_u32(kiln__wire_in *r);
uint64_t kiln__wire_get_u64(kiln__wire_in *r);
/* A u32 count of items of at least min_bytes each, which the bytes left must be able to hold. */
int kiln__wire_get_count(kiln__wire_in *r, size_t min_bytes);
/* A blob, copied (malloc) with a NUL after it; *n gets its length. */
void *kiln__wire_get_blob(kiln__wire_in *r, size_t *n);
/* A string: a blob without NUL bytes in it. */
char *kiln__wire_get_str(kiln__wire_in *r);

#endif
