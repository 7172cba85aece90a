/* 2D and 3D copies between pitched host and device memory and CUDA arrays (PyCUDA's Memcpy2D
 * and Memcpy3D): the shape checked here, each device side against its allocation and each
 * array side against the array's shape, then one cuMemcpy2D or cuMemcpy3D. */
#include "cuarray.h"
#include "memory.h"
#include "peer.h"

#include <inttypes.h>
#include <string.h>

_Static_assert(KILN_COPY_HOST == CU_MEMORYTYPE_HOST && KILN_COPY_DEVICE == CU_MEMORYTYPE_DEVICE &&
                   KILN_COPY_ARRAY == CU_MEMORYTYPE_ARRAY &&
                   KILN_COPY_UNIFIED == CU_MEMORYTYPE_UNIFIED,
               "kiln's copy kinds are the driver's memory types");

/* An array side: whole elements, inside the array's rows, rows and slices (a 1D array is one
 * row, a 2D array one slice). Its pitch and height are the array's own. */
static kiln_status kiln__copy_array_side(const kiln_copy_side *side, const char *what, size_t width,
                                         size_t row_end, size_t rows_end, size_t slices_end) {
  const kiln_array *a = side->array;
  if (!a) return kiln__fail(KILN_ERROR_INVALID, "the %s is an array side with no array", what);
  size_t row, rows, slices;
  kiln__cuarray_extent(a, &row, &rows, &slices);
  if (side->x_in_bytes % a->element_bytes || width % a->element_bytes)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the %s array's x_in_bytes (%zu) and the copy's width_in_bytes (%zu) are "
                      "whole elements of %zu bytes",
                      what, side->x_in_bytes, width, a->element_bytes);
  if (row_end > row)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the copy's rows reach %zu bytes into the %s array's rows of %zu (x_in_bytes "
                      "%zu and width_in_bytes %zu)",
                      row_end, what, row, side->x_in_bytes, width);
  if (rows_end > rows)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the copy reaches row %zu of the %s array, which has %zu (rows from row %zu)",
                      rows_end, what, rows, side->y);
  if (slices_end > slices)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the copy reaches slice %zu of the %s array, which has %zu (slices from "
                      "slice %zu)",
                      slices_end, what, slices, side->z);
  return KILN_OK;
}

/* A memory side's pitch: the width when the program left it 0. */
static size_t kiln__copy_pitch(const kiln_copy_side *side, size_t width) {
  return side->pitch ? side->pitch : width;
}

/* A memory side's rows a slice: the rows the copy reaches in it (y + height) when the program
 * left the height 0; side->y + height is checked against overflow before any use. */
static size_t kiln__copy_slice_rows(const kiln_copy_side *side, size_t height) {
  return side->height ? side->height : side->y + height;
}

/* The bytes from a side's first byte to one past its last, in *out; the shape's own checks. */
static kiln_status kiln__copy_side_extent(const kiln_copy_side *side, const char *what,
                                          size_t width, size_t height, size_t depth, size_t *out) {
  *out = 0;
  if (side->kind != KILN_COPY_HOST && side->kind != KILN_COPY_DEVICE &&
      side->kind != KILN_COPY_ARRAY && side->kind != KILN_COPY_UNIFIED)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the %s of a 2D or 3D copy is host (1), device (2) or unified (4) memory "
                      "or a CUDA array (3), not kind %u",
                      what, side->kind);
  /* Every sum and product overflow checked: a side whose arithmetic wraps would pass any
   * bound below. */
  size_t row_bytes, rows_end, slices_end;
  if (__builtin_add_overflow(side->x_in_bytes, width, &row_bytes) ||
      __builtin_add_overflow(side->y, height, &rows_end) ||
      __builtin_add_overflow(side->z, depth, &slices_end))
    return kiln__fail(KILN_ERROR_INVALID, "the %s's offsets reach past the end of memory", what);
  if (side->kind == KILN_COPY_ARRAY)
    return kiln__copy_array_side(side, what, width, row_bytes, rows_end, slices_end);
  int slices = depth > 1 || side->z; /* the side's height matters */
  /* A pitch of 0 is the width and a height of 0 the rows the copy reaches (y + height), as the
   * driver takes them in 2D and 3D alike (measured on an H200, driver 580): PyCUDA's Memcpy2D
   * and Memcpy3D leave a host side's pitch and height 0 unless the program sets them, and
   * programs count on that. */
  size_t pitch = kiln__copy_pitch(side, width), slice_rows = kiln__copy_slice_rows(side, height);
  if ((height > 1 || slices) && pitch < row_bytes)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the %s's pitch (%zu bytes from one row to the next) is less than its "
                      "rows' %zu bytes (x_in_bytes %zu and width_in_bytes %zu)",
                      what, pitch, row_bytes, side->x_in_bytes, width);
  if (slices && slice_rows < rows_end) /* the driver refuses it too */
    return kiln__fail(KILN_ERROR_INVALID,
                      "the %s's slices hold %zu rows; the copy needs %zu (rows %zu from row %zu)",
                      what, slice_rows, rows_end, height, side->y);
  if (!width || !height || !depth) return KILN_OK;
  /* One past the last byte: (z + depth - 1) slices of height rows, (y + height - 1) rows,
   * x + width bytes. */
  size_t slice = 0, last_slice = 0, last_row = 0, end = 0;
  if (__builtin_mul_overflow(pitch, slices ? slice_rows : 0, &slice) ||
      __builtin_mul_overflow(slices_end - 1, slice, &last_slice) ||
      __builtin_mul_overflow(rows_end - 1, pitch, &last_row) ||
      __builtin_add_overflow(last_slice, last_row, &end) ||
      __builtin_add_overflow(end, row_bytes, &end))
    return kiln__fail(KILN_ERROR_INVALID, "the %s's offsets and pitch reach past the end of memory",
                      what);
  *out = end;
  return KILN_OK;
}

/* The shape of both sides and their host sizes, in *extents: no device needed. */
static kiln_status kiln__copy_shape(const kiln_copy_side *src, const kiln_copy_side *dst,
                                    size_t width, size_t height, size_t depth, size_t *extents) {
  if (!src || !dst) return kiln__fail(KILN_ERROR_INVALID, "a 2D or 3D copy needs both sides");
  const kiln_copy_side *sides[2] = {src, dst};
  const char *names[2] = {"source", "destination"};
  for (int i = 0; i < 2; i++) {
    kiln_status s = kiln__copy_side_extent(sides[i], names[i], width, height, depth, &extents[i]);
    if (s) return s;
    int host = sides[i]->kind == KILN_COPY_HOST || sides[i]->kind == KILN_COPY_UNIFIED;
    if (host && extents[i] > sides[i]->host_size)
      return kiln__fail(KILN_ERROR_INVALID, "the copy reaches %zu bytes into its %s, which has %zu",
                        extents[i], names[i], sides[i]->host_size);
    if (host && extents[i] && !sides[i]->host)
      return kiln__fail(KILN_ERROR_INVALID, "the %s's host memory is NULL", names[i]);
  }
  return KILN_OK;
}

kiln_status kiln_memcpy_3d_check(const kiln_copy_side *src, const kiln_copy_side *dst,
                                 size_t width_in_bytes, size_t height, size_t depth) {
  size_t extents[2];
  kiln_status s = kiln__copy_shape(src, dst, width_in_bytes, height, depth, extents);
  if (!s) kiln__clear_error();
  return s;
}

/* The shape, then each device side against its allocation. */
static kiln_status kiln__copy_check(const kiln_copy_side *src, const kiln_copy_side *dst,
                                    size_t width, size_t height, size_t depth) {
  size_t extents[2];
  kiln_status s = kiln__copy_shape(src, dst, width, height, depth, extents);
  kiln__device *d;
  if (s || (s = kiln__device_enter(&d))) return s;
  if (extents[0] && src->kind == KILN_COPY_DEVICE &&
      (s = kiln__memory_check_range(src->device, extents[0], "source")))
    return s;
  if (extents[1] && dst->kind == KILN_COPY_DEVICE)
    s = kiln__memory_check_range(dst->device, extents[1], "destination");
  return s;
}

/* The fields CUDA_MEMCPY2D and CUDA_MEMCPY3D share, named alike in both: one body for the
 * two descriptors. A unified side names its memory by its host field's address; a pitch of 0
 * is the width, said outright rather than left to the driver (which reads 0 so too). */
#define KILN__COPY_FILL(c, src, dst, width, height)                                         \
  do {                                                                                      \
    memset((c), 0, sizeof *(c));                                                            \
    (c)->srcXInBytes = (src)->x_in_bytes;                                                   \
    (c)->srcY = (src)->y;                                                                   \
    (c)->srcMemoryType = (CUmemorytype)(src)->kind;                                         \
    (c)->srcHost = (src)->host;                                                             \
    (c)->srcDevice = (src)->kind == KILN_COPY_UNIFIED ? (CUdeviceptr)(uintptr_t)(src)->host \
                                                      : (CUdeviceptr)(src)->device;         \
    (c)->srcArray = (src)->kind == KILN_COPY_ARRAY ? (src)->array->handle : NULL;           \
    (c)->srcPitch = kiln__copy_pitch((src), (width));                                       \
    (c)->dstXInBytes = (dst)->x_in_bytes;                                                   \
    (c)->dstY = (dst)->y;                                                                   \
    (c)->dstMemoryType = (CUmemorytype)(dst)->kind;                                         \
    (c)->dstHost = (void *)(uintptr_t)(dst)->host;                                          \
    (c)->dstDevice = (dst)->kind == KILN_COPY_UNIFIED ? (CUdeviceptr)(uintptr_t)(dst)->host \
                                                      : (CUdeviceptr)(dst)->device;         \
    (c)->dstArray = (dst)->kind == KILN_COPY_ARRAY ? (dst)->array->handle : NULL;           \
    (c)->dstPitch = kiln__copy_pitch((dst), (width));                                       \
    (c)->WidthInBytes = (width);                                                            \
    (c)->Height = (height);                                                                 \
  } while (0)

/* ... and the slices, which CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER add. */
#define KILN__COPY_FILL_3D(c, src, dst, width, height, depth) \
  do {                                                        \
    KILN__COPY_FILL(c, src, dst, width, height);              \
    (c)->srcZ = (src)->z;                                     \
    (c)->srcHeight = kiln__copy_slice_rows((src), (height));  \
    (c)->dstZ = (dst)->z;                                     \
    (c)->dstHeight = kiln__copy_slice_rows((dst), (height));  \
    (c)->Depth = (depth);                                     \
  } while (0)

static int kiln__copy_array_has_slices(const kiln_copy_side *side) {
  return side->kind == KILN_COPY_ARRAY && side->array->desc.depth;
}

static kiln_status kiln__memcpy_3d(const kiln_copy_side *src, const kiln_copy_side *dst,
                                   size_t width, size_t height, size_t depth, int unaligned,
                                   kiln_stream stream, int async) {
  kiln__stream_note_work();
  kiln_status s = kiln__copy_check(src, dst, width, height, depth);
  if (s || !width || !height || !depth) return s;
  /* One slice from the first is cuMemcpy2D's, but for an array with slices or layers, which
   * only cuMemcpy3D addresses. */
  if (depth == 1 && !src->z && !dst->z && !kiln__copy_array_has_slices(src) &&
      !kiln__copy_array_has_slices(dst)) {
    CUresult (*copy)(const CUDA_MEMCPY2D *) =
        unaligned ? kiln__driver.Memcpy2DUnaligned : kiln__driver.Memcpy2D;
    if (async ? !kiln__driver.Memcpy2DAsync : !copy)
      return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuMemcpy2D%s",
                        async       ? "Async"
                        : unaligned ? "Unaligned"
                                    : "");
    CUDA_MEMCPY2D c;
    KILN__COPY_FILL(&c, src, dst, width, height);
    CUresult rc = async ? kiln__driver.Memcpy2DAsync(&c, stream) : copy(&c);
    if (rc) return kiln__cuda_fail(async ? "cuMemcpy2DAsync" : "cuMemcpy2D", (int)rc);
  } else {
    if (async ? !kiln__driver.Memcpy3DAsync : !kiln__driver.Memcpy3D)
      return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuMemcpy3D%s",
                        async ? "Async" : "");
    CUDA_MEMCPY3D c;
    KILN__COPY_FILL_3D(&c, src, dst, width, height, depth);
    CUresult rc = async ? kiln__driver.Memcpy3DAsync(&c, stream) : kiln__driver.Memcpy3D(&c);
    if (rc) return kiln__cuda_fail(async ? "cuMemcpy3DAsync" : "cuMemcpy3D", (int)rc);
  }
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_3d(const kiln_copy_side *src, const kiln_copy_side *dst,
                           size_t width_in_bytes, size_t height, size_t depth, int unaligned) {
  return kiln__memcpy_3d(src, dst, width_in_bytes, height, depth, unaligned, NULL, 0);
}

kiln_status kiln_memcpy_3d_async(const kiln_copy_side *src, const kiln_copy_side *dst,
                                 size_t width_in_bytes, size_t height, size_t depth,
                                 kiln_stream stream) {
  return kiln__memcpy_3d(src, dst, width_in_bytes, height, depth, 0, stream, 1);
}

/* ---- Between devices (PyCUDA's Memcpy3DPeer) ------------------------------------------------ */

/* The shape, then each device side against its allocation in its own device's context. */
static kiln_status kiln__copy_peer_check(const kiln_copy_side *src, int src_device,
                                         const kiln_copy_side *dst, int dst_device, size_t width,
                                         size_t height, size_t depth, CUcontext *ctx) {
  size_t extents[2];
  kiln_status s = kiln__copy_shape(src, dst, width, height, depth, extents);
  if (s) return s;
  if (src_device < 0 || dst_device < 0)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      src_device < 0 ? src_device : dst_device);
  s = kiln__peer_check(src_device, src->device, src->kind == KILN_COPY_DEVICE ? extents[0] : 0,
                       "source", &ctx[0]);
  if (!s)
    s = kiln__peer_check(dst_device, dst->device, dst->kind == KILN_COPY_DEVICE ? extents[1] : 0,
                         "destination", &ctx[1]);
  kiln__device *d;
  kiln_status back = kiln__device_enter(&d); /* the current device's context again */
  return s ? s : back;
}

static kiln_status kiln__memcpy_3d_peer(const kiln_copy_side *src, int src_device,
                                        const kiln_copy_side *dst, int dst_device, size_t width,
                                        size_t height, size_t depth, kiln_stream stream,
                                        int async) {
  kiln__stream_note_work();
  CUcontext ctx[2] = {NULL, NULL};
  kiln_status s =
      kiln__copy_peer_check(src, src_device, dst, dst_device, width, height, depth, ctx);
  if (s || !width || !height || !depth) return s;
  if (async ? !kiln__driver.Memcpy3DPeerAsync : !kiln__driver.Memcpy3DPeer)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuMemcpy3DPeer%s",
                      async ? "Async" : "");
  CUDA_MEMCPY3D_PEER c;
  KILN__COPY_FILL_3D(&c, src, dst, width, height, depth);
  c.srcContext = ctx[0];
  c.dstContext = ctx[1];
  CUresult rc = async ? kiln__driver.Memcpy3DPeerAsync(&c, stream) : kiln__driver.Memcpy3DPeer(&c);
  if (rc) return kiln__cuda_fail(async ? "cuMemcpy3DPeerAsync" : "cuMemcpy3DPeer", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_3d_peer(const kiln_copy_side *src, int src_device,
                                const kiln_copy_side *dst, int dst_device, size_t width_in_bytes,
                                size_t height, size_t depth) {
  return kiln__memcpy_3d_peer(src, src_device, dst, dst_device, width_in_bytes, height, depth, NULL,
                              0);
}

kiln_status kiln_memcpy_3d_peer_async(const kiln_copy_side *src, int src_device,
                                      const kiln_copy_side *dst, int dst_device,
                                      size_t width_in_bytes, size_t height, size_t depth,
                                      kiln_stream stream) {
  return kiln__memcpy_3d_peer(src, src_device, dst, dst_device, width_in_bytes, height, depth,
                              stream, 1);
}
