/* libFuzzer target for the rewrites of a refused source (engine/src/dialect.c): compound
 * literals as functional casts, namespace std opened as cuda::std, constants made constexpr,
 * a whole program's host functions made blanks, arrays of no elements made unsized, and a
 * source that closes a block it never opened wrapped in extern "C" { }.
 *
 * The input is the source, in a buffer of exactly its size plus the terminator the functions
 * take. The log names an error on every third line, so that some functions are refused and
 * others not. A rewrite must keep the source's length and every newline where it was (errors
 * and #line-less line numbers point into it), and change only what it says: parentheses into
 * blanks, or whole stretches into blanks. */
#include "dialect.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                          \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "fuzz_dialect: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                               \
    }                                                                                        \
  } while (0)

/* got is src with some characters made blanks, and only those in allowed ("()" for the
 * literals; anything but newlines for the host functions, NULL). */
static void check_blanked(const char *src, const char *got, const char *allowed) {
  if (!got) return;
  CHECK(strlen(got) == strlen(src));
  for (size_t i = 0; src[i]; i++) {
    if (got[i] == src[i]) continue;
    CHECK(got[i] == ' ' && src[i] != '\n');
    CHECK(!allowed || strchr(allowed, src[i]));
  }
}

/* got is src with added put in at some places and nothing else changed, each time where got
 * then reads whole, added beginning lead characters into it ("cuda::" at the start of
 * "cuda::std"; "expr" 5 into "constexpr"). */
static void check_inserted(const char *src, const char *got, const char *added, const char *whole,
                           size_t lead) {
  if (!got) return;
  size_t i = 0, j = 0, n = strlen(added);
  while (src[i] || got[j]) { /* an insertion may end the text */
    if (src[i] && src[i] == got[j]) {
      i++, j++;
    } else {
      CHECK(j >= lead && strncmp(got + j - lead, whole, strlen(whole)) == 0);
      j += n;
    }
  }
  CHECK(got[j] == '\0' && j > i);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 1 << 16) return 0;
  char *src = malloc(size + 1);
  if (!src) return 0;
  memcpy(src, data, size);
  src[size] = '\0';
  if (strlen(src) != size) { /* a NUL inside: the functions read up to it */
    free(src);
    return 0;
  }
  char *literals = kiln__dialect_compound_literals(src);
  check_blanked(src, literals, "()");
  free(literals);
  /* namespace std opened as cuda::std: "cuda::" put before some "std"s */
  char *std = kiln__dialect_std_namespace(src);
  check_inserted(src, std, "cuda::", "cuda::std", 0);
  free(std);
  /* wrapped in extern "C" { }, the source itself unchanged between the two ends */
  char *wrapped = kiln__dialect_extern_c(src);
  if (wrapped) {
    static const char open[] = "extern \"C\" {\n#line 1\n";
    CHECK(strncmp(wrapped, open, sizeof open - 1) == 0);
    CHECK(memcmp(wrapped + sizeof open - 1, src, size) == 0);
    CHECK(strcmp(wrapped + sizeof open - 1 + size, "\n}\n") == 0);
    CHECK(strchr(src, '}') != NULL);
  }
  free(wrapped);
  size_t lines = 1;
  for (size_t i = 0; i < size; i++) lines += src[i] == '\n';
  char *log = malloc(lines / 3 * 80 + 1), *at = log;
  if (log) {
    *at = '\0';
    for (size_t l = 3; l <= lines; l += 3)
      at += sprintf(at, "kernel.cu(%zu): error: a member of type \"const x\n", l);
    char *host = kiln__dialect_host_functions(src, log);
    check_blanked(src, host, NULL);
    free(host);
    /* const made constexpr: "expr" put after some "const"s */
    char *inclass = kiln__dialect_inclass_constants(src, log);
    check_inserted(src, inclass, "expr", "constexpr", 5);
    free(inclass);
    free(log);
  }
  /* Arrays of no elements: some 0s made blanks, with NVRTC's refusal on every third line. */
  char *zeros = malloc(lines / 3 * 90 + 1);
  if (zeros) {
    at = zeros;
    *at = '\0';
    for (size_t l = 3; l <= lines; l += 3)
      at +=
          sprintf(at, "kernel.cu(%zu): error: the size of an array must be greater than zero\n", l);
    char *blanked = kiln__dialect_zero_arrays(src, zeros);
    check_blanked(src, blanked, "0");
    free(blanked);
    free(zeros);
  }
  /* Namespace-scope constants made constexpr, with NVRTC's refusal on every other line. */
  char *refusals = malloc((lines / 2 + 1) * 100 + 1);
  if (refusals) {
    at = refusals;
    *at = '\0';
    for (size_t l = 2; l <= lines + 1; l += 2)
      at += sprintf(at,
                    "kernel.cu(%zu): error: dynamic initialization is not supported for a "
                    "__device__ variable\n",
                    l);
    char *constants = kiln__dialect_namespace_constants(src, refusals);
    check_inserted(src, constants, "expr", "constexpr", 5);
    free(constants);
    free(refusals);
  }
  free(src);
  return 0;
}
