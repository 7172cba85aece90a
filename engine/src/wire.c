/* Flat little-endian fields: see wire.h. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

void kiln__wire_put(kiln__wire_out *w, const void *data, size_t n) {
  if (w->oom || !n) return;
  if (w->n + n > w->cap) {
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->n + n) cap *= 2;
    unsigned char *p = realloc(w->p, cap);
    if (!p) {
      w->oom = 1;
      return;
    }
    w->p = p;
    w->cap = cap;
  }
  memcpy(w->p + w->n, data, n);
  w->n += n;
}

void kiln__wire_put_u32(kiln__wire_out *w, uint32_t v) {
  unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16),
                        (unsigned char)(v >> 24)};
  kiln__wire_put(w, b, 4);
}

void kiln__wire_put_u64(kiln__wire_out *w, uint64_t v) {
  kiln__wire_put_u32(w, (uint32_t)v);
  kiln__wire_put_u32(w, (uint32_t)(v >> 32));
}

void kiln__wire_put_blob(kiln__wire_out *w, const void *data, size_t n) {
  kiln__wire_put_u64(w, n);
  kiln__wire_put(w, data, n);
}

void kiln__wire_put_str(kiln__wire_out *w, const char *s) {
  kiln__wire_put_blob(w, s ? s : "", s ? strlen(s) : 0);
}

int kiln__wire_bad(kiln__wire_in *r, const char *why) {
  if (!r->why) r->why = why;
  return 0;
}

int kiln__wire_get(kiln__wire_in *r, void *out, size_t n) {
  if (r->why) return 0;
  if (n > r->left) return kiln__wire_bad(r, "it ends in the middle of a field (truncated)");
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return 1;
}

uint32_t kiln__wire_get_u32(kiln__wire_in *r) {
  unsigned char b[4] = {0};
  kiln__wire_get(r, b, 4);
  return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

uint64_t kiln__wire_get_u64(kiln__wire_in *r) {
  uint64_t lo = kiln__wire_get_u32(r);
  return lo | (uint64_t)kiln__wire_get_u32(r) << 32;
}

/* A count of items of at least min_bytes each, which the bytes left must be able to hold. */
int kiln__wire_get_count(kiln__wire_in *r, size_t min_bytes) {
  uint32_t n = kiln__wire_get_u32(r);
  if (r->why) return 0;
  if (n > r->left / min_bytes || n > 1000000)
    return kiln__wire_bad(r, "a count in it is larger than its bytes allow");
  return (int)n;
}

/* A length-prefixed blob, copied with a NUL after it; *n gets its length. */
void *kiln__wire_get_blob(kiln__wire_in *r, size_t *n) {
  uint64_t len = kiln__wire_get_u64(r);
  if (r->why) return NULL;
  if (len > r->left) {
    kiln__wire_bad(r, "a length in it runs past its end");
    return NULL;
  }
  char *p = malloc((size_t)len + 1);
  if (!p) {
    kiln__wire_bad(r, "out of memory reading it");
    return NULL;
  }
  memcpy(p, r->p, (size_t)len);
  p[len] = '\0';
  r->p += len;
  r->left -= (size_t)len;
  *n = (size_t)len;
  return p;
}

/* A string: a blob without NUL bytes in it. */
char *kiln__wire_get_str(kiln__wire_in *r) {
  size_t n = 0;
  char *s = kiln__wire_get_blob(r, &n);
  if (s && memchr(s, '\0', n)) {
    free(s);
    kiln__wire_bad(r, "a string in it holds a NUL byte");
    return NULL;
  }
  return s;
}
