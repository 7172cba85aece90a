/* libFuzzer target for the readers of Itanium-mangled kernel names (engine/src/demangle.c):
 * kiln__demangle (plain name and parameter classes) and kiln__demangle_signature (the kernel as
 * its source declares it). A mangled name reaches them from PTX or a CUBIN a user loads, so any
 * bytes must give an answer or NULL, never a read out of bounds, a hang or an unterminated
 * string. */
#include "demangle.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "fuzz_demangle: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                                \
    }                                                                                         \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* A name is a C string: the input up to its first NUL, in a buffer of exactly that size. */
  const uint8_t *nul = memchr(data, 0, size);
  size_t n = nul ? (size_t)(nul - data) : size;
  char *name = malloc(n + 1);
  if (!name) return 0;
  memcpy(name, data, n);
  name[n] = '\0';

  int types[64], n_types = 0;
  char *plain = kiln__demangle(name, types, 64, &n_types);
  CHECK(n_types >= -1 && n_types <= 64);
  if (plain) CHECK(strlen(plain) < 4096);
  free(plain);

  char *sig = kiln__demangle_signature(name);
  if (sig) {
    size_t len = strlen(sig);
    /* "name(...)": never empty, always closed, within the reader's own bound. */
    CHECK(len >= 3 && len < 1024);
    CHECK(sig[len - 1] == ')' && strchr(sig, '(') != NULL);
    CHECK(name[0] == '_' && name[1] == 'Z');
  }
  free(sig);
  free(name);
  return 0;
}
