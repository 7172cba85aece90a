/* Compiling with NVRTC: one run for -arch=sm_XY gives both CUBIN and PTX. */
#include "compile.h"

#include "device.h"
#include "dialect.h"
#include "dup.h"
#include "file.h"
#include "headers.h"
#include "nvrtc.h"
#include "pch.h"
#include "stdheaders.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

/* ---- A user header's host functions ------------------------------------------------------
 * A project header shared with its host program may define the program's host helpers
 * (inline void check(cudaError_t e) { ... fprintf(stderr, ...); exit(1); }), which nvcc
 * compiles for the host and NVRTC refuses. Such a header is given to NVRTC in memory, under the
 * name the source includes it by (which wins over the folders), with the refused functions
 * blanked as the source's own are. The name is the source's, or a header's that the source
 * reaches (where a name, unlike a file, stands for that header everywhere it is included). */

#define KILN__HEADER_REWRITES 8

typedef struct kiln__header_rewrites {
  int n;
  char *file[KILN__HEADER_REWRITES]; /* as the log names it */
  char *name[KILN__HEADER_REWRITES]; /* as the source includes it */
  char *text[KILN__HEADER_REWRITES];
  const char **names, **texts; /* opts' headers and these, for the compile */
} kiln__header_rewrites;

static void kiln__header_rewrites_free(kiln__header_rewrites *r) {
  for (int i = 0; i < r->n; i++) free(r->file[i]), free(r->name[i]), free(r->text[i]);
  free(r->names);
  free(r->texts);
  memset(r, 0, sizeof *r);
}

typedef struct kiln__spelling {
  const kiln_compile_opts *opts;
  const char *cwd, *real; /* the header's real path */
  char *found;
} kiln__spelling;

/* Whether dir/name is the header at want (a real path). */
static int kiln__same_file(const char *dir, const char *name, size_t len, const char *want) {
  char joined[PATH_MAX], real[PATH_MAX], copy[PATH_MAX];
  if (len >= sizeof copy) return 0;
  memcpy(copy, name, len);
  copy[len] = '\0';
  return kiln__file_join(joined, sizeof joined, dir, copy) && realpath(joined, real) &&
         strcmp(real, want) == 0;
}

/* An include of the source: its name when it finds the header, where the preprocessor would
 * look (a quoted one in the source's folder first, then the folders of the options). */
static void kiln__on_spelling(void *ctx, const char *name, size_t len, int angled) {
  kiln__spelling *sp = ctx;
  if (sp->found) return;
  const kiln_compile_opts *o = sp->opts;
  int hit = !angled && kiln__same_file(sp->cwd, name, len, sp->real);
  for (int i = 0; !hit && o && i < o->n_include_dirs; i++)
    hit = o->include_dirs[i] && kiln__same_file(o->include_dirs[i], name, len, sp->real);
  for (int i = 0; !hit && o && i < o->n_options; i++) {
    const char *opt = o->options[i];
    hit = opt && strncmp(opt, "-I", 2) == 0 && opt[2] &&
          kiln__same_file(opt + 2, name, len, sp->real);
  }
  if (hit && (sp->found = malloc(len + 1))) {
    memcpy(sp->found, name, len);
    sp->found[len] = '\0';
  }
}

/* The name the header at real (a real path) is included by: in the source, or else in one of
 * the user headers it reaches (a quoted include there looked for beside that header first).
 * NULL when none names it. */
static char *kiln__include_name(const char *src, const kiln_compile_opts *opts, const char *cwd,
                                const char *real) {
  kiln__spelling sp = {opts, cwd, real, NULL};
  kiln__headers_find_includes(src, strlen(src), kiln__on_spelling, &sp);
  kiln__headers reached = {0};
  if (sp.found || kiln__headers_scan(src, opts, cwd, &reached) != KILN_OK) {
    kiln__clear_error();
    kiln__headers_free(&reached);
    return sp.found;
  }
  for (int i = 0; i < reached.n && !sp.found; i++) {
    const kiln__header *h = &reached.items[i];
    struct stat st;
    size_t size;
    char *text = h->exists ? kiln__file_read(h->path, (size_t)64 << 20, &st, &size) : NULL;
    char folder[PATH_MAX];
    const char *slash = strrchr(h->path, '/');
    if (text && slash && (size_t)(slash - h->path) < sizeof folder) {
      memcpy(folder, h->path, (size_t)(slash - h->path));
      folder[slash - h->path] = '\0';
      sp.cwd = folder;
      kiln__headers_find_includes(text, size, kiln__on_spelling, &sp);
    }
    free(text);
  }
  kiln__headers_free(&reached);
  return sp.found;
}

/* Whether path (a real path) lies in folder dir. */
static int kiln__under(const char *path, const char *dir) {
  char real[PATH_MAX];
  if (!dir[0] || !realpath(dir, real)) return 0;
  size_t n = strlen(real);
  return strncmp(path, real, n) == 0 && (path[n] == '/' || real[n - 1] == '/');
}

/* Whether the log's file is a header given in memory, kiln's or the caller's: a name alone,
 * which a file of that name in the working folder does not stand for. */
static int kiln__in_memory(const char *file, const kiln_compile_opts *opts) {
  if (strchr(file, '/')) return 0;
  if (strcmp(file, KILN__NVCC_HOST_HEADER) == 0) return 1;
  for (int i = 0; i < kiln__stdheaders_count(); i++)
    if (strcmp(file, kiln__stdheaders_name(i)) == 0) return 1;
  for (int i = 0; opts && i < opts->n_headers; i++)
    if (opts->header_names[i] && strcmp(file, opts->header_names[i]) == 0) return 1;
  return 0;
}

/* Rewrites the user headers whose host functions log's errors fall inside; 1 when one more
 * was rewritten (or one again), 0 when none could be. */
static int kiln__header_rewrites_add(kiln__header_rewrites *r, const char *src,
                                     const kiln_compile_opts *opts, const char *cwd,
                                     const char *log) {
  int changed = 0;
  char last[PATH_MAX] = ""; /* a file's errors come in a run of lines: it is read once a run */
  for (const char *line = log; line && *line;
       line = strchr(line, '\n'), line = line ? line + 1 : 0) {
    const char *mark = strstr(line, "): error: "), *nl = strchr(line, '\n');
    if (!mark || (nl && mark > nl)) continue;
    const char *open = mark;
    while (open > line && *open != '(') open--;
    size_t n = (size_t)(open - line);
    if (*open != '(' || n == 0 || n >= PATH_MAX || (n == 9 && !strncmp(line, "kernel.cu", 9)))
      continue;
    char file[PATH_MAX], joined[PATH_MAX], real[PATH_MAX];
    memcpy(file, line, n);
    file[n] = '\0';
    if (strcmp(file, last) == 0) continue;
    memcpy(last, file, n + 1);
    int k = 0;
    while (k < r->n && strcmp(r->file[k], file) != 0) k++;
    /* A file of the user's: not a header given in memory, nor one of the toolkit's. */
    if (kiln__in_memory(file, opts) || !kiln__file_join(joined, sizeof joined, cwd, file) ||
        !realpath(joined, real) || kiln__under(real, kiln__nvrtc.include_dir) ||
        kiln__under(real, kiln__nvrtc.cccl_dir))
      continue;
    char *text = NULL;
    if (k == r->n) { /* first seen: read, and find the source's name for it */
      if (r->n == KILN__HEADER_REWRITES) continue;
      char *name = kiln__include_name(src, opts, cwd, real);
      struct stat st;
      size_t size;
      char *disk = name ? kiln__file_read(real, (size_t)64 << 20, &st, &size) : NULL;
      text = disk ? kiln__dialect_host_functions_in(disk, log, file) : NULL;
      free(disk);
      if (!text) {
        free(name);
        continue;
      }
      r->file[k] = kiln__dup_str(file);
      r->name[k] = name;
      if (!r->file[k]) {
        free(text), free(name);
        continue;
      }
      r->n++;
    } else if (!(text = kiln__dialect_host_functions_in(r->text[k], log, file))) {
      continue;
    }
    free(r->text[k]);
    r->text[k] = text;
    changed = 1;
  }
  return changed;
}

/* opts with the rewritten headers added to its in-memory ones, in *with. 0 when memory ran out. */
static int kiln__header_rewrites_opts(kiln__header_rewrites *r, const kiln_compile_opts *opts,
                                      kiln_compile_opts *with) {
  int base = opts ? opts->n_headers : 0;
  free(r->names);
  free(r->texts);
  r->names = malloc(sizeof *r->names * (size_t)(base + r->n));
  r->texts = malloc(sizeof *r->texts * (size_t)(base + r->n));
  if (!r->names || !r->texts) return 0;
  if (opts) *with = *opts;
  else memset(with, 0, sizeof *with);
  for (int i = 0; i < base; i++)
    r->names[i] = opts->header_names[i], r->texts[i] = opts->header_sources[i];
  for (int i = 0; i < r->n; i++) r->names[base + i] = r->name[i], r->texts[base + i] = r->text[i];
  with->header_names = r->names;
  with->header_sources = r->texts;
  with->n_headers = base + r->n;
  return 1;
}

/* Whether log says a header needs a newer C++: libcu++'s dialect check (NVRTC's
 * <curand_kernel.h> includes libcu++) or kiln's C++ headers, which are libcu++'s (C++17, or
 * C++14 for <type_traits>). */
static int kiln__needs_newer_cxx(const char *log) {
  return log && (strstr(log, "requires at least C++ 17") || strstr(log, "needs C++17 or later") ||
                 strstr(log, "needs C++14 or later"));
}

/* The options of opts with an -std= older than C++17 (c++03, c++11 or c++14) made C++17, in a
 * malloc'd array (free it); NULL when they ask for none. They come translated (options.c): each
 * of nvcc's spellings is "-std=" by now. */
static const char **kiln__options_cxx17(const kiln_compile_opts *opts) {
  static const char *const older[] = {"-std=c++03", "-std=c++11", "-std=c++14"};
  const char **out = NULL;
  for (int i = 0; opts && i < opts->n_options; i++) {
    int old = 0;
    for (size_t k = 0; opts->options[i] && k < sizeof older / sizeof *older; k++)
      old |= strcmp(opts->options[i], older[k]) == 0;
    if (!old) continue;
    if (!out) {
      out = malloc(sizeof *out * (size_t)opts->n_options);
      if (!out) return NULL;
      memcpy(out, opts->options, sizeof *out * (size_t)opts->n_options);
    }
    out[i] = "-std=c++17";
  }
  return out;
}

static int kiln__refuses_register(const char *log) {
  return log && strstr(log, "use of the \"register\" storage class specifier is not allowed");
}

/* GCC's spellings that nvcc takes in device code and NVRTC refuses, each with NVRTC's message
 * and the option that makes it take them: its alternate keywords (glibc's printf declaration,
 * `__const char *__restrict`, which Sailfish's kernels carry), its builtins (as the device
 * functions they are, or their constants), __int128 (which NVRTC takes when asked to), and
 * __extension__ (which marks what GCC should not warn of: nothing, to NVRTC). */
#define KILN__SAME(f) {"identifier \"__builtin_" #f "\" is undefined", "-D__builtin_" #f "=" #f}
#define KILN__INF_F "__int_as_float(0x7f800000)"
#define KILN__INF_D "__longlong_as_double(0x7ff0000000000000LL)"
static const struct {
  const char *refusal, *option;
} kiln__gnu_spellings[] = {
    {"identifier \"__const\" is undefined", "-D__const=const"},
    {"identifier \"__const__\" is undefined", "-D__const__=const"},
    {"identifier \"__volatile\" is undefined", "-D__volatile=volatile"},
    {"identifier \"__signed\" is undefined", "-D__signed=signed"},
    {"identifier \"__signed__\" is undefined", "-D__signed__=signed"},
    {"identifier \"__asm\" is undefined", "-D__asm=asm"},
    {"identifier \"__asm__\" is undefined", "-D__asm__=asm"},
    {"identifier \"__builtin_popcount\" is undefined", "-D__builtin_popcount=__popc"},
    {"identifier \"__builtin_popcountll\" is undefined", "-D__builtin_popcountll=__popcll"},
    {"identifier \"__builtin_clz\" is undefined", "-D__builtin_clz=__clz"},
    {"identifier \"__builtin_clzll\" is undefined", "-D__builtin_clzll=__clzll"},
    {"identifier \"__builtin_ffs\" is undefined", "-D__builtin_ffs=__ffs"},
    {"identifier \"__builtin_ffsll\" is undefined", "-D__builtin_ffsll=__ffsll"},
    {"identifier \"__builtin_inff\" is undefined", "-D__builtin_inff()=" KILN__INF_F},
    {"identifier \"__builtin_huge_valf\" is undefined", "-D__builtin_huge_valf()=" KILN__INF_F},
    {"identifier \"__builtin_inf\" is undefined", "-D__builtin_inf()=" KILN__INF_D},
    {"identifier \"__builtin_huge_val\" is undefined", "-D__builtin_huge_val()=" KILN__INF_D},
    KILN__SAME(fabsf),
    KILN__SAME(fabs),
    KILN__SAME(sqrtf),
    KILN__SAME(sqrt),
    KILN__SAME(expf),
    KILN__SAME(exp),
    KILN__SAME(exp2f),
    KILN__SAME(logf),
    KILN__SAME(log),
    KILN__SAME(log2f),
    KILN__SAME(log10f),
    KILN__SAME(floorf),
    KILN__SAME(floor),
    KILN__SAME(ceilf),
    KILN__SAME(ceil),
    KILN__SAME(roundf),
    KILN__SAME(round),
    KILN__SAME(truncf),
    KILN__SAME(trunc),
    KILN__SAME(fmaxf),
    KILN__SAME(fmax),
    KILN__SAME(fminf),
    KILN__SAME(fmin),
    KILN__SAME(fmaf),
    KILN__SAME(fma),
    KILN__SAME(powf),
    KILN__SAME(pow),
    KILN__SAME(fmodf),
    KILN__SAME(fmod),
    KILN__SAME(sinf),
    KILN__SAME(sin),
    KILN__SAME(cosf),
    KILN__SAME(cos),
    KILN__SAME(tanf),
    KILN__SAME(tan),
    KILN__SAME(atan2f),
    KILN__SAME(nanf),
    KILN__SAME(nan),
    KILN__SAME(abs),
    KILN__SAME(llabs),
    KILN__SAME(memcpy),
    KILN__SAME(memset),
    {"the \"--device-int128\" flag", "--device-int128"},
};
#undef KILN__SAME
#undef KILN__INF_F
#undef KILN__INF_D

/* The compiles kiln__gnu_spellings' options may take, each naming more of them. */
#define KILN__GNU_ROUNDS 4

static int kiln__refuses_gnu(const char *log) {
  for (size_t i = 0; log && i < KILN__COUNT(kiln__gnu_spellings); i++)
    if (strstr(log, kiln__gnu_spellings[i].refusal)) return 1;
  return 0;
}

/* The options of opts and those that make NVRTC take what its refusal (log) names of
 * kiln__gnu_spellings, and -D__extension__= when the source spells it, each unless opts has it
 * already, in a malloc'd array (free it) of *n; NULL when there is none to add (or memory ran
 * out). */
static int kiln__options_have(const kiln_compile_opts *opts, const char *option) {
  for (int i = 0; opts && i < opts->n_options; i++)
    if (!strcmp(opts->options[i], option)) return 1;
  return 0;
}

static const char **kiln__options_gnu(const kiln_compile_opts *opts, const char *src,
                                      const char *log, int *n) {
  int had = opts ? opts->n_options : 0;
  const char **out = malloc(sizeof *out * ((size_t)had + KILN__COUNT(kiln__gnu_spellings) + 1));
  if (!out) return NULL;
  if (had) memcpy(out, opts->options, sizeof *out * (size_t)had);
  *n = had;
  for (size_t i = 0; i < KILN__COUNT(kiln__gnu_spellings); i++)
    if (strstr(log, kiln__gnu_spellings[i].refusal) &&
        !kiln__options_have(opts, kiln__gnu_spellings[i].option))
      out[(*n)++] = kiln__gnu_spellings[i].option;
  if (strstr(src, "__extension__") && !kiln__options_have(opts, "-D__extension__="))
    out[(*n)++] = "-D__extension__=";
  if (*n == had) {
    free(out);
    return NULL;
  }
  return out;
}

/* The options of opts and one more after them, in a malloc'd array (free it); NULL when out of
 * memory. */
static const char **kiln__options_plus(const kiln_compile_opts *opts, const char *extra) {
  int n = opts ? opts->n_options : 0;
  const char **out = malloc(sizeof *out * (size_t)(n + 1));
  if (!out) return NULL;
  if (n) memcpy(out, opts->options, sizeof *out * (size_t)n);
  out[n] = extra;
  return out;
}

/* One more compile of a source NVRTC refused, with other options (alt): taken, into *out with
 * *taken set, when NVRTC compiles it or refuses it for something `still` does not find in its
 * log (the rest then starts from that refusal and alt). Otherwise the first refusal stands,
 * its message the last error again, and the second's log is handed over in *second_log when
 * that is given (else freed). The status of the compile taken, else the refusal's. */
static kiln_status kiln__compile_retry(const char *src, const kiln_compile_opts *alt,
                                       int (*still)(const char *log), const char *arch,
                                       const char *pch_dir, const char *cwd, kiln__code *out,
                                       int *again, int *taken, char **second_log) {
  *taken = 0;
  char *first = kiln__dup_str(kiln_last_error());
  kiln__code second;
  kiln_status r = kiln__compile_once(src, alt, arch, pch_dir, cwd, &second, again);
  if (first && (r == KILN_OK || (second.log && !still(second.log)))) {
    kiln__compile_free_code(out);
    *out = second;
    *taken = 1;
    if (r == KILN_OK) kiln__clear_error();
  } else {
    if (second_log) {
      *second_log = second.log;
      second.log = NULL;
    }
    kiln__compile_free_code(&second);
    if (first) kiln__fail(KILN_ERROR_COMPILE, "%s", first);
    r = KILN_ERROR_COMPILE;
  }
  free(first);
  return r;
}

/* NVRTC's refusal of a token at namespace scope that begins no declaration: a stray "}". */
static int kiln__refuses_brace(const char *log) {
  return log && strstr(log, "expected a declaration") != NULL;
}

/* One more compile, of dialect.c's rewrite of a source NVRTC refused: its code becomes *out
 * when NVRTC takes it. Otherwise the first refusal stands, its message the last error again,
 * and the rewrite's log is handed over in *second_log when that is given (else freed). */
static kiln_status kiln__compile_again(const char *rewritten, const kiln_compile_opts *opts,
                                       const char *arch, const char *pch_dir, const char *cwd,
                                       kiln__code *out, int *again, char **second_log) {
  char *first = kiln__dup_str(kiln_last_error());
  if (!first) return KILN_ERROR_COMPILE;
  kiln__code second;
  kiln_status r = kiln__compile_once(rewritten, opts, arch, pch_dir, cwd, &second, again);
  if (r == KILN_OK) {
    kiln__compile_free_code(out);
    *out = second;
    kiln__clear_error();
  } else {
    if (second_log) {
      *second_log = second.log;
      second.log = NULL;
    }
    kiln__compile_free_code(&second);
    kiln__fail(KILN_ERROR_COMPILE, "%s", first);
    r = KILN_ERROR_COMPILE;
  }
  free(first);
  return r;
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
  /* A source asking for C++11 or C++14 that includes what needs C++17 (libcu++, under NVRTC's
   * <curand_kernel.h>; kiln's <utility>), where nvcc has the host's C++ library of that
   * dialect: compiled again as C++17, and the rest below from there. Only a refused source
   * is; if it is refused for C++17 still, the first refusal stands. */
  kiln_compile_opts cxx17;
  const char **cxx17_options = NULL;
  int taken = 0;
  if (s == KILN_ERROR_COMPILE && kiln__needs_newer_cxx(out->log) &&
      (cxx17_options = kiln__options_cxx17(opts))) {
    cxx17 = *opts;
    cxx17.options = cxx17_options;
    s = kiln__compile_retry(src, &cxx17, kiln__needs_newer_cxx, arch, pch_dir, cwd, out, &again,
                            &taken, NULL);
    if (taken) opts = &cxx17;
  }
  /* C's `register`, which NVRTC refuses under C++17 and nvcc takes, as GCC does, with a
   * warning at most (a median filter's ELEM_SWAP macro): compiled again with it defined as
   * nothing, in the source and the headers alike, and the rest below from there. If the
   * source is refused for something else too, that is the refusal the rest starts from. */
  kiln_compile_opts no_register;
  const char **register_options = NULL;
  if (s == KILN_ERROR_COMPILE && kiln__refuses_register(out->log) &&
      (register_options = kiln__options_plus(opts, "-Dregister="))) {
    no_register = opts ? *opts : (kiln_compile_opts){0};
    no_register.options = register_options;
    no_register.n_options = (opts ? opts->n_options : 0) + 1;
    s = kiln__compile_retry(src, &no_register, kiln__refuses_register, arch, pch_dir, cwd, out,
                            &again, &taken, NULL);
    if (taken) opts = &no_register;
  }
  /* GCC's keywords, builtins, __int128 and __extension__, which nvcc takes in device code:
   * compiled again with the options that make NVRTC take them (kiln__gnu_spellings), and the
   * rest from there. A refusal inside a declaration hides the rest of it, so while a compile
   * names more of them, once more with those too (a few rounds at most). If the source is
   * refused for one of them still, the first refusal stands. */
  kiln_compile_opts gnu;
  const char **gnu_options = NULL;
  int n_gnu = 0;
  if (s == KILN_ERROR_COMPILE && out->log &&
      (gnu_options = kiln__options_gnu(opts, src, out->log, &n_gnu))) {
    gnu = opts ? *opts : (kiln_compile_opts){0};
    for (int round = 1;; round++) {
      gnu.options = gnu_options;
      gnu.n_options = n_gnu;
      char *second_log = NULL;
      s = kiln__compile_retry(src, &gnu, kiln__refuses_gnu, arch, pch_dir, cwd, out, &again, &taken,
                              &second_log);
      const char **more = !taken && second_log && round < KILN__GNU_ROUNDS
                              ? kiln__options_gnu(&gnu, src, second_log, &n_gnu)
                              : NULL;
      free(second_log);
      if (!more) break;
      free(gnu_options);
      gnu_options = more;
    }
    if (taken) opts = &gnu;
  }
  /* A specialization in namespace std of a template kiln's libcu++ headers give (std::
   * numeric_limits<MyType>), which nvcc's host library takes: compiled again with each
   * namespace std block opened as cuda::std, where the template is (dialect.h). If that is
   * refused too, the first refusal stands. */
  int std_block = s == KILN_ERROR_COMPILE && out->log &&
                  strstr(out->log, "cannot be specialized in the current scope") &&
                  strstr(out->log, "cuda::std::");
  /* So is a class's constant of a floating type initialized in the class (const static float
   * pi = 3.14f;), which nvcc takes as a GNU extension: compiled again as constexpr. */
  int inclass = s == KILN_ERROR_COMPILE && out->log &&
                strstr(out->log, "cannot have an in-class initializer");
  /* So is an array of no elements as a parameter or extern __shared__ memory (int n[0]), a GNU
   * extension of nvcc's: compiled again with "int n[ ]". */
  int zero_size = s == KILN_ERROR_COMPILE && out->log &&
                  strstr(out->log, "the size of an array must be greater than zero");
  if (std_block || inclass || zero_size) {
    char *rewritten = std_block ? kiln__dialect_std_namespace(src)
                      : inclass ? kiln__dialect_inclass_constants(src, out->log)
                                : kiln__dialect_zero_arrays(src, out->log);
    if (rewritten) s = kiln__compile_again(rewritten, opts, arch, pch_dir, cwd, out, &again, NULL);
    free(rewritten);
  }
  /* A source that closes the extern "C" block PyCUDA's SourceModule would have put it in (a
   * "}" first, then C++) is compiled inside one. That compile's refusal is the one the caller
   * sees, at the source's own line numbers, unless it is of a stray brace again: then the
   * source's brace was a mistake of its own (one too many at its end), and the first refusal,
   * which points at it, stands. */
  char *wrapped =
      s == KILN_ERROR_COMPILE && kiln__refuses_brace(out->log) ? kiln__dialect_extern_c(src) : NULL;
  if (wrapped) {
    s = kiln__compile_retry(wrapped, opts, kiln__refuses_brace, arch, pch_dir, cwd, out, &again,
                            &taken, NULL);
    free(wrapped);
  }
  /* A compound literal, "(float3){x, y, z}", which nvcc takes in C++ and NVRTC refuses: the
   * source is compiled again with each one as a functional cast. Only a refused source is read
   * for them, and if that compile fails too, the first refusal is what the caller sees. */
  /* The literals' rewrite and its log, when that compile failed too: the host functions'
   * rounds below start from them, so that a program with both compiles. */
  char *literal_src = NULL, *literal_log = NULL;
  if (s == KILN_ERROR_COMPILE && out->log && strstr(out->log, "expected an expression")) {
    char *rewritten = kiln__dialect_compound_literals(src);
    if (rewritten)
      s = kiln__compile_again(rewritten, opts, arch, pch_dir, cwd, out, &again, &literal_log);
    if (literal_log) {
      literal_src = rewritten;
      rewritten = NULL;
    }
    free(rewritten);
  }
  /* A whole program's host functions (main calling cudaMalloc), which nvcc compiles for the
   * host: blanked where NVRTC refused them, and compiled again, a few rounds while each finds
   * another (a host helper that called a blanked one); floating constants that nvcc folds, made
   * constexpr in the same rounds. The first refusal stands otherwise. */
  if (s == KILN_ERROR_COMPILE && out->log && strstr(out->log, "): error")) {
    char *first = kiln__dup_str(kiln_last_error()), *current = NULL;
    const char *base = literal_src ? literal_src : src;
    kiln__code next = {0};
    int no_kernel = 0;
    kiln__header_rewrites headers = {0};
    kiln_compile_opts with_headers;
    for (int round = 0; first && round < 4 && s; round++) {
      const char *log = round ? next.log : literal_log ? literal_log : out->log;
      const char *text = current ? current : base;
      /* Floating constants that fold, made constexpr first, so that the host variables' rewrite
       * (which keeps constexpr ones) blanks only those that do not. Lines stay where they were,
       * so the log's line numbers hold for the constants' text. */
      char *constants = log ? kiln__dialect_namespace_constants(text, log) : NULL;
      char *rewritten =
          log ? kiln__dialect_host_functions(constants ? constants : text, log) : NULL;
      if (constants && rewritten) free(constants);
      else if (constants) rewritten = constants;
      int in_headers = log && kiln__header_rewrites_add(&headers, text, opts, cwd, log);
      if (round) kiln__compile_free_code(&next);
      if (!rewritten && !in_headers) break;
      if (rewritten) {
        free(current);
        current = rewritten;
      }
      const kiln_compile_opts *round_opts = opts;
      if (headers.n) {
        if (!kiln__header_rewrites_opts(&headers, opts, &with_headers)) break;
        round_opts = &with_headers;
      }
      kiln_status r = kiln__compile_once(current ? current : base, round_opts, arch, pch_dir, cwd,
                                         &next, &again);
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
    kiln__header_rewrites_free(&headers);
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
  free(cxx17_options);
  free(register_options);
  free(gnu_options);
  return s;
}

kiln_status kiln_nvrtc_get_info(kiln_nvrtc_info *out) {
  KILN__NEED(out);
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
  KILN__NEED(arch);
  kiln__nvrtc_id id;
  kiln_status s = kiln__nvrtc_identify(NULL, 0, &id);
  int n;
  if (!s) s = kiln__compile_arch(NULL, &id, arch, cap, &n);
  if (!s) kiln__clear_error();
  return s;
}
