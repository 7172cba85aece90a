/* The context of the current device. kiln has one context per device, the primary one, shared
 * with the CUDA runtime, PyTorch and CuPy; what PyCUDA calls making, pushing and popping a
 * context is here a per-thread stack of current devices, each entry the device that was
 * current before a push. Limits and cache configuration are the primary context's, so they are
 * every library's in the process. */
#include "device.h"

/* Deeper than any program nests contexts; past it a push is refused rather than lost. */
#define KILN__CONTEXT_DEPTH 64

static _Thread_local int kiln__pushed[KILN__CONTEXT_DEPTH];
static _Thread_local int kiln__depth;

kiln_status kiln_context_push(int device) {
  if (kiln__depth == KILN__CONTEXT_DEPTH)
    return kiln__fail(KILN_ERROR_INVALID,
                      "this thread has pushed %d contexts without popping one; pop before "
                      "pushing more",
                      KILN__CONTEXT_DEPTH);
  if (device < 0)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      device);
  int before = kiln_device_current();
  kiln_status s = kiln_device_set_current(device);
  if (s) return s;
  /* Made current now, not at the next kiln call: another library called in between (CuPy,
   * PyTorch) finds this device's context current, as after PyCUDA's push. */
  kiln__device *d;
  if ((s = kiln__device_enter(&d))) {
    kiln__device_switch(before);
    return s;
  }
  kiln__pushed[kiln__depth++] = before;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_pop(int *device) {
  if (device) *device = -1;
  if (kiln__depth == 0)
    return kiln__fail(KILN_ERROR_INVALID,
                      "no context is pushed on this thread; pop() undoes a make_context() or "
                      "push() of this thread");
  int popped = kiln_device_current();
  kiln__device_switch(kiln__pushed[--kiln__depth]);
  if (device) *device = popped;
  /* The device before was set up when it was pushed over, unless it was never used: then
   * there is nothing to make current yet. */
  if (kiln__device_count_known() > 0) {
    kiln__device *d;
    kiln_status s = kiln__device_enter(&d);
    if (s) return s;
  }
  kiln__clear_error();
  return KILN_OK;
}

int kiln_context_depth(void) { return kiln__depth; }

kiln_status kiln_context_get_limit(int limit, size_t *value) {
  KILN__NEED(value);
  *value = 0;
  if (limit < 0 || limit >= CU_LIMIT_MAX)
    return kiln__fail(KILN_ERROR_INVALID, "limit %d is not a CUlimit (0 to %d)", limit,
                      CU_LIMIT_MAX - 1);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUresult rc = kiln__driver.CtxGetLimit(value, (CUlimit)limit);
  if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_UNSUPPORTED_LIMIT)
    return kiln__fail(KILN_ERROR_INVALID, "limit %d is not one device %d supports", limit,
                      d->ordinal);
  if (rc) return kiln__cuda_fail("cuCtxGetLimit", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

/* CUlimit's names, for messages ("limit 3" says little). */
static const char *kiln__limit_name(int limit) {
  static const char *names[] = {"STACK_SIZE",
                                "PRINTF_FIFO_SIZE",
                                "MALLOC_HEAP_SIZE",
                                "DEV_RUNTIME_SYNC_DEPTH",
                                "DEV_RUNTIME_PENDING_LAUNCH_COUNT",
                                "MAX_L2_FETCH_GRANULARITY",
                                "PERSISTING_L2_CACHE_SIZE",
                                "SHMEM_SIZE",
                                "CIG_ENABLED",
                                "CIG_SHMEM_FALLBACK_ENABLED"};
  return limit >= 0 && (size_t)limit < KILN__COUNT(names) ? names[limit] : "?";
}

kiln_status kiln_context_set_limit(int limit, size_t value) {
  if (limit < 0 || limit >= CU_LIMIT_MAX)
    return kiln__fail(KILN_ERROR_INVALID, "limit %d is not a CUlimit (0 to %d)", limit,
                      CU_LIMIT_MAX - 1);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUresult rc = kiln__driver.CtxSetLimit((CUlimit)limit, value);
  /* Device-side synchronization, which the sync depth limits, went with CUDA 12's device
   * runtime: the driver refuses the limit there. */
  const char *why = limit == CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH
                        ? " (cudaDeviceSynchronize in device code was removed in CUDA 12)"
                        : "";
  /* The driver's refusal, with its CUresult (PyCUDA's LogicError), said in words. */
  if (rc == CUDA_ERROR_UNSUPPORTED_LIMIT || rc == CUDA_ERROR_INVALID_VALUE) {
    if (rc == CUDA_ERROR_UNSUPPORTED_LIMIT)
      kiln__fail(KILN_ERROR_CUDA, "cuCtxSetLimit: limit %d (%s) is not supported on device %d%s",
                 limit, kiln__limit_name(limit), d->ordinal, why);
    else
      kiln__fail(KILN_ERROR_CUDA,
                 "cuCtxSetLimit: limit %d (%s) cannot be set to %zu on device %d%s", limit,
                 kiln__limit_name(limit), value, d->ordinal, why);
    kiln__set_cuda_result((int)rc);
    return KILN_ERROR_CUDA;
  }
  if (rc) return kiln__cuda_fail("cuCtxSetLimit", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_get_cache_config(int *config) {
  KILN__NEED(config);
  *config = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUfunc_cache c = CU_FUNC_CACHE_PREFER_NONE;
  KILN__CU(CtxGetCacheConfig, (&c));
  *config = (int)c;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_set_cache_config(int config) {
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
    return kiln__fail(KILN_ERROR_INVALID,
                      "cache config %d is not a CUfunc_cache (0 none, 1 shared, 2 L1, 3 equal)",
                      config);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(CtxSetCacheConfig, ((CUfunc_cache)config));
  kiln__clear_error();
  return KILN_OK;
}

/* cuCtx{Get,Set}SharedMemConfig are deprecated and may leave a later driver. */
static kiln_status kiln__shared_config_calls(void) {
  if (kiln__driver.CtxGetSharedMemConfig && kiln__driver.CtxSetSharedMemConfig) return KILN_OK;
  return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuCtxGetSharedMemConfig: the "
                                     "shared memory bank size is fixed on the GPUs it supports");
}

kiln_status kiln_context_get_shared_config(int *config) {
  KILN__NEED(config);
  *config = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || (s = kiln__shared_config_calls())) return s;
  CUsharedconfig c = CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE;
  KILN__CU(CtxGetSharedMemConfig, (&c));
  *config = (int)c;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_set_shared_config(int config) {
  if (config < CU_SHARED_MEM_CONFIG_DEFAULT_BANK_SIZE ||
      config > CU_SHARED_MEM_CONFIG_EIGHT_BYTE_BANK_SIZE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "shared config %d is not a CUsharedconfig (0 default, 1 four-byte banks, "
                      "2 eight-byte banks)",
                      config);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s || (s = kiln__shared_config_calls())) return s;
  KILN__CU(CtxSetSharedMemConfig, ((CUsharedconfig)config));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_handle(int device, uintptr_t *out) {
  KILN__NEED(out);
  *out = 0;
  kiln__device *d, *current;
  kiln_status s = kiln__device_visit(device, &d);
  if (s) return s;
  *out = (uintptr_t)d->ctx;
  /* Back to this thread's own device's context, which another library on the thread sees. */
  if ((s = kiln__device_enter(&current))) return s;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_api_version(unsigned *version) {
  KILN__NEED(version);
  *version = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(CtxGetApiVersion, (d->ctx, version));
  kiln__clear_error();
  return KILN_OK;
}

/* ---- Profiler control -------------------------------------------------------------------- */

kiln_status kiln_profiler_start(void) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!kiln__driver.ProfilerStart)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuProfilerStart");
  KILN__CU(ProfilerStart, ());
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_profiler_stop(void) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!kiln__driver.ProfilerStop)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuProfilerStop");
  KILN__CU(ProfilerStop, ());
  kiln__clear_error();
  return KILN_OK;
}
