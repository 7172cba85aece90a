/* Copies into fresh malloc'd memory. A file of their own, below everything that keeps names,
 * logs or images: they serve every floor and depend on nothing but libc. */
#include "dup.h"

#include <stdlib.h>
#include <string.h>

char *kiln__dup_str(const char *s) { return kiln__dup_mem(s, strlen(s) + 1); }

char *kiln__dup_mem(const void *p, size_t n) {
  char *d = malloc(n ? n : 1);
  if (d && n) memcpy(d, p, n);
  return d;
}
