/* Launching: shapes checked against the limits, then cuLaunchKernel (cuLaunchKernelEx for
 * clusters, cooperative and programmatic launches); In/Out around it; the occupancy
 * calculator. */
#include "graph.h"
#include "memory.h"
#include "module.h"
#include "stage.h"

#include <stdlib.h>
#include <string.h>

static const char kiln__axis[3] = {'x', 'y', 'z'};

/* What holds on every CUDA device: checked before the GPU is touched. */
static kiln_status kiln__check_shape(const kiln_launch_config *cfg) {
  for (int i = 0; i < 3; i++) {
    if (cfg->block[i] == 0)
      return kiln__refuse_launch(CUDA_ERROR_INVALID_VALUE,
                                 "block.%c is 0; every block dimension must be at "
                                 "least 1",
                                 kiln__axis[i]);
    if (cfg->grid[i] == 0)
      return kiln__refuse_launch(CUDA_ERROR_INVALID_VALUE,
                                 "grid.%c is 0; every grid dimension must be at "
                                 "least 1",
                                 kiln__axis[i]);
  }
  uint64_t threads = (uint64_t)cfg->block[0] * cfg->block[1] * cfg->block[2];
  if (threads > 1024)
    return kiln__refuse_launch(CUDA_ERROR_INVALID_VALUE,
                               "block (%u, %u, %u) has %llu threads; no CUDA device "
                               "allows more than 1024 per block",
                               cfg->block[0], cfg->block[1], cfg->block[2],
                               (unsigned long long)threads);
  return KILN_OK;
}

/* What this device and this kernel allow. */
static kiln_status kiln__check_limits(kiln_function *f, kiln__device *d,
                                      const kiln_launch_config *cfg) {
  const kiln_device_info *info = &d->info;
  for (int i = 0; i < 3; i++) {
    if (cfg->block[i] > (unsigned)info->max_block[i])
      return kiln__refuse_launch(CUDA_ERROR_INVALID_VALUE, "block.%c is %u; %s allows at most %d",
                                 kiln__axis[i], cfg->block[i], info->name, info->max_block[i]);
    if (cfg->grid[i] > (unsigned)info->max_grid[i])
      return kiln__refuse_launch(CUDA_ERROR_INVALID_VALUE, "grid.%c is %u; %s allows at most %d",
                                 kiln__axis[i], cfg->grid[i], info->name, info->max_grid[i]);
  }
  if (KILN__UNLIKELY(f->cluster_dims[0] != 0))
    for (int i = 0; i < 3; i++)
      if (f->cluster_dims[i] && cfg->grid[i] % f->cluster_dims[i])
        return kiln__refuse_launch(
            CUDA_ERROR_INVALID_CLUSTER_SIZE,
            "grid.%c is %u, not a multiple of %u, the cluster.%c kernel %s "
            "declares (__cluster_dims__(%u, %u, %u)); a grid is made of whole "
            "clusters",
            kiln__axis[i], cfg->grid[i], f->cluster_dims[i], kiln__axis[i], f->kernel->plain,
            f->cluster_dims[0], f->cluster_dims[1], f->cluster_dims[2]);
  unsigned threads = cfg->block[0] * cfg->block[1] * cfg->block[2];
  if (threads > (unsigned)f->max_threads)
    return kiln__refuse_launch(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
                               "block (%u, %u, %u) has %u threads; kernel %s can "
                               "launch with at most %d per block on %s (its registers limit it)",
                               cfg->block[0], cfg->block[1], cfg->block[2], threads,
                               f->kernel->plain, f->max_threads, info->name);
  if (cfg->shared > (unsigned)f->dynamic_shared_allowed) {
    int most = info->max_shared_per_block_optin - f->static_shared;
    if (cfg->shared > (unsigned)(most > 0 ? most : 0))
      return kiln__refuse_launch(
          CUDA_ERROR_INVALID_VALUE,
          "shared is %u bytes; kernel %s can have at most "
          "%d bytes of dynamic shared memory on %s (%d per block, %d static)",
          cfg->shared, f->kernel->plain, most, info->name, info->max_shared_per_block_optin,
          f->static_shared);
    /* Past 48 KiB a kernel must opt in; doing it here is what the user meant. */
    KILN__CU(KernelSetAttribute, (CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)cfg->shared,
                                  f->handle, d->dev));
    f->dynamic_shared_allowed = (int)cfg->shared;
  }
  return KILN_OK;
}

/* Whether cfg passes kiln__check_shape, in a few instructions and no branch per dimension:
 * the launch of every call asks, and only a shape that fails is looked at again for the
 * sentence saying why. */
static int kiln__shape_ok(const kiln_launch_config *cfg) {
  const unsigned *b = cfg->block, *g = cfg->grid;
  unsigned zero = (b[0] == 0) | (b[1] == 0) | (b[2] == 0) | (g[0] == 0) | (g[1] == 0) | (g[2] == 0);
  return !zero && (uint64_t)b[0] * b[1] * b[2] <= 1024;
}

/* Whether cfg passes kiln__check_limits with nothing to do (no opt-in to more shared memory),
 * as kiln__shape_ok is for kiln__check_shape. */
static int kiln__limits_ok(const kiln_function *f, const kiln__device *d,
                           const kiln_launch_config *cfg) {
  const unsigned *b = cfg->block, *g = cfg->grid;
  const int *mb = d->info.max_block, *mg = d->info.max_grid;
  unsigned over = (b[0] > (unsigned)mb[0]) | (b[1] > (unsigned)mb[1]) | (b[2] > (unsigned)mb[2]) |
                  (g[0] > (unsigned)mg[0]) | (g[1] > (unsigned)mg[1]) | (g[2] > (unsigned)mg[2]) |
                  (f->cluster_dims[0] != 0) | (cfg->shared > (unsigned)f->dynamic_shared_allowed);
  return !over && b[0] * b[1] * b[2] <= (unsigned)f->max_threads;
}

/* What every launch checks first: the shape, the context, the kernel loaded there, its limits. */
static kiln_status kiln__check(kiln_function *f, const kiln_launch_config *cfg, kiln__device **d) {
  kiln_status s = KILN__LIKELY(kiln__shape_ok(cfg)) ? KILN_OK : kiln__check_shape(cfg);
  if (!s) s = kiln__device_enter(d);
  if (!s) s = kiln__module_function_ready(f, *d);
  if (!s && KILN__UNLIKELY(!kiln__limits_ok(f, *d, cfg))) s = kiln__check_limits(f, *d, cfg);
  return s;
}

/* kiln__check before a launch, which is work queued (kiln_work_count): counted even when the
 * check fails, which only ends a reduction's host mirror early. */
static kiln_status kiln__prepare(kiln_function *f, const kiln_launch_config *cfg,
                                 kiln__device **d) {
  kiln__stream_note_work();
  return kiln__check(f, cfg, d);
}

/* A kernel with parameters launched with no array of them, which the driver would read through. */
static kiln_status kiln__params_missing(const kiln_function *f) {
  return kiln__fail(KILN_ERROR_INVALID, "params is NULL, and kernel %s takes %d parameter%s",
                    f->kernel->plain, f->kernel->n_params, f->kernel->n_params == 1 ? "" : "s");
}

static kiln_status kiln__launch(kiln_function *f, const kiln_launch_config *cfg, void **params) {
  if (KILN__UNLIKELY(!params) && f->kernel->n_params) return kiln__params_missing(f);
  CUresult rc = kiln__driver.LaunchKernel((CUfunction)f->handle, cfg->grid[0], cfg->grid[1],
                                          cfg->grid[2], cfg->block[0], cfg->block[1], cfg->block[2],
                                          cfg->shared, cfg->stream, params, NULL);
  if (KILN__UNLIKELY(rc != CUDA_SUCCESS)) {
    kiln_status s = kiln__cuda_fail("cuLaunchKernel", (int)rc);
    return s == KILN_ERROR_CUDA ? KILN_ERROR_LAUNCH : s;
  }
  if (KILN__UNLIKELY(__atomic_load_n(&kiln__graph_open, __ATOMIC_RELAXED)))
    kiln__graph_note_launch(f, cfg->stream);
  return KILN_OK;
}

kiln_status kiln_function_launch(kiln_function *f, const kiln_launch_config *cfg, void **params) {
  KILN__NEED(f);
  KILN__NEED(cfg);
  kiln__device *d;
  kiln_status s = kiln__prepare(f, cfg, &d);
  if (!s) s = kiln__launch(f, cfg, params);
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_function_check_launch(kiln_function *f, const kiln_launch_config *cfg) {
  KILN__NEED(f);
  KILN__NEED(cfg);
  kiln__device *d;
  kiln_status s = kiln__check(f, cfg, &d);
  if (!s) kiln__clear_error();
  return s;
}

/* ---- Extended launches and occupancy ------------------------------------------------- */

/* The kernel as a CUfunction of the current context, which the occupancy calculator takes. */
static kiln_status kiln__context_function(kiln_function *f, CUfunction *out) {
  KILN__CU(KernelGetFunction, (out, f->handle));
  return KILN_OK;
}

static int kiln__has_cluster(const kiln_launch_options *o) {
  return o->cluster[0] || o->cluster[1] || o->cluster[2];
}

/* What holds on every device: the cluster's shape against the grid's. */
static kiln_status kiln__check_options_shape(const kiln_launch_config *cfg,
                                             const kiln_launch_options *o) {
  if (!kiln__has_cluster(o)) return KILN_OK;
  for (int i = 0; i < 3; i++)
    if (o->cluster[i] == 0)
      return kiln__refuse_launch(CUDA_ERROR_INVALID_CLUSTER_SIZE,
                                 "cluster.%c is 0; give every cluster dimension, each at least 1 "
                                 "(cluster=(2, 1, 1), say)",
                                 kiln__axis[i]);
  uint64_t blocks = (uint64_t)o->cluster[0] * o->cluster[1] * o->cluster[2];
  if (blocks > 16)
    return kiln__refuse_launch(
        CUDA_ERROR_INVALID_CLUSTER_SIZE,
        "cluster (%u, %u, %u) has %llu blocks; a thread-block cluster has at most "
        "16 (8 on every device that has clusters)",
        o->cluster[0], o->cluster[1], o->cluster[2], (unsigned long long)blocks);
  for (int i = 0; i < 3; i++)
    if (cfg->grid[i] % o->cluster[i])
      return kiln__refuse_launch(
          CUDA_ERROR_INVALID_CLUSTER_SIZE,
          "grid.%c is %u, not a multiple of cluster.%c, %u; a grid is made of "
          "whole clusters",
          kiln__axis[i], cfg->grid[i], kiln__axis[i], o->cluster[i]);
  return KILN_OK;
}

/* The driver's launch description of cfg and o; attrs must hold 3. */
static void kiln__launch_config(const kiln_launch_config *cfg, const kiln_launch_options *o,
                                CUlaunchAttribute *attrs, CUlaunchConfig *lc) {
  unsigned n = 0;
  memset(attrs, 0, 3 * sizeof *attrs);
  if (kiln__has_cluster(o)) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    attrs[n].value.clusterDim.x = o->cluster[0];
    attrs[n].value.clusterDim.y = o->cluster[1];
    attrs[n].value.clusterDim.z = o->cluster[2];
    n++;
  }
  if (o->cooperative) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
    attrs[n].value.cooperative = 1;
    n++;
  }
  if (o->programmatic) {
    attrs[n].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attrs[n].value.programmaticStreamSerializationAllowed = 1;
    n++;
  }
  memset(lc, 0, sizeof *lc);
  lc->gridDimX = cfg->grid[0];
  lc->gridDimY = cfg->grid[1];
  lc->gridDimZ = cfg->grid[2];
  lc->blockDimX = cfg->block[0];
  lc->blockDimY = cfg->block[1];
  lc->blockDimZ = cfg->block[2];
  lc->sharedMemBytes = cfg->shared;
  lc->hStream = cfg->stream;
  lc->attrs = n ? attrs : NULL;
  lc->numAttrs = n;
}

/* A memo word: the device (8 bits), the block's threads (11), the dynamic shared bytes (18),
 * the cluster's dimensions (5 each) and the answer (23 bits), with bit 63 set so that 0 is
 * none. Shapes it cannot hold are never memoized. */
static int kiln__memo_key(int device, unsigned threads, unsigned shared, const unsigned cl[3],
                          uint64_t *key) {
  if (device > 255 || threads > 2047 || shared >= (1u << 18) || cl[0] > 31 || cl[1] > 31 ||
      cl[2] > 31)
    return 0;
  *key = (uint64_t)1 << 63 | (uint64_t)device << 55 | (uint64_t)threads << 44 |
         (uint64_t)shared << 26 | (uint64_t)cl[0] << 21 | (uint64_t)cl[1] << 16 |
         (uint64_t)cl[2] << 11;
  return 1;
}

#define KILN__MEMO_ANSWER_BITS 11
#define KILN__MEMO_ANSWER(word) ((int)((word) & ((1u << KILN__MEMO_ANSWER_BITS) - 1)))

/* The most blocks of cfg's shape resident on the whole device at once: the co-residency a
 * cooperative grid needs. */
static kiln_status kiln__cooperative_most(kiln_function *f, kiln__device *d,
                                          const kiln_launch_config *cfg, long long *most) {
  unsigned threads = cfg->block[0] * cfg->block[1] * cfg->block[2];
  static const unsigned none[3] = {0, 0, 0};
  uint64_t key = 0, word = __atomic_load_n(&f->cooperative_fit, __ATOMIC_RELAXED);
  int memo = kiln__memo_key(d->ordinal, threads, cfg->shared, none, &key);
  if (memo && word && (word & ~(uint64_t)((1u << KILN__MEMO_ANSWER_BITS) - 1)) == key) {
    *most = (long long)KILN__MEMO_ANSWER(word) * d->info.multiprocessors;
    return KILN_OK;
  }
  CUfunction fn;
  kiln_status s = kiln__context_function(f, &fn);
  if (s) return s;
  int per_sm = 0;
  KILN__CU(OccupancyMaxActiveBlocksPerMultiprocessor, (&per_sm, fn, (int)threads, cfg->shared));
  if (memo && per_sm >= 0 && per_sm < (1 << KILN__MEMO_ANSWER_BITS))
    __atomic_store_n(&f->cooperative_fit, key | (uint64_t)per_sm, __ATOMIC_RELAXED);
  *most = (long long)per_sm * d->info.multiprocessors;
  return KILN_OK;
}

/* Whether one cluster of o's shape fits on a multiprocessor group, asked of the driver once
 * per shape; a cluster of more than the portable 8 blocks is allowed for the kernel first. */
static kiln_status kiln__cluster_fits(kiln_function *f, kiln__device *d,
                                      const kiln_launch_config *cfg, const kiln_launch_options *o,
                                      int *clusters) {
  unsigned threads = cfg->block[0] * cfg->block[1] * cfg->block[2];
  uint64_t key = 0, word = __atomic_load_n(&f->cluster_fit, __ATOMIC_RELAXED);
  int memo = kiln__memo_key(d->ordinal, threads, cfg->shared, o->cluster, &key);
  if (memo && word && (word & ~(uint64_t)((1u << KILN__MEMO_ANSWER_BITS) - 1)) == key) {
    *clusters = KILN__MEMO_ANSWER(word);
    return KILN_OK;
  }
  if (o->cluster[0] * o->cluster[1] * o->cluster[2] > 8)
    KILN__CU(KernelSetAttribute,
             (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, f->handle, d->dev));
  CUfunction fn;
  kiln_status s = kiln__context_function(f, &fn);
  if (s) return s;
  CUlaunchAttribute attrs[3];
  CUlaunchConfig lc;
  kiln_launch_options only_cluster = *o;
  only_cluster.cooperative = only_cluster.programmatic = 0;
  kiln__launch_config(cfg, &only_cluster, attrs, &lc);
  *clusters = 0;
  KILN__CU(OccupancyMaxActiveClusters, (clusters, fn, &lc));
  int answer =
      *clusters < (1 << KILN__MEMO_ANSWER_BITS) ? *clusters : (1 << KILN__MEMO_ANSWER_BITS) - 1;
  if (memo) __atomic_store_n(&f->cluster_fit, key | (uint64_t)answer, __ATOMIC_RELAXED);
  return KILN_OK;
}

/* What this device allows of the options. */
static kiln_status kiln__check_options_device(kiln_function *f, kiln__device *d,
                                              const kiln_launch_config *cfg,
                                              const kiln_launch_options *o) {
  const kiln_device_info *info = &d->info;
  if ((kiln__has_cluster(o) || o->programmatic) && info->major < 9)
    return kiln__fail(KILN_ERROR_INVALID, "%s needs compute capability 9.0 or newer; %s is %d.%d",
                      kiln__has_cluster(o) ? "a thread-block cluster" : "a programmatic launch",
                      info->name, info->major, info->minor);
  kiln_status s;
  if (kiln__has_cluster(o) && f->cluster_dims[0] &&
      (o->cluster[0] != f->cluster_dims[0] || o->cluster[1] != f->cluster_dims[1] ||
       o->cluster[2] != f->cluster_dims[2]))
    return kiln__fail(KILN_ERROR_INVALID,
                      "cluster (%u, %u, %u): kernel %s declares __cluster_dims__(%u, %u, %u); "
                      "give that shape or leave cluster= out",
                      o->cluster[0], o->cluster[1], o->cluster[2], f->kernel->plain,
                      f->cluster_dims[0], f->cluster_dims[1], f->cluster_dims[2]);
  if (kiln__has_cluster(o) && !f->cluster_dims[0]) {
    int clusters = 0;
    if ((s = kiln__cluster_fits(f, d, cfg, o, &clusters))) return s;
    if (clusters < 1)
      return kiln__fail(KILN_ERROR_INVALID,
                        "a cluster (%u, %u, %u) of blocks (%u, %u, %u) with %u bytes of dynamic "
                        "shared memory of kernel %s does not fit on %s at once; use smaller "
                        "clusters, blocks or shared memory",
                        o->cluster[0], o->cluster[1], o->cluster[2], cfg->block[0], cfg->block[1],
                        cfg->block[2], cfg->shared, f->kernel->plain, info->name);
  }
  if (o->cooperative) {
    long long most = 0;
    if ((s = kiln__cooperative_most(f, d, cfg, &most))) return s;
    unsigned long long blocks = (unsigned long long)cfg->grid[0] * cfg->grid[1] * cfg->grid[2];
    if (blocks > (unsigned long long)most)
      return kiln__refuse_launch(
          CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
          "a cooperative grid must be resident on the device at once: grid (%u, "
          "%u, %u) is %llu blocks, and %s holds at most %lld blocks of (%u, %u, "
          "%u) threads with %u bytes of dynamic shared memory of kernel %s (%lld "
          "on each of %d multiprocessors); launch fewer blocks",
          cfg->grid[0], cfg->grid[1], cfg->grid[2], blocks, info->name, most, cfg->block[0],
          cfg->block[1], cfg->block[2], cfg->shared, f->kernel->plain,
          info->multiprocessors ? most / info->multiprocessors : 0, info->multiprocessors);
  }
  return KILN_OK;
}

kiln_status kiln_function_launch_ex(kiln_function *f, const kiln_launch_config *cfg,
                                    const kiln_launch_options *opts, void **params) {
  KILN__NEED(f);
  KILN__NEED(cfg);
  static const kiln_launch_options plain;
  const kiln_launch_options *o = opts ? opts : &plain;
  kiln_status s = kiln__check_options_shape(cfg, o);
  kiln__device *d;
  if (!s) s = kiln__prepare(f, cfg, &d);
  if (!s) s = kiln__check_options_device(f, d, cfg, o);
  if (s) return s;
  /* The kernel's own cluster shape given again: the launch leaves it to the kernel, since the
   * driver takes no cluster attribute for a kernel with __cluster_dims__. */
  kiln_launch_options own;
  if (f->cluster_dims[0] && kiln__has_cluster(o)) {
    own = *o;
    own.cluster[0] = own.cluster[1] = own.cluster[2] = 0;
    o = &own;
  }
  CUlaunchAttribute attrs[3];
  CUlaunchConfig lc;
  kiln__launch_config(cfg, o, attrs, &lc);
  if (!params && f->kernel->n_params) return kiln__params_missing(f);
  CUresult rc = kiln__driver.LaunchKernelEx(&lc, (CUfunction)f->handle, params, NULL);
  if (KILN__UNLIKELY(rc != CUDA_SUCCESS)) {
    s = kiln__cuda_fail("cuLaunchKernelEx", (int)rc);
    return s == KILN_ERROR_CUDA ? KILN_ERROR_LAUNCH : s;
  }
  if (KILN__UNLIKELY(__atomic_load_n(&kiln__graph_open, __ATOMIC_RELAXED)))
    kiln__graph_note_launch(f, cfg->stream);
  kiln__clear_error();
  return KILN_OK;
}

/* f loaded on the current device and as a CUfunction there. */
static kiln_status kiln__occupancy_enter(kiln_function *f, kiln__device **d, CUfunction *fn) {
  kiln_status s = kiln__device_enter(d);
  if (!s) s = kiln__module_function_ready(f, *d);
  if (!s) s = kiln__context_function(f, fn);
  return s;
}

static kiln_status kiln__check_block_threads(const kiln_function *f, unsigned threads) {
  if (threads >= 1 && threads <= 1024) return KILN_OK;
  return kiln__fail(KILN_ERROR_INVALID, "a block of %u threads for kernel %s: from 1 to 1024",
                    threads, kiln_function_name(f));
}

kiln_status kiln_function_max_active_blocks(kiln_function *f, unsigned block_threads, size_t shared,
                                            int *blocks) {
  KILN__NEED(f);
  KILN__NEED(blocks);
  *blocks = 0;
  kiln_status s = kiln__check_block_threads(f, block_threads);
  kiln__device *d;
  CUfunction fn;
  if (s || (s = kiln__occupancy_enter(f, &d, &fn))) return s;
  KILN__CU(OccupancyMaxActiveBlocksPerMultiprocessor, (blocks, fn, (int)block_threads, shared));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_function_suggested_block_size(kiln_function *f, size_t shared, int block_limit,
                                               int *min_grid, int *block_threads) {
  KILN__NEED(f);
  KILN__NEED(min_grid);
  KILN__NEED(block_threads);
  *min_grid = *block_threads = 0;
  if (block_limit < 0 || block_limit > 1024)
    return kiln__fail(KILN_ERROR_INVALID,
                      "a block size limit of %d for kernel %s: from 0 (none) to 1024", block_limit,
                      kiln_function_name(f));
  kiln__device *d;
  CUfunction fn;
  kiln_status s = kiln__occupancy_enter(f, &d, &fn);
  if (s) return s;
  KILN__CU(OccupancyMaxPotentialBlockSize,
           (min_grid, block_threads, fn, NULL, shared, block_limit));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_function_available_dynamic_shared(kiln_function *f, int blocks,
                                                   unsigned block_threads, size_t *bytes) {
  KILN__NEED(f);
  KILN__NEED(bytes);
  *bytes = 0;
  kiln_status s = kiln__check_block_threads(f, block_threads);
  if (!s && blocks < 1)
    s = kiln__fail(KILN_ERROR_INVALID, "%d blocks per multiprocessor for kernel %s: at least 1",
                   blocks, kiln_function_name(f));
  kiln__device *d;
  CUfunction fn;
  if (s || (s = kiln__occupancy_enter(f, &d, &fn))) return s;
  KILN__CU(OccupancyAvailableDynamicSMemPerBlock, (bytes, fn, blocks, (int)block_threads));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_function_max_active_clusters(kiln_function *f, const kiln_launch_config *cfg,
                                              const kiln_launch_options *opts, int *clusters) {
  KILN__NEED(f);
  KILN__NEED(cfg);
  KILN__NEED(clusters);
  static const kiln_launch_options plain;
  const kiln_launch_options *o = opts ? opts : &plain;
  *clusters = 0;
  kiln_status s = kiln__check_shape(cfg);
  if (!s) s = kiln__check_options_shape(cfg, o);
  kiln__device *d;
  CUfunction fn;
  if (s || (s = kiln__occupancy_enter(f, &d, &fn))) return s;
  if (d->info.major < 9)
    return kiln__fail(KILN_ERROR_INVALID,
                      "thread-block clusters need compute capability 9.0 or newer; %s is %d.%d",
                      d->info.name, d->info.major, d->info.minor);
  if (o->cluster[0] * o->cluster[1] * o->cluster[2] > 8)
    KILN__CU(KernelSetAttribute,
             (CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1, f->handle, d->dev));
  CUlaunchAttribute attrs[3];
  CUlaunchConfig lc;
  kiln_launch_options only_cluster = *o;
  only_cluster.cooperative = only_cluster.programmatic = 0;
  kiln__launch_config(cfg, &only_cluster, attrs, &lc);
  KILN__CU(OccupancyMaxActiveClusters, (clusters, fn, &lc));
  kiln__clear_error();
  return KILN_OK;
}

/* ---- Launches with transfers ---------------------------------------------------------- */

/* Events around the launch when its time was asked for. */
typedef struct kiln__timer {
  CUevent start, stop;
} kiln__timer;

static kiln_status kiln__timed_launch(kiln_function *f, const kiln_launch_config *cfg,
                                      void **params, kiln__timer *t) {
  CUstream stream = cfg->stream;
  if (t) KILN__CU(EventRecord, (t->start, stream));
  kiln_status s = kiln__launch(f, cfg, params);
  if (!s && t) KILN__CU(EventRecord, (t->stop, stream));
  return s;
}

static size_t kiln__round_up(size_t n) { return (n + 255) & ~(size_t)255; }

/* How a call waits for the work queued on its stream so far. */
typedef struct kiln__waiter {
  kiln_wait_fn fn; /* NULL: the driver's cuStreamSynchronize */
  void *arg;
  int gave_up; /* fn returned a failure: the GPU's work may still be running */
} kiln__waiter;

static kiln_status kiln__await(kiln__waiter *w, CUstream stream) {
  if (!w->fn) {
    KILN__CU(StreamSynchronize, (stream));
    return KILN_OK;
  }
  kiln_status s = w->fn(w->arg, stream);
  if (!s) return KILN_OK;
  w->gave_up = 1;
  if (s == KILN_ERROR_INTERRUPTED)
    return kiln__fail(s, "the wait for a kernel with transfers was given up; it goes on running "
                         "on the GPU, and its outputs are not copied back");
  return s;
}

/* Takes b for one call, or says it is not free: another call holds it, or a call that gave up
 * its wait left a kernel that may still use it. Returns 1 with b->lock held. */
static int kiln__bounce_take(kiln__bounce *b) {
  if (pthread_mutex_trylock(&b->lock) != 0) return 0;
  if (KILN__UNLIKELY(b->busy != NULL)) {
    /* An error other than not-ready means the context is gone: nothing runs there any more. */
    if (kiln__driver.EventQuery(b->busy) == CUDA_ERROR_NOT_READY) {
      pthread_mutex_unlock(&b->lock);
      return 0;
    }
    kiln__driver.EventDestroy(b->busy);
    b->busy = NULL;
  }
  return 1;
}

/* Transfers laid out in the bounce buffers, in-only first, then in-out, then out-only,
 * so one copy goes in and one comes back. */
static kiln_status kiln__call_bounced(kiln_function *f, const kiln_launch_config *cfg,
                                      void **params, const kiln_transfer *t, int n, kiln__bounce *b,
                                      kiln__timer *timer, kiln__waiter *w) {
  size_t offsets[KILN_MAX_TRANSFERS];
  size_t end = 0, in_end = 0, out_start = (size_t)-1;
  for (int pass = 1; pass <= 3; pass++) {
    kiln_transfer_dir want = pass == 1 ? KILN_IN : pass == 2 ? KILN_INOUT : KILN_OUT;
    for (int i = 0; i < n; i++) {
      if (t[i].dir != want) continue;
      offsets[i] = end;
      if (want != KILN_IN && out_start == (size_t)-1) out_start = end;
      end += kiln__round_up(t[i].nbytes);
      if (want != KILN_OUT) in_end = end;
    }
  }
  kiln_status s = kiln__memory_bounce_reserve(b, end);
  if (s) return s;
  CUstream stream = cfg->stream;
  for (int i = 0; i < n; i++) {
    CUdeviceptr p = t[i].nbytes ? b->dev + offsets[i] : 0;
    memcpy(params[t[i].param], &p, sizeof p);
    if (t[i].dir & KILN_IN) memcpy((char *)b->host + offsets[i], t[i].host, t[i].nbytes);
  }
  if (in_end) KILN__CU(MemcpyHtoDAsync, (b->dev, b->host, in_end, stream));
  if (end > in_end) KILN__CU(MemsetD8Async, (b->dev + in_end, 0, end - in_end, stream));
  s = kiln__timed_launch(f, cfg, params, timer);
  if (s) return s;
  /* The copy back lands in the pinned buffer, which the call owns: it can be queued before the
   * wait, so one wait covers the kernel and the copy. */
  if (out_start != (size_t)-1 && end > out_start)
    KILN__CU(MemcpyDtoHAsync,
             ((char *)b->host + out_start, b->dev + out_start, end - out_start, stream));
  if ((s = kiln__await(w, stream))) {
    if (w->gave_up) {
      /* The buffers stay out of use until the kernel and the copy are over. */
      CUevent e = NULL;
      if (kiln__driver.EventCreate(&e, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS &&
          kiln__driver.EventRecord(e, stream) == CUDA_SUCCESS) {
        b->busy = e;
      } else {
        /* Nothing could say when they are free: they are left to the kernel for good. */
        if (e) kiln__driver.EventDestroy(e);
        b->host = NULL;
        b->dev = 0;
        b->capacity = 0;
      }
    }
    return s;
  }
  for (int i = 0; i < n; i++)
    if (t[i].dir & KILN_OUT) memcpy(t[i].host, (char *)b->host + offsets[i], t[i].nbytes);
  return KILN_OK;
}

/* Whether an output of t is pageable: copying it back makes the driver (or the stager) wait
 * for the kernel. */
static int kiln__outputs_pageable(const kiln_transfer *t, int n) {
  for (int i = 0; i < n; i++)
    if ((t[i].dir & KILN_OUT) && t[i].nbytes && kiln__stage_pageable(t[i].host, t[i].nbytes))
      return 1;
  return 0;
}

/* Large transfers: device memory from the stream-ordered pool; each array copied by the
 * cheapest way for its memory and size (stage.c). With wait, the call returns when the outputs
 * are in the host buffers; without, it returns once they are queued. */
static kiln_status kiln__call_pooled(kiln_function *f, const kiln_launch_config *cfg, void **params,
                                     const kiln_transfer *t, int n, kiln__device *d,
                                     kiln__timer *timer, int wait, kiln__waiter *w) {
  CUstream stream = cfg->stream;
  CUdeviceptr ptrs[KILN_MAX_TRANSFERS] = {0};
  kiln_status s = KILN_OK;
  int outputs = 0;
  for (int i = 0; i < n && !s; i++) {
    CUresult rc = CUDA_SUCCESS;
    if (t[i].nbytes) {
      rc = d->has_pools ? kiln__driver.MemAllocAsync(&ptrs[i], t[i].nbytes, stream)
                        : kiln__driver.MemAlloc(&ptrs[i], t[i].nbytes);
      if (rc) s = kiln__cuda_fail(d->has_pools ? "cuMemAllocAsync" : "cuMemAlloc", (int)rc);
    }
    if (!s) memcpy(params[t[i].param], &ptrs[i], sizeof ptrs[i]);
    if (!s && (t[i].dir & KILN_IN) && t[i].nbytes)
      s = kiln__stage_htod(d, ptrs[i], t[i].host, t[i].nbytes, stream, 0);
    else if (!s && t[i].nbytes) { /* an output only: zeros first (kiln_transfer says why) */
      rc = kiln__driver.MemsetD8Async(ptrs[i], 0, t[i].nbytes, stream);
      if (rc) s = kiln__cuda_fail("cuMemsetD8Async", (int)rc);
    }
    outputs |= (t[i].dir & KILN_OUT) && t[i].nbytes;
  }
  if (!s) s = kiln__timed_launch(f, cfg, params, timer);
  /* The copies back write the caller's memory, so they are queued only after a wait that can
   * give up: a kernel that never ends must not write there once the call has returned. After
   * it, what is left to wait for (the copies, the frees) ends soon. */
  if (!s && w->fn && (wait || (outputs && kiln__outputs_pageable(t, n))))
    s = kiln__await(w, stream);
  for (int i = 0; i < n && !s; i++)
    if ((t[i].dir & KILN_OUT) && t[i].nbytes)
      s = kiln__stage_dtoh(d, t[i].host, ptrs[i], t[i].nbytes, stream, 0);
  /* Freed on every path, after the copies that use them, in stream order. */
  for (int i = 0; i < n; i++)
    if (ptrs[i]) {
      if (d->has_pools) kiln__driver.MemFreeAsync(ptrs[i], stream);
      else if (!w->gave_up) {
        kiln__driver.StreamSynchronize(stream);
        kiln__driver.MemFree(ptrs[i]);
      } /* else left to the kernel that may still use it: only the pools free in stream order */
    }
  if ((wait || s) && !w->gave_up) {
    CUresult rc = kiln__driver.StreamSynchronize(stream);
    if (!s && rc) s = kiln__cuda_fail("cuStreamSynchronize", (int)rc);
  }
  return s;
}

/* Checks the transfers; their total size, rounded as the bounce buffers lay them out. */
static kiln_status kiln__check_transfers(const kiln_function *f, const kiln_transfer *transfers,
                                         int n_transfers, size_t *total) {
  if (n_transfers < 0 || n_transfers > KILN_MAX_TRANSFERS)
    return kiln__fail(KILN_ERROR_INVALID, "%d transfers; a call takes at most %d", n_transfers,
                      KILN_MAX_TRANSFERS);
  *total = 0;
  for (int i = 0; i < n_transfers; i++) {
    const kiln_transfer *t = &transfers[i];
    if (t->param < 0 || t->param >= f->kernel->n_params ||
        (t->dir != KILN_IN && t->dir != KILN_OUT && t->dir != KILN_INOUT) ||
        (t->nbytes && !t->host))
      return kiln__fail(KILN_ERROR_INVALID, "transfer %d is malformed", i);
    if (f->kernel->params[t->param].size != sizeof(CUdeviceptr))
      return kiln__fail(KILN_ERROR_INVALID, "parameter %d of %s is %u bytes, not a pointer",
                        t->param, f->kernel->plain, f->kernel->params[t->param].size);
    size_t rounded = kiln__round_up(t->nbytes);
    if (rounded < t->nbytes || __builtin_add_overflow(*total, rounded, total))
      return kiln__fail(KILN_ERROR_INVALID, "transfer %d's %zu bytes are more than memory holds", i,
                        t->nbytes);
  }
  return KILN_OK;
}

kiln_status kiln_function_call_async_waiting(kiln_function *f, const kiln_launch_config *cfg,
                                             void **params, const kiln_transfer *transfers,
                                             int n_transfers, kiln_wait_fn wait, void *wait_arg) {
  KILN__NEED(f);
  KILN__NEED(cfg);
  size_t total;
  kiln_status s = kiln__check_transfers(f, transfers, n_transfers, &total);
  if (s) return s;
  kiln__device *d;
  if ((s = kiln__prepare(f, cfg, &d))) return s;
  if (n_transfers && (s = kiln__graph_refuse_transfers(cfg->stream, 0))) return s;
  /* Without a pool each temporary would need a synchronize before its cuMemFree anyway. */
  if (!d->has_pools)
    return kiln_function_call_waiting(f, cfg, params, transfers, n_transfers, NULL, wait, wait_arg);
  kiln__waiter w = {wait, wait_arg, 0};
  s = n_transfers ? kiln__call_pooled(f, cfg, params, transfers, n_transfers, d, NULL, 0, &w)
                  : kiln__launch(f, cfg, params);
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_function_call_async(kiln_function *f, const kiln_launch_config *cfg, void **params,
                                     const kiln_transfer *transfers, int n_transfers) {
  return kiln_function_call_async_waiting(f, cfg, params, transfers, n_transfers, NULL, NULL);
}

kiln_status kiln_function_call_waiting(kiln_function *f, const kiln_launch_config *cfg,
                                       void **params, const kiln_transfer *transfers,
                                       int n_transfers, double *elapsed_s, kiln_wait_fn wait,
                                       void *wait_arg) {
  KILN__NEED(f);
  KILN__NEED(cfg);
  size_t total;
  kiln_status s = kiln__check_transfers(f, transfers, n_transfers, &total);
  if (s) return s;
  kiln__device *d;
  if ((s = kiln__prepare(f, cfg, &d))) return s;
  if ((n_transfers || elapsed_s) && (s = kiln__graph_refuse_transfers(cfg->stream, !n_transfers)))
    return s;
  kiln__bounce *b = NULL;
  if (n_transfers && total <= KILN__BOUNCE_MAX && (s = kiln__memory_bounce(d, &b))) return s;

  kiln__timer timer, *tp = NULL;
  if (elapsed_s) {
    *elapsed_s = 0;
    KILN__CU(EventCreate, (&timer.start, CU_EVENT_DEFAULT));
    CUresult rc = kiln__driver.EventCreate(&timer.stop, CU_EVENT_DEFAULT);
    if (rc) {
      kiln__driver.EventDestroy(timer.start);
      return kiln__cuda_fail("cuEventCreate", (int)rc);
    }
    tp = &timer;
  }
  kiln__waiter w = {wait, wait_arg, 0};
  if (n_transfers == 0) {
    s = kiln__timed_launch(f, cfg, params, tp);
    /* The time needs the kernel's end; waited for here, where it can be given up. */
    if (!s && tp && wait) s = kiln__await(&w, cfg->stream);
  } else if (b && kiln__bounce_take(b)) {
    s = kiln__call_bounced(f, cfg, params, transfers, n_transfers, b, tp, &w);
    /* A copy queued before a failure may still read the buffers the next call will fill. */
    if (s && !w.gave_up) kiln__driver.StreamSynchronize(cfg->stream);
    pthread_mutex_unlock(&b->lock);
  } else {
    s = kiln__call_pooled(f, cfg, params, transfers, n_transfers, d, tp, 1, &w);
  }
  if (tp) {
    if (!s) {
      float ms = 0;
      CUresult rc = kiln__driver.EventSynchronize(timer.stop);
      if (!rc) rc = kiln__driver.EventElapsedTime(&ms, timer.start, timer.stop);
      if (rc) s = kiln__cuda_fail("cuEventElapsedTime", (int)rc);
      *elapsed_s = ms / 1e3;
    }
    /* Destroying an event still to be reached is allowed: the driver frees it once it is. */
    kiln__driver.EventDestroy(timer.start);
    kiln__driver.EventDestroy(timer.stop);
  }
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_function_call(kiln_function *f, const kiln_launch_config *cfg, void **params,
                               const kiln_transfer *transfers, int n_transfers, double *elapsed_s) {
  return kiln_function_call_waiting(f, cfg, params, transfers, n_transfers, elapsed_s, NULL, NULL);
}
