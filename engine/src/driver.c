/* Opening libcuda: dlopen on first GPU use, entry points through cuGetProcAddress. */
#include "driver.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kiln__driver_table kiln__driver;

/* The outcome of the one load attempt, replayed to every later caller. */
static pthread_once_t kiln__driver_once = PTHREAD_ONCE_INIT;
static kiln_status kiln__driver_status;
static int kiln__driver_result;
static char kiln__driver_msg[512];
static int kiln__driver_filled; /* the table is complete, whatever cuInit then said */

/* The ABI the table's prototypes follow; drivers older than this lack cuLibrary anyway. */
#define KILN__DRIVER_ABI 12000

typedef CUresult (*kiln__get_proc)(const char *, void **, int, cuuint64_t,
                                   CUdriverProcAddressQueryResult *);

static void kiln__driver_remember(kiln_status s, int result, const char *fmt, ...)
    KILN__PRINTF(3, 4);

static void kiln__driver_remember(kiln_status s, int result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(kiln__driver_msg, sizeof kiln__driver_msg, fmt, ap);
  va_end(ap);
  kiln__driver_status = s;
  kiln__driver_result = result;
}

static void *kiln__driver_open(const char **tried, char *why, size_t why_size) {
  const char *env = getenv("KILN_CUDA_PATH");
  *tried = env && *env ? env : "libcuda.so.1";
  void *h = dlopen(*tried, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char *e = dlerror(); /* the first failure says most */
    snprintf(why, why_size, "%s", e ? e : "not found");
    if (!(env && *env)) h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
  }
  return h;
}

static void kiln__driver_load_once(void) {
  const char *tried = NULL;
  char why[256] = "";
  void *h = kiln__driver_open(&tried, why, sizeof why);
  if (!h) {
    kiln__driver_remember(KILN_ERROR_NO_DRIVER, 0,
                          "no CUDA driver could be loaded (%s); launching kernels needs an "
                          "NVIDIA GPU and its driver, compiling does not",
                          why);
    return;
  }
  kiln__get_proc get = (kiln__get_proc)dlsym(h, "cuGetProcAddress_v2");
  CUresult (*init)(unsigned) = (CUresult (*)(unsigned))dlsym(h, "cuInit");
  if (!get || !init) {
    kiln__driver_remember(KILN_ERROR_NO_DRIVER, 0,
                          "the CUDA driver in %s is older than CUDA 12.0, which kiln needs "
                          "(cuGetProcAddress_v2 is missing)",
                          tried);
    return;
  }
  struct {
    const char *name;
    void **slot;
  } symbols[] = {
#define KILN__SYMBOL(member) {"cu" #member, (void **)&kiln__driver.member}
      KILN__SYMBOL(GetErrorName),
      KILN__SYMBOL(GetErrorString),
      KILN__SYMBOL(DeviceGetCount),
      KILN__SYMBOL(DeviceGet),
      KILN__SYMBOL(DeviceGetName),
      KILN__SYMBOL(DeviceGetAttribute),
      KILN__SYMBOL(DeviceTotalMem),
      KILN__SYMBOL(DevicePrimaryCtxRetain),
      KILN__SYMBOL(CtxGetCurrent),
      KILN__SYMBOL(CtxSetCurrent),
      KILN__SYMBOL(CtxSynchronize),
      KILN__SYMBOL(LibraryLoadData),
      KILN__SYMBOL(LibraryUnload),
      KILN__SYMBOL(LibraryGetKernel),
      KILN__SYMBOL(KernelGetAttribute),
      KILN__SYMBOL(KernelSetAttribute),
      KILN__SYMBOL(LaunchKernel),
      KILN__SYMBOL(MemAlloc),
      KILN__SYMBOL(MemFree),
      KILN__SYMBOL(MemAllocHost),
      KILN__SYMBOL(MemFreeHost),
      KILN__SYMBOL(MemcpyHtoD),
      KILN__SYMBOL(MemcpyDtoH),
      KILN__SYMBOL(MemcpyHtoDAsync),
      KILN__SYMBOL(MemcpyDtoHAsync),
      KILN__SYMBOL(MemAllocAsync),
      KILN__SYMBOL(MemFreeAsync),
      KILN__SYMBOL(MemGetAddressRange),
      KILN__SYMBOL(MemGetInfo),
      KILN__SYMBOL(StreamSynchronize),
      KILN__SYMBOL(EventCreate),
      KILN__SYMBOL(EventDestroy),
      KILN__SYMBOL(EventRecord),
      KILN__SYMBOL(EventSynchronize),
      KILN__SYMBOL(EventElapsedTime),
      KILN__SYMBOL(StreamCreateWithPriority),
      KILN__SYMBOL(StreamDestroy),
      KILN__SYMBOL(StreamQuery),
      KILN__SYMBOL(StreamWaitEvent),
      KILN__SYMBOL(CtxGetStreamPriorityRange),
      KILN__SYMBOL(EventQuery),
      KILN__SYMBOL(MemcpyDtoDAsync),
      KILN__SYMBOL(MemsetD8Async),
      KILN__SYMBOL(MemHostAlloc),
      KILN__SYMBOL(DeviceGetDefaultMemPool),
      KILN__SYMBOL(MemPoolSetAttribute),
      KILN__SYMBOL(MemPoolGetAttribute),
      KILN__SYMBOL(MemPoolTrimTo),
      KILN__SYMBOL(PointerGetAttribute),
      KILN__SYMBOL(DriverGetVersion),
      KILN__SYMBOL(DeviceGetPCIBusId),
      KILN__SYMBOL(DeviceGetByPCIBusId),
      KILN__SYMBOL(CtxGetLimit),
      KILN__SYMBOL(CtxSetLimit),
      KILN__SYMBOL(CtxGetCacheConfig),
      KILN__SYMBOL(CtxSetCacheConfig),
      KILN__SYMBOL(CtxGetApiVersion),
      KILN__SYMBOL(KernelSetCacheConfig),
      KILN__SYMBOL(LibraryGetGlobal),
      KILN__SYMBOL(MemsetD8),
      KILN__SYMBOL(MemsetD16),
      KILN__SYMBOL(MemsetD32),
      KILN__SYMBOL(MemsetD16Async),
      KILN__SYMBOL(MemsetD32Async),
      KILN__SYMBOL(MemcpyDtoD),
      KILN__SYMBOL(MemAllocPitch),
      KILN__SYMBOL(MemHostRegister),
      KILN__SYMBOL(MemHostUnregister),
      KILN__SYMBOL(MemHostGetDevicePointer),
      KILN__SYMBOL(MemHostGetFlags),
      KILN__SYMBOL(KernelGetFunction),
      KILN__SYMBOL(LaunchKernelEx),
      KILN__SYMBOL(OccupancyMaxActiveBlocksPerMultiprocessor),
      KILN__SYMBOL(OccupancyMaxPotentialBlockSize),
      KILN__SYMBOL(OccupancyAvailableDynamicSMemPerBlock),
      KILN__SYMBOL(OccupancyMaxActiveClusters),
      KILN__SYMBOL(StreamBeginCapture),
      KILN__SYMBOL(StreamEndCapture),
      KILN__SYMBOL(StreamIsCapturing),
      KILN__SYMBOL(StreamGetCaptureInfo),
      KILN__SYMBOL(GraphInstantiateWithFlags),
      KILN__SYMBOL(GraphLaunch),
      KILN__SYMBOL(GraphExecUpdate),
      KILN__SYMBOL(GraphExecKernelNodeSetParams),
      KILN__SYMBOL(GraphKernelNodeGetParams),
      KILN__SYMBOL(GraphGetNodes),
      KILN__SYMBOL(GraphNodeGetType),
      KILN__SYMBOL(GraphDestroy),
      KILN__SYMBOL(GraphExecDestroy),
#undef KILN__SYMBOL
  };
  for (size_t i = 0; i < KILN__COUNT(symbols); i++) {
    CUdriverProcAddressQueryResult found;
    CUresult rc = get(symbols[i].name, symbols[i].slot, KILN__DRIVER_ABI,
                      CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (rc != CUDA_SUCCESS || !*symbols[i].slot) {
      kiln__driver_remember(KILN_ERROR_NO_DRIVER, (int)rc,
                            "the CUDA driver in %s has no %s at the CUDA 12.0 ABI; kiln needs "
                            "a CUDA 12.0 or newer driver",
                            tried, symbols[i].name);
      return;
    }
  }
  /* Optional: what describes the kernels of a CUBIN (CUDA 12.4); deprecated calls and the
   * linker, which a later driver may drop; what only some programs use (managed memory, 2D
   * memsets and copies, CUDA arrays, IPC, peer access). NULL where this driver lacks them. */
  struct {
    const char *name;
    void **slot;
    int abi;
  } optional[] = {
      {"cuLibraryGetKernelCount", (void **)&kiln__driver.LibraryGetKernelCount, 12040},
      {"cuLibraryEnumerateKernels", (void **)&kiln__driver.LibraryEnumerateKernels, 12040},
      {"cuKernelGetName", (void **)&kiln__driver.KernelGetName, 12040},
      {"cuKernelGetParamInfo", (void **)&kiln__driver.KernelGetParamInfo, 12040},
      {"cuCtxGetSharedMemConfig", (void **)&kiln__driver.CtxGetSharedMemConfig, KILN__DRIVER_ABI},
      {"cuCtxSetSharedMemConfig", (void **)&kiln__driver.CtxSetSharedMemConfig, KILN__DRIVER_ABI},
      {"cuLinkCreate", (void **)&kiln__driver.LinkCreate, KILN__DRIVER_ABI},
      {"cuLinkAddData", (void **)&kiln__driver.LinkAddData, KILN__DRIVER_ABI},
      {"cuLinkAddFile", (void **)&kiln__driver.LinkAddFile, KILN__DRIVER_ABI},
      {"cuLinkComplete", (void **)&kiln__driver.LinkComplete, KILN__DRIVER_ABI},
      {"cuLinkDestroy", (void **)&kiln__driver.LinkDestroy, KILN__DRIVER_ABI},
      {"cuMemAllocManaged", (void **)&kiln__driver.MemAllocManaged, KILN__DRIVER_ABI},
      {"cuStreamAttachMemAsync", (void **)&kiln__driver.StreamAttachMemAsync, KILN__DRIVER_ABI},
      {"cuMemsetD2D8", (void **)&kiln__driver.MemsetD2D8, KILN__DRIVER_ABI},
      {"cuMemsetD2D16", (void **)&kiln__driver.MemsetD2D16, KILN__DRIVER_ABI},
      {"cuMemsetD2D32", (void **)&kiln__driver.MemsetD2D32, KILN__DRIVER_ABI},
      {"cuMemsetD2D8Async", (void **)&kiln__driver.MemsetD2D8Async, KILN__DRIVER_ABI},
      {"cuMemsetD2D16Async", (void **)&kiln__driver.MemsetD2D16Async, KILN__DRIVER_ABI},
      {"cuMemsetD2D32Async", (void **)&kiln__driver.MemsetD2D32Async, KILN__DRIVER_ABI},
      {"cuMemcpy2D", (void **)&kiln__driver.Memcpy2D, KILN__DRIVER_ABI},
      {"cuMemcpy2DUnaligned", (void **)&kiln__driver.Memcpy2DUnaligned, KILN__DRIVER_ABI},
      {"cuMemcpy2DAsync", (void **)&kiln__driver.Memcpy2DAsync, KILN__DRIVER_ABI},
      {"cuMemcpy3D", (void **)&kiln__driver.Memcpy3D, KILN__DRIVER_ABI},
      {"cuMemcpy3DAsync", (void **)&kiln__driver.Memcpy3DAsync, KILN__DRIVER_ABI},
      {"cuProfilerStart", (void **)&kiln__driver.ProfilerStart, KILN__DRIVER_ABI},
      {"cuProfilerStop", (void **)&kiln__driver.ProfilerStop, KILN__DRIVER_ABI},
      {"cuIpcGetMemHandle", (void **)&kiln__driver.IpcGetMemHandle, KILN__DRIVER_ABI},
      {"cuIpcOpenMemHandle", (void **)&kiln__driver.IpcOpenMemHandle, KILN__DRIVER_ABI},
      {"cuIpcCloseMemHandle", (void **)&kiln__driver.IpcCloseMemHandle, KILN__DRIVER_ABI},
      {"cuIpcGetEventHandle", (void **)&kiln__driver.IpcGetEventHandle, KILN__DRIVER_ABI},
      {"cuIpcOpenEventHandle", (void **)&kiln__driver.IpcOpenEventHandle, KILN__DRIVER_ABI},
      {"cuDeviceCanAccessPeer", (void **)&kiln__driver.DeviceCanAccessPeer, KILN__DRIVER_ABI},
      {"cuCtxEnablePeerAccess", (void **)&kiln__driver.CtxEnablePeerAccess, KILN__DRIVER_ABI},
      {"cuCtxDisablePeerAccess", (void **)&kiln__driver.CtxDisablePeerAccess, KILN__DRIVER_ABI},
      {"cuMemcpyPeer", (void **)&kiln__driver.MemcpyPeer, KILN__DRIVER_ABI},
      {"cuMemcpyPeerAsync", (void **)&kiln__driver.MemcpyPeerAsync, KILN__DRIVER_ABI},
      {"cuMemcpy3DPeer", (void **)&kiln__driver.Memcpy3DPeer, KILN__DRIVER_ABI},
      {"cuMemcpy3DPeerAsync", (void **)&kiln__driver.Memcpy3DPeerAsync, KILN__DRIVER_ABI},
      {"cuArrayCreate", (void **)&kiln__driver.ArrayCreate, KILN__DRIVER_ABI},
      {"cuArray3DCreate", (void **)&kiln__driver.Array3DCreate, KILN__DRIVER_ABI},
      {"cuArrayDestroy", (void **)&kiln__driver.ArrayDestroy, KILN__DRIVER_ABI},
      {"cuMemcpyHtoA", (void **)&kiln__driver.MemcpyHtoA, KILN__DRIVER_ABI},
      {"cuMemcpyAtoH", (void **)&kiln__driver.MemcpyAtoH, KILN__DRIVER_ABI},
      {"cuMemcpyDtoA", (void **)&kiln__driver.MemcpyDtoA, KILN__DRIVER_ABI},
      {"cuMemcpyAtoD", (void **)&kiln__driver.MemcpyAtoD, KILN__DRIVER_ABI},
      {"cuMemcpyAtoA", (void **)&kiln__driver.MemcpyAtoA, KILN__DRIVER_ABI},
  };
  for (size_t i = 0; i < KILN__COUNT(optional); i++) {
    CUdriverProcAddressQueryResult found;
    if (get(optional[i].name, optional[i].slot, optional[i].abi, CU_GET_PROC_ADDRESS_DEFAULT,
            &found) != CUDA_SUCCESS)
      *optional[i].slot = NULL;
  }
  __atomic_store_n(&kiln__driver_filled, 1, __ATOMIC_RELEASE);
  CUresult rc = init(0);
  if (rc != CUDA_SUCCESS) {
    const char *name = NULL;
    kiln__driver.GetErrorName(rc, &name);
    kiln_status s = rc == CUDA_ERROR_NO_DEVICE ? KILN_ERROR_NO_DEVICE : KILN_ERROR_NO_DRIVER;
    kiln__driver_remember(s, (int)rc, "cuInit failed with %s: %s", name ? name : "an unknown error",
                          rc == CUDA_ERROR_NO_DEVICE ? "the driver found no CUDA device"
                                                     : "the CUDA driver cannot be used");
    return;
  }
  kiln__driver_status = KILN_OK;
}

kiln_status kiln__driver_load(void) {
  pthread_once(&kiln__driver_once, kiln__driver_load_once);
  if (KILN__LIKELY(kiln__driver_status == KILN_OK)) return KILN_OK;
  kiln__fail(kiln__driver_status, "%s", kiln__driver_msg);
  kiln__set_cuda_result(kiln__driver_result);
  return kiln__driver_status;
}

int kiln__driver_opened(void) { return __atomic_load_n(&kiln__driver_filled, __ATOMIC_ACQUIRE); }

kiln_status kiln_driver_init(void) {
  kiln_status s = kiln__driver_load();
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_driver_version(int *version) {
  KILN__NEED(version);
  *version = 0;
  kiln_status s = kiln__driver_load();
  /* cuDriverGetVersion needs no device: a driver that found none still says what it is. */
  if (s && !(s == KILN_ERROR_NO_DEVICE && kiln__driver_opened())) return s;
  KILN__CU(DriverGetVersion, (version));
  kiln__clear_error();
  return KILN_OK;
}

int kiln_driver_header_version(void) { return CUDA_VERSION; }

const char *kiln_cuda_result_name(int result) {
  const char *name = NULL;
  if (result == 0) return NULL;
  /* The table is filled before cuInit runs, so names are there even when cuInit failed. */
  if (kiln__driver.GetErrorName &&
      kiln__driver.GetErrorName((CUresult)result, &name) == CUDA_SUCCESS)
    return name;
  /* Without a driver to ask: the results kiln gives what it refuses itself as the driver
   * would (a launch, a pop with no context pushed, an image that is none). */
  switch (result) {
  case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
  case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
  case CUDA_ERROR_INVALID_IMAGE: return "CUDA_ERROR_INVALID_IMAGE";
  case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES";
  case CUDA_ERROR_INVALID_CLUSTER_SIZE: return "CUDA_ERROR_INVALID_CLUSTER_SIZE";
  case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: return "CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE";
  default: return "CUDA_ERROR_UNKNOWN";
  }
}

/* The JIT options whose values are plain integers (CUjit_option's numbers): the rest are
 * pointers, or the log buffers kiln gives the loader and the linker itself. WALL_TIME is
 * written by the driver. */
static int kiln__jit_option_known(int option) {
  switch (option) {
  case CU_JIT_MAX_REGISTERS:
  case CU_JIT_THREADS_PER_BLOCK:
  case CU_JIT_WALL_TIME:
  case CU_JIT_OPTIMIZATION_LEVEL:
  case CU_JIT_TARGET_FROM_CUCONTEXT:
  case CU_JIT_TARGET:
  case CU_JIT_FALLBACK_STRATEGY:
  case CU_JIT_GENERATE_DEBUG_INFO:
  case CU_JIT_LOG_VERBOSE:
  case CU_JIT_GENERATE_LINE_INFO:
  case CU_JIT_CACHE_MODE:
  case 16: /* CU_JIT_FAST_COMPILE */
  case 30: /* CU_JIT_POSITION_INDEPENDENT_CODE */
  case 31: /* CU_JIT_MIN_CTA_PER_SM */
  case 32: /* CU_JIT_MAX_THREADS_PER_BLOCK */
  case 33: /* CU_JIT_OVERRIDE_DIRECTIVE_VALUES */ return 1;
  default: return 0;
  }
}

kiln_status kiln__driver_jit_options(const kiln_jit_option *options, int n, const char *what,
                                     CUjit_option *keys, void **values) {
  for (int i = 0; i < n; i++) {
    int option = options[i].option;
    long long value = options[i].value;
    if (!kiln__jit_option_known(option))
      return kiln__fail(KILN_ERROR_INVALID,
                        "%s option %d (a CUjit_option) is not one kiln passes: %s", what, option,
                        option >= CU_JIT_INFO_LOG_BUFFER &&
                                option <= CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
                            ? "the log buffers are kiln's own; read the logs it returns"
                            : "only options with integer values are taken");
    if (value < 0 || value > UINT_MAX)
      return kiln__fail(KILN_ERROR_INVALID,
                        "%s option %d has the value %lld; an unsigned 32-bit integer is "
                        "expected",
                        what, option, value);
    keys[i] = (CUjit_option)option;
    values[i] = (void *)(uintptr_t)value;
  }
  return KILN_OK;
}

kiln_status kiln__cuda_fail(const char *call, int result) {
  const char *name = NULL, *text = NULL;
  if (kiln__driver.GetErrorName) kiln__driver.GetErrorName((CUresult)result, &name);
  if (kiln__driver.GetErrorString) kiln__driver.GetErrorString((CUresult)result, &text);
  kiln_status s = KILN_ERROR_CUDA;
  if (result == CUDA_ERROR_OUT_OF_MEMORY) s = KILN_ERROR_OUT_OF_MEMORY;
  kiln__fail(s, "%s failed with %s (%s)", call, name ? name : "an unknown CUresult",
             text ? text : "no description");
  kiln__set_cuda_result(result);
  return s;
}
