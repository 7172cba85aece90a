/* SHA-256 from libcrypto's SHA256_* functions.
 *
 * Not through EVP: under OpenSSL 3 the first EVP_MD_fetch loads the provider machinery, 0.5 to
 * 1.2 ms, more than a whole cache hit may cost in a new process; SHA256_Init is ready at once
 * and uses the same assembly. OpenSSL 3 marks it deprecated, hence the define. */
#define OPENSSL_SUPPRESS_DEPRECATED
#include "hash.h"

#include <openssl/sha.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct kiln__hasher {
  SHA256_CTX ctx;
};

kiln_status kiln__hash_begin(kiln__hasher **out) {
  kiln__hasher *h = malloc(sizeof *h);
  if (!h || !SHA256_Init(&h->ctx)) {
    free(h);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "SHA-256 could not start");
  }
  *out = h;
  return KILN_OK;
}

void kiln__hash_field(kiln__hasher *h, const void *data, size_t n) {
  uint64_t len = n;
  SHA256_Update(&h->ctx, &len, sizeof len);
  if (n) SHA256_Update(&h->ctx, data, n);
}

void kiln__hash_string(kiln__hasher *h, const char *s) {
  if (!s) {
    uint64_t none = UINT64_MAX;
    SHA256_Update(&h->ctx, &none, sizeof none);
    return;
  }
  kiln__hash_field(h, s, strlen(s));
}

kiln_status kiln__hash_end(kiln__hasher *h, unsigned char key[KILN__KEY_SIZE]) {
  int ok = SHA256_Final(key, &h->ctx);
  free(h);
  if (!ok) return kiln__fail(KILN_ERROR_NO_MEMORY, "SHA-256 could not finish");
  return KILN_OK;
}

kiln_status kiln__hash_sha256(const void *data, size_t n, unsigned char key[KILN__KEY_SIZE]) {
  SHA256_CTX ctx;
  if (!SHA256_Init(&ctx) || !SHA256_Update(&ctx, data, n) || !SHA256_Final(key, &ctx))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "SHA-256 of %zu bytes failed", n);
  return KILN_OK;
}

void kiln__hash_hex(const unsigned char key[KILN__KEY_SIZE], char hex[2 * KILN__KEY_SIZE + 1]) {
  static const char digits[] = "0123456789abcdef";
  for (int i = 0; i < KILN__KEY_SIZE; i++) {
    hex[2 * i] = digits[key[i] >> 4];
    hex[2 * i + 1] = digits[key[i] & 15];
  }
  hex[2 * KILN__KEY_SIZE] = '\0';
}
