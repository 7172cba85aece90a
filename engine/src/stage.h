/* Large copies between pageable host memory and a device, through a ring of pinned buffers.
 *
 * The driver copies pageable memory through its own small staging buffer, one piece at a time
 * on one thread (about 10 GB/s host to device on an H200, against 55 GB/s from pinned memory).
 * The stager splits a copy into chunks; several host threads each take chunks in turn, copy
 * them into pinned buffers of their own and queue the DMA of each on the stager's stream, so
 * the CPUs fill and drain buffers while the copy engine moves the ones before. */
#ifndef KILN_STAGE_H
#define KILN_STAGE_H

#include "driver.h"

typedef struct kiln__stager kiln__stager;
struct kiln__device;

/* Whether a copy of nbytes at host should go through the stager: it is at least the threshold
 * ($KILN_STAGING_MIN) and host is not page-locked (the driver moves page-locked memory at full
 * speed itself). */
int kiln__stage_wanted(const void *host, size_t nbytes);

/* Host to device, in the order of `stream`: work queued there before runs first, work queued
 * after sees the data. Returns once src may be reused; with wait, once the data is on the
 * device. */
kiln_status kiln__stage_htod(struct kiln__device *d, CUdeviceptr dst, const void *src,
                             size_t nbytes, CUstream stream, int wait);

/* Device to host after the work queued on `stream`; returns once every byte is in dst. */
kiln_status kiln__stage_dtoh(struct kiln__device *d, void *dst, CUdeviceptr src, size_t nbytes,
                             CUstream stream);

#endif
