/* Opening NVRTC and finding the toolkit headers that go with it. */
#include "nvrtc.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

kiln__nvrtc kiln__rtc;

static pthread_once_t kiln__nvrtc_once = PTHREAD_ONCE_INIT;
static kiln_status kiln__nvrtc_status;
static char kiln__nvrtc_msg[1024];

static void *kiln__nvrtc_open(char *tried, size_t tried_size) {
  const char *env = getenv("KILN_NVRTC_PATH");
  if (env && *env) {
    snprintf(tried, tried_size, "KILN_NVRTC_PATH=%s", env);
    return dlopen(env, RTLD_NOW | RTLD_LOCAL);
  }
  /* The loader path first, then the usual toolkit folders (not always on the loader path). */
  const char *sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (size_t i = 0; i < KILN__COUNT(sonames); i++) {
    void *h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  for (size_t r = 0; r < KILN__COUNT(roots); r++) {
    if (!roots[r] || !*roots[r]) continue;
    for (size_t i = 0; i < KILN__COUNT(sonames); i++) {
      char path[PATH_MAX];
      snprintf(path, sizeof path, "%s/lib64/%s", roots[r], sonames[i]);
      void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
      if (h) return h;
    }
  }
  snprintf(tried, tried_size,
           "libnvrtc.so.13 and libnvrtc.so.12 on the loader path and under $CUDA_HOME, "
           "$CUDA_PATH and /usr/local/cuda");
  return NULL;
}

/* Joins a and b into out; 0 when it does not fit. */
static int kiln__join(char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s%s", a, b);
  return n >= 0 && (size_t)n < cap;
}

static int kiln__has_fp16_header(const char *dir) {
  char path[PATH_MAX];
  return kiln__join(path, sizeof path, dir, "/cuda_fp16.h") && access(path, R_OK) == 0;
}

/* The toolkit's include folder: beside the NVRTC that was loaded (lib/../include, or the pip
 * wheels' nvidia/cuda_runtime/include), else under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda. */
static void kiln__nvrtc_find_includes(void *symbol) {
  Dl_info info;
  char lib[PATH_MAX], cand[PATH_MAX];
  if (dladdr(symbol, &info) && info.dli_fname && realpath(info.dli_fname, lib)) {
    char *slash = strrchr(lib, '/');
    if (slash) {
      *slash = '\0';
      const char *rel[] = {"/../include", "/../../cuda_runtime/include"};
      for (size_t i = 0; i < KILN__COUNT(rel); i++) {
        char real[PATH_MAX];
        if (kiln__join(cand, sizeof cand, lib, rel[i]) && realpath(cand, real) &&
            kiln__has_fp16_header(real) &&
            kiln__join(kiln__rtc.include_dir, sizeof kiln__rtc.include_dir, real, ""))
          return;
      }
    }
  }
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (size_t r = 0; r < KILN__COUNT(roots); r++) {
    if (!roots[r] || !*roots[r]) continue;
    if (kiln__join(cand, sizeof cand, roots[r], "/include") && kiln__has_fp16_header(cand) &&
        kiln__join(kiln__rtc.include_dir, sizeof kiln__rtc.include_dir, cand, ""))
      return;
  }
}

static void kiln__nvrtc_load_once(void) {
  char tried[512];
  void *h = kiln__nvrtc_open(tried, sizeof tried);
  if (!h) {
    snprintf(kiln__nvrtc_msg, sizeof kiln__nvrtc_msg,
             "NVRTC could not be loaded (tried %s); install the CUDA toolkit's NVRTC or set "
             "KILN_NVRTC_PATH to libnvrtc.so",
             tried);
    kiln__nvrtc_status = KILN_ERROR_NO_NVRTC;
    return;
  }
  struct {
    const char *name;
    void **slot;
  } entries[] = {
#define KILN__ENTRY(member) {"nvrtc" #member, (void **)&kiln__rtc.member}
      KILN__ENTRY(GetErrorString),    KILN__ENTRY(Version),
      KILN__ENTRY(GetNumSupportedArchs), KILN__ENTRY(GetSupportedArchs),
      KILN__ENTRY(CreateProgram),     KILN__ENTRY(DestroyProgram),
      KILN__ENTRY(CompileProgram),    KILN__ENTRY(GetPTXSize),
      KILN__ENTRY(GetPTX),            KILN__ENTRY(GetCUBINSize),
      KILN__ENTRY(GetCUBIN),          KILN__ENTRY(GetProgramLogSize),
      KILN__ENTRY(GetProgramLog),     KILN__ENTRY(AddNameExpression),
      KILN__ENTRY(GetLoweredName),
#undef KILN__ENTRY
  };
  for (size_t i = 0; i < KILN__COUNT(entries); i++) {
    *entries[i].slot = dlsym(h, entries[i].name);
    if (!*entries[i].slot) {
      snprintf(kiln__nvrtc_msg, sizeof kiln__nvrtc_msg,
               "the NVRTC that was loaded has no %s; kiln needs NVRTC 12 or newer",
               entries[i].name);
      kiln__nvrtc_status = KILN_ERROR_NO_NVRTC;
      return;
    }
  }
  kiln__rtc.Version(&kiln__rtc.major, &kiln__rtc.minor);
  int n = 0;
  if (kiln__rtc.GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 ||
      !(kiln__rtc.archs = calloc((size_t)n, sizeof(int))) ||
      kiln__rtc.GetSupportedArchs(kiln__rtc.archs) != NVRTC_SUCCESS) {
    snprintf(kiln__nvrtc_msg, sizeof kiln__nvrtc_msg,
             "NVRTC %d.%d did not list the architectures it supports", kiln__rtc.major,
             kiln__rtc.minor);
    kiln__nvrtc_status = KILN_ERROR_NO_NVRTC;
    return;
  }
  kiln__rtc.n_archs = n;
  kiln__nvrtc_find_includes(*entries[0].slot);
  char cccl[PATH_MAX];
  if (kiln__rtc.include_dir[0] && kiln__join(cccl, sizeof cccl, kiln__rtc.include_dir, "/cccl") &&
      access(cccl, R_OK) == 0)
    kiln__join(kiln__rtc.cccl_dir, sizeof kiln__rtc.cccl_dir, cccl, "");
  kiln__nvrtc_status = KILN_OK;
}

kiln_status kiln__nvrtc_load(void) {
  pthread_once(&kiln__nvrtc_once, kiln__nvrtc_load_once);
  if (KILN__LIKELY(kiln__nvrtc_status == KILN_OK)) return KILN_OK;
  return kiln__fail(kiln__nvrtc_status, "%s", kiln__nvrtc_msg);
}

int kiln__nvrtc_clamp_arch(int want) {
  int best = 0;
  for (int i = 0; i < kiln__rtc.n_archs; i++)
    if (kiln__rtc.archs[i] <= want && kiln__rtc.archs[i] > best) best = kiln__rtc.archs[i];
  return best;
}
