/* Launching: shapes checked against the limits, then cuLaunchKernel; In/Out around it. */
#include "memory.h"
#include "module.h"
#include "stage.h"

#include <stdlib.h>
#include <string.h>

static const char kiln__axis[3] = {'x', 'y', 'z'};

/* What holds on every CUDA device: checked before the GPU is touched. */
static kiln_status kiln__check_shape(const kiln_launch_config *cfg) {
  for (int i = 0; i < 3; i++) {
    if (cfg->block[i] == 0)
      return kiln__fail(KILN_ERROR_INVALID,
                        "block.%c is 0; every block dimension must be at "
                        "least 1",
                        kiln__axis[i]);
    if (cfg->grid[i] == 0)
      return kiln__fail(KILN_ERROR_INVALID,
                        "grid.%c is 0; every grid dimension must be at "
                        "least 1",
                        kiln__axis[i]);
  }
  uint64_t threads = (uint64_t)cfg->block[0] * cfg->block[1] * cfg->block[2];
  if (threads > 1024)
    return kiln__fail(KILN_ERROR_INVALID,
                      "block (%u, %u, %u) has %llu threads; no CUDA device "
                      "allows more than 1024 per block",
                      cfg->block[0], cfg->block[1], cfg->block[2], (unsigned long long)threads);
  return KILN_OK;
}

/* What this device and this kernel allow. */
static kiln_status kiln__check_limits(kiln_function *f, kiln__device *d,
                                      const kiln_launch_config *cfg) {
  const kiln_device_info *info = &d->info;
  for (int i = 0; i < 3; i++) {
    if (cfg->block[i] > (unsigned)info->max_block[i])
      return kiln__fail(KILN_ERROR_INVALID, "block.%c is %u; %s allows at most %d", kiln__axis[i],
                        cfg->block[i], info->name, info->max_block[i]);
    if (cfg->grid[i] > (unsigned)info->max_grid[i])
      return kiln__fail(KILN_ERROR_INVALID, "grid.%c is %u; %s allows at most %d", kiln__axis[i],
                        cfg->grid[i], info->name, info->max_grid[i]);
  }
  unsigned threads = cfg->block[0] * cfg->block[1] * cfg->block[2];
  if (threads > (unsigned)f->max_threads)
    return kiln__fail(KILN_ERROR_INVALID,
                      "block (%u, %u, %u) has %u threads; kernel %s can "
                      "launch with at most %d per block on %s (its registers limit it)",
                      cfg->block[0], cfg->block[1], cfg->block[2], threads, f->kernel->plain,
                      f->max_threads, info->name);
  if (cfg->shared > (unsigned)f->dynamic_shared_allowed) {
    int most = info->max_shared_per_block_optin - f->static_shared;
    if (cfg->shared > (unsigned)(most > 0 ? most : 0))
      return kiln__fail(KILN_ERROR_INVALID,
                        "shared is %u bytes; kernel %s can have at most "
                        "%d bytes of dynamic shared memory on %s (%d per block, %d static)",
                        cfg->shared, f->kernel->plain, most, info->name,
                        info->max_shared_per_block_optin, f->static_shared);
    /* Past 48 KiB a kernel must opt in; doing it here is what the user meant. */
    KILN__CU(KernelSetAttribute, (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)cfg->shared,
                                  f->handle, d->dev));
    f->dynamic_shared_allowed = (int)cfg->shared;
  }
  return KILN_OK;
}

static kiln_status kiln__prepare(kiln_function *f, const kiln_launch_config *cfg,
                                 kiln__device **d) {
  kiln_status s = kiln__check_shape(cfg);
  if (!s) s = kiln__device_enter(d);
  if (!s) s = kiln__module_function_ready(f, *d);
  if (!s) s = kiln__check_limits(f, *d, cfg);
  return s;
}

static kiln_status kiln__launch(kiln_function *f, const kiln_launch_config *cfg, void **params) {
  CUresult rc = kiln__driver.LaunchKernel((CUfunction)f->handle, cfg->grid[0], cfg->grid[1],
                                          cfg->grid[2], cfg->block[0], cfg->block[1], cfg->block[2],
                                          cfg->shared, cfg->stream, params, NULL);
  if (KILN__UNLIKELY(rc != CUDA_SUCCESS)) {
    kiln_status s = kiln__cuda_fail("cuLaunchKernel", (int)rc);
    return s == KILN_ERROR_CUDA ? KILN_ERROR_LAUNCH : s;
  }
  return KILN_OK;
}

kiln_status kiln_function_launch(kiln_function *f, const kiln_launch_config *cfg, void **params) {
  kiln__device *d;
  kiln_status s = kiln__prepare(f, cfg, &d);
  if (!s) s = kiln__launch(f, cfg, params);
  if (!s) kiln__clear_error();
  return s;
}

/* ---- Launches with transfers ---------------------------------------------------------- */

/* Events around the launch when its time was asked for. */
typedef struct kiln__timer {
  CUevent start, stop;
} kiln__timer;

static kiln_status kiln__timed_launch(kiln_function *f, const kiln_launch_config *cfg,
                                      void **params, kiln__timer *t) {
  CUstream stream = cfg->stream;
  if (t) KILN__CU(EventRecord, (t->start, stream));
  kiln_status s = kiln__launch(f, cfg, params);
  if (!s && t) KILN__CU(EventRecord, (t->stop, stream));
  return s;
}

static size_t kiln__round_up(size_t n) { return (n + 255) & ~(size_t)255; }

/* Transfers laid out in the bounce buffers, in-only first, then in-out, then out-only,
 * so one copy goes in and one comes back. */
static kiln_status kiln__call_bounced(kiln_function *f, const kiln_launch_config *cfg,
                                      void **params, const kiln_transfer *t, int n, kiln__bounce *b,
                                      kiln__timer *timer) {
  size_t offsets[KILN_MAX_TRANSFERS];
  size_t end = 0, in_end = 0, out_start = (size_t)-1;
  for (int pass = 1; pass <= 3; pass++) {
    kiln_transfer_dir want = pass == 1 ? KILN_IN : pass == 2 ? KILN_INOUT : KILN_OUT;
    for (int i = 0; i < n; i++) {
      if (t[i].dir != want) continue;
      offsets[i] = end;
      if (want != KILN_IN && out_start == (size_t)-1) out_start = end;
      end += kiln__round_up(t[i].nbytes);
      if (want != KILN_OUT) in_end = end;
    }
  }
  kiln_status s = kiln__memory_bounce_reserve(b, end);
  if (s) return s;
  CUstream stream = cfg->stream;
  for (int i = 0; i < n; i++) {
    CUdeviceptr p = t[i].nbytes ? b->dev + offsets[i] : 0;
    memcpy(params[t[i].param], &p, sizeof p);
    if (t[i].dir & KILN_IN) memcpy((char *)b->host + offsets[i], t[i].host, t[i].nbytes);
  }
  if (in_end) KILN__CU(MemcpyHtoDAsync, (b->dev, b->host, in_end, stream));
  s = kiln__timed_launch(f, cfg, params, timer);
  if (s) return s;
  if (out_start != (size_t)-1 && end > out_start)
    KILN__CU(MemcpyDtoHAsync,
             ((char *)b->host + out_start, b->dev + out_start, end - out_start, stream));
  KILN__CU(StreamSynchronize, (stream));
  for (int i = 0; i < n; i++)
    if (t[i].dir & KILN_OUT) memcpy(t[i].host, (char *)b->host + offsets[i], t[i].nbytes);
  return KILN_OK;
}

/* Large transfers: device memory from the stream-ordered pool; each array copied by the
 * cheapest way for its memory and size (stage.c). */
static kiln_status kiln__call_pooled(kiln_function *f, const kiln_launch_config *cfg, void **params,
                                     const kiln_transfer *t, int n, kiln__device *d,
                                     kiln__timer *timer, int wait) {
  CUstream stream = cfg->stream;
  CUdeviceptr ptrs[KILN_MAX_TRANSFERS] = {0};
  kiln_status s = KILN_OK;
  for (int i = 0; i < n && !s; i++) {
    CUresult rc = CUDA_SUCCESS;
    if (t[i].nbytes) {
      rc = d->has_pools ? kiln__driver.MemAllocAsync(&ptrs[i], t[i].nbytes, stream)
                        : kiln__driver.MemAlloc(&ptrs[i], t[i].nbytes);
      if (rc) s = kiln__cuda_fail(d->has_pools ? "cuMemAllocAsync" : "cuMemAlloc", (int)rc);
    }
    if (!s) memcpy(params[t[i].param], &ptrs[i], sizeof ptrs[i]);
    if (!s && (t[i].dir & KILN_IN) && t[i].nbytes)
      s = kiln__stage_htod(d, ptrs[i], t[i].host, t[i].nbytes, stream, 0);
  }
  if (!s) s = kiln__timed_launch(f, cfg, params, timer);
  for (int i = 0; i < n && !s; i++)
    if ((t[i].dir & KILN_OUT) && t[i].nbytes)
      s = kiln__stage_dtoh(d, t[i].host, ptrs[i], t[i].nbytes, stream, 0);
  /* Freed on every path, after the copies that use them, in stream order. */
  for (int i = 0; i < n; i++)
    if (ptrs[i]) {
      if (d->has_pools) kiln__driver.MemFreeAsync(ptrs[i], stream);
      else {
        kiln__driver.StreamSynchronize(stream);
        kiln__driver.MemFree(ptrs[i]);
      }
    }
  if (wait || s) {
    CUresult rc = kiln__driver.StreamSynchronize(stream);
    if (!s && rc) s = kiln__cuda_fail("cuStreamSynchronize", (int)rc);
  }
  return s;
}

/* Checks the transfers; their total size, rounded as the bounce buffers lay them out. */
static kiln_status kiln__check_transfers(const kiln_function *f, const kiln_transfer *transfers,
                                         int n_transfers, size_t *total) {
  if (n_transfers < 0 || n_transfers > KILN_MAX_TRANSFERS)
    return kiln__fail(KILN_ERROR_INVALID, "%d transfers; a call takes at most %d", n_transfers,
                      KILN_MAX_TRANSFERS);
  *total = 0;
  for (int i = 0; i < n_transfers; i++) {
    const kiln_transfer *t = &transfers[i];
    if (t->param < 0 || t->param >= f->kernel->n_params || !(t->dir & KILN_INOUT) ||
        (t->nbytes && !t->host))
      return kiln__fail(KILN_ERROR_INVALID, "transfer %d is malformed", i);
    if (f->kernel->params[t->param].size != sizeof(CUdeviceptr))
      return kiln__fail(KILN_ERROR_INVALID, "parameter %d of %s is %u bytes, not a pointer",
                        t->param, f->kernel->plain, f->kernel->params[t->param].size);
    *total += kiln__round_up(t->nbytes);
  }
  return KILN_OK;
}

kiln_status kiln_function_call_async(kiln_function *f, const kiln_launch_config *cfg, void **params,
                                     const kiln_transfer *transfers, int n_transfers) {
  size_t total;
  kiln_status s = kiln__check_transfers(f, transfers, n_transfers, &total);
  if (s) return s;
  kiln__device *d;
  if ((s = kiln__prepare(f, cfg, &d))) return s;
  /* Without a pool each temporary would need a synchronize before its cuMemFree anyway. */
  if (!d->has_pools) return kiln_function_call(f, cfg, params, transfers, n_transfers, NULL);
  s = n_transfers ? kiln__call_pooled(f, cfg, params, transfers, n_transfers, d, NULL, 0)
                  : kiln__launch(f, cfg, params);
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_function_call(kiln_function *f, const kiln_launch_config *cfg, void **params,
                               const kiln_transfer *transfers, int n_transfers, double *elapsed_s) {
  size_t total;
  kiln_status s = kiln__check_transfers(f, transfers, n_transfers, &total);
  if (s) return s;
  kiln__device *d;
  if ((s = kiln__prepare(f, cfg, &d))) return s;
  kiln__bounce *b = NULL;
  if (n_transfers && total <= KILN__BOUNCE_MAX && (s = kiln__memory_bounce(d, &b))) return s;

  kiln__timer timer, *tp = NULL;
  if (elapsed_s) {
    *elapsed_s = 0;
    KILN__CU(EventCreate, (&timer.start, CU_EVENT_DEFAULT));
    CUresult rc = kiln__driver.EventCreate(&timer.stop, CU_EVENT_DEFAULT);
    if (rc) {
      kiln__driver.EventDestroy(timer.start);
      return kiln__cuda_fail("cuEventCreate", (int)rc);
    }
    tp = &timer;
  }
  if (n_transfers == 0) {
    s = kiln__timed_launch(f, cfg, params, tp);
  } else if (b && pthread_mutex_trylock(&b->lock) == 0) {
    s = kiln__call_bounced(f, cfg, params, transfers, n_transfers, b, tp);
    /* A copy queued before a failure may still read the buffers the next call will fill. */
    if (s) kiln__driver.StreamSynchronize(cfg->stream);
    pthread_mutex_unlock(&b->lock);
  } else {
    s = kiln__call_pooled(f, cfg, params, transfers, n_transfers, d, tp, 1);
  }
  if (tp) {
    if (!s) {
      float ms = 0;
      CUresult rc = kiln__driver.EventSynchronize(timer.stop);
      if (!rc) rc = kiln__driver.EventElapsedTime(&ms, timer.start, timer.stop);
      if (rc) s = kiln__cuda_fail("cuEventElapsedTime", (int)rc);
      *elapsed_s = ms / 1e3;
    }
    kiln__driver.EventDestroy(timer.start);
    kiln__driver.EventDestroy(timer.stop);
  }
  if (!s) kiln__clear_error();
  return s;
}
