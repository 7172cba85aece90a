/* The kernel cache on disk: one file per key, written whole or not at all, a lock per key so
 * a cold cache costs one compile per machine, bounded by least-recent use. kiln__cache_get is
 * the whole protocol a compile goes through: look up, lock, look again, compile, store. */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include "entry.h"

#include <limits.h>

/* What one compile's lookup needs, worked out once, before the in-process table is asked. */
typedef struct kiln__cache_query {
  kiln__nvrtc_id id; /* which NVRTC compiles here */
  char arch[24];     /* "sm_90" */
  int arch_num;
  unsigned char key[KILN__KEY_SIZE];
  char cwd[PATH_MAX]; /* where quoted includes start; "" when the key does not
                         depend on it */
  int cwd_in_key;     /* the key depends on the working folder (cwd may still be "", when
                         it could not be read) */
} kiln__cache_query;

/* Fills q for src and opts: NVRTC's identity (from the note in the cache folder when it can,
 * nvrtc.c), the arch (compile.c) and the key. */
kiln_status kiln__cache_prepare(const char *src, const kiln_compile_opts *opts,
                                kiln__cache_query *q);

/* What src compiles to: an entry on disk whose headers are unchanged (the main folder, then
 * each read-only layer), else a compile by NVRTC, stored when it may be. A miss takes the key's
 * lock and looks once more before compiling, since another process may have compiled it
 * meanwhile; a damaged entry is a miss and one warning. With the cache off ($KILN_CACHE=0, or
 * no usable folder) it compiles. On KILN_ERROR_COMPILE, out holds the log (out->code.log) and
 * the headers read, to be freed by the caller; on any other failure out is empty. */
kiln_status kiln__cache_get(const char *src, const kiln_compile_opts *opts,
                            const kiln__cache_query *q, kiln__cached *out);

/* The key of a compile: everything that decides its output except the contents of headers on
 * disk, which the entry records and a hit checks (headers.c). Writes the folder the source's
 * quoted includes start from into cwd (empty when the key does not depend on it). */
kiln_status kiln__cache_key(const char *src, const kiln_compile_opts *opts,
                            const kiln__nvrtc_id *id, const char *arch,
                            unsigned char key[KILN__KEY_SIZE], char cwd[PATH_MAX]);

/* Writes an entry into the main folder (a temporary file renamed into place), then keeps the
 * folder under its bound. A failure is a warning, once per process: kiln works uncached. */
void kiln__cache_store(const unsigned char key[KILN__KEY_SIZE], const kiln__code *code,
                       const kiln__kernel *kernels, int n_kernels, const kiln__headers *headers);

/* The counters behind kiln_cache_get_stats. */
typedef enum kiln__counter {
  KILN__MEMORY_HITS,
  KILN__DISK_HITS,
  KILN__MISSES,
  KILN__COMPILES,
  KILN__STORES,
  KILN__EVICTIONS,
  KILN__CORRUPT,
  KILN__COUNTERS
} kiln__counter;
void kiln__cache_count(kiln__counter c);

#endif
