/* NVRTC, opened with dlopen by its versioned soname or KILN_NVRTC_PATH. */
#ifndef KILN_NVRTC_H
#define KILN_NVRTC_H

#include "internal.h"

#include <limits.h>
#include <nvrtc.h>

typedef struct kiln__nvrtc {
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int *, int *);
  nvrtcResult (*GetNumSupportedArchs)(int *);
  nvrtcResult (*GetSupportedArchs)(int *);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                               const char *const *, const char *const *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetPTX)(nvrtcProgram, char *);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
  nvrtcResult (*AddNameExpression)(nvrtcProgram, const char *);
  nvrtcResult (*GetLoweredName)(nvrtcProgram, const char *, const char **);

  int major, minor;     /* NVRTC's version */
  int *archs;           /* supported sm_XY as XY, ascending */
  int n_archs;
  char include_dir[PATH_MAX]; /* the toolkit's include folder; "" when none was found */
  char cccl_dir[PATH_MAX];    /* its cccl folder (<cuda/std/...> from CUDA 13 on), or "" */
} kiln__nvrtc;

extern kiln__nvrtc kiln__rtc;

/* Opens NVRTC once per process; KILN_ERROR_NO_NVRTC with the places tried when it fails. */
kiln_status kiln__nvrtc_load(void);

/* The newest arch NVRTC supports that is not newer than `want` (e.g. 90 for sm_90); 0 when
 * even the oldest it supports is newer. */
int kiln__nvrtc_clamp_arch(int want);

#define KILN__RTC(fn, args)                                                          \
  do {                                                                               \
    nvrtcResult kiln__r = kiln__rtc.fn args;                                         \
    if (KILN__UNLIKELY(kiln__r != NVRTC_SUCCESS))                                    \
      return kiln__fail(KILN_ERROR_COMPILE, "nvrtc" #fn " failed with %s",           \
                        kiln__rtc.GetErrorString(kiln__r));                          \
  } while (0)

#endif
