/* Extended launches (cooperative, clusters), occupancy and graphs from C. The first tests need
 * no device; the gpu_ ones skip without one, saying why. */
#include "runner.h"

#include <stdlib.h>

static const char *graph_src =
    "#include <cooperative_groups.h>\n"
    "namespace cg = cooperative_groups;\n"
    "extern \"C\" __global__ void add(float *x, float v, int n)\n"
    "{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += v; }\n"
    /* Every block sums a grid-strided share, the grid waits, then block 0 adds the partials
     * in order: the result needs the whole grid resident at once. */
    "extern \"C\" __global__ void grid_sum(const float *x, float *partial, float *out, int n)\n"
    "{\n"
    "  cg::grid_group grid = cg::this_grid();\n"
    "  __shared__ float s[256];\n"
    "  float acc = 0;\n"
    "  for (int i = (int)grid.thread_rank(); i < n; i += (int)grid.size()) acc += x[i];\n"
    "  s[threadIdx.x] = acc;\n"
    "  __syncthreads();\n"
    "  for (int w = 128; w > 0; w >>= 1) {\n"
    "    if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];\n"
    "    __syncthreads();\n"
    "  }\n"
    "  if (threadIdx.x == 0) partial[blockIdx.x] = s[0];\n"
    "  grid.sync();\n"
    "  if (grid.thread_rank() == 0) {\n"
    "    float t = 0;\n"
    "    for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];\n"
    "    out[0] = t;\n"
    "  }\n"
    "}\n"
    /* Each block reads its neighbour's shared memory in the cluster (distributed shared
     * memory). */
    "extern \"C\" __global__ void neighbour(int *out)\n"
    "{\n"
    "  __shared__ int v;\n"
    "  cg::cluster_group cluster = cg::this_cluster();\n"
    "  unsigned rank = cluster.block_rank();\n"
    "  if (threadIdx.x == 0) v = (int)rank * 10 + 1;\n"
    "  cluster.sync();\n"
    "  int *remote = cluster.map_shared_rank(&v, (rank + 1) % cluster.num_blocks());\n"
    "  if (threadIdx.x == 0) out[blockIdx.x] = *remote;\n"
    "  cluster.sync();\n"
    "}\n";

static kiln_function *get(kiln_module *m, const char *name) {
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, name, &f));
  return f;
}

TEST(launch_options_checked_before_the_device) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1); /* any device use would fail */
  kiln_compile_opts opts = {.arch = "sm_90"};
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(graph_src, &opts, &m));
  kiln_function *f = get(m, "neighbour");
  uint64_t p = 0;
  void *params[] = {&p};
  kiln_launch_config cfg = {.grid = {4, 1, 1}, .block = {32, 1, 1}};
  kiln_launch_options half = {.cluster = {2, 0, 1}};
  ASSERT_STATUS(kiln_function_launch_ex(f, &cfg, &half, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "cluster.y is 0");
  kiln_launch_options big = {.cluster = {4, 4, 2}};
  kiln_launch_config wide = {.grid = {4, 4, 2}, .block = {32, 1, 1}};
  ASSERT_STATUS(kiln_function_launch_ex(f, &wide, &big, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "at most 16");
  kiln_launch_options three = {.cluster = {3, 1, 1}};
  ASSERT_STATUS(kiln_function_launch_ex(f, &cfg, &three, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "not a multiple of cluster.x");
  kiln_launch_config zero = {.grid = {0, 1, 1}, .block = {32, 1, 1}};
  kiln_launch_options coop = {.cooperative = 1};
  ASSERT_STATUS(kiln_function_launch_ex(f, &zero, &coop, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "grid.x is 0");
  /* A good shape reaches the device, which is missing here. */
  kiln_launch_options two = {.cluster = {2, 1, 1}};
  ASSERT_STATUS(kiln_function_launch_ex(f, &cfg, &two, params), KILN_ERROR_NO_DRIVER);
  int blocks = -1;
  ASSERT_STATUS(kiln_function_max_active_blocks(f, 0, 0, &blocks), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "from 1 to 1024");
  ASSERT_EQ(blocks, 0);
  size_t bytes = 1;
  ASSERT_STATUS(kiln_function_available_dynamic_shared(f, 0, 64, &bytes), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "at least 1");
  int grid = -1, block = -1;
  ASSERT_STATUS(kiln_function_suggested_block_size(f, 0, 4096, &grid, &block), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "limit");
  kiln_module_free(m);
}

TEST(graph_calls_checked_before_the_device) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_graph *g = (kiln_graph *)1;
  ASSERT_STATUS(kiln_graph_begin_capture(NULL, &g), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "legacy default stream cannot be captured");
  ASSERT(g == NULL);
  ASSERT_STATUS(kiln_graph_launch(NULL, NULL), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "NULL");
  ASSERT_STATUS(kiln_graph_end_capture(NULL), KILN_ERROR_INVALID);
  ASSERT_EQ(kiln_graph_kernel_count(NULL), 0);
  ASSERT(kiln_graph_kernel_function(NULL, 0) == NULL);
  kiln_graph_free(NULL);
}

TEST(gpu_cooperative_grid_sum_and_a_grid_too_large) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(graph_src, NULL, &m));
  kiln_function *f = get(m, "grid_sum");
  enum { N = 1 << 20 };
  float *x = malloc(N * sizeof *x);
  ASSERT(x != NULL);
  double want = 0;
  for (int i = 0; i < N; i++) {
    x[i] = (float)(i % 7) - 3.0f; /* small integers: every order of summing is exact */
    want += x[i];
  }
  int per_sm = 0;
  ASSERT_OK(kiln_function_max_active_blocks(f, 256, 0, &per_sm));
  ASSERT(per_sm >= 1);
  kiln_device_info info;
  ASSERT_OK(kiln_device_get_info(0, &info));
  unsigned most = (unsigned)per_sm * (unsigned)info.multiprocessors;
  kiln_deviceptr dx, dpartial, dout;
  ASSERT_OK(kiln_mem_alloc(N * sizeof *x, &dx));
  ASSERT_OK(kiln_mem_alloc((most + 1) * sizeof(float), &dpartial));
  ASSERT_OK(kiln_mem_alloc(sizeof(float), &dout));
  ASSERT_OK(kiln_memcpy_htod(dx, x, N * sizeof *x));
  int n = N;
  void *params[] = {&dx, &dpartial, &dout, &n};
  kiln_launch_options coop = {.cooperative = 1};
  kiln_launch_config cfg = {.grid = {most, 1, 1}, .block = {256, 1, 1}};
  ASSERT_OK(kiln_function_launch_ex(f, &cfg, &coop, params));
  ASSERT_OK(kiln_synchronize());
  float got = 0;
  ASSERT_OK(kiln_memcpy_dtoh(&got, dout, sizeof got));
  ASSERT_EQ((int64_t)got, (int64_t)want);
  /* One block more than can be resident: refused before the driver. */
  kiln_launch_config over = {.grid = {most + 1, 1, 1}, .block = {256, 1, 1}};
  ASSERT_STATUS(kiln_function_launch_ex(f, &over, &coop, params), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "resident on the device at once");
  kiln_mem_free(dx);
  kiln_mem_free(dpartial);
  kiln_mem_free(dout);
  free(x);
  kiln_module_free(m);
}

TEST(gpu_cluster_reads_its_neighbours_shared_memory) {
  kiln_test_require_gpu();
  kiln_device_info info;
  ASSERT_OK(kiln_device_get_info(0, &info));
  if (info.major < 9) SKIP("thread-block clusters need compute capability 9.0");
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(graph_src, NULL, &m));
  kiln_function *f = get(m, "neighbour");
  enum { BLOCKS = 8, CLUSTER = 4 };
  kiln_deviceptr dout;
  ASSERT_OK(kiln_mem_alloc(BLOCKS * sizeof(int), &dout));
  void *params[] = {&dout};
  kiln_launch_config cfg = {.grid = {BLOCKS, 1, 1}, .block = {32, 1, 1}};
  kiln_launch_options opts = {.cluster = {CLUSTER, 1, 1}};
  int clusters = 0;
  ASSERT_OK(kiln_function_max_active_clusters(f, &cfg, &opts, &clusters));
  ASSERT(clusters >= 1);
  ASSERT_OK(kiln_function_launch_ex(f, &cfg, &opts, params));
  ASSERT_OK(kiln_synchronize());
  int out[BLOCKS];
  ASSERT_OK(kiln_memcpy_dtoh(out, dout, sizeof out));
  for (int b = 0; b < BLOCKS; b++) ASSERT_EQ(out[b], ((b % CLUSTER + 1) % CLUSTER) * 10 + 1);
  kiln_mem_free(dout);
  kiln_module_free(m);
}

/* 100 launches of add(x, v_i, n), recorded on stream into *g. */
static void capture_adds(kiln_function *f, kiln_stream stream, kiln_deviceptr *dx, int *n,
                         const float *v, kiln_graph **g) {
  ASSERT_OK(kiln_graph_begin_capture(stream, g));
  int capturing = 0;
  ASSERT_OK(kiln_stream_is_capturing(stream, &capturing));
  ASSERT_EQ(capturing, 1);
  kiln_launch_config cfg = {.grid = {4, 1, 1}, .block = {256, 1, 1}, .stream = stream};
  for (int i = 0; i < 100; i++) {
    void *params[] = {dx, (void *)&v[i], n};
    ASSERT_OK(kiln_function_launch(f, &cfg, params));
  }
  ASSERT_OK(kiln_graph_end_capture(*g));
  ASSERT_OK(kiln_stream_is_capturing(stream, &capturing));
  ASSERT_EQ(capturing, 0);
}

TEST(gpu_graph_replays_updates_and_takes_another_capture) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(graph_src, NULL, &m));
  kiln_function *f = get(m, "add");
  enum { N = 1000 };
  int n = N;
  kiln_stream stream;
  ASSERT_OK(kiln_stream_create(KILN_STREAM_NON_BLOCKING, 0, &stream));
  kiln_deviceptr dx;
  ASSERT_OK(kiln_mem_alloc(N * sizeof(float), &dx));
  ASSERT_OK(kiln_memset_d32(dx, 0, N));
  ASSERT_OK(kiln_synchronize()); /* the memset is ordered on no stream of the test's */
  /* Warm: the module loads before the capture. */
  float zero = 0;
  void *warm[] = {&dx, &zero, &n};
  kiln_launch_config cfg = {.grid = {4, 1, 1}, .block = {256, 1, 1}, .stream = stream};
  ASSERT_OK(kiln_function_launch(f, &cfg, warm));
  ASSERT_OK(kiln_stream_synchronize(stream));
  float v[100], twos[100];
  for (int i = 0; i < 100; i++) {
    v[i] = (float)i;
    twos[i] = 2;
  }
  kiln_graph *g = NULL, *h = NULL;
  capture_adds(f, stream, &dx, &n, v, &g);
  ASSERT_EQ(kiln_graph_kernel_count(g), 100);
  ASSERT(kiln_graph_kernel_function(g, 99) == f);
  ASSERT_EQ(kiln_graph_joined(g), 0);
  float x[N];
  ASSERT_OK(kiln_memcpy_dtoh(x, dx, sizeof x));
  ASSERT_EQ((int64_t)x[0], 0); /* recorded, not run */
  ASSERT_OK(kiln_graph_launch(g, stream));
  ASSERT_OK(kiln_stream_synchronize(stream));
  ASSERT_OK(kiln_memcpy_dtoh(x, dx, sizeof x));
  for (int i = 0; i < N; i++) ASSERT_EQ((int64_t)x[i], 4950);
  /* Kernel 5 adds 1000 instead of 5. */
  float big = 1000;
  void *params[] = {&dx, &big, &n};
  ASSERT_OK(kiln_graph_set_kernel_params(g, 5, params));
  ASSERT_STATUS(kiln_graph_set_kernel_params(g, 100, params), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_graph_launch(g, stream));
  ASSERT_OK(kiln_stream_synchronize(stream));
  ASSERT_OK(kiln_memcpy_dtoh(x, dx, sizeof x));
  ASSERT_EQ((int64_t)x[N - 1], 4950 + 4950 - 5 + 1000);
  /* A second capture of the same shape, every kernel adding 2, taken whole. */
  capture_adds(f, stream, &dx, &n, twos, &h);
  ASSERT_OK(kiln_graph_update(g, h));
  ASSERT_OK(kiln_graph_launch(g, stream));
  ASSERT_OK(kiln_stream_synchronize(stream));
  ASSERT_OK(kiln_memcpy_dtoh(x, dx, sizeof x));
  ASSERT_EQ((int64_t)x[7], 4950 + 4950 - 5 + 1000 + 200);
  kiln_graph_free(g);
  kiln_graph_free(h);
  kiln_mem_free(dx);
  kiln_stream_destroy(stream);
  kiln_module_free(m);
}

TEST(gpu_transfers_refused_inside_a_capture) {
  kiln_test_require_gpu();
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_source(graph_src, NULL, &m));
  kiln_function *f = get(m, "add");
  kiln_stream stream;
  ASSERT_OK(kiln_stream_create(KILN_STREAM_NON_BLOCKING, 0, &stream));
  float host[64] = {0};
  int n = 64;
  float v = 1;
  kiln_deviceptr slot = 0;
  void *params[] = {&slot, &v, &n};
  kiln_transfer t = {.param = 0, .dir = KILN_INOUT, .host = host, .nbytes = sizeof host};
  kiln_launch_config cfg = {.grid = {1, 1, 1}, .block = {64, 1, 1}, .stream = stream};
  ASSERT_OK(kiln_function_call(f, &cfg, params, &t, 1, NULL)); /* loads the module */
  kiln_graph *g = NULL;
  ASSERT_OK(kiln_graph_begin_capture(stream, &g));
  ASSERT_STATUS(kiln_function_call_async(f, &cfg, params, &t, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "cannot be recorded in a stream capture");
  ASSERT_STATUS(kiln_graph_launch(g, stream), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "still capturing");
  ASSERT_OK(kiln_graph_end_capture(g));
  ASSERT_EQ(kiln_graph_kernel_count(g), 0);
  kiln_graph_free(g);
  ASSERT_OK(kiln_stream_synchronize(stream));
  kiln_stream_destroy(stream);
  kiln_module_free(m);
}
