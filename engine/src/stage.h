/* Large copies between pageable host memory and a device, through a ring of pinned buffers.
 *
 * The driver copies pageable memory through its own small staging buffer, one piece at a time
 * on one thread (about 10 GB/s host to device on an H200, against 55 GB/s from pinned memory).
 * The stager splits a copy into chunks; several host threads each take chunks in turn, copy
 * them into pinned buffers of their own and queue the DMA of each on the stager's stream, so
 * the CPUs fill and drain buffers while the copy engine moves the ones before. */
#ifndef KILN_STAGE_H
#define KILN_STAGE_H

#include "device.h"

/* Host to device by the cheapest way for the memory and the size: the stager for pageable
 * memory of at least $KILN_STAGING_MIN bytes, else the driver directly (page-locked memory at
 * the DMA engine's speed, small copies through the driver's own staging). With sync, the
 * synchronous copy on the legacy default stream (stream is NULL): it returns with the data on
 * the device. Otherwise in the order of `stream`: work queued there before runs first, work
 * queued after sees the data, and the call returns once src may be reused. */
kiln_status kiln__stage_htod(const kiln__device *d, CUdeviceptr dst, const void *src, size_t nbytes,
                             CUstream stream, int sync);

/* Device to host the same way. A staged copy (and the driver's own copy to pageable memory)
 * returns once every byte is in dst, sync or not. */
kiln_status kiln__stage_dtoh(const kiln__device *d, void *dst, CUdeviceptr src, size_t nbytes,
                             CUstream stream, int sync);

/* Whether any byte of [host, host + nbytes) may be pageable (not known to the driver as
 * page-locked): a copy there makes the driver wait for the work queued before it. */
int kiln__stage_pageable(const void *host, size_t nbytes);

#endif
