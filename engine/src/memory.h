/* Device memory and copies; what memory.c keeps per device: the one bounce buffer behind
 * small In/Out, and freed small blocks kept for reuse. */
#ifndef KILN_MEMORY_H
#define KILN_MEMORY_H

#include "device.h"

#include <pthread.h>

/* Small In/Out transfers bounce through one pinned buffer and one device buffer, kept per
 * device and grown on demand: a single host-to-device copy, the launch, a single copy back.
 * ("Bounce", not "staging": staging is stage.c's ring for large copies.) */
typedef struct kiln__bounce {
  pthread_mutex_t lock; /* held for the whole of one call's use */
  void *host;           /* pinned, owned */
  CUdeviceptr dev;      /* owned */
  size_t capacity;
  /* Set when a call gave up waiting for its kernel: the GPU may use the buffers until this
   * event completes, and no call takes them before (owned). */
  CUevent busy;
} kiln__bounce;

/* Transfers larger than this in total bypass the bounce buffer: a single memcpy then a single
 * DMA, one after the other, is the cheapest way for a few KiB, but from about 256 KiB the
 * driver's own pipelined pageable copy is faster (and from 2 MiB the stager). */
#define KILN__BOUNCE_MAX ((size_t)256 << 10)

/* d's bounce buffer, made (empty) on first use; never freed, like the device. */
kiln_status kiln__memory_bounce(const kiln__device *d, kiln__bounce **out);

/* Makes room for nbytes; call with b->lock held. */
kiln_status kiln__memory_bounce_reserve(kiln__bounce *b, size_t nbytes);

/* Frees (in stream order) the small blocks d keeps for `stream`, or all of them with all set. */
void kiln__memory_small_release(const kiln__device *d, CUstream stream, int all);

/* Module variables as copy targets: globals.c notes each address it hands out, with the module
 * that owns it, and a copy into a __constant__ or __device__ variable is checked against the
 * variable's own extent (the driver's cuMemGetAddressRange is promised to know allocations only,
 * and may know the variables only as the block they share). A module's ranges are forgotten
 * when it is unloaded. */
void kiln__memory_note_range(const void *owner, CUdeviceptr base, size_t size);
void kiln__memory_forget_ranges(const void *owner);

/* KILN_OK when nbytes from p lie in one allocation (or one module variable) of the current
 * context; else KILN_ERROR_INVALID saying so, `what` naming p ("destination"). */
kiln_status kiln__memory_check_range(kiln_deviceptr p, size_t nbytes, const char *what);

#endif
