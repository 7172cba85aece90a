/* Linking relocatable device code with the device runtime. NVRTC with -rdc=true leaves a
 * relocatable CUBIN whose device-side launches call into libcudadevrt.a; the driver cannot load
 * it until a linker has resolved them. nvJitLink does that without a driver, so a
 * DynamicSourceModule compiles (and fills the cache) on a machine with no GPU, as any other
 * source does; with no nvJitLink the driver's cuLink* do it in the current context. */
#include "link.h"

#include "device.h"
#include "dup.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* nvJitLink's ABI, declared here rather than taken from nvJitLink.h, whose functions are
 * inline wrappers of symbols versioned by the toolkit's major version. */
typedef struct kiln__jl *kiln__jl_handle;
enum { KILN__JL_INPUT_CUBIN = 1, KILN__JL_INPUT_LIBRARY = 6 };

typedef struct kiln__jl_table {
  int (*Create)(kiln__jl_handle *, uint32_t, const char **);
  int (*Destroy)(kiln__jl_handle *);
  int (*AddData)(kiln__jl_handle, int, const void *, size_t, const char *);
  int (*AddFile)(kiln__jl_handle, int, const char *);
  int (*Complete)(kiln__jl_handle);
  int (*GetLinkedCubinSize)(kiln__jl_handle, size_t *);
  int (*GetLinkedCubin)(kiln__jl_handle, void *);
  int (*GetErrorLogSize)(kiln__jl_handle, size_t *);
  int (*GetErrorLog)(kiln__jl_handle, char *);
} kiln__jl_table;

static kiln__jl_table kiln__jl;
static pthread_once_t kiln__jl_once = PTHREAD_ONCE_INIT;
static int kiln__jl_ok;
static char kiln__jl_why[512];

/* Resolves every entry point with one version suffix ("_13_0"); 0 when one is missing. */
static int kiln__jl_resolve(void *h, const char *suffix) {
  struct {
    const char *name;
    void **slot;
  } symbols[] = {
#define KILN__JL_SYMBOL(member) {"__nvJitLink" #member, (void **)&kiln__jl.member}
      KILN__JL_SYMBOL(Create),         KILN__JL_SYMBOL(Destroy),
      KILN__JL_SYMBOL(AddData),        KILN__JL_SYMBOL(AddFile),
      KILN__JL_SYMBOL(Complete),       KILN__JL_SYMBOL(GetLinkedCubinSize),
      KILN__JL_SYMBOL(GetLinkedCubin), KILN__JL_SYMBOL(GetErrorLogSize),
      KILN__JL_SYMBOL(GetErrorLog),
#undef KILN__JL_SYMBOL
  };
  for (size_t i = 0; i < KILN__COUNT(symbols); i++) {
    char name[64];
    snprintf(name, sizeof name, "%s%s", symbols[i].name, suffix);
    if (!(*symbols[i].slot = dlsym(h, name))) return 0;
  }
  return 1;
}

static void kiln__jl_load_once(void) {
  static const char *sonames[] = {"libnvJitLink.so.13", "libnvJitLink.so.12"};
  static const char *suffixes[] = {"_13_0", "_12_0"};
  char candidates[6][PATH_MAX];
  int n = 0;
  const char *env = getenv("KILN_NVJITLINK_PATH");
  if (env && *env) {
    snprintf(candidates[n++], PATH_MAX, "%s", env);
  } else {
    /* Beside the NVRTC that compiled the code first: the same toolkit, so the same version. */
    const char *slash = strrchr(kiln__nvrtc.lib_path, '/');
    for (size_t i = 0; slash && i < KILN__COUNT(sonames); i++)
      snprintf(candidates[n++], PATH_MAX, "%.*s/%s", (int)(slash - kiln__nvrtc.lib_path),
               kiln__nvrtc.lib_path, sonames[i]);
    for (size_t i = 0; i < KILN__COUNT(sonames); i++)
      snprintf(candidates[n++], PATH_MAX, "%s", sonames[i]);
  }
  for (int i = 0; i < n; i++) {
    void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) continue;
    for (size_t k = 0; k < KILN__COUNT(suffixes); k++)
      if (kiln__jl_resolve(h, suffixes[k])) {
        kiln__jl_ok = 1;
        return;
      }
    dlclose(h);
  }
  snprintf(kiln__jl_why, sizeof kiln__jl_why, "nvJitLink could not be opened (tried %s%s)",
           env && *env ? "KILN_NVJITLINK_PATH="
                       : "libnvJitLink.so.13 and .12 beside NVRTC and "
                         "on the loader path",
           env && *env ? env : "");
}

static int kiln__regular_file(const char *path, uint64_t *bytes) {
  struct stat st;
  if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
  *bytes = (uint64_t)st.st_size;
  return 1;
}

kiln_status kiln__link_runtime_path(const kiln_compile_opts *opts, char path[PATH_MAX],
                                    uint64_t *bytes) {
  const char *given = opts ? opts->device_runtime : NULL;
  if (given && *given) {
    if (kiln__regular_file(given, bytes) && snprintf(path, PATH_MAX, "%s", given) < PATH_MAX)
      return KILN_OK;
    if (snprintf(path, PATH_MAX, "%s/libcudadevrt.a", given) < PATH_MAX &&
        kiln__regular_file(path, bytes))
      return KILN_OK;
    return kiln__fail(KILN_ERROR_INVALID,
                      "the device runtime %s is neither libcudadevrt.a nor a folder holding it",
                      given);
  }
  const char *slash = strrchr(kiln__nvrtc.lib_path, '/');
  if (slash &&
      snprintf(path, PATH_MAX, "%.*s/libcudadevrt.a", (int)(slash - kiln__nvrtc.lib_path),
               kiln__nvrtc.lib_path) < PATH_MAX &&
      kiln__regular_file(path, bytes))
    return KILN_OK;
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (size_t r = 0; r < KILN__COUNT(roots); r++)
    if (roots[r] && *roots[r] &&
        snprintf(path, PATH_MAX, "%s/lib64/libcudadevrt.a", roots[r]) < PATH_MAX &&
        kiln__regular_file(path, bytes))
      return KILN_OK;
  path[0] = '\0';
  return kiln__fail(KILN_ERROR_INVALID,
                    "libcudadevrt.a, the device runtime kernels that launch kernels are linked "
                    "with, is not beside NVRTC (%s) nor in lib64 under $CUDA_HOME, $CUDA_PATH "
                    "or /usr/local/cuda; name it (or its folder) with device_runtime",
                    kiln__nvrtc.lib_path[0] ? kiln__nvrtc.lib_path : "not loaded");
}

/* Appends the linker's log to code->log, and its first line to the message. */
static kiln_status kiln__link_failed(kiln__code *code, const char *linker, const char *log) {
  const char *line_end = strchr(log, '\n');
  kiln__fail(KILN_ERROR_COMPILE, "linking with the device runtime failed in %s: %.*s", linker,
             (int)(line_end ? line_end - log : (ptrdiff_t)strlen(log)), log[0] ? log : "no log");
  size_t old = code->log ? strlen(code->log) : 0, add = strlen(log);
  char *joined = malloc(old + add + 2);
  if (joined) {
    if (old) memcpy(joined, code->log, old);
    memcpy(joined + old, log, add);
    joined[old + add] = '\n';
    joined[old + add + 1] = '\0';
    free(code->log);
    code->log = joined;
  }
  return KILN_ERROR_COMPILE;
}

static kiln_status kiln__link_nvjitlink(kiln__code *code, const char *runtime) {
  char arch[48];
  snprintf(arch, sizeof arch, "-arch=%s", code->arch);
  const char *options[] = {arch};
  kiln__jl_handle h = NULL;
  if (kiln__jl.Create(&h, 1, options) != 0)
    return kiln__fail(KILN_ERROR_COMPILE, "nvJitLinkCreate failed for %s", code->arch);
  kiln_status s = KILN_OK;
  int rc = kiln__jl.AddData(h, KILN__JL_INPUT_CUBIN, code->cubin, code->cubin_size, "kernel.cubin");
  if (!rc) rc = kiln__jl.AddFile(h, KILN__JL_INPUT_LIBRARY, runtime);
  if (!rc) rc = kiln__jl.Complete(h);
  if (rc) {
    size_t n = 0;
    char *log = NULL;
    if (kiln__jl.GetErrorLogSize(h, &n) == 0 && (log = calloc(n + 1, 1)))
      kiln__jl.GetErrorLog(h, log);
    s = kiln__link_failed(code, "nvJitLink", log ? log : "");
    free(log);
  }
  size_t size = 0;
  void *linked = NULL;
  if (!s && (kiln__jl.GetLinkedCubinSize(h, &size) != 0 || !(linked = malloc(size))))
    s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the linked CUBIN");
  if (!s && kiln__jl.GetLinkedCubin(h, linked) != 0)
    s = kiln__fail(KILN_ERROR_COMPILE, "nvJitLink could not give the linked CUBIN");
  kiln__jl.Destroy(&h);
  if (s) {
    free(linked);
    return s;
  }
  free(code->cubin);
  code->cubin = linked;
  code->cubin_size = size;
  return KILN_OK;
}

static kiln_status kiln__link_driver(kiln__code *code, const char *runtime) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) {
    kiln__fail_append("; linking relocatable device code needs nvJitLink or the CUDA driver, and "
                      "%s",
                      kiln__jl_why);
    return s;
  }
  if (!kiln__driver.LinkCreate || !kiln__driver.LinkAddData || !kiln__driver.LinkAddFile ||
      !kiln__driver.LinkComplete || !kiln__driver.LinkDestroy)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuLinkCreate, and %s",
                      kiln__jl_why);
  char log[8192] = "";
  int target = code->arch_num;
  size_t n = strlen(code->arch);
  if (n && code->arch[n - 1] == 'a') target += CU_COMPUTE_ACCELERATED_TARGET_BASE;
  else if (n && code->arch[n - 1] == 'f') target += CU_COMPUTE_FAMILY_TARGET_BASE;
  CUjit_option keys[] = {CU_JIT_TARGET, CU_JIT_ERROR_LOG_BUFFER,
                         CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {(void *)(uintptr_t)target, log, (void *)(uintptr_t)sizeof log};
  CUlinkState state = NULL;
  KILN__CU(LinkCreate, (3, keys, values, &state));
  CUresult rc = kiln__driver.LinkAddData(state, CU_JIT_INPUT_CUBIN, code->cubin, code->cubin_size,
                                         "kernel.cubin", 0, NULL, NULL);
  if (!rc) rc = kiln__driver.LinkAddFile(state, CU_JIT_INPUT_LIBRARY, runtime, 0, NULL, NULL);
  void *cubin = NULL;
  size_t size = 0;
  if (!rc) rc = kiln__driver.LinkComplete(state, &cubin, &size);
  void *copy = NULL;
  if (rc) s = kiln__link_failed(code, "the driver's linker", log);
  else if (!(copy = kiln__dup_mem(cubin, size)))
    s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the linked CUBIN");
  kiln__driver.LinkDestroy(state); /* owns cubin */
  if (s) return s;
  free(code->cubin);
  code->cubin = copy;
  code->cubin_size = size;
  return KILN_OK;
}

kiln_status kiln__link_device_runtime(const kiln_compile_opts *opts, kiln__code *code) {
  char runtime[PATH_MAX];
  uint64_t bytes;
  kiln_status s = kiln__link_runtime_path(opts, runtime, &bytes);
  if (s) return s;
  if (!code->cubin)
    return kiln__fail(KILN_ERROR_COMPILE, "NVRTC gave no CUBIN for %s to link", code->arch);
  pthread_once(&kiln__jl_once, kiln__jl_load_once);
  return kiln__jl_ok ? kiln__link_nvjitlink(code, runtime) : kiln__link_driver(code, runtime);
}
