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

/* Transfers larger than this in total bypass the staging buffers. */
#define KILN__STAGING_MAX ((size_t)4 << 20)

kiln_status kiln__staging_init(kiln__staging *st);

/* Makes room for nbytes; call with st->lock held. */
kiln_status kiln__staging_reserve(kiln__staging *st, size_t nbytes);

#endif
