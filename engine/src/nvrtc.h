/* NVRTC, opened with dlopen by its versioned soname or KILN_NVRTC_PATH. */
#ifndef KILN_NVRTC_H
#define KILN_NVRTC_H

#include "internal.h"

#include <limits.h>
#include <nvrtc.h>
#include <stdint.h>

/* What decides NVRTC's output besides its input, and the archs it can target: all the cache
 * key and the choice of arch need, which a note in the cache folder can give without opening
 * NVRTC (its dlopen alone costs 10-20 ms, forty times a whole cache hit). */
#define KILN__MAX_ARCHS 64
typedef struct kiln__nvrtc_id {
  int major, minor;
  uint64_t lib_bytes; /* the size of the library file, which tells its builds apart */
  int n_archs;
  int archs[KILN__MAX_ARCHS]; /* supported sm_XY as XY, ascending */
} kiln__nvrtc_id;

typedef struct kiln__nvrtc_table {
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*Version)(int *, int *);
  nvrtcResult (*GetNumSupportedArchs)(int *);
  nvrtcResult (*GetSupportedArchs)(int *);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *);
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

  int major, minor;   /* NVRTC's version */
  uint64_t lib_bytes; /* the size of the library file, which tells its builds apart */
  int *archs;         /* supported sm_XY as XY, ascending */
  int n_archs;
  char lib_path[PATH_MAX];    /* the library file that was opened, resolved */
  char include_dir[PATH_MAX]; /* the toolkit's include folder; "" when none was found */
  char cccl_dir[PATH_MAX];    /* its cccl folder (<cuda/std/...> from CUDA 13 on), or "" */
} kiln__nvrtc_table;

/* NVRTC's entry points and what was learnt on opening it, named for this file:
 * kiln__nvrtc.CompileProgram(...), kiln__nvrtc.include_dir. */
extern kiln__nvrtc_table kiln__nvrtc;

/* kiln_nvrtc_set_search_path's folders into out ("" for none); 0 when they do not fit. */
int kiln__nvrtc_search_path(char *out, size_t cap);

/* Opens NVRTC once per process; KILN_ERROR_NO_NVRTC with the places tried when it fails. */
kiln_status kiln__nvrtc_load(void);

/* The NVRTC library this process opened, once it has (another thread may be opening it now,
 * and its fields are read only after); NULL before. */
const char *kiln__nvrtc_opened(void);

/* The identity of the NVRTC this process opens or would open: from NVRTC itself once open,
 * else from the note in note_dir when the library it names is unchanged, else by opening
 * NVRTC (and, with may_write, leaving a note). note_dir may be NULL. */
kiln_status kiln__nvrtc_identify(const char *note_dir, int may_write, kiln__nvrtc_id *out);

/* The identity found by an earlier kiln__nvrtc_identify, without locking; 0 before one. */
int kiln__nvrtc_known(kiln__nvrtc_id *out);
/* The same, without a copy: NULL before one; never changes once known. */
const kiln__nvrtc_id *kiln__nvrtc_known_id(void);

/* 1 when NVRTC is open and is the one id describes. */
int kiln__nvrtc_is(const kiln__nvrtc_id *id);

/* The newest arch of id that is not newer than `want` (e.g. 90 for sm_90); 0 when even the
 * oldest it supports is newer. */
int kiln__nvrtc_clamp_arch(const kiln__nvrtc_id *id, int want);

#define KILN__RTC(fn, args)                                                \
  do {                                                                     \
    nvrtcResult kiln__r = kiln__nvrtc.fn args;                             \
    if (KILN__UNLIKELY(kiln__r != NVRTC_SUCCESS))                          \
      return kiln__fail(KILN_ERROR_COMPILE, "nvrtc" #fn " failed with %s", \
                        kiln__nvrtc.GetErrorString(kiln__r));              \
  } while (0)

#endif
