/* Device memory, copies, and the reusable buffers behind In/Out. */
#ifndef KILN_MEMORY_H
#define KILN_MEMORY_H

#include "driver.h"

#include <pthread.h>

/* Small In/Out transfers go through one pinned buffer and one device buffer, kept per device
 * and grown on demand: a single host-to-device copy, the launch, a single copy back. */
typedef struct kiln__staging {
  pthread_mutex_t lock; /* held for the whole of one call's use */
  void *host;           /* pinned, owned */
  CUdeviceptr dev;      /* owned */
  size_t capacity;
} kiln__staging;

/* Freed blocks of up to 1 MiB kept per device for reuse on the stream they were freed on:
 * taking one back costs a lock, not a driver call. Reuse on the same stream is safe by stream
 * order; a block is never handed to another stream. */
#define KILN__SMALL_CLASSES 13 /* powers of two, 256 B to 1 MiB */
#define KILN__SMALL_SLOTS 32   /* per class: at most about 64 MiB kept in all */

typedef struct kiln__small_cache {
  pthread_mutex_t lock;
  struct {
    CUdeviceptr p;
    CUstream stream;
  } slots[KILN__SMALL_CLASSES][KILN__SMALL_SLOTS];
  int n[KILN__SMALL_CLASSES];
} kiln__small_cache;

kiln_status kiln__small_init(kiln__small_cache *c);

/* Frees (in stream order) the kept blocks of `stream`, or all of them with all set. */
void kiln__small_release(kiln__small_cache *c, CUstream stream, int all);

/* Transfers larger than this in total bypass the one-buffer path: a single memcpy then a
 * single DMA, one after the other, is the cheapest way for a few KiB, but from about 256 KiB
 * the driver's own pipelined pageable copy is faster (and from 2 MiB the stager). */
#define KILN__STAGING_MAX ((size_t)256 << 10)

kiln_status kiln__staging_init(kiln__staging *st);

/* Makes room for nbytes; call with st->lock held. */
kiln_status kiln__staging_reserve(kiln__staging *st, size_t nbytes);

#endif
