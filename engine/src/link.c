/* Linking relocatable device code with the device runtime. NVRTC with -rdc=true leaves a
 * relocatable CUBIN whose device-side launches call into libcudadevrt.a; the driver cannot load
 * it until a linker has resolved them. nvJitLink does that without a driver, so a
 * DynamicSourceModule compiles (and fills the cache) on a machine with no GPU, as any other
 * source does; with no nvJitLink, or for a link given the driver's JIT options (PyCUDA's
 * link_options, which are the driver linker's), the driver's cuLink* do it in the current
 * context. */
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

/* 1 when the toolkit folder root holds lib64/libcudadevrt.a, its path then in path. Made in a
 * buffer of its own: gcc under -fsanitize=undefined warns of a null destination otherwise. */
static int kiln__runtime_under(const char *root, char path[PATH_MAX], uint64_t *bytes) {
  char found[PATH_MAX];
  if (!root || !*root ||
      snprintf(found, sizeof found, "%s/lib64/libcudadevrt.a", root) >= (int)sizeof found ||
      !kiln__regular_file(found, bytes))
    return 0;
  memcpy(path, found, strlen(found) + 1);
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
    if (kiln__runtime_under(roots[r], path, bytes)) return KILN_OK;
  path[0] = '\0';
  return kiln__fail(KILN_ERROR_INVALID,
                    "libcudadevrt.a, the device runtime kernels that launch kernels are linked "
                    "with, is not beside NVRTC (%s) nor in lib64 under $CUDA_HOME, $CUDA_PATH "
                    "or /usr/local/cuda; name it (or its folder) with device_runtime",
                    kiln__nvrtc.lib_path[0] ? kiln__nvrtc.lib_path : "not loaded");
}

/* nvJitLink's input kinds, by kiln_link_kind (cuda.h's CUjitInputType numbering). */
static const int kiln__jl_kinds[] = {1 /* CUBIN */, 2 /* PTX */, 4 /* FATBIN */, 5 /* OBJECT */,
                                     6 /* LIBRARY */};

/* Links inputs for arch with nvJitLink: 0 with the linked CUBIN in *cubin (malloc'd), or the
 * status with *log (malloc'd, may be NULL) holding the linker's log when it gave one. */
static kiln_status kiln__link_nvjitlink(const char *arch, const kiln_link_input *in, int n,
                                        void **cubin, size_t *size, char **log) {
  char option[48];
  snprintf(option, sizeof option, "-arch=%s", arch);
  const char *options[] = {option};
  kiln__jl_handle h = NULL;
  if (kiln__jl.Create(&h, 1, options) != 0)
    return kiln__fail(KILN_ERROR_COMPILE, "nvJitLinkCreate failed for %s", arch);
  int rc = 0;
  for (int i = 0; i < n && !rc; i++) {
    const char *name = in[i].name ? in[i].name : "input";
    int kind = kiln__jl_kinds[in[i].kind];
    rc = in[i].data ? kiln__jl.AddData(h, kind, in[i].data, in[i].size, name)
                    : kiln__jl.AddFile(h, kind, in[i].path);
  }
  if (!rc) rc = kiln__jl.Complete(h);
  kiln_status s = KILN_OK;
  if (rc) {
    size_t bytes = 0;
    if (kiln__jl.GetErrorLogSize(h, &bytes) == 0 && (*log = calloc(bytes + 1, 1)))
      kiln__jl.GetErrorLog(h, *log);
    s = KILN_ERROR_COMPILE;
  }
  if (!s && (kiln__jl.GetLinkedCubinSize(h, size) != 0 || !(*cubin = malloc(*size))))
    s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the linked CUBIN");
  if (!s && kiln__jl.GetLinkedCubin(h, *cubin) != 0)
    s = kiln__fail(KILN_ERROR_COMPILE, "nvJitLink could not give the linked CUBIN");
  kiln__jl.Destroy(&h);
  if (s) {
    free(*cubin);
    *cubin = NULL;
  }
  return s;
}

/* The driver's JIT options a link is given (kiln_link_jit's), as the driver takes them. */
typedef struct kiln__link_jit {
  CUjit_option keys[KILN__DRIVER_JIT_MAX];
  void *values[KILN__DRIVER_JIT_MAX];
  int n;
} kiln__link_jit;

/* The same with the driver's linker, in the current context, with jit's options (NULL: none)
 * before kiln's: the target (unless jit names one) and the error log. */
static kiln_status kiln__link_driver(const char *arch, const kiln_link_input *in, int n,
                                     const kiln__link_jit *jit, void **cubin, size_t *size,
                                     char **log) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) {
    if (jit) kiln__fail_append("; a link given the driver's JIT options is the driver's linker's");
    else
      kiln__fail_append("; linking relocatable device code needs nvJitLink or the CUDA driver, "
                        "and %s",
                        kiln__jl_why);
    return s;
  }
  if (!kiln__driver.LinkCreate || !kiln__driver.LinkAddData || !kiln__driver.LinkAddFile ||
      !kiln__driver.LinkComplete || !kiln__driver.LinkDestroy)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuLinkCreate, and %s",
                      jit ? "a link given the driver's JIT options is the driver's linker's"
                          : kiln__jl_why);
  char text[8192] = "";
  int target = atoi(arch + 3);
  size_t len = strlen(arch);
  if (len && arch[len - 1] == 'a') target += CU_COMPUTE_ACCELERATED_TARGET_BASE;
  else if (len && arch[len - 1] == 'f') target += CU_COMPUTE_FAMILY_TARGET_BASE;
  CUjit_option keys[KILN__DRIVER_JIT_MAX + 3];
  void *values[KILN__DRIVER_JIT_MAX + 3];
  unsigned k = 0;
  int targeted = 0;
  for (int i = 0; jit && i < jit->n; i++, k++) {
    keys[k] = jit->keys[i];
    values[k] = jit->values[i];
    targeted |= keys[k] == CU_JIT_TARGET || keys[k] == CU_JIT_TARGET_FROM_CUCONTEXT;
  }
  if (!targeted) {
    keys[k] = CU_JIT_TARGET;
    values[k++] = (void *)(uintptr_t)target;
  }
  keys[k] = CU_JIT_ERROR_LOG_BUFFER;
  values[k++] = text;
  keys[k] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
  values[k++] = (void *)(uintptr_t)sizeof text;
  CUlinkState state = NULL;
  KILN__CU(LinkCreate, (k, keys, values, &state));
  CUresult rc = CUDA_SUCCESS;
  for (int i = 0; i < n && !rc; i++) {
    CUjitInputType kind = (CUjitInputType)in[i].kind; /* kiln_link_kind is cuda.h's numbering */
    rc = in[i].data ? kiln__driver.LinkAddData(state, kind, (void *)in[i].data, in[i].size,
                                               in[i].name ? in[i].name : "input", 0, NULL, NULL)
                    : kiln__driver.LinkAddFile(state, kind, in[i].path, 0, NULL, NULL);
  }
  void *linked = NULL;
  if (!rc) rc = kiln__driver.LinkComplete(state, &linked, size);
  if (rc) {
    *log = kiln__dup_str(text);
    s = KILN_ERROR_COMPILE;
  } else if (!(*cubin = kiln__dup_mem(linked, *size)))
    s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the linked CUBIN");
  kiln__driver.LinkDestroy(state); /* owns linked */
  return s;
}

/* Links with nvJitLink when it opens and no JIT options are given (jit NULL), else the
 * driver's linker, whose options they are. */
static kiln_status kiln__link_inputs(const char *arch, const kiln_link_input *in, int n,
                                     const kiln__link_jit *jit, void **cubin, size_t *size,
                                     char **log, const char **linker) {
  *cubin = NULL;
  *size = 0;
  *log = NULL;
  pthread_once(&kiln__jl_once, kiln__jl_load_once);
  int nvjitlink = kiln__jl_ok && !jit;
  *linker = nvjitlink ? "nvJitLink" : "the driver's linker";
  return nvjitlink ? kiln__link_nvjitlink(arch, in, n, cubin, size, log)
                   : kiln__link_driver(arch, in, n, jit, cubin, size, log);
}

/* The first line of a linker's log, for a message. */
static int kiln__first_line(const char *log) {
  const char *end = strchr(log, '\n');
  return (int)(end ? end - log : (ptrdiff_t)strlen(log));
}

kiln_status kiln__link_device_runtime(const kiln_compile_opts *opts, kiln__code *code) {
  char runtime[PATH_MAX];
  uint64_t bytes;
  kiln_status s = kiln__link_runtime_path(opts, runtime, &bytes);
  if (s) return s;
  if (!code->cubin)
    return kiln__fail(KILN_ERROR_COMPILE, "NVRTC gave no CUBIN for %s to link", code->arch);
  kiln_link_input in[] = {
      {.kind = KILN_LINK_CUBIN,
       .data = code->cubin,
       .size = code->cubin_size,
       .name = "kernel.cubin"},
      {.kind = KILN_LINK_LIBRARY, .path = runtime},
  };
  void *linked;
  size_t size;
  char *log;
  const char *linker;
  s = kiln__link_inputs(code->arch, in, 2, NULL, &linked, &size, &log, &linker);
  if (s == KILN_ERROR_COMPILE && !linked) {
    const char *text = log ? log : "";
    kiln__fail(KILN_ERROR_COMPILE, "linking with the device runtime failed in %s: %.*s", linker,
               kiln__first_line(text), text[0] ? text : "no log");
    /* The linker's log after NVRTC's, in the module's log. */
    size_t old = code->log ? strlen(code->log) : 0, add = strlen(text);
    char *joined = malloc(old + add + 2);
    if (joined) {
      if (old) memcpy(joined, code->log, old);
      memcpy(joined + old, text, add);
      joined[old + add] = '\n';
      joined[old + add + 1] = '\0';
      free(code->log);
      code->log = joined;
    }
  }
  free(log);
  if (s) return s;
  free(code->cubin);
  code->cubin = linked;
  code->cubin_size = size;
  return KILN_OK;
}

kiln_status kiln_link(const kiln_link_input *inputs, int n_inputs, const char *arch, void **cubin,
                      size_t *size) {
  return kiln_link_jit(inputs, n_inputs, arch, NULL, 0, cubin, size);
}

kiln_status kiln_link_jit(const kiln_link_input *inputs, int n_inputs, const char *arch,
                          const kiln_jit_option *options, int n_options, void **cubin,
                          size_t *size) {
  KILN__NEED(cubin);
  KILN__NEED(size);
  *cubin = NULL;
  *size = 0;
  kiln__link_jit jit = {.n = n_options};
  if (n_options < 0 || n_options > (int)KILN__COUNT(jit.keys) || (n_options && !options))
    return kiln__fail(KILN_ERROR_INVALID, "%d link options given; 0 to %d are taken", n_options,
                      (int)KILN__COUNT(jit.keys));
  kiln_status s = kiln__driver_jit_options(options, n_options, "link", jit.keys, jit.values);
  if (s) return s;
  if (n_inputs <= 0 || !inputs) return kiln__fail(KILN_ERROR_INVALID, "there is nothing to link");
  for (int i = 0; i < n_inputs; i++) {
    const kiln_link_input *in = &inputs[i];
    if ((unsigned)in->kind > KILN_LINK_LIBRARY)
      return kiln__fail(KILN_ERROR_INVALID,
                        "input %d of the link has kind %d, not one of "
                        "kiln_link_kind's (0 to 4)",
                        i, (int)in->kind);
    if (in->data ? !in->size : !in->path)
      return kiln__fail(KILN_ERROR_INVALID, "input %d of the link has %s", i,
                        in->data ? "no bytes" : "neither bytes nor a path");
  }
  char chosen[32];
  if (!arch || !*arch) s = kiln_compile_default_arch(chosen, sizeof chosen), arch = chosen;
  if (s) return s;
  if (strncmp(arch, "sm_", 3) != 0 || atoi(arch + 3) < 10 || strlen(arch) > 16)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the link's arch is a real GPU's, such as sm_90, not "
                      "'%s'",
                      arch);
  char *log;
  const char *linker;
  s = kiln__link_inputs(arch, inputs, n_inputs, n_options ? &jit : NULL, cubin, size, &log,
                        &linker);
  if (s == KILN_ERROR_COMPILE && !*cubin)
    kiln__fail(KILN_ERROR_COMPILE, "the link for %s failed in %s:\n%s", arch, linker,
               log && log[0] ? log : "no log");
  free(log);
  if (!s) kiln__clear_error();
  return s;
}
