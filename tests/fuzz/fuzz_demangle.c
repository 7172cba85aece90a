/* libFuzzer target for the Itanium demangler (engine/src/demangle.c).
 *
 * The input is the mangled name, in a buffer of exactly its size with no NUL after it (the
 * reader takes a length). ASan catches a read past it; a name that nests deeply must not take
 * the stack (libFuzzer's -max_len lets inputs grow long enough to try). What comes back must be
 * a string and, when the types were read, one known class (or -1) per parameter; the printed
 * declaration, when there is one, a name and balanced brackets. */
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
  char *name = malloc(size ? size : 1);
  if (!name) return 0;
  if (size) memcpy(name, data, size);
  int types[256], n = -2;
  char *plain = kiln__demangle(name, size, types, 256, &n);
  CHECK(n >= -1 && n <= 256);
  if (!plain) {
    CHECK(n == -1);
  } else {
    CHECK(size >= 3 && name[0] == '_' && name[1] == 'Z');
    CHECK(plain[0] != '\0' && strlen(plain) < 512);
    for (int i = 0; i < n; i++)
      CHECK(types[i] == -1 || (types[i] >= 0 && types[i] <= (int)KILN_PARAM_AGGREGATE));
  }
  free(plain);
  /* Without room for the types, as the module-variable reader calls it. */
  plain = kiln__demangle(name, size, NULL, 0, &n);
  CHECK(n == -1 || n == 0);
  free(plain);
  /* The printing reader, which takes a NUL-terminated name: its text is a declaration with a
   * name and balanced brackets, or nothing. */
  char *text = malloc(size + 1);
  if (text) {
    if (size) memcpy(text, data, size);
    text[size] = '\0';
    char *declared = kiln__demangle_signature(text);
    if (declared) {
      size_t len = strlen(declared);
      CHECK(len > 2 && len < 1024 && declared[0] != '(' && declared[len - 1] == ')');
      int round = 0, square = 0;
      for (size_t i = 0; i < len; i++) {
        round += (declared[i] == '(') - (declared[i] == ')');
        square += (declared[i] == '[') - (declared[i] == ']');
        CHECK(round >= 0 && square >= 0);
      }
      CHECK(round == 0 && square == 0);
    }
    free(declared);
    free(text);
  }
  free(name);
  return 0;
}
