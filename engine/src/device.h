/* Devices: each one's primary context, limits and default memory pool, and the current device
 * of each thread. What the files above keep per device (memory.c's buffers, stage.c's stager)
 * they make and keep themselves, by ordinal: a device knows nothing of what runs on it. */
#ifndef KILN_DEVICE_H
#define KILN_DEVICE_H

#include "driver.h"

typedef struct kiln__device {
  int ordinal;
  CUdevice dev;
  CUcontext ctx; /* the primary context, retained for the process's life */
  kiln_device_info info;
  int has_pools;       /* cuMemAllocAsync works */
  CUmemoryPool pool;   /* the device's default pool, which keeps freed memory for reuse */
  int pageable_access; /* its kernels can read pageable host memory (HMM, ATS) */
} kiln__device;

/* Makes the current device's primary context current on this thread (setting it up on first
 * use) and gives its state. The hot path: one cuCtxGetCurrent when nothing changes. */
kiln_status kiln__device_enter(kiln__device **out);

/* Sets up device `ordinal` (checked) and makes its primary context current on this thread,
 * leaving the thread's current device as it was: for a call that works in another device's
 * context for a moment (a peer copy checks each side in its own). The next kiln__device_enter
 * makes the current device's context current again. */
kiln_status kiln__device_visit(int ordinal, kiln__device **out);

/* The driver's handle of an existing device, without setting it up (no context is made). */
kiln_status kiln__device_handle(int device, CUdevice *out);

/* Makes `ordinal` this thread's current device without checking it: for returning to a device
 * that was current before (context.c's stack), which was checked then. */
void kiln__device_switch(int ordinal);

/* The current device's compute capability, without making a context. */
kiln_status kiln__device_capability(int *major, int *minor);

/* How many devices the driver reports. Known, and fixed, once any device has been entered:
 * it sizes the per-device tables of the files above. */
int kiln__device_count_known(void);

/* stream.c's count of the work queued (kiln_work_count): each launch, copy, memset and graph
 * launch adds one as it is queued, before the driver is asked. */
extern unsigned long long kiln__stream_work;
static inline void kiln__stream_note_work(void) {
  __atomic_add_fetch(&kiln__stream_work, 1, __ATOMIC_RELAXED);
}

#endif
