/* The raw-C side of bench/graphs.py: a sequence of kernel launches from C, one by one and as
 * a CUDA graph, with nothing in front of the driver.
 *
 *   graphs CUBIN KERNELS SEQUENCES REPEATS UPDATES
 *
 * The kernel is add(float *x, float v, int n) of the CUBIN, grid 2, block 32, n = 64, on a
 * stream of its own. Prints one JSON object of series, one value per repeat:
 *   calls_us       µs per kernel: SEQUENCES x KERNELS cuLaunchKernel, then cuStreamSynchronize
 *   graph_us       µs per kernel: the same KERNELS launches captured once into a graph,
 *                  cuGraphLaunch SEQUENCES times, then cuStreamSynchronize
 *   set_params_us  µs per cuGraphExecKernelNodeSetParams of one kernel node (UPDATES of them)
 * Every way is checked (the values x holds) before it is timed.
 *
 * Build: cc -O2 -Wall -Wextra -I/usr/local/cuda/include graphs.c \
 *            -L/usr/local/cuda/lib64/stubs -lcuda -o graphs
 */
#define _POSIX_C_SOURCE 200809L

#define BENCH_NAME "graphs"
#include "bench.h"

#include <string.h>

enum { N = 64 };

static char *read_file(const char *path) {
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
    fprintf(stderr, "graphs: cannot read %s\n", path);
    exit(1);
  }
  fclose(f);
  return p;
}

static float one = 1.0f;
static int n_elements = N;

static void launch(CUfunction f, CUdeviceptr *x, CUstream s) {
  void *params[] = {x, &one, &n_elements};
  CHECK(cuLaunchKernel(f, 2, 1, 1, 32, 1, 1, 0, s, params, NULL));
}

/* x must hold `want` everywhere; then it is zeroed. */
static void expect(CUdeviceptr x, CUstream s, float want, const char *what) {
  float got[N];
  CHECK(cuStreamSynchronize(s));
  CHECK(cuMemcpyDtoH(got, x, sizeof got));
  for (int i = 0; i < N; i++)
    if (got[i] != want) {
      fprintf(stderr, "graphs: %s left x[%d] = %g, not %g\n", what, i, got[i], want);
      exit(1);
    }
  CHECK(cuMemsetD8(x, 0, sizeof got));
}

int main(int argc, char **argv) {
  if (argc != 6) {
    fprintf(stderr, "usage: %s CUBIN KERNELS SEQUENCES REPEATS UPDATES\n", argv[0]);
    return 2;
  }
  long kernels = bench_count(argv[2]), sequences = bench_count(argv[3]);
  long repeats = bench_count(argv[4]), updates = bench_count(argv[5]);
  bench_context();
  char *image = read_file(argv[1]);
  CUmodule m;
  CUfunction f;
  CHECK(cuModuleLoadData(&m, image));
  CHECK(cuModuleGetFunction(&f, m, "add"));
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CUdeviceptr x;
  CHECK(cuMemAlloc(&x, N * sizeof(float)));
  CHECK(cuMemsetD8(x, 0, N * sizeof(float)));

  for (long k = 0; k < kernels; k++) launch(f, &x, s);
  expect(x, s, (float)kernels, "the launches one by one");

  CUgraph graph;
  CUgraphExec exec;
  CHECK(cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
  for (long k = 0; k < kernels; k++) launch(f, &x, s);
  CHECK(cuStreamEndCapture(s, &graph));
  CHECK(cuGraphInstantiate(&exec, graph, 0));
  CHECK(cuGraphLaunch(exec, s));
  expect(x, s, (float)kernels, "the graph's replay");

  /* The first kernel node, for the updates: any one is as good. */
  size_t n_nodes = 0;
  CHECK(cuGraphGetNodes(graph, NULL, &n_nodes));
  CUgraphNode *nodes = malloc(n_nodes * sizeof *nodes);
  if (!nodes) return 1;
  CHECK(cuGraphGetNodes(graph, nodes, &n_nodes));
  CUgraphNode node = NULL;
  for (size_t i = 0; i < n_nodes && !node; i++) {
    CUgraphNodeType type;
    CHECK(cuGraphNodeGetType(nodes[i], &type));
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) node = nodes[i];
  }
  if (!node) {
    fprintf(stderr, "graphs: the captured graph has no kernel node\n");
    return 1;
  }
  CUDA_KERNEL_NODE_PARAMS p;
  CHECK(cuGraphKernelNodeGetParams(node, &p));
  float values[2] = {1.0f, 3.0f};
  void *params[2][3] = {{&x, &values[0], &n_elements}, {&x, &values[1], &n_elements}};
  p.kernelParams = params[1];
  p.extra = NULL;
  CHECK(cuGraphExecKernelNodeSetParams(exec, node, &p));
  CHECK(cuGraphLaunch(exec, s));
  expect(x, s, (float)kernels + 2.0f, "the graph with one kernel updated");

  double *calls = calloc((size_t)repeats, sizeof *calls);
  double *replays = calloc((size_t)repeats, sizeof *replays);
  double *sets = calloc((size_t)repeats, sizeof *sets);
  if (!calls || !replays || !sets) return 1;
  for (long r = -1; r < repeats; r++) { /* r = -1: untimed warm-up */
    double t = bench_now_us();
    for (long q = 0; q < sequences; q++)
      for (long k = 0; k < kernels; k++) launch(f, &x, s);
    CHECK(cuStreamSynchronize(s));
    double t_calls = bench_now_us() - t;
    t = bench_now_us();
    for (long q = 0; q < sequences; q++) CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
    double t_graph = bench_now_us() - t;
    t = bench_now_us();
    for (long u = 0; u < updates; u++) {
      p.kernelParams = params[u & 1];
      CHECK(cuGraphExecKernelNodeSetParams(exec, node, &p));
    }
    double t_sets = bench_now_us() - t;
    if (r >= 0) {
      calls[r] = t_calls / (double)(sequences * kernels);
      replays[r] = t_graph / (double)(sequences * kernels);
      sets[r] = t_sets / (double)updates;
    }
  }
  printf("{\n");
  bench_series("calls_us", calls, repeats, 0);
  bench_series("graph_us", replays, repeats, 0);
  bench_series("set_params_us", sets, repeats, 1);
  printf("}\n");
  CHECK(cuGraphExecDestroy(exec));
  CHECK(cuGraphDestroy(graph));
  return 0;
}
