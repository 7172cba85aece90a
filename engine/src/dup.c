/* Copies into fresh malloc'd memory. A file of their own, below everything that keeps names,
 * logs or images: they serve every floor and depend on nothing but libc. */
#include "dup.h"

#include <stdlib.h>
#include <string.h>

char *kiln__dup_str(const char *s) { return kiln__dup_range(s, strlen(s)); }

char *kiln__dup_range(const char *s, size_t n) {
  char *d = malloc(n + 1);
  if (!d) return NULL;
  if (n) memcpy(d, s, n);
  d[n] = '\0';
  return d;
}

char *kiln__dup_mem(const void *p, size_t n) {
  char *d = malloc(n ? n : 1);
  if (d && n) memcpy(d, p, n);
  return d;
}
