/* SHA-256 through libcrypto's EVP interface. */
#include "hash.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct kiln__hasher {
  EVP_MD_CTX *ctx;
};

/* Fetched once: an implicit fetch per digest costs more than hashing a kernel's source. */
static pthread_once_t kiln__sha_once = PTHREAD_ONCE_INIT;
static EVP_MD *kiln__sha256;

static void kiln__sha_fetch(void) { kiln__sha256 = EVP_MD_fetch(NULL, "SHA256", NULL); }

kiln_status kiln__hasher_begin(kiln__hasher **out) {
  pthread_once(&kiln__sha_once, kiln__sha_fetch);
  if (!kiln__sha256) return kiln__fail(KILN_ERROR_NO_MEMORY, "libcrypto has no SHA-256");
  kiln__hasher *h = malloc(sizeof *h);
  if (!h || !(h->ctx = EVP_MD_CTX_new()) || !EVP_DigestInit_ex(h->ctx, kiln__sha256, NULL)) {
    if (h) EVP_MD_CTX_free(h->ctx);
    free(h);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "SHA-256 could not start");
  }
  *out = h;
  return KILN_OK;
}

void kiln__hasher_field(kiln__hasher *h, const void *data, size_t n) {
  uint64_t len = n;
  EVP_DigestUpdate(h->ctx, &len, sizeof len);
  if (n) EVP_DigestUpdate(h->ctx, data, n);
}

void kiln__hasher_string(kiln__hasher *h, const char *s) {
  if (!s) {
    uint64_t none = UINT64_MAX;
    EVP_DigestUpdate(h->ctx, &none, sizeof none);
    return;
  }
  kiln__hasher_field(h, s, strlen(s));
}

kiln_status kiln__hasher_end(kiln__hasher *h, unsigned char key[KILN__KEY_SIZE]) {
  unsigned n = 0;
  int ok = EVP_DigestFinal_ex(h->ctx, key, &n) && n == KILN__KEY_SIZE;
  EVP_MD_CTX_free(h->ctx);
  free(h);
  if (!ok) return kiln__fail(KILN_ERROR_NO_MEMORY, "SHA-256 could not finish");
  return KILN_OK;
}
