/* Device memory and copies. */
#include "memory.h"

#include "device.h"

#include <inttypes.h>
#include <string.h>

kiln_status kiln__staging_init(kiln__staging *st) {
  memset(st, 0, sizeof *st);
  if (pthread_mutex_init(&st->lock, NULL))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "could not create the staging lock");
  return KILN_OK;
}

kiln_status kiln__staging_reserve(kiln__staging *st, size_t nbytes) {
  if (nbytes <= st->capacity) return KILN_OK;
  size_t cap = st->capacity ? st->capacity : 64 << 10;
  while (cap < nbytes) cap *= 2;
  /* The old buffers may still be the source of copies queued by an earlier call: every call
   * that used them has synchronized, so they are free to go. */
  if (st->host) kiln__cu.MemFreeHost(st->host);
  if (st->dev) kiln__cu.MemFree(st->dev);
  st->host = NULL;
  st->dev = 0;
  st->capacity = 0;
  KILN__CU(MemAllocHost, (&st->host, cap));
  CUresult rc = kiln__cu.MemAlloc(&st->dev, cap);
  if (rc) {
    kiln__cu.MemFreeHost(st->host);
    st->host = NULL;
    st->dev = 0;
    return kiln__cuda_fail("cuMemAlloc", (int)rc);
  }
  st->capacity = cap;
  return KILN_OK;
}

kiln_status kiln_mem_alloc(size_t nbytes, kiln_deviceptr *out) {
  *out = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (nbytes == 0) return kiln__fail(KILN_ERROR_INVALID, "cannot allocate 0 bytes");
  CUdeviceptr p = 0;
  CUresult rc = kiln__cu.MemAlloc(&p, nbytes);
  if (rc) {
    s = kiln__cuda_fail("cuMemAlloc", (int)rc);
    size_t free_b = 0, total_b = 0;
    if (s == KILN_ERROR_OUT_OF_MEMORY && kiln__cu.MemGetInfo(&free_b, &total_b) == CUDA_SUCCESS)
      kiln__fail_append("; asked for %zu bytes, %zu of %zu free", nbytes, free_b, total_b);
    return s;
  }
  *out = (kiln_deviceptr)p;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_free(kiln_deviceptr p) {
  if (!p) return KILN_OK;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(MemFree, ((CUdeviceptr)p));
  kiln__clear_error();
  return KILN_OK;
}

/* A copy must stay inside one allocation: checked here so a wrong size is a sentence, not
 * a corrupted neighbour or an illegal-address error later. */
static kiln_status kiln__check_range(kiln_deviceptr p, size_t nbytes, const char *what) {
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult rc = kiln__cu.MemGetAddressRange(&base, &size, (CUdeviceptr)p);
  /* Anything but "not found" is the context's own failure (a kernel's illegal address). */
  if (rc && rc != CUDA_ERROR_INVALID_VALUE && rc != CUDA_ERROR_NOT_FOUND)
    return kiln__cuda_fail("cuMemGetAddressRange", (int)rc);
  if (rc)
    return kiln__fail(KILN_ERROR_INVALID,
                      "%s 0x%" PRIx64 " is not device memory of the current context", what,
                      (uint64_t)p);
  if ((uint64_t)p + nbytes > (uint64_t)base + size)
    return kiln__fail(KILN_ERROR_INVALID,
                      "copying %zu bytes at %s 0x%" PRIx64 " runs past its allocation (%zu "
                      "bytes at 0x%" PRIx64 ")",
                      nbytes, what, (uint64_t)p, size, (uint64_t)base);
  return KILN_OK;
}

kiln_status kiln_memcpy_htod(kiln_deviceptr dst, const void *src, size_t nbytes) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return s;
  if ((s = kiln__check_range(dst, nbytes, "destination"))) return s;
  if ((s = kiln__copy_htod(d, (CUdeviceptr)dst, src, nbytes, NULL, 1))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtoh(void *dst, kiln_deviceptr src, size_t nbytes) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return s;
  if ((s = kiln__check_range(src, nbytes, "source"))) return s;
  if ((s = kiln__copy_dtoh(d, dst, (CUdeviceptr)src, nbytes, NULL, 1))) return s;
  kiln__clear_error();
  return KILN_OK;
}

/* ---- Stream-ordered memory, the pool, page-locked host memory ------------------------------ */

/* "; asked for N bytes, F of T free" after an out-of-memory failure. */
static void kiln__append_free(size_t asked) {
  size_t free_b = 0, total_b = 0;
  if (kiln__cu.MemGetInfo(&free_b, &total_b) == CUDA_SUCCESS)
    kiln__fail_append("; asked for %zu bytes, %zu of %zu free", asked, free_b, total_b);
}

kiln_status kiln__small_init(kiln__small_cache *c) {
  memset(c, 0, sizeof *c);
  if (pthread_mutex_init(&c->lock, NULL))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "could not create the block cache's lock");
  return KILN_OK;
}

/* The class of a small block (256 << class bytes), or -1 above 1 MiB. */
static int kiln__small_class(size_t nbytes) {
  int c = 0;
  while (c < KILN__SMALL_CLASSES && ((size_t)256 << c) < nbytes) c++;
  return c < KILN__SMALL_CLASSES ? c : -1;
}

void kiln__small_release(kiln__small_cache *c, CUstream stream, int all) {
  pthread_mutex_lock(&c->lock);
  for (int k = 0; k < KILN__SMALL_CLASSES; k++)
    for (int i = c->n[k] - 1; i >= 0; i--)
      if (all || c->slots[k][i].stream == stream) {
        kiln__cu.MemFreeAsync(c->slots[k][i].p, c->slots[k][i].stream);
        c->slots[k][i] = c->slots[k][--c->n[k]];
      }
  pthread_mutex_unlock(&c->lock);
}

kiln_status kiln_mem_alloc_async(size_t nbytes, kiln_stream stream, kiln_deviceptr *out) {
  *out = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (nbytes == 0) return kiln__fail(KILN_ERROR_INVALID, "cannot allocate 0 bytes");
  if (!d->has_pools) return kiln_mem_alloc(nbytes, out); /* the same, without stream order */
  int k = kiln__small_class(nbytes);
  if (k >= 0) {
    kiln__small_cache *c = &d->small;
    pthread_mutex_lock(&c->lock);
    for (int i = c->n[k] - 1; i >= 0; i--)
      if (c->slots[k][i].stream == stream) {
        *out = (kiln_deviceptr)c->slots[k][i].p;
        c->slots[k][i] = c->slots[k][--c->n[k]];
        break;
      }
    pthread_mutex_unlock(&c->lock);
    if (*out) {
      kiln__clear_error();
      return KILN_OK;
    }
    nbytes = (size_t)256 << k; /* the whole class, so the block can serve any size in it */
  }
  CUdeviceptr p = 0;
  CUresult rc = kiln__cu.MemAllocAsync(&p, nbytes, stream);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    /* Kept blocks and the pool's free memory go back to the driver; then once more. */
    kiln__small_release(&d->small, NULL, 1);
    kiln__cu.CtxSynchronize();
    kiln__cu.MemPoolTrimTo(d->pool, 0);
    rc = kiln__cu.MemAllocAsync(&p, nbytes, stream);
  }
  if (rc) {
    s = kiln__cuda_fail("cuMemAllocAsync", (int)rc);
    if (s == KILN_ERROR_OUT_OF_MEMORY) kiln__append_free(nbytes);
    return s;
  }
  *out = (kiln_deviceptr)p;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_free_async(kiln_deviceptr p, size_t nbytes, kiln_stream stream) {
  if (!p) return KILN_OK;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!d->has_pools) return kiln_mem_free(p);
  int k = kiln__small_class(nbytes);
  if (k >= 0) {
    kiln__small_cache *c = &d->small;
    pthread_mutex_lock(&c->lock);
    int kept = c->n[k] < KILN__SMALL_SLOTS;
    if (kept) {
      c->slots[k][c->n[k]].p = (CUdeviceptr)p;
      c->slots[k][c->n[k]++].stream = stream;
    }
    pthread_mutex_unlock(&c->lock);
    if (kept) {
      kiln__clear_error();
      return KILN_OK;
    }
  }
  KILN__CU(MemFreeAsync, ((CUdeviceptr)p, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_htod_async(kiln_deviceptr dst, const void *src, size_t nbytes,
                                   kiln_stream stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return s;
  if ((s = kiln__check_range(dst, nbytes, "destination"))) return s;
  if ((s = kiln__copy_htod(d, (CUdeviceptr)dst, src, nbytes, stream, 0))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtoh_async(void *dst, kiln_deviceptr src, size_t nbytes,
                                   kiln_stream stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return s;
  if ((s = kiln__check_range(src, nbytes, "source"))) return s;
  if ((s = kiln__copy_dtoh(d, dst, (CUdeviceptr)src, nbytes, stream, 0))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtod_async(kiln_deviceptr dst, kiln_deviceptr src, size_t nbytes,
                                   kiln_stream stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return s;
  if ((s = kiln__check_range(dst, nbytes, "destination")) ||
      (s = kiln__check_range(src, nbytes, "source")))
    return s;
  KILN__CU(MemcpyDtoDAsync, ((CUdeviceptr)dst, (CUdeviceptr)src, nbytes, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_async(kiln_deviceptr dst, unsigned char value, size_t nbytes,
                              kiln_stream stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return s;
  if ((s = kiln__check_range(dst, nbytes, "destination"))) return s;
  KILN__CU(MemsetD8Async, ((CUdeviceptr)dst, value, nbytes, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_info(size_t *free_bytes, size_t *total_bytes) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(MemGetInfo, (free_bytes, total_bytes));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_pool_get_stats(kiln_pool_stats *out) {
  memset(out, 0, sizeof *out);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || !d->has_pools) return s;
  cuuint64_t v[4] = {0, 0, 0, 0};
  CUmemPool_attribute attrs[4] = {CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                  CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH,
                                  CU_MEMPOOL_ATTR_USED_MEM_CURRENT, CU_MEMPOOL_ATTR_USED_MEM_HIGH};
  for (int i = 0; i < 4; i++) KILN__CU(MemPoolGetAttribute, (d->pool, attrs[i], &v[i]));
  out->reserved = v[0];
  out->reserved_high = v[1];
  out->used = v[2];
  out->used_high = v[3];
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_pool_trim(size_t keep_bytes) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || !d->has_pools) return s;
  /* Blocks freed on a stream return to the pool only when that work is done. */
  kiln__small_release(&d->small, NULL, 1);
  KILN__CU(CtxSynchronize, ());
  KILN__CU(MemPoolTrimTo, (d->pool, keep_bytes));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_alloc(size_t nbytes, void **out) {
  *out = NULL;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  /* Portable: page-locked for every context, so any device copies from it at full speed. */
  CUresult rc = kiln__cu.MemHostAlloc(out, nbytes ? nbytes : 1, CU_MEMHOSTALLOC_PORTABLE);
  if (rc) {
    s = kiln__cuda_fail("cuMemHostAlloc", (int)rc);
    kiln__fail_append(" for %zu bytes of page-locked host memory", nbytes);
    return s;
  }
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_free(void *p) {
  if (!p) return KILN_OK;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(MemFreeHost, (p));
  kiln__clear_error();
  return KILN_OK;
}
