/* libFuzzer target for the cache-entry decoder (engine/src/entry.c).
 *
 * Every input goes to both decoders: kiln__entry_decode sees it as a whole entry (key NULL,
 * so only the checksum stands between a mutation and the body), kiln__entry_decode_body sees
 * it as a body, which is how mutations reach the field parsers without forging a SHA-256. The
 * PTX of a decoded entry goes on to the reader of module variables.
 * ASan and UBSan catch a crash, an over-read or a leak; the checks below catch a decoder that
 * returns success with fields that contradict each other, or that changes what it was given
 * (a decoded entry, encoded again, must give back the very bytes it came from). */
#include "entry.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* abort() rather than assert(): the checks stay on whatever NDEBUG says, and libFuzzer
 * reports the abort as a crash with the input that caused it. */
#define CHECK(cond)                                                                        \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      fprintf(stderr, "fuzz_entry: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      abort();                                                                             \
    }                                                                                      \
  } while (0)

/* A string field: present and its NUL where strlen says. */
static void check_str(const char *s) {
  CHECK(s != NULL);
  (void)strlen(s); /* ASan: the NUL lies inside the allocation */
}

static void check_code(const kiln__code *c) {
  CHECK(memchr(c->arch, '\0', sizeof c->arch) != NULL);
  CHECK(strncmp(c->arch, "sm_", 3) == 0);
  CHECK(c->arch_num >= 10 && c->arch_num <= 9999);
  CHECK(c->ptx != NULL);
  CHECK(c->ptx_size > 0);
  CHECK(c->ptx_size == strlen(c->ptx));
  CHECK((c->cubin == NULL) == (c->cubin_size == 0));
  if (c->cubin_size) {
    /* Touch the last byte: ASan says whether cubin_size bytes are really there. */
    volatile unsigned char last = ((const unsigned char *)c->cubin)[c->cubin_size - 1];
    (void)last;
  }
  check_str(c->log);
  CHECK(c->n_names >= 0);
  if (c->n_names) CHECK(c->names != NULL && c->lowered != NULL);
  for (int i = 0; i < c->n_names; i++) {
    check_str(c->names[i]);
    check_str(c->lowered[i]);
  }
}

static void check_kernels(const kiln__kernel *kernels, int n) {
  CHECK(n >= 0);
  CHECK(kernels != NULL); /* allocated even when there are none */
  for (int i = 0; i < n; i++) {
    const kiln__kernel *kernel = &kernels[i];
    check_str(kernel->name);
    check_str(kernel->plain);
    CHECK(kernel->name[0] != '\0' && kernel->plain[0] != '\0');
    CHECK(kernel->n_params >= 0);
    CHECK(kernel->params != NULL);
    /* The rules a parsed signature keeps, which the packer trusts (an f64 of 8 bytes, ...). */
    CHECK(kiln__ptx_check_kernel(kernel) == NULL);
    unsigned long total = 0;
    for (int k = 0; k < kernel->n_params; k++) {
      const kiln_param *p = &kernel->params[k];
      CHECK((unsigned)p->cls <= (unsigned)KILN_PARAM_AGGREGATE);
      CHECK(p->size >= 1 && p->size <= 32764);
      CHECK(p->align >= 1 && p->align <= 4096 && (p->align & (p->align - 1)) == 0);
      total += p->size;
    }
    CHECK(total <= 32764);
  }
}

static void check_headers(const kiln__headers *h) {
  CHECK(h->n >= 0 && h->n <= h->cap);
  CHECK(h->uncacheable == NULL);
  if (h->n) CHECK(h->items != NULL);
  for (int i = 0; i < h->n; i++) {
    const kiln__header *r = &h->items[i];
    check_str(r->path);
    CHECK(r->path[0] == '/');
    CHECK(r->exists == 0 || r->exists == 1);
    CHECK(r->stat_trusted == 0 || r->stat_trusted == 1);
  }
}

/* Encodes c again with key and checks it gives back exactly want[0..want_size). */
static void check_round_trip(const kiln__cached *c, const unsigned char key[KILN__KEY_SIZE],
                             const unsigned char *want, size_t want_size, int body_only) {
  unsigned char *again = NULL;
  size_t again_size = 0;
  kiln_status s =
      kiln__entry_encode(key, &c->code, c->kernels, c->n_kernels, &c->headers, &again, &again_size);
  CHECK(s == KILN_OK);
  CHECK(again_size >= KILN__ENTRY_HEADER_SIZE);
  const unsigned char *got = again + (body_only ? KILN__ENTRY_HEADER_SIZE : 0);
  size_t got_size = again_size - (body_only ? KILN__ENTRY_HEADER_SIZE : 0);
  CHECK(got_size == want_size);
  CHECK(memcmp(got, want, want_size) == 0);
  free(again);
}

/* The PTX of an entry is what get_global reads the module's variables from (ptx.c): every name
 * it gives is a name, and none is a string literal's. */
static void check_globals(const kiln__code *code) {
  char **names = NULL;
  int n = -1;
  if (kiln__ptx_globals(code->ptx, code->ptx_size, &names, &n) != KILN_OK) return;
  CHECK(n >= 0 && (n == 0 || names != NULL));
  for (int i = 0; i < n; i++) {
    CHECK(names[i] && names[i][0] && names[i][0] != '$' && names[i][0] != '.');
    CHECK(strlen(names[i]) < code->ptx_size);
  }
  kiln__ptx_free_names(names, n);
}

/* A failed decode leaves *out empty, as entry.h promises. */
static void check_empty(const kiln__cached *c) {
  static const kiln__cached zero;
  CHECK(memcmp(c, &zero, sizeof zero) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  kiln__cached c;

  /* Fill out first, so a decoder that trusts what it was handed shows up. */
  memset(&c, 0xa5, sizeof c);
  const char *why = kiln__entry_decode(data, size, NULL, &c);
  if (why) {
    check_str(why);
    check_empty(&c);
  } else {
    CHECK(size > KILN__ENTRY_HEADER_SIZE);
    check_code(&c.code);
    check_kernels(c.kernels, c.n_kernels);
    check_headers(&c.headers);
    check_globals(&c.code);
    check_round_trip(&c, data + 24, data, size, 0); /* the key sits at offset 24 */
    kiln__entry_free_cached(&c);
    check_empty(&c);
  }

  memset(&c, 0xa5, sizeof c);
  why = kiln__entry_decode_body(data, size, &c);
  if (why) {
    check_str(why);
    check_empty(&c);
  } else {
    check_code(&c.code);
    check_kernels(c.kernels, c.n_kernels);
    check_headers(&c.headers);
    check_globals(&c.code);
    static const unsigned char no_key[KILN__KEY_SIZE];
    check_round_trip(&c, no_key, data, size, 1);
    kiln__entry_free_cached(&c);
    check_empty(&c);
  }
  return 0;
}
