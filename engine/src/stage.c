/* The stager: large pageable copies through pinned buffers, several host threads at once.
 *
 * One stager per device, made on its first large copy: a non-blocking stream of its own, N
 * workers (the calling thread is worker 0, the others wait on a condition variable), and two
 * pinned chunk buffers per worker, each with an event recorded after the DMA that last used it.
 * A copy is one job: the workers take chunk numbers from one counter, so every chunk is copied
 * exactly once whatever the timing, and the bytes of chunk i always go to offset i * chunk.
 *
 *   host to device: wait for the buffer's last DMA, memcpy the chunk in, queue the DMA, record
 *   device to host: queue the DMA of the next chunk, then wait for the previous one and memcpy
 *                   it out, so each worker has one chunk on the copy engine while it drains one
 *
 * The stager's stream first waits for an event recorded on the caller's stream, and after a
 * host-to-device job the caller's stream waits for the stager's last event: the copy sits in
 * the caller's stream order as a driver copy would. One job runs at a time per device. */
#include "stage.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Defaults measured on an H200 host with 16 CPUs (bench/transfer.py --sweep; the results are
 * bench/results/2026-11-21-nvidia-h200-staging-{sweep,threshold}.json). At 512 MiB, 8 threads
 * with chunks of 2 to 4 MiB reach 50 GB/s each way; 12 or 16 threads add nothing, and chunks
 * of 16 MiB lose a quarter (they no longer overlap). Staged copies beat the driver's from
 * 2 MiB; at 1 MiB they lose a fifth. Each can be set with the variable named beside it, read
 * once per process. */
#define KILN__STAGE_MIN ((size_t)2 << 20)   /* KILN_STAGING_MIN: smaller copies go direct */
#define KILN__STAGE_CHUNK ((size_t)2 << 20) /* KILN_STAGING_CHUNK */
#define KILN__STAGE_THREADS 8               /* KILN_STAGING_THREADS, at most the CPUs we have */
#define KILN__STAGE_MAX_THREADS 64

static struct {
  size_t min, chunk;
  int threads;
} kiln__stage_cfg;
static pthread_once_t kiln__stage_cfg_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t kiln__staged_copies, kiln__staged_bytes;

/* A byte count with an optional k, m or g (powers of 1024); "off" is SIZE_MAX. */
static size_t kiln__env_size(const char *name, size_t fallback) {
  const char *v = getenv(name);
  if (!v || !*v) return fallback;
  if (!strcmp(v, "off")) return SIZE_MAX;
  char *end;
  errno = 0;
  unsigned long long n = strtoull(v, &end, 10);
  int shift = *end == 'k' || *end == 'K'   ? 10
              : *end == 'm' || *end == 'M' ? 20
              : *end == 'g' || *end == 'G' ? 30
                                           : 0;
  if (shift) end++;
  if (errno || end == v || *end || n > (SIZE_MAX >> shift)) {
    kiln__warn("%s=%s is not a byte count (like 4194304 or 4m); using %zu", name, v, fallback);
    return fallback;
  }
  return (size_t)n << shift;
}

static void kiln__stage_read_cfg(void) {
  kiln__stage_cfg.min = kiln__env_size("KILN_STAGING_MIN", KILN__STAGE_MIN);
  size_t chunk = kiln__env_size("KILN_STAGING_CHUNK", KILN__STAGE_CHUNK);
  /* Whole pages, so every chunk but the last starts page-aligned in the user's array too. */
  chunk = (chunk + 4095) & ~(size_t)4095;
  kiln__stage_cfg.chunk = chunk<4096 ? 4096 : chunk>((size_t)1 << 30) ? (size_t)1 << 30 : chunk;
  size_t threads = kiln__env_size("KILN_STAGING_THREADS", KILN__STAGE_THREADS);
  cpu_set_t cpus;
  if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && (size_t)CPU_COUNT(&cpus) < threads)
    threads = (size_t)CPU_COUNT(&cpus);
  kiln__stage_cfg.threads = threads < 1                         ? 1
                            : threads > KILN__STAGE_MAX_THREADS ? KILN__STAGE_MAX_THREADS
                                                                : (int)threads;
}

typedef struct kiln__stage_job {
  int to_device;
  char *host;
  CUdeviceptr dev;
  size_t nbytes, chunk, n_chunks;
  int workers;        /* how many take part: worker w joins when w < workers */
  atomic_size_t next; /* the next chunk to take */
  atomic_int failed;  /* set on the first failure; the others stop taking chunks */
  CUresult rc;        /* the first failure, under the stager's lock */
  const char *call;
} kiln__stage_job;

typedef struct kiln__slot {
  char *host;   /* pinned, chunk bytes */
  CUevent done; /* recorded after the last DMA that used host */
} kiln__slot;

typedef struct kiln__stager {
  pthread_mutex_t use; /* one job at a time */
  pthread_mutex_t lock;
  pthread_cond_t wake, idle;
  CUcontext ctx;
  CUstream stream;
  CUevent start, end;
  size_t chunk;
  int n_workers;
  kiln__slot *slots; /* two per worker */
  void *pinned;
  kiln__stage_job *job;     /* the job of this generation; only its workers may look at it */
  int job_workers;          /* how many take part in it */
  unsigned long generation; /* bumped for each job */
  int running;              /* workers other than the caller still on the job */
} kiln__stager;

void kiln_staging_get_info(kiln_staging_info *out) {
  if (!out) return;
  pthread_once(&kiln__stage_cfg_once, kiln__stage_read_cfg);
  out->min_bytes = kiln__stage_cfg.min;
  out->chunk_bytes = kiln__stage_cfg.chunk;
  out->threads = kiln__stage_cfg.threads;
  out->copies = atomic_load(&kiln__staged_copies);
  out->bytes = atomic_load(&kiln__staged_bytes);
}

/* Whether any byte of [host, host + nbytes) may be pageable: page-locked memory (kiln's, or
 * any the driver allocated or registered) is known to the driver as host memory; pageable memory
 * is not known at all. Both ends are asked, since a registration may cover only part of it. */
int kiln__stage_pageable(const void *host, size_t nbytes) {
  const char *p = host;
  for (int i = 0; i < 2; i++) {
    unsigned type = 0;
    CUresult rc = kiln__driver.PointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                                   (CUdeviceptr)(p + (i ? nbytes - 1 : 0)));
    if (rc != CUDA_SUCCESS || type != CU_MEMORYTYPE_HOST) return 1;
  }
  return 0;
}

/* Whether a copy of nbytes at host should be staged: it is at least the threshold and host is
 * not page-locked (the driver moves page-locked memory at full speed itself). */
static int kiln__stage_wanted(const void *host, size_t nbytes) {
  pthread_once(&kiln__stage_cfg_once, kiln__stage_read_cfg);
  return nbytes >= kiln__stage_cfg.min && kiln__stage_pageable(host, nbytes);
}

static void kiln__job_fail(kiln__stager *s, kiln__stage_job *job, const char *call, CUresult rc) {
  pthread_mutex_lock(&s->lock);
  if (!job->rc) {
    job->rc = rc;
    job->call = call;
  }
  pthread_mutex_unlock(&s->lock);
  atomic_store(&job->failed, 1);
}

/* The next chunk for this worker, or 0 when there is none (or the job failed). */
static int kiln__job_take(kiln__stage_job *job, size_t *off, size_t *len) {
  if (atomic_load_explicit(&job->failed, memory_order_relaxed)) return 0;
  size_t i = atomic_fetch_add(&job->next, 1);
  if (i >= job->n_chunks) return 0;
  *off = i * job->chunk;
  *len = job->nbytes - *off < job->chunk ? job->nbytes - *off : job->chunk;
  return 1;
}

#define KILN__JOB_CU(call, args)                   \
  do {                                             \
    CUresult job_rc_ = kiln__driver.call args;     \
    if (job_rc_) {                                 \
      kiln__job_fail(s, job, "cu" #call, job_rc_); \
      return;                                      \
    }                                              \
  } while (0)

static void kiln__work_htod(kiln__stager *s, kiln__stage_job *job, kiln__slot *mine) {
  size_t off, len;
  for (int k = 0; kiln__job_take(job, &off, &len); k ^= 1) {
    kiln__slot *slot = &mine[k];
    KILN__JOB_CU(EventSynchronize, (slot->done));
    memcpy(slot->host, job->host + off, len);
    KILN__JOB_CU(MemcpyHtoDAsync, (job->dev + off, slot->host, len, s->stream));
    KILN__JOB_CU(EventRecord, (slot->done, s->stream));
  }
}

static void kiln__work_dtoh(kiln__stager *s, kiln__stage_job *job, kiln__slot *mine) {
  kiln__slot *pending = NULL;
  size_t pending_off = 0, pending_len = 0, off, len;
  for (int k = 0;; k ^= 1) {
    int more = kiln__job_take(job, &off, &len);
    if (more) {
      kiln__slot *slot = &mine[k];
      /* Stream order puts this after the DMA that last used the buffer. */
      KILN__JOB_CU(MemcpyDtoHAsync, (slot->host, job->dev + off, len, s->stream));
      KILN__JOB_CU(EventRecord, (slot->done, s->stream));
    }
    if (pending) {
      KILN__JOB_CU(EventSynchronize, (pending->done));
      if (!atomic_load_explicit(&job->failed, memory_order_relaxed))
        memcpy(job->host + pending_off, pending->host, pending_len);
    }
    if (!more) return;
    pending = &mine[k];
    pending_off = off;
    pending_len = len;
  }
}

static void kiln__work(kiln__stager *s, kiln__stage_job *job, int w) {
  kiln__slot *mine = &s->slots[2 * w];
  if (job->to_device) kiln__work_htod(s, job, mine);
  else kiln__work_dtoh(s, job, mine);
}

typedef struct kiln__worker_arg {
  kiln__stager *s;
  int index;
} kiln__worker_arg;

static void *kiln__worker_main(void *p) {
  kiln__worker_arg arg = *(kiln__worker_arg *)p;
  free(p);
  kiln__stager *s = arg.s;
  kiln__driver.CtxSetCurrent(s->ctx);
  /* Workers start before the stager is handed out, so no job has been posted yet: starting
   * from 0 rather than reading the counter means a job posted before this thread first takes
   * the lock is still seen. */
  unsigned long seen = 0;
  pthread_mutex_lock(&s->lock);
  for (;;) {
    while (s->generation == seen) pthread_cond_wait(&s->wake, &s->lock);
    seen = s->generation;
    /* A worker that takes no part must not touch the job: its caller does not wait for it,
     * and the job (on the caller's stack) may be gone by the time this thread runs. */
    if (arg.index >= s->job_workers) continue;
    kiln__stage_job *job = s->job;
    pthread_mutex_unlock(&s->lock);
    kiln__work(s, job, arg.index);
    pthread_mutex_lock(&s->lock);
    if (--s->running == 0) pthread_cond_signal(&s->idle);
  }
  return NULL;
}

/* ---- Making a stager ------------------------------------------------------------------- */

/* Each device's stager, made on its first staged copy; a failure to make it is remembered, so
 * it is told once and not paid for on every copy. One per ordinal, all allocated at once, never
 * freed: a copy reads its device's without a lock. */
typedef struct kiln__stage_device {
  kiln__stager *stager;
  int failed;
} kiln__stage_device;

static pthread_mutex_t kiln__stagers_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln__stage_device *kiln__stage_devices;

/* What is made before the first thread starts; on failure nothing is left behind. */
static kiln_status kiln__stager_alloc(const kiln__device *d, kiln__stager **out) {
  kiln__stager *s = calloc(1, sizeof *s);
  int n = kiln__stage_cfg.threads;
  if (!s || !(s->slots = calloc((size_t)(2 * n), sizeof *s->slots))) {
    free(s);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the staging ring");
  }
  s->ctx = d->ctx;
  s->chunk = kiln__stage_cfg.chunk;
  s->n_workers = n;
  pthread_mutex_init(&s->use, NULL);
  pthread_mutex_init(&s->lock, NULL);
  pthread_cond_init(&s->wake, NULL);
  pthread_cond_init(&s->idle, NULL);
  size_t bytes = (size_t)(2 * n) * s->chunk;
  CUresult rc = kiln__driver.MemAllocHost(&s->pinned, bytes);
  const char *call = "cuMemAllocHost";
  if (!rc)
    call = "cuStreamCreateWithPriority",
    rc = kiln__driver.StreamCreateWithPriority(&s->stream, CU_STREAM_NON_BLOCKING, 0);
  if (!rc)
    call = "cuEventCreate", rc = kiln__driver.EventCreate(&s->start, CU_EVENT_DISABLE_TIMING);
  if (!rc) rc = kiln__driver.EventCreate(&s->end, CU_EVENT_DISABLE_TIMING);
  for (int i = 0; i < 2 * n && !rc; i++) {
    s->slots[i].host = (char *)s->pinned + (size_t)i * s->chunk;
    rc = kiln__driver.EventCreate(&s->slots[i].done, CU_EVENT_DISABLE_TIMING);
  }
  if (rc) {
    kiln_status st = kiln__cuda_fail(call, (int)rc);
    kiln__fail_append(" while making the staging ring (%zu bytes page-locked)", bytes);
    for (int i = 0; i < 2 * n; i++)
      if (s->slots[i].done) kiln__driver.EventDestroy(s->slots[i].done);
    if (s->start) kiln__driver.EventDestroy(s->start);
    if (s->end) kiln__driver.EventDestroy(s->end);
    if (s->stream) kiln__driver.StreamDestroy(s->stream);
    if (s->pinned) kiln__driver.MemFreeHost(s->pinned);
    free(s->slots);
    free(s);
    return st;
  }
  *out = s;
  return KILN_OK;
}

/* Starts the workers with every signal blocked, so signals reach the application's threads.
 * Fewer workers than asked for is not a failure: the caller alone is one. */
static void kiln__stager_start(kiln__stager *s) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  int started = 1;
  for (int i = 1; i < s->n_workers; i++) {
    kiln__worker_arg *arg = malloc(sizeof *arg);
    pthread_t t;
    if (!arg) break;
    arg->s = s;
    arg->index = i;
    if (pthread_create(&t, &attr, kiln__worker_main, arg)) {
      free(arg);
      break;
    }
    started++;
  }
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  s->n_workers = started;
}

/* The device's stager, made on first use; NULL (with the reason as the last error) when it
 * cannot be made, and then the copy goes to the driver directly. */
static kiln__stager *kiln__stager_of(const kiln__device *d) {
  kiln__stage_device *t = __atomic_load_n(&kiln__stage_devices, __ATOMIC_ACQUIRE);
  kiln__stager *s = NULL;
  if (KILN__LIKELY(t)) {
    kiln__stage_device *mine = &t[d->ordinal];
    s = __atomic_load_n(&mine->stager, __ATOMIC_ACQUIRE);
    if (KILN__LIKELY(s) || __atomic_load_n(&mine->failed, __ATOMIC_ACQUIRE)) return s;
  }
  pthread_mutex_lock(&kiln__stagers_lock);
  if (!(t = kiln__stage_devices) && (t = calloc((size_t)kiln__device_count_known(), sizeof *t)))
    __atomic_store_n(&kiln__stage_devices, t, __ATOMIC_RELEASE);
  if (!t) {
    kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the devices' stagers");
  } else if (!t[d->ordinal].stager && !t[d->ordinal].failed) {
    if (kiln__stager_alloc(d, &s) == KILN_OK) {
      kiln__stager_start(s);
      __atomic_store_n(&t[d->ordinal].stager, s, __ATOMIC_RELEASE);
    } else {
      kiln__warn("large copies on device %d go through the driver's own staging, at its "
                 "pageable speed: %s",
                 d->ordinal, kiln_last_error());
      __atomic_store_n(&t[d->ordinal].failed, 1, __ATOMIC_RELEASE);
    }
  }
  s = t ? t[d->ordinal].stager : NULL;
  pthread_mutex_unlock(&kiln__stagers_lock);
  return s;
}

/* ---- Jobs ------------------------------------------------------------------------------ */

static kiln_status kiln__stage_run(kiln__stager *s, kiln__stage_job *job, CUstream stream,
                                   int wait) {
  /* A copy smaller than a chunk per worker is cut finer, so every worker has a piece; not
   * below 64 KiB (unless the chunk itself is smaller), where waking a thread costs more than
   * its copy saves. */
  size_t piece = (job->nbytes / (size_t)s->n_workers + 4095) & ~(size_t)4095;
  if (piece < ((size_t)64 << 10)) piece = (size_t)64 << 10;
  job->chunk = piece < s->chunk ? piece : s->chunk;
  job->n_chunks = (job->nbytes + job->chunk - 1) / job->chunk;
  job->workers = job->n_chunks < (size_t)s->n_workers ? (int)job->n_chunks : s->n_workers;
  pthread_mutex_lock(&s->use);
  CUresult rc = kiln__driver.EventRecord(s->start, stream);
  const char *call = "cuEventRecord";
  if (!rc) call = "cuStreamWaitEvent", rc = kiln__driver.StreamWaitEvent(s->stream, s->start, 0);
  if (!rc) {
    pthread_mutex_lock(&s->lock);
    s->job = job;
    s->job_workers = job->workers;
    s->running = job->workers - 1;
    s->generation++;
    if (s->running) pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    kiln__work(s, job, 0);
    pthread_mutex_lock(&s->lock);
    while (s->running) pthread_cond_wait(&s->idle, &s->lock);
    s->job = NULL;
    s->job_workers = 0;
    pthread_mutex_unlock(&s->lock);
    if (job->rc) call = job->call, rc = job->rc;
  }
  if (!rc && job->to_device) {
    call = "cuEventRecord", rc = kiln__driver.EventRecord(s->end, s->stream);
    if (!rc) call = "cuStreamWaitEvent", rc = kiln__driver.StreamWaitEvent(stream, s->end, 0);
    if (!rc && wait) call = "cuEventSynchronize", rc = kiln__driver.EventSynchronize(s->end);
  }
  pthread_mutex_unlock(&s->use);
  if (rc) {
    kiln_status st = kiln__cuda_fail(call, (int)rc);
    kiln__fail_append(" during a staged copy of %zu bytes %s", job->nbytes,
                      job->to_device ? "to the device" : "from the device");
    return st;
  }
  atomic_fetch_add(&kiln__staged_copies, 1);
  atomic_fetch_add(&kiln__staged_bytes, job->nbytes);
  return KILN_OK;
}

/* KILN_ERROR_INVALID with a sentence when stream is being captured into a graph, where a copy
 * with pageable memory cannot be recorded (a replay could not read or write it safely);
 * KILN_OK when it is not. Asked only where such a copy is about to be staged or has failed, so
 * a copy that works pays nothing. */
/* Whether stream is being captured into a graph (or, for the legacy stream, another stream
 * captures in a mode that forbids using it). */
static int kiln__stage_capturing(CUstream stream) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  CUresult rc = kiln__driver.StreamIsCapturing(stream, &status);
  return rc == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT ||
         (rc == CUDA_SUCCESS && status != CU_STREAM_CAPTURE_STATUS_NONE);
}

/* An async copy of pageable memory into a capture: some drivers record it (a replay would then
 * read or write host memory the program may have freed or reused), others refuse it with a
 * code that names no cause. Refused here first, saying why; asked only of an async copy, and
 * the pages only when the stream is capturing. */
static kiln_status kiln__stage_refuse_capture(CUstream stream, const void *host, size_t nbytes) {
  if (!kiln__stage_capturing(stream) || !kiln__stage_pageable(host, nbytes)) return KILN_OK;
  return kiln__fail(KILN_ERROR_INVALID,
                    "a copy with pageable host memory cannot be recorded in a stream capture "
                    "(a replay could not read or write that memory safely); copy to and from "
                    "page-locked memory (kiln.pagelocked_empty) inside a capture");
}

kiln_status kiln__stage_htod(const kiln__device *d, CUdeviceptr dst, const void *src, size_t nbytes,
                             CUstream stream, int sync) {
  if (!sync && kiln__stage_refuse_capture(stream, src, nbytes)) return KILN_ERROR_INVALID;
  kiln__stager *s = kiln__stage_wanted(src, nbytes) ? kiln__stager_of(d) : NULL;
  if (!s) {
    if (sync) KILN__CU(MemcpyHtoD, (dst, src, nbytes));
    else KILN__CU(MemcpyHtoDAsync, (dst, src, nbytes, stream));
    return KILN_OK;
  }
  kiln__stage_job job = {.to_device = 1, .host = (char *)src, .dev = dst, .nbytes = nbytes};
  return kiln__stage_run(s, &job, stream, sync);
}

kiln_status kiln__stage_dtoh(const kiln__device *d, void *dst, CUdeviceptr src, size_t nbytes,
                             CUstream stream, int sync) {
  if (!sync && kiln__stage_refuse_capture(stream, dst, nbytes)) return KILN_ERROR_INVALID;
  kiln__stager *s = kiln__stage_wanted(dst, nbytes) ? kiln__stager_of(d) : NULL;
  if (!s) {
    if (sync) KILN__CU(MemcpyDtoH, (dst, src, nbytes));
    else KILN__CU(MemcpyDtoHAsync, (dst, src, nbytes, stream));
    return KILN_OK;
  }
  kiln__stage_job job = {.to_device = 0, .host = dst, .dev = src, .nbytes = nbytes};
  return kiln__stage_run(s, &job, stream, 1);
}
