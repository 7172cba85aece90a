/* The C side of bench/cache.py: kiln's cold compile beside a bare NVRTC compile, and a cache
 * folder filled with entries for the lookup-at-scale figure.
 *
 *   compile cold SOURCE REPEATS  kiln_module_from_source on a cold cache, and NVRTC called
 *                                directly with the same source, arch and include options, side
 *                                by side in this process; prints JSON: every repeat in ms, the
 *                                medians, and the medians of the per-repeat ratio kiln / bare
 *                                and difference kiln - bare
 *   compile fill SOURCE COUNT    compiles SOURCE into the cache, then stores COUNT - 1 more
 *                                entries holding the same code under made-up keys, through the
 *                                engine's own writer (kiln__cache_store); prints JSON
 *
 * Both work in $KILN_CACHE_DIR, which the caller makes fresh. A cold repeat compiles SOURCE with
 * "// variant N" appended, the same text on both sides, so kiln never finds it in the cache;
 * the two sides take turns going first. The bare side gives NVRTC what kiln gives it for a
 * compile with no options of its own: -arch, -default-device, -lineinfo (unless
 * KILN_LINEINFO=0) and the toolkit's include folders, and no in-memory headers (kiln gives its C
 * headers only to a source that can include one). Before anything is timed, one warm-up round (the
 * first NVRTC call in a process is slower) checks that both sides produce the same PTX and CUBIN.
 * bench/compare.py runs this beside its own cold row, where the bare side runs in the Python
 * process itself.
 *
 * Built by bench/cache.py against build/libkiln.a. The fill mode, and the include folders kiln
 * passes NVRTC (kiln__nvrtc), come from the engine's internal headers: -iquote engine/src, not -I,
 * or the engine's nvrtc.h would answer its own #include <nvrtc.h> instead of the toolkit's. */
#include "kiln.h"

#include "cache.h"
#include "hash.h"
#include "module.h"
#include "nvrtc.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_REPEATS 1000

static void die(const char *fmt, ...) KILN__PRINTF(1, 2);

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("compile: ", stderr);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static double now_ms(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(const double *v, int n) {
  double sorted[MAX_REPEATS];
  memcpy(sorted, v, (size_t)n * sizeof *v);
  qsort(sorted, (size_t)n, sizeof *sorted, by_value);
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}

static void print_series(const char *name, const double *v, int n) {
  printf("  \"%s\": [", name);
  for (int i = 0; i < n; i++) printf("%s%.4f", i ? ", " : "", v[i]);
  printf("],\n");
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open %s", path);
  char *text = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (n + 4096 > cap && !(text = realloc(text, cap = 2 * cap + 4096))) die("out of memory");
    n += got = fread(text + n, 1, cap - n - 1, f);
  } while (got);
  fclose(f);
  text[n] = '\0';
  return text;
}

static kiln_cache_stats stats_now(void) {
  kiln_cache_stats s;
  kiln_cache_get_stats(&s);
  return s;
}

/* ---- The bare side: NVRTC opened and called as a program that uses it directly would ------- */

typedef struct bare_nvrtc {
  const char *(*GetErrorString)(nvrtcResult);
  nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int, const char *const *,
                               const char *const *);
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
  nvrtcResult (*GetPTXSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetPTX)(nvrtcProgram, char *);
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
  nvrtcResult (*DestroyProgram)(nvrtcProgram *);
  char lib_path[PATH_MAX];
} bare_nvrtc;

typedef struct bare_code {
  char *ptx, *cubin;
  size_t ptx_size, cubin_size; /* as NVRTC gives them: the PTX's counts its NUL */
} bare_code;

static void bare_open(bare_nvrtc *rtc) {
  const char *sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  const char *cuda = getenv("CUDA_HOME");
  void *h = NULL;
  for (size_t i = 0; !h && i < KILN__COUNT(sonames); i++) h = dlopen(sonames[i], RTLD_NOW);
  for (int root = 0; !h && root < 2; root++) {
    const char *dir = root == 0 ? cuda : "/usr/local/cuda";
    for (size_t i = 0; dir && *dir && !h && i < KILN__COUNT(sonames); i++) {
      char path[PATH_MAX];
      snprintf(path, sizeof path, "%s/lib64/%s", dir, sonames[i]);
      h = dlopen(path, RTLD_NOW);
    }
  }
  if (!h)
    die("NVRTC could not be loaded (libnvrtc.so.13 or .12, on the loader path or under "
        "$CUDA_HOME/lib64 or /usr/local/cuda/lib64)");
  struct {
    const char *name;
    void **slot;
  } fns[] = {
      {"nvrtcGetErrorString", (void **)&rtc->GetErrorString},
      {"nvrtcCreateProgram", (void **)&rtc->CreateProgram},
      {"nvrtcCompileProgram", (void **)&rtc->CompileProgram},
      {"nvrtcGetPTXSize", (void **)&rtc->GetPTXSize},
      {"nvrtcGetPTX", (void **)&rtc->GetPTX},
      {"nvrtcGetCUBINSize", (void **)&rtc->GetCUBINSize},
      {"nvrtcGetCUBIN", (void **)&rtc->GetCUBIN},
      {"nvrtcDestroyProgram", (void **)&rtc->DestroyProgram},
  };
  for (size_t i = 0; i < KILN__COUNT(fns); i++)
    if (!(*fns[i].slot = dlsym(h, fns[i].name))) die("NVRTC has no %s", fns[i].name);
  Dl_info info;
  if (!dladdr(*fns[0].slot, &info) || !info.dli_fname || !realpath(info.dli_fname, rtc->lib_path))
    die("cannot tell which file NVRTC was loaded from");
}

#define BARE(call)                                                                    \
  do {                                                                                \
    nvrtcResult r = rtc->call;                                                        \
    if (r != NVRTC_SUCCESS) die("bare %s failed: %s", #call, rtc->GetErrorString(r)); \
  } while (0)

/* One compile to PTX and CUBIN: create, compile, fetch both, destroy. The caller frees out. */
static void bare_compile(const bare_nvrtc *rtc, const char *src, const char *const *opts,
                         int n_opts, bare_code *out) {
  nvrtcProgram prog;
  BARE(CreateProgram(&prog, src, "kernel.cu", 0, NULL, NULL));
  BARE(CompileProgram(prog, n_opts, opts));
  BARE(GetPTXSize(prog, &out->ptx_size));
  if (!(out->ptx = malloc(out->ptx_size))) die("out of memory");
  BARE(GetPTX(prog, out->ptx));
  BARE(GetCUBINSize(prog, &out->cubin_size));
  if (!(out->cubin = malloc(out->cubin_size))) die("out of memory");
  BARE(GetCUBIN(prog, out->cubin));
  BARE(DestroyProgram(&prog));
}

static void bare_free(bare_code *c) {
  free(c->ptx);
  free(c->cubin);
}

/* ---- compile cold ---------------------------------------------------------------------------- */

static kiln_module *kiln_compile(const char *src) {
  kiln_module *m;
  kiln_status s = kiln_module_from_source(src, NULL, &m);
  if (s) die("kiln_module_from_source: %s: %s", kiln_status_name(s), kiln_last_error());
  return m;
}

/* SOURCE with a comment that makes it a text neither side has compiled. */
static char *variant(const char *src, const char *tag) {
  size_t n = strlen(src) + strlen(tag) + 32;
  char *v = malloc(n);
  if (!v) die("out of memory");
  snprintf(v, n, "%s\n// variant %s\n", src, tag);
  return v;
}

/* Dies unless the kiln call between before and after compiled once and stored once. */
static void expect_compiled(const kiln_cache_stats *before, const kiln_cache_stats *after,
                            const char *what) {
  if (after->misses != before->misses + 1 || after->compiles != before->compiles + 1 ||
      after->stores != before->stores + 1 || after->memory_hits != before->memory_hits ||
      after->disk_hits != before->disk_hits)
    die("%s: kiln did not miss, compile and store exactly once (misses +%llu, compiles "
        "+%llu, stores +%llu, memory hits +%llu, disk hits +%llu); is $KILN_CACHE_DIR a fresh "
        "folder?",
        what, (unsigned long long)(after->misses - before->misses),
        (unsigned long long)(after->compiles - before->compiles),
        (unsigned long long)(after->stores - before->stores),
        (unsigned long long)(after->memory_hits - before->memory_hits),
        (unsigned long long)(after->disk_hits - before->disk_hits));
}

static int cold(const char *src, int repeats) {
  static double kiln_ms[MAX_REPEATS], bare_ms[MAX_REPEATS], ratio[MAX_REPEATS], extra[MAX_REPEATS];
  bare_nvrtc rtc;
  bare_open(&rtc);

  /* Warm-up, and the check: kiln first, so that its arch and include folders are known. */
  char *warm = variant(src, "warm-up");
  kiln_cache_stats before = stats_now();
  kiln_module *m = kiln_compile(warm);
  kiln_cache_stats after = stats_now();
  expect_compiled(&before, &after, "warm-up");
  if (strcmp(rtc.lib_path, kiln__nvrtc.lib_path) != 0)
    die("the bare side opened %s, kiln %s: they must run the same NVRTC", rtc.lib_path,
        kiln__nvrtc.lib_path);
  char arch_opt[64];
  snprintf(arch_opt, sizeof arch_opt, "-arch=%s", kiln_module_arch(m));
  char toolkit[PATH_MAX + 3], cccl[PATH_MAX + 3];
  /* kiln adds -default-device, and -lineinfo unless told otherwise (KILN_LINEINFO=0): the same
   * work here. */
  const char *opts[5] = {arch_opt, "-default-device"};
  int n_opts = 2;
  const char *lineinfo = getenv("KILN_LINEINFO");
  if (!lineinfo || strcmp(lineinfo, "0") != 0) opts[n_opts++] = "-lineinfo";
  if (kiln__nvrtc.include_dir[0]) {
    snprintf(toolkit, sizeof toolkit, "-I%s", kiln__nvrtc.include_dir);
    opts[n_opts++] = toolkit;
  }
  if (kiln__nvrtc.cccl_dir[0]) {
    snprintf(cccl, sizeof cccl, "-I%s", kiln__nvrtc.cccl_dir);
    opts[n_opts++] = cccl;
  }
  bare_code code;
  bare_compile(&rtc, warm, opts, n_opts, &code);
  size_t ptx_size, cubin_size;
  const char *ptx = kiln_module_ptx(m, &ptx_size);
  const void *cubin = kiln_module_cubin(m, &cubin_size);
  if (!cubin || ptx_size + 1 != code.ptx_size || memcmp(ptx, code.ptx, ptx_size) != 0 ||
      cubin_size != code.cubin_size || memcmp(cubin, code.cubin, cubin_size) != 0)
    die("kiln and the bare compile disagree on the warm-up source: PTX %zu / %zu bytes, "
        "CUBIN %zu / %zu bytes",
        ptx_size, code.ptx_size - 1, cubin ? cubin_size : 0, code.cubin_size);
  bare_free(&code);
  kiln_module_free(m);
  free(warm);

  for (int i = 0; i < repeats; i++) {
    char tag[16];
    snprintf(tag, sizeof tag, "%d", i);
    char *src_i = variant(src, tag);
    for (int turn = 0; turn < 2; turn++) {
      if ((turn == 0) == (i % 2 == 0)) { /* kiln first on even repeats */
        before = stats_now();
        double t0 = now_ms();
        m = kiln_compile(src_i);
        kiln_ms[i] = now_ms() - t0;
        after = stats_now();
        expect_compiled(&before, &after, "a timed repeat");
        kiln_module_free(m);
      } else {
        double t0 = now_ms();
        bare_compile(&rtc, src_i, opts, n_opts, &code);
        bare_ms[i] = now_ms() - t0;
        bare_free(&code);
      }
    }
    ratio[i] = kiln_ms[i] / bare_ms[i];
    extra[i] = kiln_ms[i] - bare_ms[i];
    free(src_i);
  }

  printf("{\n  \"arch\": \"%s\",\n  \"nvrtc\": \"%d.%d\",\n  \"nvrtc_library\": \"%s\",\n",
         arch_opt + 6, kiln__nvrtc.major, kiln__nvrtc.minor, rtc.lib_path);
  printf("  \"nvrtc_options\": [");
  for (int i = 0; i < n_opts; i++) printf("%s\"%s\"", i ? ", " : "", opts[i]);
  printf("],\n  \"repeats\": %d,\n", repeats);
  print_series("kiln_ms", kiln_ms, repeats);
  print_series("bare_ms", bare_ms, repeats);
  print_series("kiln_over_bare", ratio, repeats);
  print_series("kiln_minus_bare_ms", extra, repeats);
  printf("  \"kiln_median_ms\": %.4f,\n  \"bare_median_ms\": %.4f,\n"
         "  \"kiln_over_bare_median\": %.4f,\n  \"kiln_minus_bare_median_ms\": %.4f\n}\n",
         median(kiln_ms, repeats), median(bare_ms, repeats), median(ratio, repeats),
         median(extra, repeats));
  return 0;
}

/* ---- compile fill ---------------------------------------------------------------------------- */

static int fill(const char *src, long count) {
  double t0 = now_ms();
  kiln_module *m = kiln_compile(src);
  kiln_cache_stats before = stats_now();
  for (long i = 1; i < count; i++) {
    char seed[64];
    unsigned char key[KILN__KEY_SIZE];
    int n = snprintf(seed, sizeof seed, "kiln bench synthetic entry %ld", i);
    if (kiln__hash_sha256(seed, (size_t)n, key)) die("SHA-256: %s", kiln_last_error());
    kiln__cache_store(key, &m->code, m->kernels, m->n_kernels, &m->headers);
  }
  kiln_cache_stats after = stats_now();
  double fill_s = (now_ms() - t0) / 1e3;
  kiln_module_free(m);
  static kiln_cache_info info;
  kiln_status s = kiln_cache_get_info(&info);
  if (s) die("kiln_cache_get_info: %s", kiln_last_error());
  if (after.stores - before.stores != (uint64_t)(count - 1) || after.evictions ||
      info.entries != (uint64_t)count)
    die("%s holds %llu entries after storing %llu and evicting %llu; %ld were asked for", info.dir,
        (unsigned long long)info.entries, (unsigned long long)(after.stores - before.stores),
        (unsigned long long)after.evictions, count);
  printf("{\"dir\": \"%s\", \"entries\": %llu, \"bytes\": %llu, \"fill_s\": %.3f}\n", info.dir,
         (unsigned long long)info.entries, (unsigned long long)info.bytes, fill_s);
  return 0;
}

int main(int argc, char **argv) {
  if (argc != 4 || (strcmp(argv[1], "cold") != 0 && strcmp(argv[1], "fill") != 0))
    die("usage: compile cold SOURCE REPEATS | compile fill SOURCE COUNT");
  char *src = read_file(argv[2]);
  long n = strtol(argv[3], NULL, 10);
  if (strcmp(argv[1], "cold") == 0) {
    if (n < 1 || n > MAX_REPEATS) die("REPEATS must be 1 to %d", MAX_REPEATS);
    return cold(src, (int)n);
  }
  if (n < 1) die("COUNT must be at least 1");
  return fill(src, n);
}
