/* A cache entry's bytes: a header that proves them whole, a body that holds one module. */
#ifndef KILN_ENTRY_H
#define KILN_ENTRY_H

#include "compile.h"
#include "headers.h"
#include "ptx.h"
#include "wire.h"

/* Part of every key, so two formats never share a file name. */
#define KILN__ENTRY_VERSION 1

/* magic[8], u32 version, u32 header size, u64 body size, key[32], SHA-256 of the body[32];
 * every integer little-endian. */
#define KILN__ENTRY_HEADER_SIZE 88

/* Everything one compile produced that a later process needs: what an entry holds, what the
 * cache hands back (kiln__cache_get) and what a module is made of. */
typedef struct kiln__cached {
  kiln__code code;
  kiln__kernel *kernels; /* the kernels' signatures */
  int n_kernels;
  kiln__headers headers; /* the user headers the compile could read */
} kiln__cached;

/* The whole entry for key, in a malloc'd buffer. */
kiln_status kiln__entry_encode(const unsigned char key[KILN__KEY_SIZE], const kiln__code *code,
                               const kiln__kernel *kernels, int n_kernels,
                               const kiln__headers *headers, unsigned char **out, size_t *size);

/* Decodes a whole entry, checking its header, length, key (NULL accepts any) and checksum.
 * NULL on success; otherwise why it is not a good entry (static text, for the warning), and
 * *out is left empty. Reads only data[0..size). */
const char *kiln__entry_decode(const void *data, size_t size,
                               const unsigned char key[KILN__KEY_SIZE], kiln__cached *out);

/* The body alone, which the fuzz target reaches without forging a checksum. */
const char *kiln__entry_decode_body(const void *body, size_t size, kiln__cached *out);

/* The header alone, against the size of the file it came from and key (NULL accepts any):
 * NULL when the rest is worth reading, else why not. A file that is no entry is refused
 * before its body is read. */
const char *kiln__entry_check_header(const unsigned char head[KILN__ENTRY_HEADER_SIZE],
                                     uint64_t file_size, const unsigned char key[KILN__KEY_SIZE]);

/* The code part of an entry's body (arch, CUBIN, PTX, log, name expressions), which the
 * compile helper's answer carries too (remote.c); the reader holds it to what kiln writes. */
void kiln__entry_put_code(kiln__wire_out *w, const kiln__code *code);
void kiln__entry_get_code(kiln__wire_in *r, kiln__code *code);

/* Frees what c holds and leaves it empty. */
void kiln__entry_free_cached(kiln__cached *c);

#endif
