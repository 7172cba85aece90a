/* Devices: each one's primary context, limits and transfer buffers. */
#ifndef KILN_DEVICE_H
#define KILN_DEVICE_H

#include "driver.h"
#include "memory.h"
#include "stage.h"

#include <pthread.h>

typedef struct kiln__device {
  int ordinal;
  CUdevice dev;
  CUcontext ctx;           /* the primary context, retained for the process's life */
  kiln_device_info info;
  int has_pools;           /* cuMemAllocAsync works */
  CUmemoryPool pool;       /* the device's default pool, which keeps freed memory for reuse */
  kiln__staging staging;   /* pinned + device buffers reused by In/Out */
  kiln__small_cache small; /* freed small blocks, kept for reuse */
  kiln__stager *stager;    /* large pageable copies; made on first use */
  int stager_failed;       /* it could not be made: copies go to the driver */
} kiln__device;

/* Makes the current device's primary context current on this thread (setting it up on first
 * use) and gives its state. The hot path: one cuCtxGetCurrent when nothing changes. */
kiln_status kiln__device_enter(kiln__device **out);

/* The current device's compute capability, without making a context. */
kiln_status kiln__device_capability(int *major, int *minor);

#endif
