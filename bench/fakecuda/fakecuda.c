/* A CUDA driver that does no GPU work, for timing the CPU side of a launch (bench/cpu.py).
 *
 * Built as libcuda.so.1, it stands in for the real driver both for kiln (KILN_CUDA_PATH) and
 * for the floor (bench/floor/floor.c, linked against it). cuLaunchKernel returns at once, so
 * what a loop of launches costs is the caller's own work: the floor's unpacking of its ints,
 * or kiln's parsing, checking and packing. The difference between the two is the overhead the
 * launch row of bench/compare.py holds against the floor, without the driver's own ~2.5 µs
 * that sits in both there.
 *
 * One device with an H100's limits; "device memory" is host memory from malloc, so copies
 * work and a pointer's allocation can be found; modules and kernels are tokens. Any other
 * entry point kiln asks for answers CUDA_ERROR_NOT_SUPPORTED, so a path the fake does not
 * model fails loudly instead of reading an output that was never written. */
#include <cuda.h>
#include <pthread.h>
#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define FAKE_COUNTING 1
#endif
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_EXPORT __attribute__((visibility("default")))

static CUresult fake_unsupported(void) { return CUDA_ERROR_NOT_SUPPORTED; }

static const int fake_token; /* the address every module, kernel and context points at */
static __thread CUcontext fake_current;

/* ---- Errors, initialization, the device ---------------------------------------------------- */

FAKE_EXPORT CUresult cuInit(unsigned flags) {
  (void)flags;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorName(CUresult rc, const char **name) {
  *name = rc == CUDA_SUCCESS               ? "CUDA_SUCCESS"
          : rc == CUDA_ERROR_NOT_SUPPORTED ? "CUDA_ERROR_NOT_SUPPORTED"
          : rc == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
                                           : "CUDA_ERROR_UNKNOWN";
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult rc, const char **text) {
  *text = rc == CUDA_ERROR_NOT_SUPPORTED ? "the fake CUDA driver does not model this call"
                                         : "an error of the fake CUDA driver";
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int *version) {
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetCount(int *count) {
  *count = 1;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice *dev, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *dev = 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
  (void)dev;
  if (len < 1) return CUDA_ERROR_INVALID_VALUE;
  strncpy(name, "fake CUDA device (CPU timing)", (size_t)len - 1);
  name[len - 1] = 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceTotalMem(size_t *bytes, CUdevice dev) {
  (void)dev;
  *bytes = (size_t)80 << 30;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int *value, CUdevice_attribute attr, CUdevice dev) {
  (void)dev;
  switch (attr) {
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = 9; break;
  case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = 0; break;
  case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = 132; break;
  case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X:
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: *value = 1024; break;
  case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: *value = 64; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: *value = INT32_MAX; break;
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
  case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: *value = 65535; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: *value = 48 << 10; break;
  case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = 227 << 10; break;
  case CU_DEVICE_ATTRIBUTE_WARP_SIZE: *value = 32; break;
  default: *value = 0; break; /* memory pools and the rest: not there */
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *ctx, CUdevice dev) {
  (void)dev;
  *ctx = (CUcontext)(uintptr_t)&fake_token;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext *ctx) {
  *ctx = fake_current;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
  fake_current = ctx;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned *version) {
  (void)ctx;
  *version = 3020;
  return CUDA_SUCCESS;
}

/* With FAKECUDA_SAY_SYNCHRONIZE set, each wait says so on stderr: the tests see when kiln
 * waits (at a program's end) by the order of that line and their own. */
FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  if (getenv("FAKECUDA_SAY_SYNCHRONIZE")) fputs("fakecuda: cuCtxSynchronize\n", stderr);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}

/* Work is done when it is queued: every stream and event is always finished. */
FAKE_EXPORT CUresult cuStreamQuery(CUstream stream) {
  (void)stream;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream stream, CUevent event, unsigned flags) {
  (void)stream, (void)event, (void)flags;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventCreate(CUevent *event, unsigned flags) {
  (void)flags;
  *event = (CUevent)(uintptr_t)&fake_token;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventDestroy(CUevent event) {
  (void)event;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent event, CUstream stream) {
  (void)event, (void)stream;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventQuery(CUevent event) {
  (void)event;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventSynchronize(CUevent event) {
  (void)event;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream stream, CUstreamCaptureStatus *status) {
  (void)stream;
  *status = CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

/* ---- Modules and kernels: tokens ----------------------------------------------------------- */

FAKE_EXPORT CUresult cuLibraryLoadData(CUlibrary *lib, const void *image, CUjit_option *jit,
                                       void **jit_values, unsigned n_jit, CUlibraryOption *options,
                                       void **option_values, unsigned n_options) {
  (void)image, (void)jit, (void)jit_values, (void)n_jit, (void)options, (void)option_values,
      (void)n_options;
  *lib = (CUlibrary)(uintptr_t)&fake_token;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLibraryUnload(CUlibrary lib) {
  (void)lib;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLibraryGetKernel(CUkernel *kernel, CUlibrary lib, const char *name) {
  (void)lib, (void)name;
  *kernel = (CUkernel)(uintptr_t)&fake_token;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuKernelGetAttribute(int *value, CUfunction_attribute attr, CUkernel kernel,
                                          CUdevice dev) {
  (void)kernel, (void)dev;
  *value = attr == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuKernelGetFunction(CUfunction *fn, CUkernel kernel) {
  *fn = (CUfunction)kernel;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image) {
  (void)image;
  *module = (CUmodule)(uintptr_t)&fake_token;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleUnload(CUmodule module) {
  (void)module;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *fn, CUmodule module, const char *name) {
  (void)module, (void)name;
  *fn = (CUfunction)(uintptr_t)&fake_token;
  return CUDA_SUCCESS;
}

/* bench/c/compare.c links it (its global mode); a program bound at load time needs it there. */
FAKE_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule module,
                                          const char *name) {
  (void)module, (void)name;
  if (dptr) *dptr = 0;
  if (bytes) *bytes = 0;
  return CUDA_ERROR_NOT_FOUND;
}

/* What the launches were given, for tests (tests/test_fake_driver.py): the number of
 * launches, and, once fakecuda_record has said the parameters' sizes, the last launch's shape
 * and the bytes of its parameters, copied while the caller's pointers are good. */
#define FAKE_RECORD_MAX 8192
static unsigned long long fake_launches;
static int fake_record_n = -1;
static unsigned fake_record_sizes[1024];
static unsigned char fake_record_bytes[FAKE_RECORD_MAX];
static unsigned fake_record_shape[7];

/* Records each later launch's n parameters, of sizes[i] bytes; n < 0 stops recording. */
FAKE_EXPORT int fakecuda_record(int n, const unsigned *sizes) {
  size_t total = 0;
  if (n > 1024) return -1;
  for (int i = 0; i < n; i++) total += sizes[i];
  if (total > FAKE_RECORD_MAX) return -1;
  if (n > 0) memcpy(fake_record_sizes, sizes, (size_t)n * sizeof *sizes);
  fake_record_n = n;
  return 0;
}

FAKE_EXPORT unsigned long long fakecuda_launches(void) { return fake_launches; }

/* The last recorded launch: its parameters' bytes, one after another, into out (which holds
 * at least the sum of the sizes), and grid x, y, z, block x, y, z and shared into shape. */
FAKE_EXPORT void fakecuda_recorded(unsigned char *out, unsigned shape[7]) {
  size_t total = 0;
  for (int i = 0; i < fake_record_n; i++) total += fake_record_sizes[i];
  memcpy(out, fake_record_bytes, total);
  memcpy(shape, fake_record_shape, sizeof fake_record_shape);
}

/* The whole point: a launch that costs the caller nothing but the call (and, when a test asks,
 * a copy of what it was given). */
FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream stream, void **params, void **extra) {
  (void)f, (void)stream, (void)extra;
  fake_launches++;
  if (__builtin_expect(fake_record_n >= 0, 0)) {
    size_t at = 0;
    for (int i = 0; i < fake_record_n; i++) {
      memcpy(fake_record_bytes + at, params[i], fake_record_sizes[i]);
      at += fake_record_sizes[i];
    }
    unsigned shape[7] = {gx, gy, gz, bx, by, bz, shared};
    memcpy(fake_record_shape, shape, sizeof shape);
  }
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **params,
                                      void **extra) {
  (void)config, (void)f, (void)params, (void)extra;
  return CUDA_SUCCESS;
}

/* ---- Memory: host memory, with its allocations remembered ---------------------------------- */

typedef struct fake_block {
  CUdeviceptr base;
  size_t size;
  struct fake_block *next;
} fake_block;

static fake_block *fake_blocks;
static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;

FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr *p, size_t bytes) {
  void *m = NULL;
  fake_block *b = malloc(sizeof *b);
  if (!b || posix_memalign(&m, 256, bytes ? bytes : 1)) {
    free(b);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  b->base = (CUdeviceptr)(uintptr_t)m;
  b->size = bytes;
  pthread_mutex_lock(&fake_lock);
  b->next = fake_blocks;
  fake_blocks = b;
  pthread_mutex_unlock(&fake_lock);
  *p = b->base;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree(CUdeviceptr p) {
  pthread_mutex_lock(&fake_lock);
  fake_block **at = &fake_blocks;
  while (*at && (*at)->base != p) at = &(*at)->next;
  fake_block *b = *at;
  if (b) *at = b->next;
  pthread_mutex_unlock(&fake_lock);
  if (!b) return CUDA_ERROR_INVALID_VALUE;
  free((void *)(uintptr_t)b->base);
  free(b);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  CUresult rc = CUDA_ERROR_NOT_FOUND;
  pthread_mutex_lock(&fake_lock);
  for (fake_block *b = fake_blocks; b; b = b->next)
    if (p >= b->base && p < b->base + (b->size ? b->size : 1)) {
      if (base) *base = b->base;
      if (size) *size = b->size;
      rc = CUDA_SUCCESS;
      break;
    }
  pthread_mutex_unlock(&fake_lock);
  return rc;
}

FAKE_EXPORT CUresult cuMemGetInfo(size_t *free_bytes, size_t *total) {
  *free_bytes = *total = (size_t)80 << 30;
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  memcpy((void *)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpyHtoDAsync(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
  (void)s;
  return cuMemcpyHtoD(dst, src, n);
}

FAKE_EXPORT CUresult cuMemcpyDtoHAsync(void *dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  return cuMemcpyDtoH(dst, src, n);
}

FAKE_EXPORT CUresult cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  (void)s;
  return cuMemcpyDtoD(dst, src, n);
}

FAKE_EXPORT CUresult cuMemsetD8(CUdeviceptr dst, unsigned char v, size_t n) {
  memset((void *)(uintptr_t)dst, v, n);
  return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
  (void)s;
  return cuMemsetD8(dst, v, n);
}

FAKE_EXPORT CUresult cuMemAllocHost(void **p, size_t bytes) {
  *p = malloc(bytes ? bytes : 1);
  return *p ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FAKE_EXPORT CUresult cuMemHostAlloc(void **p, size_t bytes, unsigned flags) {
  (void)flags;
  return cuMemAllocHost(p, bytes);
}

FAKE_EXPORT CUresult cuMemFreeHost(void *p) {
  free(p);
  return CUDA_SUCCESS;
}

/* ---- Counting instructions under callgrind (bench/cpu.py --callgrind) ---------------------- */

/* 1 when running under valgrind with the client requests built in. */
FAKE_EXPORT int fakecuda_counting(void) {
#ifdef FAKE_COUNTING
  return RUNNING_ON_VALGRIND ? 1 : 0;
#else
  return 0;
#endif
}

/* Instrumentation on (callgrind was started with it off, so the start-up ran fast). */
FAKE_EXPORT void fakecuda_count_begin(void) {
#ifdef FAKE_COUNTING
  CALLGRIND_START_INSTRUMENTATION;
#endif
}

FAKE_EXPORT void fakecuda_count_zero(void) {
#ifdef FAKE_COUNTING
  CALLGRIND_ZERO_STATS;
#endif
}

/* Writes what was counted since fakecuda_count_zero to a dump of its own. */
FAKE_EXPORT void fakecuda_count_dump(void) {
#ifdef FAKE_COUNTING
  CALLGRIND_DUMP_STATS;
#endif
}

/* ---- The entry points by name -------------------------------------------------------------- */

/* The names kiln asks for (cuda.h maps some of them to their _v2 symbols here). */
static const struct {
  const char *name;
  void *fn;
} fake_entries[] = {
#define FAKE_ENTRY(name) {#name, (void *)name}
    FAKE_ENTRY(cuGetErrorName),
    FAKE_ENTRY(cuGetErrorString),
    FAKE_ENTRY(cuDriverGetVersion),
    FAKE_ENTRY(cuDeviceGetCount),
    FAKE_ENTRY(cuDeviceGet),
    FAKE_ENTRY(cuDeviceGetName),
    FAKE_ENTRY(cuDeviceTotalMem),
    FAKE_ENTRY(cuDeviceGetAttribute),
    FAKE_ENTRY(cuDevicePrimaryCtxRetain),
    FAKE_ENTRY(cuCtxGetCurrent),
    FAKE_ENTRY(cuCtxSetCurrent),
    FAKE_ENTRY(cuCtxGetApiVersion),
    FAKE_ENTRY(cuCtxSynchronize),
    FAKE_ENTRY(cuStreamSynchronize),
    FAKE_ENTRY(cuStreamIsCapturing),
    FAKE_ENTRY(cuStreamQuery),
    FAKE_ENTRY(cuStreamWaitEvent),
    FAKE_ENTRY(cuEventCreate),
    FAKE_ENTRY(cuEventDestroy),
    FAKE_ENTRY(cuEventRecord),
    FAKE_ENTRY(cuEventQuery),
    FAKE_ENTRY(cuEventSynchronize),
    FAKE_ENTRY(cuLibraryLoadData),
    FAKE_ENTRY(cuLibraryUnload),
    FAKE_ENTRY(cuLibraryGetKernel),
    FAKE_ENTRY(cuKernelGetAttribute),
    FAKE_ENTRY(cuKernelGetFunction),
    FAKE_ENTRY(cuLaunchKernel),
    FAKE_ENTRY(cuLaunchKernelEx),
    FAKE_ENTRY(cuMemAlloc),
    FAKE_ENTRY(cuMemFree),
    FAKE_ENTRY(cuMemGetAddressRange),
    FAKE_ENTRY(cuMemGetInfo),
    FAKE_ENTRY(cuMemcpyHtoD),
    FAKE_ENTRY(cuMemcpyDtoH),
    FAKE_ENTRY(cuMemcpyDtoD),
    FAKE_ENTRY(cuMemcpyHtoDAsync),
    FAKE_ENTRY(cuMemcpyDtoHAsync),
    FAKE_ENTRY(cuMemcpyDtoDAsync),
    FAKE_ENTRY(cuMemsetD8),
    FAKE_ENTRY(cuMemsetD8Async),
    FAKE_ENTRY(cuMemAllocHost),
    FAKE_ENTRY(cuMemHostAlloc),
    FAKE_ENTRY(cuMemFreeHost),
#undef FAKE_ENTRY
};

/* Optional entry points kiln can do without: absent, so it takes its other way. */
static const char *const fake_absent[] = {
    "cuLibraryGetKernelCount",
    "cuLibraryEnumerateKernels",
    "cuKernelGetName",
    "cuKernelGetParamInfo",
};

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult *status) {
  (void)version, (void)flags;
  for (size_t i = 0; i < sizeof fake_entries / sizeof fake_entries[0]; i++)
    if (!strcmp(symbol, fake_entries[i].name)) {
      *pfn = fake_entries[i].fn;
      if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
      return CUDA_SUCCESS;
    }
  for (size_t i = 0; i < sizeof fake_absent / sizeof fake_absent[0]; i++)
    if (!strcmp(symbol, fake_absent[i])) {
      *pfn = NULL;
      if (status) *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
      return CUDA_ERROR_NOT_FOUND;
    }
  *pfn = (void *)fake_unsupported;
  if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
  return CUDA_SUCCESS;
}
