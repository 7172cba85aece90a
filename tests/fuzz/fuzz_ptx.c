/* libFuzzer target for the PTX readers (engine/src/ptx.c, and image.c's path for prebuilt PTX).
 *
 * The input is copied into a buffer of exactly its size, with no NUL after it, so ASan reports
 * any read past ptx[n): a name copied with one byte too many, a scan that trusts a terminator.
 * A parse that succeeds must give signatures that keep the rules every reader is held to
 * (kiln__ptx_check_kernel), names that are strings inside the text, and module variables that
 * are names. */
#include "demangle.h"
#include "ptx.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                      \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      fprintf(stderr, "fuzz_ptx: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                           \
    }                                                                                    \
  } while (0)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *ptx = malloc(size ? size : 1);
  if (!ptx) return 0;
  if (size) memcpy(ptx, data, size);

  kiln__kernel *k = NULL;
  int n = -1;
  kiln_status s = kiln__ptx_parse(ptx, size, &k, &n);
  CHECK(s == KILN_OK || s == KILN_ERROR_PTX || s == KILN_ERROR_NO_MEMORY);
  if (s) {
    CHECK(k == NULL && n == 0);
  } else {
    CHECK(n >= 0 && (n == 0 || k != NULL));
    for (int i = 0; i < n; i++) {
      CHECK(strlen(k[i].name) <= size);
      CHECK(memmem(ptx, size, k[i].name, strlen(k[i].name)) != NULL);
      CHECK(kiln__ptx_check_kernel(&k[i]) == NULL);
    }
  }
  kiln__ptx_free_kernels(k, n);

  char **names = NULL;
  s = kiln__ptx_globals(ptx, size, &names, &n);
  CHECK(s == KILN_OK || s == KILN_ERROR_NO_MEMORY);
  for (int i = 0; !s && i < n; i++) {
    CHECK(names[i][0] && names[i][0] != '$' && names[i][0] != '.');
    CHECK(memmem(ptx, size, names[i], strlen(names[i])) != NULL);
  }
  if (!s) kiln__ptx_free_names(names, n);

  /* The whole path of a prebuilt PTX image, which needs no device: a module or a status. */
  kiln_module *m = NULL;
  s = kiln_module_from_image(ptx, size, &m);
  CHECK(s == KILN_OK || s == KILN_ERROR_PTX || s == KILN_ERROR_INVALID ||
        s == KILN_ERROR_NO_MEMORY || s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_CUDA);
  CHECK((s == KILN_OK) == (m != NULL));
  kiln_module_free(m);
  free(ptx);
  return 0;
}
