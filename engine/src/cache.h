/* The kernel cache on disk: one file per key, written whole or not at all, a lock per key so
 * a cold cache costs one compile per machine, bounded by least-recent use. */
#ifndef KILN_CACHE_H
#define KILN_CACHE_H

#include "entry.h"

#include <limits.h>

/* Which NVRTC compiles here, from the note in the cache folder when it can (nvrtc.c). */
kiln_status kiln__cache_nvrtc(kiln__nvrtc_id *id);

/* The key of a compile: everything that decides its output except the contents of headers on
 * disk, which the entry records and a hit checks (headers.c). Writes the folder the source's
 * quoted includes start from into cwd (empty when the key does not depend on it). */
kiln_status kiln__cache_key(const char *src, const kiln_compile_opts *opts,
                            const kiln__nvrtc_id *id, const char *arch,
                            unsigned char key[KILN__KEY_SIZE], char cwd[PATH_MAX]);

/* 1 when the disk cache is on and a folder can be read; rereads the environment when it
 * changed since the last call. */
int kiln__cache_enabled(void);

/* Looks key up in the main folder, then in each read-only layer. 1 on a hit whose headers are
 * unchanged, with *out filled; 0 on a miss. A damaged entry is a miss with a warning, unless
 * *damaged is already set (the same lookup, repeated under the lock); sets *damaged. */
int kiln__cache_find(const unsigned char key[KILN__KEY_SIZE], kiln__cached *out, int *damaged);

/* The per-key lock in the main folder; fd is -1 when it could not be taken (a read-only
 * folder), and the caller goes on without it. Released by the kernel if the holder dies. */
typedef struct kiln__cache_lock {
  int fd;
} kiln__cache_lock;
void kiln__cache_lock_key(const unsigned char key[KILN__KEY_SIZE], kiln__cache_lock *lock);
void kiln__cache_unlock(kiln__cache_lock *lock);

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
