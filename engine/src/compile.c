/* Compiling with NVRTC: one run for -arch=sm_XY gives both CUBIN and PTX. */
#include "compile.h"

#include "device.h"
#include "dialect.h"
#include "dup.h"
#include "nvrtc.h"
#include "pch.h"
#include "stdheaders.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* "sm_90", "sm_90a", "compute_90", "90" -> 90 and the suffix; 0 when unreadable. */
static int kiln__parse_arch(const char *s, char *suffix, size_t cap) {
  if (strncmp(s, "sm_", 3) == 0) s += 3;
  else if (strncmp(s, "compute_", 8) == 0) s += 8;
  int n = 0, digits = 0;
  while (*s >= '0' && *s <= '9' && digits < 4) n = n * 10 + (*s++ - '0'), digits++;
  if (digits < 2 || (*s && strcmp(s, "a") && strcmp(s, "f"))) return 0;
  if (cap) { /* "", "a" or "f": copied by hand, since a repeated SourceModule asks this too */
    size_t k = 0;
    while (s[k] && k + 1 < cap) suffix[k] = s[k], k++;
    suffix[k] = '\0';
  }
  return n;
}

static kiln_status kiln__unsupported_arch(const kiln__nvrtc_id *id, const char *asked) {
  kiln__fail(KILN_ERROR_INVALID, "arch '%s' is not one NVRTC %d.%d supports; it supports", asked,
             id->major, id->minor);
  for (int i = 0; i < id->n_archs; i++) kiln__fail_append("%s sm_%d", i ? "," : "", id->archs[i]);
  return KILN_ERROR_INVALID;
}

/* nvcc's code= beside arch=: the real arch to build, which must not be older than the virtual
 * one arch names. kiln builds one target, so either names one. */
static kiln_status kiln__code_and_arch(const kiln_compile_opts *opts, const kiln__nvrtc_id *id,
                                       const char **asked) {
  const char *arch = opts && opts->arch && *opts->arch ? opts->arch : NULL;
  const char *code = opts && opts->code && *opts->code ? opts->code : NULL;
  const char *lists[2][2] = {{"arch", arch}, {"code", code}};
  for (int i = 0; i < 2; i++)
    if (lists[i][1] && strchr(lists[i][1], ','))
      return kiln__fail(KILN_ERROR_INVALID,
                        "%s '%s' names several targets; kiln compiles one (the device's, or the "
                        "one named), so give one",
                        lists[i][0], lists[i][1]);
  *asked = arch;
  if (!code) return KILN_OK;
  char suffix[4];
  int c = kiln__parse_arch(code, suffix, sizeof suffix);
  if (!c) return kiln__unsupported_arch(id, code);
  int a = arch ? kiln__parse_arch(arch, suffix, sizeof suffix) : 0;
  if (arch && !a) return kiln__unsupported_arch(id, arch);
  if (a > c)
    return kiln__fail(KILN_ERROR_INVALID,
                      "code '%s' is older than arch '%s': the real arch built must be the virtual "
                      "arch or a newer one",
                      code, arch);
  *asked = code;
  return KILN_OK;
}

kiln_status kiln__compile_arch_pick(const kiln_compile_opts *opts, const kiln__nvrtc_id *id,
                                    const char *env_arch, int *arch_num, char suffix[4]) {
  const char *asked = NULL;
  suffix[0] = '\0';
  kiln_status s = kiln__code_and_arch(opts, id, &asked);
  if (s) return s;
  if (!asked) asked = env_arch;
  if (asked && *asked) {
    int n = kiln__parse_arch(asked, suffix, 4);
    if (!n || kiln__nvrtc_clamp_arch(id, n) != n) return kiln__unsupported_arch(id, asked);
    *arch_num = n;
    return KILN_OK;
  }
  int major, minor, n = 0;
  if (kiln__device_capability(&major, &minor) == KILN_OK) {
    n = kiln__nvrtc_clamp_arch(id, major * 10 + minor);
    if (!n)
      return kiln__fail(KILN_ERROR_INVALID,
                        "the device is sm_%d%d, older than any arch NVRTC %d.%d supports "
                        "(the oldest is sm_%d)",
                        major, minor, id->major, id->minor, id->archs[0]);
  } else {
    /* No device: the oldest arch, whose PTX any newer GPU can still run. */
    kiln__clear_error();
    n = id->archs[0];
  }
  *arch_num = n;
  return KILN_OK;
}

kiln_status kiln__compile_arch(const kiln_compile_opts *opts, const kiln__nvrtc_id *id, char *arch,
                               size_t cap, int *arch_num) {
  char suffix[4];
  kiln_status s = kiln__compile_arch_pick(opts, id, getenv("KILN_ARCH"), arch_num, suffix);
  if (!s) snprintf(arch, cap, "sm_%d%s", *arch_num, suffix);
  return s;
}

void kiln__compile_free_code(kiln__code *code) {
  if (!code) return;
  free(code->ptx);
  free(code->cubin);
  free(code->log);
  for (int i = 0; i < code->n_names; i++) {
    if (code->names) free(code->names[i]);
    if (code->lowered) free(code->lowered[i]);
  }
  free(code->names);
  free(code->lowered);
  memset(code, 0, sizeof *code);
}

/* The first "error" line of the log, for the one-line message. */
static void kiln__first_error(const char *log, char *out, size_t cap) {
  const char *e = strstr(log, "error");
  if (!e) {
    snprintf(out, cap, "see the log");
    return;
  }
  const char *start = e;
  while (start > log && start[-1] != '\n') start--;
  const char *end = strchr(e, '\n');
  size_t n = end ? (size_t)(end - start) : strlen(start);
  snprintf(out, cap, "%.*s", (int)(n > cap - 1 ? cap - 1 : n), start);
}

/* One NVRTC compile of prog. *again is set when it failed over its precompiled header (a
 * file gone between the plan and NVRTC's open, or one that could not be written), which says
 * nothing of the source: the caller compiles it once more without one. */
static kiln_status kiln__compile_program(const char *src, nvrtcProgram prog,
                                         const kiln_compile_opts *opts, const char *arch,
                                         const char *pch_dir, const char *cwd, kiln__code *out,
                                         int *again) {
  int n_inc = opts ? opts->n_include_dirs : 0, n_opt = opts ? opts->n_options : 0;
  int rdc = opts && (opts->flags & (KILN_COMPILE_DEVICE_RUNTIME | KILN_COMPILE_RELOCATABLE));
  size_t n_args = 7 + (size_t)n_inc + (size_t)n_opt;
  const char **args = calloc(n_args, sizeof *args);
  char **owned = calloc(n_args, sizeof *owned);
  kiln_status s = KILN_OK;
  size_t k = 0;
  if (!args || !owned) {
    s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory building NVRTC options");
    goto done;
  }
  char arch_opt[48];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", arch);
  args[k++] = arch_opt;
  /* The user's folders first, so their headers win over the toolkit's. */
  for (int i = 0; i < n_inc; i++) {
    size_t len = strlen(opts->include_dirs[i]) + 3;
    if (!(owned[k] = malloc(len))) {
      s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory building NVRTC options");
      goto done;
    }
    snprintf(owned[k], len, "-I%s", opts->include_dirs[i]);
    args[k] = owned[k];
    k++;
  }
  char toolkit[PATH_MAX + 3], cccl[PATH_MAX + 9];
  if (kiln__nvrtc.include_dir[0]) {
    snprintf(toolkit, sizeof toolkit, "-I%s", kiln__nvrtc.include_dir);
    args[k++] = toolkit;
  }
  if (kiln__nvrtc.cccl_dir[0]) {
    snprintf(cccl, sizeof cccl, "-I%s", kiln__nvrtc.cccl_dir);
    args[k++] = cccl;
  }
  if (rdc) args[k++] = "-rdc=true"; /* linked after, with the device runtime or by the caller */
  /* Before the user's options, as nvcc puts cuda_runtime.h before any -include of theirs. */
  args[k++] = "--pre-include=" KILN__NVCC_HOST_HEADER;
  for (int i = 0; i < n_opt; i++) args[k++] = opts->options[i];
  kiln__pch_plan pch;
  kiln__pch_plan_for(src, opts, args, (int)k, pch_dir, cwd, &pch);
  if (pch.opt[0]) {
    args[k++] = pch.opt;
    args[k++] = "--pch-messages=false"; /* the log is the user's code's, not kiln's PCH's */
  }

  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  nvrtcResult rc = kiln__nvrtc.CompileProgram(prog, (int)k, args);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  out->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
  size_t log_size = 0;
  if (kiln__nvrtc.GetProgramLogSize(prog, &log_size) == NVRTC_SUCCESS && log_size > 1) {
    out->log = malloc(log_size);
    if (out->log && kiln__nvrtc.GetProgramLog(prog, out->log) != NVRTC_SUCCESS) out->log[0] = 0;
  }
  if (!out->log) out->log = kiln__dup_str("");
  out->pch = pch.creating ? 1 : pch.opt[0] ? 2 : 0;
  *again = rc != NVRTC_SUCCESS && pch.opt[0] && kiln__pch_refused(out->log);
  kiln__pch_done(&pch, rc == NVRTC_SUCCESS, out->log);
  if (rc != NVRTC_SUCCESS) {
    char first[512];
    kiln__first_error(out->log ? out->log : "", first, sizeof first);
    s = kiln__fail(KILN_ERROR_COMPILE, "NVRTC compilation for %s failed with %s: %s", arch,
                   kiln__nvrtc.GetErrorString(rc), first);
  }
done:
  if (owned)
    for (size_t i = 0; i < n_args; i++) free(owned[i]);
  free(owned);
  free(args);
  return s;
}

static kiln_status kiln__collect(nvrtcProgram prog, const kiln_compile_opts *opts,
                                 kiln__code *out) {
  KILN__RTC(GetPTXSize, (prog, &out->ptx_size));
  if (!(out->ptx = malloc(out->ptx_size + 1)))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the PTX");
  KILN__RTC(GetPTX, (prog, out->ptx));
  out->ptx[out->ptx_size] = '\0';
  out->ptx_size = strlen(out->ptx); /* NVRTC counts the NUL */
  KILN__RTC(GetCUBINSize, (prog, &out->cubin_size));
  if (out->cubin_size) {
    if (!(out->cubin = malloc(out->cubin_size)))
      return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the CUBIN");
    KILN__RTC(GetCUBIN, (prog, out->cubin));
  }
  int n = opts ? opts->n_name_expressions : 0;
  if (!n) return KILN_OK;
  out->names = calloc((size_t)n, sizeof(char *));
  out->lowered = calloc((size_t)n, sizeof(char *));
  if (!out->names || !out->lowered)
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for name expressions");
  out->n_names = n;
  for (int i = 0; i < n; i++) {
    const char *lowered = NULL;
    KILN__RTC(GetLoweredName, (prog, opts->name_expressions[i], &lowered));
    out->names[i] = kiln__dup_str(opts->name_expressions[i]);
    out->lowered[i] = kiln__dup_str(lowered);
    if (!out->names[i] || !out->lowered[i])
      return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for name expressions");
  }
  return KILN_OK;
}

static kiln_status kiln__compile_once(const char *src, const kiln_compile_opts *opts,
                                      const char *arch, const char *pch_dir, const char *cwd,
                                      kiln__code *out, int *again) {
  memset(out, 0, sizeof *out);
  *again = 0;
  kiln_status s;
  char suffix[4];
  snprintf(out->arch, sizeof out->arch, "%s", arch);
  out->arch_num = kiln__parse_arch(arch, suffix, sizeof suffix);
  nvrtcProgram prog = NULL;
  const char **header_names = NULL, **header_sources = NULL;
  int n_headers = 0;
  if ((s = kiln__stdheaders_select(src, opts, &header_names, &header_sources, &n_headers)))
    return s;
  nvrtcResult created =
      kiln__nvrtc.CreateProgram(&prog, src, "kernel.cu", n_headers, header_sources, header_names);
  free(header_names);
  free(header_sources);
  if (created != NVRTC_SUCCESS)
    return kiln__fail(KILN_ERROR_COMPILE, "nvrtcCreateProgram failed with %s",
                      kiln__nvrtc.GetErrorString(created));
  for (int i = 0; opts && i < opts->n_name_expressions && !s; i++) {
    nvrtcResult rc = kiln__nvrtc.AddNameExpression(prog, opts->name_expressions[i]);
    if (rc != NVRTC_SUCCESS)
      s = kiln__fail(KILN_ERROR_INVALID, "name expression '%s' was refused by NVRTC: %s",
                     opts->name_expressions[i], kiln__nvrtc.GetErrorString(rc));
  }
  if (!s) s = kiln__compile_program(src, prog, opts, arch, pch_dir, cwd, out, again);
  if (!s) s = kiln__collect(prog, opts, out);
  kiln__nvrtc.DestroyProgram(&prog);
  if (s && s != KILN_ERROR_COMPILE) {
    char *log = out->log;
    out->log = NULL;
    kiln__compile_free_code(out);
    out->log = log;
  }
  return s;
}

kiln_status kiln__compile(const char *src, const kiln_compile_opts *opts, const char *arch,
                          const char *pch_dir, const char *cwd, kiln__code *out) {
  memset(out, 0, sizeof *out);
  kiln_status s = kiln__nvrtc_load();
  if (s) return s;
  int again = 0;
  s = kiln__compile_once(src, opts, arch, pch_dir, cwd, out, &again);
  /* A PCH file can go between its plan and NVRTC's open of it (another process's compile
   * evicted it to keep the cache's bound, or refused it; cache clear): the source is not at
   * fault, so it is compiled again without one. */
  if (s && again) {
    kiln__compile_free_code(out);
    s = kiln__compile_once(src, opts, arch, NULL, cwd, out, &again);
  }
  /* A compound literal, "(float3){x, y, z}", which nvcc takes in C++ and NVRTC refuses: the
   * source is compiled again with each one as a functional cast. Only a refused source is read
   * for them, and if that compile fails too, the first refusal is what the caller sees. */
  /* The literals' rewrite and its log, when that compile failed too: the host functions'
   * rounds below start from them, so that a program with both compiles. */
  char *literal_src = NULL, *literal_log = NULL;
  if (s == KILN_ERROR_COMPILE && out->log && strstr(out->log, "expected an expression")) {
    char *rewritten = kiln__dialect_compound_literals(src);
    char *first = rewritten ? kiln__dup_str(kiln_last_error()) : NULL;
    kiln__code second;
    if (first &&
        kiln__compile_once(rewritten, opts, arch, pch_dir, cwd, &second, &again) == KILN_OK) {
      kiln__compile_free_code(out);
      *out = second;
      s = KILN_OK;
      kiln__clear_error();
    } else if (first) {
      literal_log = second.log;
      second.log = NULL;
      kiln__compile_free_code(&second);
      literal_src = literal_log ? rewritten : NULL;
      if (literal_src) rewritten = NULL;
      kiln__fail(KILN_ERROR_COMPILE, "%s", first);
    }
    free(first);
    free(rewritten);
  }
  /* A whole program's host functions (main calling cudaMalloc), which nvcc compiles for the
   * host: blanked where NVRTC refused them, and compiled again, a few rounds while each finds
   * another (a host helper that called a blanked one). The first refusal stands otherwise. */
  if (s == KILN_ERROR_COMPILE && out->log && strstr(out->log, "): error")) {
    char *first = kiln__dup_str(kiln_last_error()), *current = NULL;
    const char *base = literal_src ? literal_src : src;
    kiln__code next = {0};
    int no_kernel = 0;
    for (int round = 0; first && round < 4 && s; round++) {
      const char *log = round ? next.log : literal_log ? literal_log : out->log;
      char *rewritten = log ? kiln__dialect_host_functions(current ? current : base, log) : NULL;
      if (round) kiln__compile_free_code(&next);
      if (!rewritten) break;
      free(current);
      current = rewritten;
      kiln_status r = kiln__compile_once(current, opts, arch, pch_dir, cwd, &next, &again);
      /* With no kernel left, the blanking took a kernel's mistyped head, or the host code that
       * alone instantiated a template kernel: the refusal is the answer, not a module of
       * nothing. */
      if (r == KILN_OK && !strstr(next.ptx, ".entry ")) {
        no_kernel = 1;
        break;
      }
      if (r == KILN_OK) {
        kiln__compile_free_code(out);
        *out = next;
        memset(&next, 0, sizeof next);
        s = KILN_OK;
        kiln__clear_error();
      } else if (!next.log) {
        break;
      }
    }
    kiln__compile_free_code(&next);
    /* Said after the log too, where a caller shows the log rather than the message. */
    static const char note[] =
        "(The source compiles without the functions NVRTC refused, which nvcc would compile "
        "for the host, but then has no kernel: a template kernel that only host code launched "
        "needs its instances named, name_expressions=[\"k<float>\"], or instantiated "
        "explicitly; or a kernel's head is mistyped.)\n";
    if (s && first && no_kernel && out->log) {
      size_t n = strlen(out->log);
      char *longer = realloc(out->log, n + sizeof note + 1);
      if (longer) {
        snprintf(longer + n, sizeof note + 1, "%s%s", n && longer[n - 1] != '\n' ? "\n" : "", note);
        out->log = longer;
      }
    }
    if (s && first)
      kiln__fail(KILN_ERROR_COMPILE, "%s%s%s", first, no_kernel ? "\n" : "", no_kernel ? note : "");
    free(first);
    free(current);
  }
  free(literal_src);
  free(literal_log);
  return s;
}

kiln_status kiln_nvrtc_get_info(kiln_nvrtc_info *out) {
  memset(out, 0, sizeof *out);
  kiln_status s = kiln__nvrtc_load();
  if (s) return s;
  out->major = kiln__nvrtc.major;
  out->minor = kiln__nvrtc.minor;
  snprintf(out->path, sizeof out->path, "%s", kiln__nvrtc.lib_path);
  snprintf(out->include_dir, sizeof out->include_dir, "%s", kiln__nvrtc.include_dir);
  snprintf(out->cccl_dir, sizeof out->cccl_dir, "%s", kiln__nvrtc.cccl_dir);
  for (int i = 0; i < kiln__nvrtc.n_archs && i < (int)KILN__COUNT(out->archs); i++)
    out->archs[out->n_archs++] = kiln__nvrtc.archs[i];
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_compile_default_arch(char *arch, size_t cap) {
  kiln__nvrtc_id id;
  kiln_status s = kiln__nvrtc_identify(NULL, 0, &id);
  int n;
  if (!s) s = kiln__compile_arch(NULL, &id, arch, cap, &n);
  if (!s) kiln__clear_error();
  return s;
}
