/* SHA-256 keys for compiled code, from OpenSSL's libcrypto. */
#ifndef KILN_HASH_H
#define KILN_HASH_H

#include "internal.h"

#define KILN__KEY_SIZE 32

typedef struct kiln__hasher kiln__hasher;

kiln_status kiln__hash_begin(kiln__hasher **out);
/* Adds a length-prefixed field, so ("ab","c") and ("a","bc") differ. */
void kiln__hash_field(kiln__hasher *h, const void *data, size_t n);
void kiln__hash_string(kiln__hasher *h, const char *s); /* NULL hashes unlike "" */
/* Writes the digest and frees the hasher. */
kiln_status kiln__hash_end(kiln__hasher *h, unsigned char key[KILN__KEY_SIZE]);

/* One buffer's SHA-256, for checksums and header contents. */
kiln_status kiln__hash_sha256(const void *data, size_t n, unsigned char key[KILN__KEY_SIZE]);
/* The key as 64 lowercase hex digits, the way the cache names files. */
void kiln__hash_hex(const unsigned char key[KILN__KEY_SIZE], char hex[2 * KILN__KEY_SIZE + 1]);

#endif
