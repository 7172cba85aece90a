/* Opening libcuda: dlopen on first GPU use, entry points through cuGetProcAddress. */
#include "driver.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

kiln__driver kiln__cu;

/* The outcome of the one load attempt, replayed to every later caller. */
static pthread_once_t kiln__driver_once = PTHREAD_ONCE_INIT;
static kiln_status kiln__driver_status;
static int kiln__driver_result;
static char kiln__driver_msg[512];

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
  CUresult (*init)(unsigned) = (CUresult(*)(unsigned))dlsym(h, "cuInit");
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
  } entries[] = {
#define KILN__ENTRY(member) {"cu" #member, (void **)&kiln__cu.member}
      KILN__ENTRY(GetErrorName),       KILN__ENTRY(GetErrorString),
      KILN__ENTRY(DeviceGetCount),
      KILN__ENTRY(DeviceGet),          KILN__ENTRY(DeviceGetName),
      KILN__ENTRY(DeviceGetAttribute), KILN__ENTRY(DeviceTotalMem),
      KILN__ENTRY(DevicePrimaryCtxRetain), KILN__ENTRY(CtxGetCurrent),
      KILN__ENTRY(CtxSetCurrent),      KILN__ENTRY(CtxSynchronize),
      KILN__ENTRY(LibraryLoadData),    KILN__ENTRY(LibraryUnload),
      KILN__ENTRY(LibraryGetKernel),   KILN__ENTRY(KernelGetAttribute),
      KILN__ENTRY(KernelSetAttribute), KILN__ENTRY(LaunchKernel),
      KILN__ENTRY(MemAlloc),           KILN__ENTRY(MemFree),
      KILN__ENTRY(MemAllocHost),       KILN__ENTRY(MemFreeHost),
      KILN__ENTRY(MemcpyHtoD),         KILN__ENTRY(MemcpyDtoH),
      KILN__ENTRY(MemcpyHtoDAsync),    KILN__ENTRY(MemcpyDtoHAsync),
      KILN__ENTRY(MemAllocAsync),      KILN__ENTRY(MemFreeAsync),
      KILN__ENTRY(MemGetAddressRange), KILN__ENTRY(MemGetInfo),
      KILN__ENTRY(StreamSynchronize),
      KILN__ENTRY(EventCreate),        KILN__ENTRY(EventDestroy),
      KILN__ENTRY(EventRecord),        KILN__ENTRY(EventSynchronize),
      KILN__ENTRY(EventElapsedTime),
      KILN__ENTRY(StreamCreateWithPriority), KILN__ENTRY(StreamDestroy),
      KILN__ENTRY(StreamQuery),        KILN__ENTRY(StreamWaitEvent),
      KILN__ENTRY(CtxGetStreamPriorityRange), KILN__ENTRY(EventQuery),
      KILN__ENTRY(MemcpyDtoDAsync),    KILN__ENTRY(MemsetD8Async),
      KILN__ENTRY(MemHostAlloc),       KILN__ENTRY(DeviceGetDefaultMemPool),
      KILN__ENTRY(MemPoolSetAttribute), KILN__ENTRY(MemPoolGetAttribute),
      KILN__ENTRY(MemPoolTrimTo),      KILN__ENTRY(PointerGetAttribute),
#undef KILN__ENTRY
  };
  for (size_t i = 0; i < KILN__COUNT(entries); i++) {
    CUdriverProcAddressQueryResult found;
    CUresult rc = get(entries[i].name, entries[i].slot, KILN__DRIVER_ABI,
                      CU_GET_PROC_ADDRESS_DEFAULT, &found);
    if (rc != CUDA_SUCCESS || !*entries[i].slot) {
      kiln__driver_remember(KILN_ERROR_NO_DRIVER, (int)rc,
                            "the CUDA driver in %s has no %s at the CUDA 12.0 ABI; kiln needs "
                            "a CUDA 12.0 or newer driver",
                            tried, entries[i].name);
      return;
    }
  }
  /* Optional: what describes the kernels of a CUBIN (CUDA 12.4); NULL on older drivers. */
  struct {
    const char *name;
    void **slot;
  } optional[] = {
      {"cuLibraryGetKernelCount", (void **)&kiln__cu.LibraryGetKernelCount},
      {"cuLibraryEnumerateKernels", (void **)&kiln__cu.LibraryEnumerateKernels},
      {"cuKernelGetName", (void **)&kiln__cu.KernelGetName},
      {"cuKernelGetParamInfo", (void **)&kiln__cu.KernelGetParamInfo},
  };
  for (size_t i = 0; i < KILN__COUNT(optional); i++) {
    CUdriverProcAddressQueryResult found;
    if (get(optional[i].name, optional[i].slot, 12040, CU_GET_PROC_ADDRESS_DEFAULT, &found) !=
        CUDA_SUCCESS)
      *optional[i].slot = NULL;
  }
  CUresult rc = init(0);
  if (rc != CUDA_SUCCESS) {
    const char *name = NULL;
    kiln__cu.GetErrorName(rc, &name);
    kiln_status s = rc == CUDA_ERROR_NO_DEVICE ? KILN_ERROR_NO_DEVICE : KILN_ERROR_NO_DRIVER;
    kiln__driver_remember(s, (int)rc,
                          "cuInit failed with %s: %s", name ? name : "an unknown error",
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

const char *kiln_cuda_result_name(int result) {
  const char *name = NULL;
  if (result == 0) return NULL;
  /* The table is filled before cuInit runs, so names are there even when cuInit failed. */
  if (kiln__cu.GetErrorName && kiln__cu.GetErrorName((CUresult)result, &name) == CUDA_SUCCESS)
    return name;
  return "CUDA_ERROR_UNKNOWN";
}

kiln_status kiln__cuda_fail(const char *call, int result) {
  const char *name = NULL, *text = NULL;
  if (kiln__cu.GetErrorName) kiln__cu.GetErrorName((CUresult)result, &name);
  if (kiln__cu.GetErrorString) kiln__cu.GetErrorString((CUresult)result, &text);
  kiln_status s = KILN_ERROR_CUDA;
  if (result == CUDA_ERROR_OUT_OF_MEMORY) s = KILN_ERROR_OUT_OF_MEMORY;
  kiln__fail(s, "%s failed with %s (%s)", call, name ? name : "an unknown CUresult",
             text ? text : "no description");
  kiln__set_cuda_result(result);
  return s;
}
