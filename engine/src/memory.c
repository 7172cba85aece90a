/* Device memory and copies: allocation, range-checked memcpy, stream-ordered memory from the
 * device's pool with freed small blocks kept per stream, the pool's statistics and trimming,
 * page-locked host memory; and, per device, the bounce buffer behind small In/Out. */
#include "memory.h"

#include "stage.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

_Static_assert(KILN_HOST_PORTABLE == CU_MEMHOSTALLOC_PORTABLE &&
                   KILN_HOST_PORTABLE == CU_MEMHOSTREGISTER_PORTABLE &&
                   KILN_HOST_DEVICEMAP == CU_MEMHOSTALLOC_DEVICEMAP &&
                   KILN_HOST_DEVICEMAP == CU_MEMHOSTREGISTER_DEVICEMAP &&
                   KILN_HOST_WRITECOMBINED == CU_MEMHOSTALLOC_WRITECOMBINED,
               "kiln's host memory flags are the driver's");

/* ---- What memory.c keeps per device ----------------------------------------------------- */

/* Freed blocks of up to 1 MiB kept per device for reuse on the stream they were freed on:
 * taking one back costs a lock, not a driver call. Reuse on the same stream is safe by stream
 * order (the caller orders a free after any use on another stream, kiln_mem_free_async's
 * contract); a block is never handed to another stream. */
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

typedef struct kiln__memory_device {
  kiln__bounce bounce;
  kiln__small_cache small;
} kiln__memory_device;

/* One per ordinal, all made at once on the first use of any, never freed: a reader needs one
 * load and no lock. */
static pthread_mutex_t kiln__memory_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln__memory_device *kiln__memory_devices;

/* d's state, or NULL before anything made it. */
static kiln__memory_device *kiln__memory_peek(const kiln__device *d) {
  kiln__memory_device *t = __atomic_load_n(&kiln__memory_devices, __ATOMIC_ACQUIRE);
  return t ? &t[d->ordinal] : NULL;
}

static kiln_status kiln__memory_of(const kiln__device *d, kiln__memory_device **out) {
  kiln__memory_device *t = __atomic_load_n(&kiln__memory_devices, __ATOMIC_ACQUIRE);
  if (KILN__UNLIKELY(!t)) {
    pthread_mutex_lock(&kiln__memory_lock);
    int n = kiln__device_count_known(); /* at least d's ordinal + 1: d was entered */
    if (!(t = kiln__memory_devices) && (t = calloc((size_t)n, sizeof *t))) {
      for (int i = 0; i < n; i++) {
        pthread_mutex_init(&t[i].bounce.lock, NULL);
        pthread_mutex_init(&t[i].small.lock, NULL);
      }
      __atomic_store_n(&kiln__memory_devices, t, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&kiln__memory_lock);
    if (!t) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the devices' buffers");
  }
  *out = &t[d->ordinal];
  return KILN_OK;
}

kiln_status kiln__memory_bounce(const kiln__device *d, kiln__bounce **out) {
  kiln__memory_device *m = NULL;
  kiln_status s = kiln__memory_of(d, &m);
  if (!s) *out = &m->bounce;
  return s;
}

kiln_status kiln__memory_bounce_reserve(kiln__bounce *b, size_t nbytes) {
  if (nbytes <= b->capacity) return KILN_OK;
  size_t cap = b->capacity ? b->capacity : 64 << 10;
  while (cap < nbytes) cap *= 2;
  /* The old buffers may still be the source of copies queued by an earlier call: every call
   * that used them has synchronized, or left an event that has since completed (b->busy), so
   * they are free to go. */
  if (b->host) kiln__driver.MemFreeHost(b->host);
  if (b->dev) kiln__driver.MemFree(b->dev);
  b->host = NULL;
  b->dev = 0;
  b->capacity = 0;
  KILN__CU(MemAllocHost, (&b->host, cap));
  CUresult rc = kiln__driver.MemAlloc(&b->dev, cap);
  if (rc) {
    kiln__driver.MemFreeHost(b->host);
    b->host = NULL;
    b->dev = 0;
    return kiln__cuda_fail("cuMemAlloc", (int)rc);
  }
  b->capacity = cap;
  return KILN_OK;
}

/* The class of a small block (256 << class bytes), or -1 above 1 MiB. */
static int kiln__small_class(size_t nbytes) {
  int c = 0;
  while (c < KILN__SMALL_CLASSES && ((size_t)256 << c) < nbytes) c++;
  return c < KILN__SMALL_CLASSES ? c : -1;
}

static void kiln__small_release(kiln__small_cache *c, CUstream stream, int all) {
  pthread_mutex_lock(&c->lock);
  for (int k = 0; k < KILN__SMALL_CLASSES; k++)
    for (int i = c->n[k] - 1; i >= 0; i--)
      if (all || c->slots[k][i].stream == stream) {
        kiln__driver.MemFreeAsync(c->slots[k][i].p, c->slots[k][i].stream);
        c->slots[k][i] = c->slots[k][--c->n[k]];
      }
  pthread_mutex_unlock(&c->lock);
}

void kiln__memory_small_release(const kiln__device *d, CUstream stream, int all) {
  kiln__memory_device *m = kiln__memory_peek(d);
  if (m) kiln__small_release(&m->small, stream, all); /* none made: none kept */
}

/* Hands what kiln keeps for reuse (its small blocks, the pool's unused memory) back to the
 * driver, so that another allocation, kiln's or another library's, can have it. Blocks freed on
 * a stream return to the pool only when that stream's work is done: wait says whether to wait
 * for it. */
static void kiln__memory_give_back(const kiln__device *d, int wait) {
  kiln__memory_small_release(d, NULL, 1);
  if (!d->has_pools) return;
  if (wait) kiln__driver.CtxSynchronize();
  kiln__driver.MemPoolTrimTo(d->pool, 0);
}

/* ---- Memory and copies ------------------------------------------------------------------ */

kiln_status kiln_mem_alloc(size_t nbytes, kiln_deviceptr *out) {
  KILN__NEED(out);
  *out = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (nbytes == 0) return kiln__fail(KILN_ERROR_INVALID, "cannot allocate 0 bytes");
  CUdeviceptr p = 0;
  CUresult rc = kiln__driver.MemAlloc(&p, nbytes);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    /* What kiln's arrays freed may be what the driver lacks: given back, then once more. */
    kiln__memory_give_back(d, 1);
    rc = kiln__driver.MemAlloc(&p, nbytes);
  }
  if (rc) {
    s = kiln__cuda_fail("cuMemAlloc", (int)rc);
    size_t free_b = 0, total_b = 0;
    if (s == KILN_ERROR_OUT_OF_MEMORY && kiln__driver.MemGetInfo(&free_b, &total_b) == CUDA_SUCCESS)
      kiln__fail_append("; asked for %zu bytes, %zu of %zu free", nbytes, free_b, total_b);
    return s;
  }
  *out = (kiln_deviceptr)p;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_free(kiln_deviceptr p) {
  if (!p) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(MemFree, ((CUdeviceptr)p));
  kiln__clear_error();
  return KILN_OK;
}

/* ---- Ranges of module variables ----------------------------------------------------------- */

typedef struct kiln__range {
  const void *owner;
  CUdeviceptr base;
  size_t size;
} kiln__range;

static pthread_mutex_t kiln__ranges_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln__range *kiln__ranges;
static size_t kiln__n_ranges, kiln__ranges_cap;

void kiln__memory_note_range(const void *owner, CUdeviceptr base, size_t size) {
  pthread_mutex_lock(&kiln__ranges_lock);
  int known = 0;
  for (size_t i = 0; i < kiln__n_ranges && !known; i++)
    known = kiln__ranges[i].base == base && kiln__ranges[i].size == size;
  if (!known && kiln__n_ranges == kiln__ranges_cap) {
    size_t cap = kiln__ranges_cap ? 2 * kiln__ranges_cap : 16;
    kiln__range *grown = realloc(kiln__ranges, cap * sizeof *grown);
    if (grown) kiln__ranges = grown, kiln__ranges_cap = cap;
  }
  /* Out of memory only costs the fallback: the driver's answer stands. */
  if (!known && kiln__n_ranges < kiln__ranges_cap) {
    kiln__ranges[kiln__n_ranges] = (kiln__range){owner, base, size};
    __atomic_store_n(&kiln__n_ranges, kiln__n_ranges + 1, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&kiln__ranges_lock);
}

void kiln__memory_forget_ranges(const void *owner) {
  pthread_mutex_lock(&kiln__ranges_lock);
  size_t n = kiln__n_ranges;
  for (size_t i = n; i-- > 0;)
    if (kiln__ranges[i].owner == owner) kiln__ranges[i] = kiln__ranges[--n];
  __atomic_store_n(&kiln__n_ranges, n, __ATOMIC_RELEASE); /* read without the lock, as a hint */
  pthread_mutex_unlock(&kiln__ranges_lock);
}

/* The module variable holding p: 1 with its extent, 0 when p is in none kiln handed out. */
static int kiln__memory_find_range(CUdeviceptr p, CUdeviceptr *base, size_t *size) {
  int found = 0;
  pthread_mutex_lock(&kiln__ranges_lock);
  for (size_t i = 0; i < kiln__n_ranges && !found; i++)
    if (p >= kiln__ranges[i].base && p - kiln__ranges[i].base < kiln__ranges[i].size) {
      *base = kiln__ranges[i].base;
      *size = kiln__ranges[i].size;
      found = 1;
    }
  pthread_mutex_unlock(&kiln__ranges_lock);
  return found;
}

/* The allocation p (`what`, in a message) lies in: a module variable kiln handed out is its
 * own extent, as the driver may know only the larger block the module's variables share.
 * KILN_ERROR_INVALID where p is no device memory of the current context. */
static kiln_status kiln__memory_range(kiln_deviceptr p, const char *what, CUdeviceptr *base,
                                      size_t *size) {
  int known = __atomic_load_n(&kiln__n_ranges, __ATOMIC_RELAXED) &&
              kiln__memory_find_range((CUdeviceptr)p, base, size);
  CUresult rc = known ? CUDA_SUCCESS : kiln__driver.MemGetAddressRange(base, size, (CUdeviceptr)p);
  /* Anything but "not found" is the context's own failure (a kernel's illegal address). */
  if (rc && rc != CUDA_ERROR_INVALID_VALUE && rc != CUDA_ERROR_NOT_FOUND)
    return kiln__cuda_fail("cuMemGetAddressRange", (int)rc);
  if (rc)
    return kiln__fail(KILN_ERROR_INVALID,
                      "%s 0x%" PRIx64 " is not device memory of the current context", what,
                      (uint64_t)p);
  return KILN_OK;
}

/* A copy must stay inside one allocation: checked here so a wrong size is a sentence, not
 * a corrupted neighbour or an illegal-address error later. */
kiln_status kiln__memory_check_range(kiln_deviceptr p, size_t nbytes, const char *what) {
  CUdeviceptr base = 0;
  size_t size = 0;
  kiln_status s = kiln__memory_range(p, what, &base, &size);
  if (s) return s;
  /* The lookup gives base <= p; written so that no sum can wrap (a 2D copy's extent is the
   * caller's arithmetic, as large as a size_t holds). */
  if (nbytes > size || (uint64_t)p - (uint64_t)base > size - nbytes)
    return kiln__fail(KILN_ERROR_INVALID,
                      "copying %zu bytes at %s 0x%" PRIx64 " runs past its allocation (%zu "
                      "bytes at 0x%" PRIx64 ")",
                      nbytes, what, (uint64_t)p, size, (uint64_t)base);
  return KILN_OK;
}

kiln_status kiln_memcpy_htod(kiln_deviceptr dst, const void *src, size_t nbytes) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(dst, nbytes, "destination"))) return s;
  if ((s = kiln__stage_htod(d, (CUdeviceptr)dst, src, nbytes, NULL, 1))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtoh(void *dst, kiln_deviceptr src, size_t nbytes) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(src, nbytes, "source"))) return s;
  if ((s = kiln__stage_dtoh(d, dst, (CUdeviceptr)src, nbytes, NULL, 1))) return s;
  kiln__clear_error();
  return KILN_OK;
}

/* ---- Stream-ordered memory, the pool, page-locked host memory ------------------------------ */

/* "; asked for N bytes, F of T free" after an out-of-memory failure. */
static void kiln__append_free(size_t asked) {
  size_t free_b = 0, total_b = 0;
  if (kiln__driver.MemGetInfo(&free_b, &total_b) == CUDA_SUCCESS)
    kiln__fail_append("; asked for %zu bytes, %zu of %zu free", asked, free_b, total_b);
}

kiln_status kiln_mem_alloc_async(size_t nbytes, kiln_stream stream, kiln_deviceptr *out) {
  KILN__NEED(out);
  *out = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (nbytes == 0) return kiln__fail(KILN_ERROR_INVALID, "cannot allocate 0 bytes");
  if (!d->has_pools) return kiln_mem_alloc(nbytes, out); /* the same, without stream order */
  kiln__memory_device *m = NULL;
  if ((s = kiln__memory_of(d, &m))) return s;
  int k = kiln__small_class(nbytes);
  if (k >= 0) {
    kiln__small_cache *c = &m->small;
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
  CUresult rc = kiln__driver.MemAllocAsync(&p, nbytes, stream);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    /* Kept blocks and the pool's free memory go back to the driver; then once more. */
    kiln__memory_give_back(d, 1);
    rc = kiln__driver.MemAllocAsync(&p, nbytes, stream);
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
  if (!p) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!d->has_pools) return kiln_mem_free(p);
  kiln__memory_device *m = NULL;
  if ((s = kiln__memory_of(d, &m))) return s;
  int k = kiln__small_class(nbytes);
  if (k >= 0) {
    kiln__small_cache *c = &m->small;
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
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(dst, nbytes, "destination"))) return s;
  if ((s = kiln__stage_htod(d, (CUdeviceptr)dst, src, nbytes, stream, 0))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtoh_async(void *dst, kiln_deviceptr src, size_t nbytes,
                                   kiln_stream stream) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(src, nbytes, "source"))) return s;
  if ((s = kiln__stage_dtoh(d, dst, (CUdeviceptr)src, nbytes, stream, 0))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtod_async(kiln_deviceptr dst, kiln_deviceptr src, size_t nbytes,
                                   kiln_stream stream) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(dst, nbytes, "destination")) ||
      (s = kiln__memory_check_range(src, nbytes, "source")))
    return s;
  KILN__CU(MemcpyDtoDAsync, ((CUdeviceptr)dst, (CUdeviceptr)src, nbytes, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_async(kiln_deviceptr dst, unsigned char value, size_t nbytes,
                              kiln_stream stream) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(dst, nbytes, "destination"))) return s;
  KILN__CU(MemsetD8Async, ((CUdeviceptr)dst, value, nbytes, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_dtod(kiln_deviceptr dst, kiln_deviceptr src, size_t nbytes) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || nbytes == 0) return kiln__done(s);
  if ((s = kiln__memory_check_range(dst, nbytes, "destination")) ||
      (s = kiln__memory_check_range(src, nbytes, "source")))
    return s;
  KILN__CU(MemcpyDtoD, ((CUdeviceptr)dst, (CUdeviceptr)src, nbytes));
  kiln__clear_error();
  return KILN_OK;
}

/* What a memset of count elements of `width` bytes at dst needs: the device, a destination
 * aligned to the element, the whole range inside one allocation. */
static kiln_status kiln__memset_check(kiln_deviceptr dst, size_t count, unsigned width,
                                      kiln__device **d) {
  if (dst % width)
    return kiln__fail(KILN_ERROR_INVALID,
                      "a memset of %u-byte values needs a destination aligned to %u bytes; "
                      "0x%" PRIx64 " is not",
                      width, width, (uint64_t)dst);
  if (count > SIZE_MAX / width)
    return kiln__fail(KILN_ERROR_INVALID, "%zu values of %u bytes is more than memory holds", count,
                      width);
  kiln_status s = kiln__device_enter(d);
  if (s || count == 0) return kiln__done(s);
  return kiln__memory_check_range(dst, count * width, "destination");
}

/* The checks of a 2D memset, then the device: aligned, a pitch that holds a row, the whole
 * stretch in one allocation. */
static kiln_status kiln__memset_2d_check(kiln_deviceptr dst, size_t pitch, unsigned bytes,
                                         size_t width, size_t height, kiln__device **d) {
  if (bytes != 1 && bytes != 2 && bytes != 4)
    return kiln__fail(KILN_ERROR_INVALID, "a 2D memset sets values of 1, 2 or 4 bytes, not %u",
                      bytes);
  if (width > SIZE_MAX / bytes)
    return kiln__fail(KILN_ERROR_INVALID, "%zu values of %u bytes is more than memory holds", width,
                      bytes);
  if (height > 1 && (pitch < width * bytes || pitch % bytes))
    return kiln__fail(KILN_ERROR_INVALID,
                      "the pitch of a 2D memset is the bytes from one row to the next: at least "
                      "a row's %zu and a multiple of %u, not %zu",
                      width * bytes, bytes, pitch);
  if (height > 1 && (height - 1) > (SIZE_MAX - width * bytes) / (pitch ? pitch : 1))
    return kiln__fail(KILN_ERROR_INVALID, "%zu rows %zu bytes apart is more than memory holds",
                      height, pitch);
  size_t extent = height && width ? (height - 1) * pitch + width * bytes : 0;
  return kiln__memset_check(dst, extent / bytes, bytes, d);
}

/* The 2D memsets, blocking or queued on stream. */
static kiln_status kiln__memset_2d(kiln_deviceptr dst, size_t pitch, uint32_t value, unsigned bytes,
                                   size_t width, size_t height, kiln_stream stream, int async) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__memset_2d_check(dst, pitch, bytes, width, height, &d);
  if (s || !width || !height) return s;
  if (async ? !kiln__driver.MemsetD2D8Async || !kiln__driver.MemsetD2D16Async ||
                  !kiln__driver.MemsetD2D32Async
            : !kiln__driver.MemsetD2D8 || !kiln__driver.MemsetD2D16 || !kiln__driver.MemsetD2D32)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuMemsetD2D*%s",
                      async ? "Async" : "");
  CUdeviceptr p = (CUdeviceptr)dst;
  unsigned char v8 = (unsigned char)value;
  unsigned short v16 = (unsigned short)value;
  if (async && bytes == 1) KILN__CU(MemsetD2D8Async, (p, pitch, v8, width, height, stream));
  else if (async && bytes == 2) KILN__CU(MemsetD2D16Async, (p, pitch, v16, width, height, stream));
  else if (async) KILN__CU(MemsetD2D32Async, (p, pitch, value, width, height, stream));
  else if (bytes == 1) KILN__CU(MemsetD2D8, (p, pitch, v8, width, height));
  else if (bytes == 2) KILN__CU(MemsetD2D16, (p, pitch, v16, width, height));
  else KILN__CU(MemsetD2D32, (p, pitch, value, width, height));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_2d(kiln_deviceptr dst, size_t pitch, uint32_t value, unsigned value_bytes,
                           size_t width, size_t height) {
  return kiln__memset_2d(dst, pitch, value, value_bytes, width, height, NULL, 0);
}

kiln_status kiln_memset_2d_async(kiln_deviceptr dst, size_t pitch, uint32_t value,
                                 unsigned value_bytes, size_t width, size_t height,
                                 kiln_stream stream) {
  return kiln__memset_2d(dst, pitch, value, value_bytes, width, height, stream, 1);
}

kiln_status kiln_mem_alloc_managed(size_t nbytes, unsigned flags, kiln_deviceptr *out) {
  KILN__NEED(out);
  *out = 0;
  if (flags != KILN_MEM_ATTACH_GLOBAL && flags != KILN_MEM_ATTACH_HOST)
    return kiln__fail(KILN_ERROR_INVALID,
                      "managed memory is attached GLOBAL (1) or HOST (2) "
                      "when made, not %u",
                      flags);
  if (nbytes == 0) return kiln__fail(KILN_ERROR_INVALID, "cannot allocate 0 bytes");
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!kiln__driver.MemAllocManaged)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuMemAllocManaged");
  /* The driver grants managed memory past what the machine has (pages are made when touched),
   * so a size no device and host memory together can hold would be granted, and the first
   * pass over it (managed_zeros', a kernel's) would end the process for lack of memory. */
  size_t free_b = 0, total_b = 0;
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  size_t host = pages > 0 && page > 0 ? (size_t)pages * (size_t)page : 0;
  if (host && nbytes > host && kiln__driver.MemGetInfo(&free_b, &total_b) == CUDA_SUCCESS &&
      nbytes - host > total_b) /* the driver asked only of a size past the host's memory */
    return kiln__fail(KILN_ERROR_OUT_OF_MEMORY,
                      "cannot allocate %zu bytes of managed memory: more than the device's %zu "
                      "bytes and the host's %zu together",
                      nbytes, total_b, host);
  CUdeviceptr p = 0;
  CUresult rc = kiln__driver.MemAllocManaged(&p, nbytes, flags);
  if (rc) {
    s = kiln__cuda_fail("cuMemAllocManaged", (int)rc);
    if (s == KILN_ERROR_OUT_OF_MEMORY) kiln__append_free(nbytes);
    return s;
  }
  *out = (kiln_deviceptr)p;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_attach_mem(kiln_stream stream, kiln_deviceptr p, size_t length,
                                   unsigned flags) {
  if (flags != KILN_MEM_ATTACH_GLOBAL && flags != KILN_MEM_ATTACH_HOST &&
      flags != KILN_MEM_ATTACH_SINGLE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "memory is attached GLOBAL (1), HOST (2) or SINGLE "
                      "(4), not %u",
                      flags);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!kiln__driver.StreamAttachMemAsync)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuStreamAttachMemAsync");
  KILN__CU(StreamAttachMemAsync, (stream, (CUdeviceptr)p, length, flags));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_d8(kiln_deviceptr dst, uint8_t value, size_t count) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__memset_check(dst, count, 1, &d);
  if (s || count == 0) return kiln__done(s);
  KILN__CU(MemsetD8, ((CUdeviceptr)dst, value, count));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_d16(kiln_deviceptr dst, uint16_t value, size_t count) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__memset_check(dst, count, 2, &d);
  if (s || count == 0) return kiln__done(s);
  KILN__CU(MemsetD16, ((CUdeviceptr)dst, value, count));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_d32(kiln_deviceptr dst, uint32_t value, size_t count) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__memset_check(dst, count, 4, &d);
  if (s || count == 0) return kiln__done(s);
  KILN__CU(MemsetD32, ((CUdeviceptr)dst, value, count));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_d16_async(kiln_deviceptr dst, uint16_t value, size_t count,
                                  kiln_stream stream) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__memset_check(dst, count, 2, &d);
  if (s || count == 0) return kiln__done(s);
  KILN__CU(MemsetD16Async, ((CUdeviceptr)dst, value, count, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memset_d32_async(kiln_deviceptr dst, uint32_t value, size_t count,
                                  kiln_stream stream) {
  kiln__stream_note_work();
  kiln__device *d;
  kiln_status s = kiln__memset_check(dst, count, 4, &d);
  if (s || count == 0) return kiln__done(s);
  KILN__CU(MemsetD32Async, ((CUdeviceptr)dst, value, count, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_alloc_pitch(size_t width, size_t height, unsigned element_bytes,
                                 kiln_deviceptr *out, size_t *pitch) {
  KILN__NEED(out);
  KILN__NEED(pitch);
  *out = 0;
  *pitch = 0;
  if (element_bytes != 4 && element_bytes != 8 && element_bytes != 16)
    return kiln__fail(KILN_ERROR_INVALID,
                      "a pitched allocation is read in elements of 4, 8 or 16 bytes, not %u",
                      element_bytes);
  if (width == 0 || height == 0)
    return kiln__fail(KILN_ERROR_INVALID, "cannot allocate %zu rows of %zu bytes", height, width);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUdeviceptr p = 0;
  CUresult rc = kiln__driver.MemAllocPitch(&p, pitch, width, height, element_bytes);
  if (rc == CUDA_ERROR_OUT_OF_MEMORY) {
    kiln__memory_give_back(d, 1); /* as kiln_mem_alloc does */
    rc = kiln__driver.MemAllocPitch(&p, pitch, width, height, element_bytes);
  }
  if (rc) {
    s = kiln__cuda_fail("cuMemAllocPitch", (int)rc);
    if (s == KILN_ERROR_OUT_OF_MEMORY) kiln__append_free(width * height);
    return s;
  }
  *out = (kiln_deviceptr)p;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_info(size_t *free_bytes, size_t *total_bytes) {
  KILN__NEED(free_bytes);
  KILN__NEED(total_bytes);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  /* Memory kiln keeps for reuse counts as free, as it would after cuMemFree: given back
   * first, without waiting for streams still at work. */
  kiln__memory_give_back(d, 0);
  KILN__CU(MemGetInfo, (free_bytes, total_bytes));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_mem_address_range(kiln_deviceptr p, kiln_deviceptr *base, size_t *size) {
  KILN__NEED(base);
  KILN__NEED(size);
  *base = 0;
  *size = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUdeviceptr b = 0;
  size_t n = 0;
  s = kiln__memory_range(p, "the address", &b, &n);
  /* the driver's own refusal of an address it knows nothing of (PyCUDA's LogicError) */
  if (s == KILN_ERROR_INVALID) kiln__set_cuda_result(CUDA_ERROR_INVALID_VALUE);
  if (s) return s;
  *base = (kiln_deviceptr)b;
  *size = n;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_pointer_reachable(kiln_deviceptr p, int *reachable) {
  KILN__NEED(reachable);
  *reachable = 1;
  if (!p) return kiln__done(KILN_OK);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  unsigned type = 0;
  CUresult rc = kiln__driver.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p);
  /* INVALID_VALUE: no allocation, registration or mapping of the driver's holds p. */
  if (rc == CUDA_ERROR_INVALID_VALUE) *reachable = d->pageable_access;
  else if (rc != CUDA_SUCCESS) return kiln__cuda_fail("cuPointerGetAttribute", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_pool_get_stats(kiln_pool_stats *out) {
  KILN__NEED(out);
  memset(out, 0, sizeof *out);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || !d->has_pools) return kiln__done(s);
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
  if (s || !d->has_pools) return kiln__done(s);
  /* Blocks freed on a stream return to the pool only when that work is done. */
  kiln__memory_small_release(d, NULL, 1);
  KILN__CU(CtxSynchronize, ());
  KILN__CU(MemPoolTrimTo, (d->pool, keep_bytes));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_alloc_with_flags(size_t nbytes, unsigned flags, void **out) {
  KILN__NEED(out);
  *out = NULL;
  unsigned known = KILN_HOST_PORTABLE | KILN_HOST_DEVICEMAP | KILN_HOST_WRITECOMBINED;
  if (flags & ~known)
    return kiln__fail(KILN_ERROR_INVALID,
                      "host allocation flags are KILN_HOST_PORTABLE (1), KILN_HOST_DEVICEMAP (2) "
                      "and KILN_HOST_WRITECOMBINED (4); 0x%x has others",
                      flags);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  /* Always portable: page-locked for every context, so any device copies from it at full
   * speed, whichever is current when it is used. */
  CUresult rc =
      kiln__driver.MemHostAlloc(out, nbytes ? nbytes : 1, flags | CU_MEMHOSTALLOC_PORTABLE);
  if (rc) {
    s = kiln__cuda_fail("cuMemHostAlloc", (int)rc);
    kiln__fail_append(" for %zu bytes of page-locked host memory", nbytes);
    return s;
  }
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_alloc(size_t nbytes, void **out) {
  return kiln_host_alloc_with_flags(nbytes, 0, out);
}

kiln_status kiln_host_register(void *p, size_t nbytes, unsigned flags) {
  unsigned known = KILN_HOST_PORTABLE | KILN_HOST_DEVICEMAP;
  if (flags & ~known)
    return kiln__fail(KILN_ERROR_INVALID,
                      "host register flags are KILN_HOST_PORTABLE (1) and KILN_HOST_DEVICEMAP "
                      "(2); 0x%x has others",
                      flags);
  if (!p || nbytes == 0)
    return kiln__fail(KILN_ERROR_INVALID, "cannot page-lock %zu bytes at %p", nbytes, p);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUresult rc = kiln__driver.MemHostRegister(p, nbytes, flags | CU_MEMHOSTREGISTER_PORTABLE);
  if (rc == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED)
    return kiln__fail(KILN_ERROR_INVALID, "%zu bytes at %p are page-locked already", nbytes, p);
  if (rc) {
    s = kiln__cuda_fail("cuMemHostRegister", (int)rc);
    kiln__fail_append(" for %zu bytes at %p", nbytes, p);
    return s;
  }
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_unregister(void *p) {
  if (!p) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(MemHostUnregister, (p));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_get_device_pointer(void *p, kiln_deviceptr *out) {
  KILN__NEED(out);
  *out = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUdeviceptr dp = 0;
  CUresult rc = kiln__driver.MemHostGetDevicePointer(&dp, p, 0);
  if (rc == CUDA_ERROR_INVALID_VALUE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "host memory at %p is not page-locked memory mapped for the device; "
                      "allocate it with KILN_HOST_DEVICEMAP (host_alloc_flags.DEVICEMAP) or "
                      "register it so",
                      p);
  if (rc) return kiln__cuda_fail("cuMemHostGetDevicePointer", (int)rc);
  *out = (kiln_deviceptr)dp;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_get_flags(void *p, unsigned *out) {
  KILN__NEED(out);
  *out = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUresult rc = kiln__driver.MemHostGetFlags(out, p);
  if (rc == CUDA_ERROR_INVALID_VALUE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "host memory at %p was not allocated page-locked by the driver", p);
  if (rc) return kiln__cuda_fail("cuMemHostGetFlags", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_pointer_host_address(kiln_deviceptr p, size_t nbytes, void **out) {
  KILN__NEED(out);
  *out = NULL;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  unsigned managed = 0;
  void *host = NULL;
  CUdeviceptr start = 0;
  size_t size = 0;
  CUresult rc =
      kiln__driver.PointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)p);
  if (rc == CUDA_ERROR_INVALID_VALUE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "0x%" PRIx64 " is no memory the driver knows, so the host cannot be given "
                      "it",
                      (uint64_t)p);
  if (rc) return kiln__cuda_fail("cuPointerGetAttribute", (int)rc);
  if (managed) host = (void *)(uintptr_t)p;
  else if (kiln__driver.PointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                            (CUdeviceptr)p) != CUDA_SUCCESS ||
           !host)
    return kiln__fail(KILN_ERROR_INVALID,
                      "0x%" PRIx64 " is device memory, which the host cannot read or write; "
                      "copy it (memcpy_dtoh), or use managed or mapped page-locked memory",
                      (uint64_t)p);
  KILN__CU(PointerGetAttribute, (&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, (CUdeviceptr)p));
  KILN__CU(PointerGetAttribute, (&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)p));
  if (nbytes > size || (uint64_t)p - (uint64_t)start > size - nbytes)
    return kiln__fail(KILN_ERROR_INVALID,
                      "%zu bytes at 0x%" PRIx64 " run past their allocation (%zu bytes at "
                      "0x%" PRIx64 ")",
                      nbytes, (uint64_t)p, size, (uint64_t)start);
  *out = host;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_host_free(void *p) {
  if (!p) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(MemFreeHost, (p));
  kiln__clear_error();
  return KILN_OK;
}
