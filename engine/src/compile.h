/* One NVRTC run: CUBIN and PTX for a real arch, the log, lowered name expressions. */
#ifndef KILN_COMPILE_H
#define KILN_COMPILE_H

#include "internal.h"
#include "nvrtc.h"

typedef struct kiln__code {
  char arch[24];   /* "sm_90", "sm_90a" */
  int arch_num;    /* 90 */
  char *ptx;       /* owned, NUL-terminated */
  size_t ptx_size; /* without the NUL */
  void *cubin;     /* owned */
  size_t cubin_size;
  char *log; /* owned; "" when NVRTC said nothing */
  int n_names;
  char **names;   /* owned: the name expressions asked for */
  char **lowered; /* owned: what each became */
  int pch;        /* 0: no precompiled header; 1: this run made one; 2: it used one */
  double seconds; /* NVRTC's run; 0 for code read from the cache */
  int helper;     /* where NVRTC ran: 0 here, 1 a compile helper of this process's, 2 the
                     lasting one of the cache folder (remote.c) */
} kiln__code;

/* Chooses the arch: opts->arch, else KILN_ARCH, else the current device's clamped to what
 * NVRTC (id) supports, else the oldest arch it supports. Writes "sm_XY[a]" into arch. */
kiln_status kiln__compile_arch(const kiln_compile_opts *opts, const kiln__nvrtc_id *id, char *arch,
                               size_t cap, int *arch_num);
/* The same choice as its number and suffix ("", "a" or "f"), nothing formatted, with env_arch
 * the value of KILN_ARCH as the caller read it (NULL: unset). */
kiln_status kiln__compile_arch_pick(const kiln_compile_opts *opts, const kiln__nvrtc_id *id,
                                    const char *env_arch, int *arch_num, char suffix[4]);

/* Compiles src for arch (with -rdc=true for KILN_COMPILE_DEVICE_RUNTIME, whose link is
 * link.c's). With a cache folder pch_dir, the #include lines src begins with go through a
 * precompiled header kept there (pch.c); cwd is the folder of its quoted includes. On
 * KILN_ERROR_COMPILE the log is still in out->log. */
kiln_status kiln__compile(const char *src, const kiln_compile_opts *opts, const char *arch,
                          const char *pch_dir, const char *cwd, kiln__code *out);
void kiln__compile_free_code(kiln__code *code);

#endif
