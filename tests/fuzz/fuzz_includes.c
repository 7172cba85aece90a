/* libFuzzer target for the #include scanner (kiln__headers_find_includes in engine/src/headers.c).
 *
 * The input is copied into a buffer of exactly its size, with no NUL after it, so that ASan
 * reports any read past text[n) (libFuzzer's own buffer could hide a one-byte over-read
 * behind a terminator that happens to be there). The scan hands names from its own copy of
 * the text (lines spliced, trigraphs replaced), valid during the call: every name must sit
 * between the delimiters its angled flag claims, on one line. */
#include "headers.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                           \
  do {                                                                                        \
    if (!(cond)) {                                                                            \
      fprintf(stderr, "fuzz_includes: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                                \
    }                                                                                         \
  } while (0)

typedef struct scan_ctx {
  const char *text;
  size_t n;
  int calls;
} scan_ctx;

static void on_include(void *ctx, const char *name, size_t len, int angled) {
  scan_ctx *sc = ctx;
  CHECK(len > 0 && len <= sc->n);
  CHECK(angled == 0 || angled == 1);
  /* The opening and closing delimiters are around the name (ASan checks they are inside the
   * scan's copy). */
  CHECK(name[-1] == (angled ? '<' : '"'));
  CHECK(name[len] == (angled ? '>' : '"'));
  CHECK(memchr(name, '\n', len) == NULL);
  sc->calls++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  /* malloc(0) may give NULL; one byte keeps a valid pointer while n stays 0. */
  char *text = malloc(size ? size : 1);
  if (!text) return 0;
  if (size) memcpy(text, data, size);
  scan_ctx sc = {text, size, 0};
  int computed = kiln__headers_find_includes(text, size, on_include, &sc);
  CHECK(computed >= 0);
  /* Each name or macro takes at least one byte of its own, in each of the (at most four)
   * readings of the text. */
  CHECK((size_t)computed <= size && (size_t)sc.calls <= 4 * size);
  free(text);
  return 0;
}
