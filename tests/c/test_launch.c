/* Launching from C with no Python: these need a GPU and skip (saying why) without one. */
#include "runner.h"

#include <time.h>

static const char *multiply_src =
    "__global__ void multiply_them(float *dest, const float *a, const float *b, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i]; }\n"
    "__global__ void scale_in_place(float *x, float s, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }\n"
    "__global__ void poke(int *p) { p[threadIdx.x] = 42; }\n";

static kiln_function *get(kiln_module **m, const char *name) {
  if (!*m) ASSERT_OK(kiln_module_from_source(multiply_src, NULL, m));
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(*m, name, &f));
  return f;
}

static void fill(float *x, int n, float base) {
  for (int i = 0; i < n; i++) x[i] = base + (float)(i % 97) * 0.25f;
}

TEST(gpu_launch_with_device_pointers) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  kiln_function *f = get(&m, "multiply_them");
  enum { N = 400 };
  float a[N], b[N], c[N];
  fill(a, N, 1.0f);
  fill(b, N, -3.0f);
  kiln_deviceptr da, db, dc;
  ASSERT_OK(kiln_mem_alloc(sizeof a, &da));
  ASSERT_OK(kiln_mem_alloc(sizeof b, &db));
  ASSERT_OK(kiln_mem_alloc(sizeof c, &dc));
  ASSERT_OK(kiln_memcpy_htod(da, a, sizeof a));
  ASSERT_OK(kiln_memcpy_htod(db, b, sizeof b));
  int n = N;
  void *params[] = {&dc, &da, &db, &n};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {N, 1, 1}};
  unsigned long long work = kiln_work_count();
  ASSERT_OK(kiln_function_check_launch(f, &cfg)); /* queues nothing, so counts nothing */
  ASSERT_EQ(kiln_work_count(), work);
  ASSERT_OK(kiln_function_launch(f, &cfg, params));
  ASSERT_OK(kiln_synchronize());
  ASSERT_OK(kiln_memcpy_dtoh(c, dc, sizeof c));
  ASSERT_EQ(kiln_work_count(), work + 2); /* the launch and the copy */
  for (int i = 0; i < N; i++)
    if (c[i] != a[i] * b[i]) FAIL("c[%d] = %g, want %g", i, c[i], a[i] * b[i]);
  ASSERT_OK(kiln_mem_free(da));
  ASSERT_OK(kiln_mem_free(db));
  ASSERT_OK(kiln_mem_free(dc));
  kiln_module_free(m);
}

TEST(gpu_call_with_in_and_out) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  kiln_function *f = get(&m, "multiply_them");
  kiln_function *s = get(&m, "scale_in_place");
  enum { N = 1000 };
  static float a[N], b[N], c[N], x[N], x0[N];
  fill(a, N, 2.0f);
  fill(b, N, 0.5f);
  uint64_t pa = 0, pb = 0, pc = 0;
  int n = N;
  void *params[] = {&pc, &pa, &pb, &n};
  kiln_transfer t[] = {
      {0, KILN_OUT, c, sizeof c}, {1, KILN_IN, a, sizeof a}, {2, KILN_IN, b, sizeof b}};
  kiln_launch_config cfg = {.grid = {(N + 255) / 256, 1, 1}, .block = {256, 1, 1}};
  for (int round = 0; round < 3; round++) { /* the staging buffers are reused */
    memset(c, 0, sizeof c);
    fill(a, N, (float)round);
    ASSERT_OK(kiln_function_call(f, &cfg, params, t, 3, NULL));
    for (int i = 0; i < N; i++)
      if (c[i] != a[i] * b[i]) FAIL("round %d: c[%d] = %g, want %g", round, i, c[i], a[i] * b[i]);
  }
  fill(x, N, 1.0f);
  memcpy(x0, x, sizeof x);
  uint64_t px = 0;
  float factor = 3.0f;
  void *sparams[] = {&px, &factor, &n};
  kiln_transfer io = {0, KILN_INOUT, x, sizeof x};
  ASSERT_OK(kiln_function_call(s, &cfg, sparams, &io, 1, NULL));
  for (int i = 0; i < N; i++)
    if (x[i] != x0[i] * 3.0f) FAIL("x[%d] = %g, want %g", i, x[i], x0[i] * 3.0f);
  kiln_module_free(m);
}

TEST(gpu_call_large_transfers_and_timing) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  kiln_function *f = get(&m, "multiply_them");
  int n = 3 << 20; /* 12 MiB an array: past the staging buffers */
  float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4), *c = calloc((size_t)n, 4);
  fill(a, n, 1.5f);
  fill(b, n, 2.0f);
  uint64_t pa = 0, pb = 0, pc = 0;
  void *params[] = {&pc, &pa, &pb, &n};
  kiln_transfer t[] = {{0, KILN_OUT, c, (size_t)n * 4},
                       {1, KILN_IN, a, (size_t)n * 4},
                       {2, KILN_IN, b, (size_t)n * 4}};
  kiln_launch_config cfg = {.grid = {(unsigned)(n + 255) / 256, 1, 1}, .block = {256, 1, 1}};
  double elapsed = -1;
  ASSERT_OK(kiln_function_call(f, &cfg, params, t, 3, &elapsed));
  ASSERT(elapsed > 0 && elapsed < 1.0);
  for (int i = 0; i < n; i++)
    if (c[i] != a[i] * b[i]) FAIL("c[%d] = %g, want %g", i, c[i], a[i] * b[i]);
  free(a);
  free(b);
  free(c);
  kiln_module_free(m);
}

TEST(gpu_launch_over_device_limits) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  kiln_function *f = get(&m, "poke");
  uint64_t p = 0;
  void *params[] = {&p};
  kiln_launch_config deep = {.grid = {1, 1, 1}, .block = {1, 1, 128}};
  ASSERT_STATUS(kiln_function_launch(f, &deep, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "block.z is 128");
  kiln_launch_config tall = {.grid = {1, 1u << 20, 1}, .block = {1, 1, 1}};
  ASSERT_STATUS(kiln_function_launch(f, &tall, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "grid.y");
  kiln_launch_config shared = {.grid = {1, 1, 1}, .block = {1, 1, 1}, .shared = 1u << 30};
  ASSERT_STATUS(kiln_function_launch(f, &shared, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "dynamic shared memory");
  kiln_module_free(m);
}

TEST(gpu_illegal_address_is_named) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  kiln_function *f = get(&m, "poke");
  uint64_t bad = 0x10;
  void *params[] = {&bad};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {32, 1, 1}};
  ASSERT_OK(kiln_function_launch(f, &cfg, params));
  kiln_status s = kiln_synchronize();
  ASSERT(s == KILN_ERROR_CUDA || s == KILN_ERROR_LAUNCH);
  ASSERT_STR_EQ(kiln_cuda_result_name(kiln_last_cuda_result()), "CUDA_ERROR_ILLEGAL_ADDRESS");
  ASSERT_CONTAINS(kiln_last_error(), "CUDA_ERROR_ILLEGAL_ADDRESS");
  /* No kiln_module_free: the context is lost after an illegal address; the process ends. */
}

TEST(gpu_memcpy_range_is_checked) {
  kiln_test_require_gpu();
  kiln_deviceptr p = 0;
  ASSERT_OK(kiln_mem_alloc(16, &p));
  char host[64] = {0};
  ASSERT_STATUS(kiln_memcpy_htod(p, host, 32), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_STATUS(kiln_memcpy_dtoh(host, p + 8, 16), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_memcpy_htod(p, host, 16));
  ASSERT_STATUS(kiln_memcpy_htod(0x10, host, 4), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "is not device memory");
  ASSERT_OK(kiln_mem_free(p));
}

/* ---- A wait that gives up ------------------------------------------------------------- */

static const char *spin_src =
    "extern \"C\" __global__ void spin_fill(float *out, int n, long long cycles)\n"
    "{ long long start = clock64(); while (clock64() - start < cycles) {}\n"
    "  for (int i = threadIdx.x; i < n; i += blockDim.x) out[i] = 7.0f; }\n";

typedef struct give_up {
  int calls;
  kiln_stream stream; /* the stream the call waited on */
} give_up;

static double seconds_now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Polls for 50 ms, as Python's wait does between looks at its signals, then gives up. */
static kiln_status give_up_after_50ms(void *arg, kiln_stream stream) {
  give_up *g = arg;
  g->calls++;
  g->stream = stream;
  double end = seconds_now() + 0.05;
  while (seconds_now() < end) {
    int done = 0;
    kiln_status s = kiln_stream_query(stream, &done);
    if (s || done) return s;
  }
  return KILN_ERROR_INTERRUPTED;
}

static int all_equal(const float *x, int n, float v) {
  for (int i = 0; i < n; i++)
    if (x[i] != v) return 0;
  return 1;
}

/* A call whose wait gives up returns at once, leaves the kernel running, never copies back,
 * and the buffers it used serve the next calls only once that kernel is over. */
TEST(gpu_call_wait_given_up_leaves_the_kernel_running) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_from_source(spin_src, NULL, &m));
  ASSERT_OK(kiln_module_get_function(m, "spin_fill", &f));
  /* Small (kiln's pinned bounce buffers) and 4 MiB (the pool, staged copies). */
  static const int sizes[2] = {64, 1 << 20};
  for (int k = 0; k < 2; k++) {
    int n = sizes[k];
    float *out = calloc((size_t)n, 4), *next = calloc((size_t)n, 4);
    ASSERT(out && next);
    uint64_t p = 0;
    long long cycles = 3000000000LL; /* about 1.5 s at 2 GHz */
    void *params[] = {&p, &n, &cycles};
    kiln_transfer t = {0, KILN_OUT, out, (size_t)n * 4};
    kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {256, 1, 1}};
    give_up g = {0, (kiln_stream)1};
    double start = seconds_now();
    ASSERT_STATUS(kiln_function_call_waiting(f, &cfg, params, &t, 1, NULL, give_up_after_50ms, &g),
                  KILN_ERROR_INTERRUPTED);
    double took = seconds_now() - start;
    if (took > 0.5) FAIL("size %d: the call returned %.3f s after it began", n, took);
    ASSERT_EQ(g.calls, 1);
    ASSERT(g.stream == NULL);
    ASSERT_CONTAINS(kiln_last_error(), "goes on running");
    int done = 1;
    ASSERT_OK(kiln_stream_query(NULL, &done));
    ASSERT_EQ(done, 0); /* the kernel still spins */
    /* The next call queues behind it on the legacy stream and copies back as usual. */
    long long none = 0;
    void *next_params[] = {&p, &n, &none};
    kiln_transfer tn = {0, KILN_OUT, next, (size_t)n * 4};
    ASSERT_OK(kiln_function_call(f, &cfg, next_params, &tn, 1, NULL));
    if (!all_equal(next, n, 7.0f)) FAIL("size %d: the call after the interrupted one", n);
    ASSERT_OK(kiln_synchronize());
    if (!all_equal(out, n, 0.0f)) FAIL("size %d: the interrupted call copied back after all", n);
    /* Once the kernel is over, the buffers serve again. */
    memset(next, 0, (size_t)n * 4);
    ASSERT_OK(kiln_function_call(f, &cfg, next_params, &tn, 1, NULL));
    if (!all_equal(next, n, 7.0f)) FAIL("size %d: a call once the kernel was over", n);
    free(out);
    free(next);
  }
  kiln_module_free(m);
}
