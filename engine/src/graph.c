/* Graphs: a stream's work recorded once (cuStreamBeginCapture), instantiated, and replayed
 * with one cuGraphLaunch; the kernels kiln launched into it numbered, so that one's arguments
 * can be replaced (cuGraphExecKernelNodeSetParams) without instantiating again. */
#include "graph.h"

#include "module.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

int kiln__graph_open;

/* One kernel kiln launched into the capture. */
typedef struct kiln__graph_kernel {
  CUgraphNode node; /* in the graph the exec was instantiated from; NULL: unknown */
  kiln_function *f; /* borrowed: the caller keeps the module alive */
  CUDA_KERNEL_NODE_PARAMS_v2 params; /* the node's launch (read at the end of the capture) */
} kiln__graph_kernel;

struct kiln_graph {
  CUstream stream;
  int device;    /* the ordinal it was captured on */
  int capturing; /* between begin and end */
  int joined;    /* recorded into a capture another library began */
  int lost;      /* a kernel node could not be found: numbering may be off */
  CUgraph graph; /* owned, kept for the nodes' identity; NULL when joined */
  CUgraphExec exec;
  kiln__graph_kernel *kernels; /* owned */
  int n_kernels, cap_kernels;
  kiln_graph *next_open; /* in kiln__graph_list while capturing */
};

/* The captures open in the process, by stream; kiln__graph_open counts them. */
static pthread_mutex_t kiln__graph_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln_graph *kiln__graph_list;

static kiln_graph *kiln__graph_find_locked(CUstream stream) {
  for (kiln_graph *g = kiln__graph_list; g; g = g->next_open)
    if (g->stream == stream) return g;
  return NULL;
}

static void kiln__graph_note_locked(kiln_graph *g, kiln_function *f, CUstream stream) {
  if (g->n_kernels == g->cap_kernels) {
    int cap = g->cap_kernels ? 2 * g->cap_kernels : 16;
    kiln__graph_kernel *k = realloc(g->kernels, (size_t)cap * sizeof *k);
    if (!k) {
      g->lost = 1;
      return;
    }
    g->kernels = k;
    g->cap_kernels = cap;
  }
  kiln__graph_kernel *k = &g->kernels[g->n_kernels++];
  memset(k, 0, sizeof *k);
  k->f = f;
  /* Right after a launch, what the next work would depend on is that launch's node. */
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  const CUgraphNode *deps = NULL;
  size_t n_deps = 0;
  CUresult rc = kiln__driver.StreamGetCaptureInfo(stream, &status, NULL, NULL, &deps, &n_deps);
  if (rc == CUDA_SUCCESS && status == CU_STREAM_CAPTURE_STATUS_ACTIVE && n_deps == 1)
    k->node = deps[0];
  else g->lost = 1;
}

void kiln__graph_note_launch(kiln_function *f, CUstream stream) {
  pthread_mutex_lock(&kiln__graph_lock);
  kiln_graph *g = kiln__graph_find_locked(stream);
  if (g) kiln__graph_note_locked(g, f, stream);
  pthread_mutex_unlock(&kiln__graph_lock);
}

/* Ends a recording whose graph is not wanted. */
static void kiln__graph_abandon(CUstream stream) {
  CUgraph dropped = NULL;
  if (kiln__driver.StreamEndCapture(stream, &dropped) == CUDA_SUCCESS && dropped)
    kiln__driver.GraphDestroy(dropped);
}

kiln_status kiln_stream_is_capturing(kiln_stream stream, int *capturing) {
  KILN__NEED(capturing);
  *capturing = 0;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = kiln__driver.StreamIsCapturing(stream, &status);
  /* The legacy default stream, asked while a stream that waits for it records. */
  if (rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT) {
    *capturing = 1;
    kiln__clear_error();
    return KILN_OK;
  }
  if (rc) return kiln__cuda_fail("cuStreamIsCapturing", (int)rc);
  *capturing = status != CU_STREAM_CAPTURE_STATUS_NONE;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln__graph_refuse_transfers(CUstream stream, int timed) {
  int capturing = 0;
  kiln_status s = kiln_stream_is_capturing(stream, &capturing);
  if (s || !capturing) return s;
  if (timed)
    return kiln__fail(KILN_ERROR_INVALID,
                      "a timed launch cannot be recorded in a stream capture: it waits for the "
                      "kernel, which a capture does not run; time the replay with events");
  return kiln__fail(KILN_ERROR_INVALID,
                    "In/Out/InOut arguments cannot be recorded in a stream capture: a replay "
                    "would copy between temporaries and host memory that no longer exist; pass "
                    "device arrays, and copy to and from page-locked memory with the async "
                    "copies inside the capture");
}

kiln_status kiln_graph_begin_capture(kiln_stream stream, kiln_graph **out) {
  KILN__NEED(out);
  *out = NULL;
  if (!stream || stream == CU_STREAM_LEGACY)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the legacy default stream cannot be captured; capture a stream of its "
                      "own (kiln_stream_create)");
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  KILN__CU(StreamIsCapturing, (stream, &status));
  if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the stream is in a capture that has been invalidated; its owner must end "
                      "it first");
  kiln_graph *g = calloc(1, sizeof *g);
  if (!g) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of host memory for a graph");
  g->stream = stream;
  g->device = d->ordinal;
  g->joined = status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
  /* Relaxed: kiln's own first launch of a kernel loads its module and may opt it in to more
   * shared memory, calls the stricter modes would refuse while the stream records. */
  if (!g->joined) {
    CUresult rc = kiln__driver.StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED);
    if (rc) {
      free(g);
      return kiln__cuda_fail("cuStreamBeginCapture", (int)rc);
    }
  }
  pthread_mutex_lock(&kiln__graph_lock);
  int taken = kiln__graph_find_locked(stream) != NULL;
  if (!taken) {
    g->capturing = 1;
    g->next_open = kiln__graph_list;
    kiln__graph_list = g;
    __atomic_add_fetch(&kiln__graph_open, 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&kiln__graph_lock);
  if (taken) {
    /* Not a driver capture of its own when joined; ended otherwise. */
    if (!g->joined) kiln__graph_abandon(stream);
    free(g);
    return kiln__fail(KILN_ERROR_INVALID,
                      "kiln is already capturing this stream; end that capture before "
                      "beginning another");
  }
  *out = g;
  kiln__clear_error();
  return KILN_OK;
}

/* Closes the capture's bookkeeping, whatever happens to the recording. */
static void kiln__graph_close(kiln_graph *g) {
  pthread_mutex_lock(&kiln__graph_lock);
  if (g->capturing) {
    g->capturing = 0;
    for (kiln_graph **p = &kiln__graph_list; *p; p = &(*p)->next_open)
      if (*p == g) {
        *p = g->next_open;
        break;
      }
    __atomic_sub_fetch(&kiln__graph_open, 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&kiln__graph_lock);
}

kiln_status kiln_graph_end_capture(kiln_graph *g) {
  if (!g || !g->capturing)
    return kiln__fail(KILN_ERROR_INVALID, "the graph is not capturing; end a capture once");
  kiln__graph_close(g);
  if (g->joined) {
    kiln__clear_error();
    return KILN_OK;
  }
  CUresult rc = kiln__driver.StreamEndCapture(g->stream, &g->graph);
  if (rc == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED)
    return kiln__fail(KILN_ERROR_CUDA,
                      "the capture was invalidated: work that cannot be recorded ran while the "
                      "stream recorded (a synchronizing call, a copy with pageable memory, or "
                      "work on the legacy default stream, which a blocking stream waits for); "
                      "nothing was recorded");
  if (rc) return kiln__cuda_fail("cuStreamEndCapture", (int)rc);
  KILN__CU(GraphInstantiateWithFlags, (&g->exec, g->graph, 0));
  for (int i = 0; i < g->n_kernels; i++) {
    kiln__graph_kernel *k = &g->kernels[i];
    if (!k->node) continue;
    KILN__CU(GraphKernelNodeGetParams, (k->node, &k->params));
  }
  kiln__clear_error();
  return KILN_OK;
}

/* The device the graph was recorded on made current, or a sentence. */
static kiln_status kiln__graph_enter(const kiln_graph *g, const char *what) {
  if (!g) return kiln__fail(KILN_ERROR_INVALID, "%s: the graph is NULL", what);
  if (!g->exec)
    return kiln__fail(KILN_ERROR_INVALID, "%s: %s", what,
                      g->joined ? "the graph was recorded into another library's capture (such "
                                  "as PyTorch's torch.cuda.graph); replay and update that one"
                      : g->capturing ? "the graph is still capturing; end the capture first"
                                     : "the graph's capture failed; capture it again");
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (d->ordinal != g->device)
    return kiln__fail(KILN_ERROR_INVALID,
                      "%s: the graph was recorded on device %d and device %d is current", what,
                      g->device, d->ordinal);
  return KILN_OK;
}

kiln_status kiln_graph_launch(kiln_graph *g, kiln_stream stream) {
  kiln_status s = kiln__graph_enter(g, "kiln_graph_launch");
  if (s) return s;
  kiln__stream_note_work();
  CUresult rc = kiln__driver.GraphLaunch(g->exec, stream);
  if (KILN__UNLIKELY(rc != CUDA_SUCCESS)) {
    s = kiln__cuda_fail("cuGraphLaunch", (int)rc);
    return s == KILN_ERROR_CUDA ? KILN_ERROR_LAUNCH : s;
  }
  kiln__clear_error();
  return KILN_OK;
}

int kiln_graph_kernel_count(const kiln_graph *g) { return g ? g->n_kernels : 0; }

int kiln_graph_joined(const kiln_graph *g) { return g ? g->joined : 0; }

kiln_function *kiln_graph_kernel_function(const kiln_graph *g, int index) {
  if (!g || index < 0 || index >= g->n_kernels) return NULL;
  return g->kernels[index].f;
}

kiln_status kiln_graph_set_kernel_params(kiln_graph *g, int index, void **params) {
  kiln_status s = kiln__graph_enter(g, "kiln_graph_set_kernel_params");
  if (s) return s;
  if (index < 0 || index >= g->n_kernels)
    return kiln__fail(KILN_ERROR_INVALID, "kernel %d: the graph has %d kernel%s", index,
                      g->n_kernels, g->n_kernels == 1 ? "" : "s");
  kiln__graph_kernel *k = &g->kernels[index];
  if (!k->node)
    return kiln__fail(KILN_ERROR_INVALID,
                      "kernel %d (%s): its node in the graph was not found when it was "
                      "launched, so its arguments cannot be replaced",
                      index, k->f->kernel->plain);
  if (!params && k->f->kernel->n_params)
    return kiln__fail(KILN_ERROR_INVALID, "kernel %d (%s): params is NULL, and it takes %d", index,
                      k->f->kernel->plain, k->f->kernel->n_params);
  /* The driver copies the arguments' bytes now, by the kernel's own parameter layout. */
  CUDA_KERNEL_NODE_PARAMS_v2 p = k->params;
  p.kernelParams = params;
  p.extra = NULL;
  KILN__CU(GraphExecKernelNodeSetParams, (g->exec, k->node, &p));
  kiln__clear_error();
  return KILN_OK;
}

static const char *kiln__graph_update_why(CUgraphExecUpdateResult r) {
  switch (r) {
  case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED: return "the nodes or their order differ";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
    return "a node is of another kind (a kernel where a copy was, say)";
  case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
    return "a kernel node launches another function";
  case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
    return "a node changed in a way an update cannot apply (a copy's kind of memory, say)";
  case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED: return "a node cannot be updated";
  case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
    return "a kernel node's function changed in a way the driver cannot apply";
  case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
    return "a kernel's launch attributes (cluster, cooperative) changed";
  default: return "the graphs differ";
  }
}

kiln_status kiln_graph_update(kiln_graph *g, const kiln_graph *from) {
  kiln_status s = kiln__graph_enter(g, "kiln_graph_update");
  if (s) return s;
  if (!from || !from->exec)
    return kiln__fail(KILN_ERROR_INVALID,
                      "kiln_graph_update: the graph to take arguments from must be a finished "
                      "capture of kiln's own");
  if (from->device != g->device)
    return kiln__fail(KILN_ERROR_INVALID,
                      "kiln_graph_update: the graphs were recorded on devices %d and %d", g->device,
                      from->device);
  if (from->n_kernels != g->n_kernels)
    return kiln__fail(KILN_ERROR_INVALID,
                      "kiln_graph_update: the graphs are not of one shape: %d kernel%s launched "
                      "through kiln, and %d in the graph to take arguments from",
                      g->n_kernels, g->n_kernels == 1 ? "" : "s", from->n_kernels);
  CUgraphExecUpdateResultInfo info;
  memset(&info, 0, sizeof info);
  CUresult rc = kiln__driver.GraphExecUpdate(g->exec, from->graph, &info);
  if (rc == CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE) {
    kiln__fail(KILN_ERROR_INVALID,
               "kiln_graph_update: the graphs are not of one shape: %s; capture the same "
               "sequence of calls with new arguments",
               kiln__graph_update_why(info.result));
    kiln__set_cuda_result((int)rc);
    return KILN_ERROR_INVALID;
  }
  if (rc) return kiln__cuda_fail("cuGraphExecUpdate", (int)rc);
  /* Later replacements go to this graph's nodes, with what from's nodes now launch. */
  for (int i = 0; i < g->n_kernels; i++) {
    g->kernels[i].f = from->kernels[i].f;
    g->kernels[i].params = from->kernels[i].params;
    if (!from->kernels[i].node) g->kernels[i].node = NULL;
  }
  kiln__clear_error();
  return KILN_OK;
}

void kiln_graph_free(kiln_graph *g) {
  if (!g) return;
  /* Ends the driver's recording too, so the stream is usable again. */
  if (g->capturing && !g->joined) kiln__graph_abandon(g->stream);
  kiln__graph_close(g);
  if (g->exec) kiln__driver.GraphExecDestroy(g->exec);
  if (g->graph) kiln__driver.GraphDestroy(g->graph);
  free(g->kernels);
  free(g);
}
