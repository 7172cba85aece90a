/* The raw-C side of bench/compare.py: the driver called from C with nothing in front of it.
 *
 *   compare launch CUBIN LAUNCHES REPEATS   µs per async cuLaunchKernel (grid 1, block 32) of
 *                                           args1, args4, args16 and args64 (one int pointer
 *                                           and 0, 3, 15 or 63 ints), a loop of LAUNCHES then
 *                                           cuCtxSynchronize
 *   compare load CUBIN REPEATS              ms to get args4 ready from the CUBIN already in
 *                                           memory (cuModuleLoadData + cuModuleGetFunction):
 *                                           C's in-process hit; and from the file once unloaded
 *                                           (read, load, get, a first launch and
 *                                           cuCtxSynchronize): a module loaded again in a
 *                                           process that has loaded modules before
 *   compare disk CUBIN                      ms of one disk hit in this new process, whose
 *                                           context is up and buffer made before the clock:
 *                                           read the file, load, get args4, launch it,
 *                                           cuCtxSynchronize and copy the 32 ints back, as
 *                                           kiln's disk hit in bench/children.py does
 *   compare first CUBIN                     ms from the start of main to the first finished
 *                                           kernel: cuInit, the primary context, the file, the
 *                                           load, a launch of args4 and cuCtxSynchronize
 *   compare global CUBIN NAME COUNT REPEATS µs per cuModuleGetGlobal of the 4-byte variable
 *                                           NAME and cuMemcpyHtoD of a float into it: what
 *                                           kiln's get_global + memcpy_htod do
 *
 * Prints one JSON object. Every kernel writes the sum of its ints into dest[threadIdx.x], which
 * is checked before anything is timed. Device 0's primary context, as the Python systems use.
 *
 * Build: cc -O2 -Wall -Wextra -I/usr/local/cuda/include compare.c \
 *            -L/usr/local/cuda/lib64/stubs -lcuda -o compare
 */
#define _POSIX_C_SOURCE 200809L

#define BENCH_NAME "compare"
#include "bench.h"

#include <string.h>

static double now_ms(void) { return bench_now_us() / 1e3; }

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *p = malloc((size_t)n + 1);
  if (!p || fread(p, 1, (size_t)n, f) != (size_t)n) {
    fprintf(stderr, "compare: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  p[n] = 0;
  *size = (size_t)n;
  return p;
}

/* Launches f with dest and n_ints ints 1, 2, ..., n_ints. */
static void launch(CUfunction f, CUdeviceptr *dest, int n_ints) {
  static int ints[64];
  void *params[64] = {dest};
  for (int i = 0; i < n_ints; i++) {
    ints[i] = i + 1;
    params[i + 1] = &ints[i];
  }
  CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL));
}

static void expect_sum(CUdeviceptr dest, int n_ints) {
  int got[32];
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(got, dest, sizeof got));
  int want = n_ints * (n_ints + 1) / 2;
  for (int i = 0; i < 32; i++)
    if (got[i] != want) {
      fprintf(stderr, "compare: args%d wrote %d, not %d\n", n_ints + 1, got[i], want);
      exit(1);
    }
  CHECK(cuMemsetD8(dest, 0, sizeof got));
}

static int mode_launch(const char *cubin_path, long launches, long repeats) {
  static const int counts[] = {1, 4, 16, 64};
  bench_context();
  size_t size;
  char *image = read_file(cubin_path, &size);
  CUmodule m;
  CHECK(cuModuleLoadData(&m, image));
  CUdeviceptr dest;
  CHECK(cuMemAlloc(&dest, 32 * sizeof(int)));
  CHECK(cuMemsetD8(dest, 0, 32 * sizeof(int)));
  double *us = calloc((size_t)repeats, sizeof *us);
  if (!us) return 1;
  printf("{\n");
  for (int c = 0; c < 4; c++) {
    char name[16];
    snprintf(name, sizeof name, "args%d", counts[c]);
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, m, name));
    launch(f, &dest, counts[c] - 1);
    expect_sum(dest, counts[c] - 1);
    for (long r = -1; r < repeats; r++) { /* r = -1: untimed warm-up */
      double t = now_ms();
      for (long i = 0; i < launches; i++) launch(f, &dest, counts[c] - 1);
      CHECK(cuCtxSynchronize());
      if (r >= 0) us[r] = (now_ms() - t) * 1e3 / (double)launches;
    }
    snprintf(name, sizeof name, "%d", counts[c]);
    bench_series(name, us, repeats, c == 3);
  }
  printf("}\n");
  return 0;
}

static int mode_load(const char *cubin_path, long repeats) {
  bench_context();
  size_t size;
  char *image = read_file(cubin_path, &size);
  CUdeviceptr dest;
  CHECK(cuMemAlloc(&dest, 32 * sizeof(int)));
  CHECK(cuMemsetD8(dest, 0, 32 * sizeof(int)));
  double *memory = calloc((size_t)repeats, sizeof *memory);
  double *disk = calloc((size_t)repeats, sizeof *disk);
  if (!memory || !disk) return 1;
  for (long r = -1; r < repeats; r++) {
    CUmodule m;
    CUfunction f;
    double t = now_ms();
    CHECK(cuModuleLoadData(&m, image));
    CHECK(cuModuleGetFunction(&f, m, "args4"));
    double loaded = now_ms() - t;
    CHECK(cuModuleUnload(m));
    t = now_ms();
    size_t n;
    char *again = read_file(cubin_path, &n);
    CHECK(cuModuleLoadData(&m, again));
    CHECK(cuModuleGetFunction(&f, m, "args4"));
    launch(f, &dest, 3);
    CHECK(cuCtxSynchronize());
    double hit = now_ms() - t;
    expect_sum(dest, 3);
    free(again);
    CHECK(cuModuleUnload(m));
    if (r >= 0) memory[r] = loaded, disk[r] = hit;
  }
  printf("{\n");
  bench_series("memory_load_ms", memory, repeats, 0);
  bench_series("reload_hit_ms", disk, repeats, 1);
  printf("}\n");
  return 0;
}

/* The process's first module load is dearer than later ones (about 100-130 µs against 45-75 on
 * an H200), so this mode times exactly one and loads nothing before it. */
static int mode_disk(const char *cubin_path) {
  bench_context();
  CUdeviceptr dest;
  CHECK(cuMemAlloc(&dest, 32 * sizeof(int)));
  CHECK(cuMemsetD8(dest, 0, 32 * sizeof(int)));
  int got[32];
  double t = now_ms();
  size_t size;
  char *image = read_file(cubin_path, &size);
  CUmodule m;
  CUfunction f;
  CHECK(cuModuleLoadData(&m, image));
  CHECK(cuModuleGetFunction(&f, m, "args4"));
  launch(f, &dest, 3);
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(got, dest, sizeof got));
  double hit = now_ms() - t;
  for (int i = 0; i < 32; i++)
    if (got[i] != 6) {
      fprintf(stderr, "compare: args4 wrote %d, not 6\n", got[i]);
      return 1;
    }
  free(image);
  printf("{\"disk_hit_ms\": %.4f}\n", hit);
  return 0;
}

static int mode_first(const char *cubin_path) {
  double t = now_ms();
  bench_context();
  size_t size;
  char *image = read_file(cubin_path, &size);
  CUmodule m;
  CUfunction f;
  CHECK(cuModuleLoadData(&m, image));
  CHECK(cuModuleGetFunction(&f, m, "args4"));
  CUdeviceptr dest;
  CHECK(cuMemAlloc(&dest, 32 * sizeof(int)));
  launch(f, &dest, 3);
  CHECK(cuCtxSynchronize());
  double first = now_ms() - t;
  expect_sum(dest, 3);
  printf("{\"first_call_ms\": %.4f}\n", first);
  return 0;
}

static int mode_global(const char *cubin_path, const char *name, long count, long repeats) {
  static const float values[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  bench_context();
  size_t size;
  char *image = read_file(cubin_path, &size);
  CUmodule m;
  CHECK(cuModuleLoadData(&m, image));
  double *us = calloc((size_t)repeats, sizeof *us);
  if (!us) return 1;
  CUdeviceptr p = 0;
  size_t bytes = 0;
  for (long r = -1; r < repeats; r++) { /* r = -1: untimed warm-up */
    double t = now_ms();
    for (long i = 0; i < count; i++) {
      CHECK(cuModuleGetGlobal(&p, &bytes, m, name));
      CHECK(cuMemcpyHtoD(p, &values[i & 3], sizeof values[0]));
    }
    if (r >= 0) us[r] = (now_ms() - t) * 1e3 / (double)count;
  }
  float got = 0;
  CHECK(cuMemcpyDtoH(&got, p, sizeof got));
  if (bytes != sizeof got || got != values[(count - 1) & 3]) {
    fprintf(stderr, "compare: %s holds %g in %zu bytes, not %g in 4\n", name, got, bytes,
            values[(count - 1) & 3]);
    return 1;
  }
  printf("{\n");
  bench_series("global_us", us, repeats, 1);
  printf("}\n");
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 5 && !strcmp(argv[1], "launch"))
    return mode_launch(argv[2], bench_count(argv[3]), bench_count(argv[4]));
  if (argc == 4 && !strcmp(argv[1], "load")) return mode_load(argv[2], bench_count(argv[3]));
  if (argc == 3 && !strcmp(argv[1], "disk")) return mode_disk(argv[2]);
  if (argc == 3 && !strcmp(argv[1], "first")) return mode_first(argv[2]);
  if (argc == 6 && !strcmp(argv[1], "global"))
    return mode_global(argv[2], argv[3], bench_count(argv[4]), bench_count(argv[5]));
  fprintf(stderr,
          "usage: %s launch CUBIN LAUNCHES REPEATS | load CUBIN REPEATS | disk CUBIN | first "
          "CUBIN | global CUBIN NAME COUNT REPEATS\n",
          argv[0]);
  return 2;
}
