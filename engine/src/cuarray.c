/* CUDA arrays (PyCUDA's Array): made from a descriptor checked here first, destroyed, and the
 * driver's copies between an array's bytes and host memory, device memory or another array. */
#include "cuarray.h"

#include <inttypes.h>
#include <stdlib.h>

_Static_assert(KILN_ARRAY_UINT8 == CU_AD_FORMAT_UNSIGNED_INT8 &&
                   KILN_ARRAY_INT32 == CU_AD_FORMAT_SIGNED_INT32 &&
                   KILN_ARRAY_HALF == CU_AD_FORMAT_HALF && KILN_ARRAY_FLOAT == CU_AD_FORMAT_FLOAT,
               "kiln's array formats are the driver's");
_Static_assert(KILN_ARRAY_LAYERED == CUDA_ARRAY3D_LAYERED &&
                   KILN_ARRAY_SURFACE_LDST == CUDA_ARRAY3D_SURFACE_LDST &&
                   KILN_ARRAY_CUBEMAP == CUDA_ARRAY3D_CUBEMAP &&
                   KILN_ARRAY_TEXTURE_GATHER == CUDA_ARRAY3D_TEXTURE_GATHER,
               "kiln's array flags are the driver's");

#define KILN__ARRAY_FLAGS \
  (KILN_ARRAY_LAYERED | KILN_ARRAY_SURFACE_LDST | KILN_ARRAY_CUBEMAP | KILN_ARRAY_TEXTURE_GATHER)

/* Bytes of one channel of the format; 0 for a format kiln does not know. */
static size_t kiln__cuarray_format_bytes(unsigned format) {
  switch (format) {
  case KILN_ARRAY_UINT8:
  case KILN_ARRAY_INT8: return 1;
  case KILN_ARRAY_UINT16:
  case KILN_ARRAY_INT16:
  case KILN_ARRAY_HALF: return 2;
  case KILN_ARRAY_UINT32:
  case KILN_ARRAY_INT32:
  case KILN_ARRAY_FLOAT: return 4;
  default: return 0;
  }
}

void kiln__cuarray_extent(const kiln_array *a, size_t *row_bytes, size_t *rows, size_t *slices) {
  *row_bytes = a->desc.width * a->element_bytes;
  *rows = a->desc.height ? a->desc.height : 1;
  *slices = a->desc.depth ? a->desc.depth : 1;
}

/* Every rule of a descriptor that needs no device; the bytes of an element in *element. */
static kiln_status kiln__cuarray_check(const kiln_array_desc *d, size_t *element) {
  if (!d) return kiln__fail(KILN_ERROR_INVALID, "an array needs a descriptor");
  size_t channel = kiln__cuarray_format_bytes(d->format);
  if (!channel)
    return kiln__fail(KILN_ERROR_INVALID,
                      "an array's format is one of UNSIGNED_INT8 (0x01), UNSIGNED_INT16 (0x02), "
                      "UNSIGNED_INT32 (0x03), SIGNED_INT8 (0x08), SIGNED_INT16 (0x09), "
                      "SIGNED_INT32 (0x0a), HALF (0x10) and FLOAT (0x20), not 0x%x",
                      d->format);
  if (d->num_channels != 1 && d->num_channels != 2 && d->num_channels != 4)
    return kiln__fail(KILN_ERROR_INVALID, "an array's elements have 1, 2 or 4 channels, not %u",
                      d->num_channels);
  if (!d->width)
    return kiln__fail(KILN_ERROR_INVALID, "an array's width is at least 1 element, not 0");
  if (d->flags & ~KILN__ARRAY_FLAGS)
    return kiln__fail(KILN_ERROR_INVALID,
                      "an array's flags are LAYERED (1), SURFACE_LDST (2), CUBEMAP (4) and "
                      "TEXTURE_GATHER (8), not 0x%x",
                      d->flags);
  int layered = (d->flags & KILN_ARRAY_LAYERED) != 0;
  if (!d->height && d->depth && !layered)
    return kiln__fail(KILN_ERROR_INVALID,
                      "a 1D array (height 0) has no depth, not %zu; layers of 1D arrays are "
                      "flagged LAYERED",
                      d->depth);
  if (layered && !d->depth)
    return kiln__fail(KILN_ERROR_INVALID,
                      "a LAYERED array counts its layers in depth, which is at least 1, not 0");
  if ((d->flags & KILN_ARRAY_CUBEMAP) &&
      (d->width != d->height || !d->depth || d->depth % 6 || (!layered && d->depth != 6)))
    return kiln__fail(KILN_ERROR_INVALID,
                      "a CUBEMAP array is square, with 6 faces as its depth (a multiple of 6 "
                      "when LAYERED), not %zu x %zu x %zu",
                      d->width, d->height, d->depth);
  size_t bytes;
  if (__builtin_mul_overflow(d->width, channel * d->num_channels, &bytes) ||
      __builtin_mul_overflow(bytes, d->height ? d->height : 1, &bytes) ||
      __builtin_mul_overflow(bytes, d->depth ? d->depth : 1, &bytes))
    return kiln__fail(KILN_ERROR_INVALID, "an array of %zu x %zu x %zu holds more than memory",
                      d->width, d->height, d->depth);
  *element = channel * d->num_channels;
  return KILN_OK;
}

kiln_status kiln_array_create(const kiln_array_desc *desc, kiln_array **out) {
  KILN__NEED(desc);
  KILN__NEED(out);
  *out = NULL;
  size_t element = 0;
  kiln_status s = kiln__cuarray_check(desc, &element);
  kiln__device *d;
  if (s || (s = kiln__device_enter(&d))) return s;
  int three_d = desc->depth || desc->flags;
  if (three_d ? !kiln__driver.Array3DCreate : !kiln__driver.ArrayCreate)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuArray%sCreate",
                      three_d ? "3D" : "");
  kiln_array *a = calloc(1, sizeof *a);
  if (!a) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of host memory for an array's handle");
  CUresult rc;
  if (three_d) {
    CUDA_ARRAY3D_DESCRIPTOR c = {desc->width,        desc->height,
                                 desc->depth,        (CUarray_format)desc->format,
                                 desc->num_channels, desc->flags};
    rc = kiln__driver.Array3DCreate(&a->handle, &c);
  } else {
    CUDA_ARRAY_DESCRIPTOR c = {desc->width, desc->height, (CUarray_format)desc->format,
                               desc->num_channels};
    rc = kiln__driver.ArrayCreate(&a->handle, &c);
  }
  if (rc) {
    free(a);
    return kiln__cuda_fail(three_d ? "cuArray3DCreate" : "cuArrayCreate", (int)rc);
  }
  a->desc = *desc;
  a->element_bytes = element;
  a->device = d->ordinal;
  *out = a;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_array_free(kiln_array *a) {
  if (!a) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  /* In the context it was made in, whichever device is current now (then current again). */
  kiln__device *d;
  kiln_status s = kiln__device_visit(a->device, &d);
  CUresult rc =
      s || !kiln__driver.ArrayDestroy ? CUDA_SUCCESS : kiln__driver.ArrayDestroy(a->handle);
  free(a);
  kiln_status back = kiln__device_enter(&d);
  if (s || (s = back)) return s;
  if (rc) return kiln__cuda_fail("cuArrayDestroy", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

const kiln_array_desc *kiln_array_descriptor(const kiln_array *a) { return a ? &a->desc : NULL; }

size_t kiln_array_element_size(const kiln_array *a) { return a ? a->element_bytes : 0; }

uintptr_t kiln_array_handle(const kiln_array *a) { return a ? (uintptr_t)a->handle : 0; }

/* nbytes from offset lie in the array's bytes. */
static kiln_status kiln__cuarray_check_range(const kiln_array *a, size_t offset, size_t nbytes,
                                             const char *what) {
  if (!a) return kiln__fail(KILN_ERROR_INVALID, "the %s array is NULL", what);
  size_t row, rows, slices;
  kiln__cuarray_extent(a, &row, &rows, &slices);
  size_t total = row * rows * slices;
  if (offset > total || nbytes > total - offset)
    return kiln__fail(KILN_ERROR_INVALID,
                      "copying %zu bytes from byte %zu runs past the end of the %s array (%zu "
                      "bytes: %zu x %zu x %zu elements of %zu)",
                      nbytes, offset, what, total, a->desc.width, a->desc.height, a->desc.depth,
                      a->element_bytes);
  return KILN_OK;
}

/* After the arrays' own checks: the device entered, then a device side (dev_what naming it,
 * or NULL for none) checked against its allocation; *skip when there is nothing to copy. */
static kiln_status kiln__cuarray_copy_enter(kiln_deviceptr dev, const char *dev_what, size_t nbytes,
                                            int *skip) {
  *skip = 1;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || !nbytes) return kiln__done(s);
  if (dev_what && (s = kiln__memory_check_range(dev, nbytes, dev_what))) return s;
  *skip = 0;
  return KILN_OK;
}

static kiln_status kiln__cuarray_host(const void *host, size_t nbytes) {
  if (!host && nbytes)
    return kiln__fail(KILN_ERROR_INVALID, "the host memory of a copy of %zu bytes is NULL", nbytes);
  return KILN_OK;
}

#define KILN__ARRAY_COPY(fn, args)                                                              \
  do {                                                                                          \
    if (!kiln__driver.fn) return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cu" #fn); \
    KILN__CU(fn, args);                                                                         \
    kiln__clear_error();                                                                        \
    return KILN_OK;                                                                             \
  } while (0)

kiln_status kiln_memcpy_htoa(kiln_array *dst, size_t offset, const void *src, size_t nbytes) {
  kiln__stream_note_work();
  int skip;
  kiln_status s;
  if ((s = kiln__cuarray_check_range(dst, offset, nbytes, "destination")) ||
      (s = kiln__cuarray_host(src, nbytes)) ||
      (s = kiln__cuarray_copy_enter(0, NULL, nbytes, &skip)) || skip)
    return s;
  KILN__ARRAY_COPY(MemcpyHtoA, (dst->handle, offset, src, nbytes));
}

kiln_status kiln_memcpy_atoh(void *dst, const kiln_array *src, size_t offset, size_t nbytes) {
  kiln__stream_note_work();
  int skip;
  kiln_status s;
  if ((s = kiln__cuarray_check_range(src, offset, nbytes, "source")) ||
      (s = kiln__cuarray_host(dst, nbytes)) ||
      (s = kiln__cuarray_copy_enter(0, NULL, nbytes, &skip)) || skip)
    return s;
  KILN__ARRAY_COPY(MemcpyAtoH, (dst, src->handle, offset, nbytes));
}

kiln_status kiln_memcpy_dtoa(kiln_array *dst, size_t offset, kiln_deviceptr src, size_t nbytes) {
  kiln__stream_note_work();
  int skip;
  kiln_status s;
  if ((s = kiln__cuarray_check_range(dst, offset, nbytes, "destination")) ||
      (s = kiln__cuarray_copy_enter(src, "source", nbytes, &skip)) || skip)
    return s;
  KILN__ARRAY_COPY(MemcpyDtoA, (dst->handle, offset, (CUdeviceptr)src, nbytes));
}

kiln_status kiln_memcpy_atod(kiln_deviceptr dst, const kiln_array *src, size_t offset,
                             size_t nbytes) {
  kiln__stream_note_work();
  int skip;
  kiln_status s;
  if ((s = kiln__cuarray_check_range(src, offset, nbytes, "source")) ||
      (s = kiln__cuarray_copy_enter(dst, "destination", nbytes, &skip)) || skip)
    return s;
  KILN__ARRAY_COPY(MemcpyAtoD, ((CUdeviceptr)dst, src->handle, offset, nbytes));
}

kiln_status kiln_memcpy_atoa(kiln_array *dst, size_t dst_offset, const kiln_array *src,
                             size_t src_offset, size_t nbytes) {
  kiln__stream_note_work();
  int skip;
  kiln_status s;
  if ((s = kiln__cuarray_check_range(dst, dst_offset, nbytes, "destination")) ||
      (s = kiln__cuarray_check_range(src, src_offset, nbytes, "source")) ||
      (s = kiln__cuarray_copy_enter(0, NULL, nbytes, &skip)) || skip)
    return s;
  KILN__ARRAY_COPY(MemcpyAtoA, (dst->handle, dst_offset, src->handle, src_offset, nbytes));
}
