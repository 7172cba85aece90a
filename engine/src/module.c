/* Modules: compiling through the in-process table and then the cache, kernel lookup, loading
 * at the first launch and each kernel's limits. */
#include "module.h"

#include "demangle.h"

#include "cache.h"
#include "compile.h"
#include "memory.h"
#include "nvrtc.h"
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- The in-process table: the same inputs give the same module without NVRTC ---------- */

/* The table answers a repeated compile; it also keeps modules no one else holds, so that
 * compiling the same source again costs nothing. Past a bound those are unloaded, least
 * recently used first: a notebook makes a new module with every edit, and each kept one holds
 * its code, and its library on the device once launched. Modules someone holds stay. */
#define KILN__TABLE_BUCKETS 1024
#define KILN__TABLE_LIMIT 256

static pthread_mutex_t kiln__table_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln_module *kiln__table[KILN__TABLE_BUCKETS];
static size_t kiln__table_count;                     /* written under the lock, atomically */
static size_t kiln__table_limit = KILN__TABLE_LIMIT; /* atomic */
static unsigned long long kiln__table_tick;          /* guarded by the lock */

static unsigned kiln__bucket(const unsigned char *key) {
  return ((unsigned)key[0] | (unsigned)key[1] << 8) % KILN__TABLE_BUCKETS;
}

static kiln_module *kiln__table_find(const unsigned char *key) {
  for (kiln_module *m = kiln__table[kiln__bucket(key)]; m; m = m->next)
    if (memcmp(m->key, key, KILN__KEY_SIZE) == 0) {
      m->used = ++kiln__table_tick;
      return m;
    }
  return NULL;
}

/* Takes out of the table, least recently used first, modules only the table holds until it
 * is within its bound; gives them back chained by next, for the caller to free without the
 * lock. Call with the lock held. A reference is only ever taken under this lock or from one
 * already held, so a module seen with one reference cannot gain another meanwhile. */
static kiln_module *kiln__table_trim_locked(void) {
  kiln_module *out = NULL;
  size_t limit = __atomic_load_n(&kiln__table_limit, __ATOMIC_RELAXED);
  while (kiln__table_count > limit) {
    kiln_module **oldest = NULL;
    for (unsigned b = 0; b < KILN__TABLE_BUCKETS; b++)
      for (kiln_module **link = &kiln__table[b]; *link; link = &(*link)->next)
        if (__atomic_load_n(&(*link)->refs, __ATOMIC_ACQUIRE) == 1 &&
            (!oldest || (*link)->used < (*oldest)->used))
          oldest = link;
    if (!oldest) break; /* every module left is held: they go when let go */
    kiln_module *m = *oldest;
    *oldest = m->next;
    __atomic_store_n(&m->in_table, 0, __ATOMIC_RELAXED);
    m->next = out;
    out = m;
    __atomic_sub_fetch(&kiln__table_count, 1, __ATOMIC_RELAXED);
  }
  return out;
}

static void kiln__table_free_chain(kiln_module *m) {
  while (m) {
    kiln_module *next = m->next;
    kiln_module_free(m); /* the table's reference, the last */
    m = next;
  }
}

static void kiln__table_trim(void) {
  pthread_mutex_lock(&kiln__table_lock);
  kiln_module *out = kiln__table_trim_locked();
  pthread_mutex_unlock(&kiln__table_lock);
  kiln__table_free_chain(out);
}

size_t kiln_module_table_set_limit(size_t limit) {
  size_t before = __atomic_exchange_n(&kiln__table_limit, limit, __ATOMIC_RELAXED);
  kiln__table_trim();
  return before;
}

size_t kiln_module_table_limit(void) {
  return __atomic_load_n(&kiln__table_limit, __ATOMIC_RELAXED);
}

size_t kiln_module_table_count(void) {
  pthread_mutex_lock(&kiln__table_lock);
  size_t n = kiln__table_count;
  pthread_mutex_unlock(&kiln__table_lock);
  return n;
}

/* ---- Modules ------------------------------------------------------------------------------ */

static void kiln__module_destroy(kiln_module *m) {
  /* Its variables' memory goes with the library: no copy may be checked against it now. */
  if (m->n_globals) kiln__memory_forget_ranges(m);
  for (int i = 0; i < m->n_globals; i++) {
    free(m->globals[i].name);
    free(m->globals[i].plain);
  }
  free(m->globals);
  if (m->lib) kiln__driver.LibraryUnload(m->lib);
  free(m->loader_logs); /* after the unload: no load writes it now */
  kiln__compile_free_code(&m->code);
  kiln__ptx_free_kernels(m->kernels, m->n_kernels);
  kiln__headers_free(&m->headers);
  for (int i = 0; m->functions && i < m->n_kernels; i++) free(m->functions[i].signature);
  free(m->functions);
  pthread_mutex_destroy(&m->load_lock);
  free(m);
}

void kiln_module_free(kiln_module *m) {
  if (!m) return;
  int left = __atomic_sub_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
  if (left == 0) {
    kiln__module_destroy(m);
  } else if (left == 1 && __atomic_load_n(&m->in_table, __ATOMIC_RELAXED) &&
             __atomic_load_n(&kiln__table_count, __ATOMIC_RELAXED) >
                 __atomic_load_n(&kiln__table_limit, __ATOMIC_RELAXED)) {
    kiln__table_trim(); /* the last holder let go of a module over the bound: it may go now */
  }
}

static kiln_module *kiln__module_new(void) {
  kiln_module *m = calloc(1, sizeof *m);
  if (!m) return NULL;
  m->refs = 1;
  pthread_mutex_init(&m->load_lock, NULL);
  return m;
}

/* One function per kernel. */
static kiln_status kiln__module_functions(kiln_module *m) {
  m->functions = calloc((size_t)(m->n_kernels ? m->n_kernels : 1), sizeof *m->functions);
  if (!m->functions) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for functions");
  for (int i = 0; i < m->n_kernels; i++) {
    m->functions[i].module = m;
    m->functions[i].kernel = &m->kernels[i];
    m->functions[i].ready_device = -1;
    /* Messages name a kernel as its source declares it, never by its mangled name alone. */
    m->functions[i].signature = kiln__demangle_signature(m->kernels[i].name);
  }
  return KILN_OK;
}

kiln_status kiln__module_adopt(kiln__cached *c, kiln_module **out) {
  kiln_module *m = kiln__module_new();
  if (!m) {
    kiln__entry_free_cached(c);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory");
  }
  m->code = c->code;
  m->kernels = c->kernels;
  m->n_kernels = c->n_kernels;
  m->headers = c->headers;
  memset(c, 0, sizeof *c);
  kiln_status s = kiln__module_functions(m);
  if (s) {
    kiln__module_destroy(m);
    return s;
  }
  *out = m;
  return KILN_OK;
}

static int kiln__module_fresh(const kiln_module *m) {
  return m->headers.n == 0 || kiln__headers_fresh(&m->headers);
}

/* Puts m in the table unless an equal, still fresh module got there first; gives back the
 * one the caller should use, holding a reference to it. */
static kiln_module *kiln__table_insert(kiln_module *m) {
  pthread_mutex_lock(&kiln__table_lock);
  unsigned b = kiln__bucket(m->key);
  kiln_module **link = &kiln__table[b], *stale = NULL, *raced = NULL;
  for (; *link; link = &(*link)->next)
    if (memcmp((*link)->key, m->key, KILN__KEY_SIZE) == 0) break;
  if (*link && kiln__module_fresh(*link)) {
    raced = *link;
    __atomic_add_fetch(&raced->refs, 1, __ATOMIC_ACQ_REL);
  } else {
    if (*link) { /* compiled against a header that has changed since */
      stale = *link;
      *link = stale->next;
      __atomic_store_n(&stale->in_table, 0, __ATOMIC_RELAXED);
      __atomic_sub_fetch(&kiln__table_count, 1, __ATOMIC_RELAXED);
    }
    m->next = kiln__table[b];
    kiln__table[b] = m;
    m->refs++; /* the table's */
    __atomic_store_n(&m->in_table, 1, __ATOMIC_RELAXED);
    m->used = ++kiln__table_tick;
    __atomic_add_fetch(&kiln__table_count, 1, __ATOMIC_RELAXED);
  }
  kiln_module *trimmed = kiln__table_trim_locked();
  pthread_mutex_unlock(&kiln__table_lock);
  kiln__table_free_chain(trimmed);
  kiln_module_free(stale);
  if (!raced) return m;
  kiln_module_free(m);
  return raced;
}

static _Thread_local kiln_compile_report kiln__report;

void kiln_compile_last_report(kiln_compile_report *out) {
  if (out) *out = kiln__report;
}

/* What a compile read besides its source and options, so that kiln_module_recall can tell
 * whether the same inputs would still give the same key. */
struct kiln_compile_memo {
  unsigned char key[KILN__KEY_SIZE];
  char hex[2 * KILN__KEY_SIZE + 1];
  int arch_num;          /* the arch the environment chose (90 of sm_90a); 0 when the options
                            named one */
  char suffix[4];        /* ... and its suffix ("a") */
  char options_arch[32]; /* an -arch of the options, alone: the arch where nothing follows it
                            (no $KILN_ARCH, no device), else "" */
  int lineinfo_env;      /* $KILN_LINEINFO decided -lineinfo ... */
  int lineinfo_off;      /* ... and turned it off */
  int device_debug;      /* kiln_compile_set_device_debug's setting then */
};

static kiln_status kiln__module_compile(const char *src, const kiln_compile_opts *opts,
                                        kiln_module **out, kiln__cache_query *q) {
  kiln_status s = kiln__cache_prepare(src, opts, q);
  if (s) return s;
  kiln__hash_hex(q->key, kiln__report.key);

  pthread_mutex_lock(&kiln__table_lock);
  kiln_module *m = kiln__table_find(q->key);
  if (m) __atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&kiln__table_lock);
  if (m && kiln__module_fresh(m)) {
    kiln__cache_count(KILN__MEMORY_HITS);
    kiln__report.origin = KILN_ORIGIN_MEMORY;
    *out = m;
    return KILN_OK;
  }
  kiln__report.stale = m != NULL;
  kiln_module_free(m);

  /* Evictions happen only here, when a compile stores (a table hit never reads them). */
  kiln_cache_stats before, after;
  kiln_cache_get_stats(&before);
  kiln__cached c;
  s = kiln__cache_get(src, opts, q, &c);
  kiln_cache_get_stats(&after);
  kiln__report.evictions = after.evictions - before.evictions;
  if (s && s != KILN_ERROR_COMPILE) return s;
  kiln__report.origin = c.code.seconds > 0 || s ? KILN_ORIGIN_NVRTC : KILN_ORIGIN_DISK;
  kiln__report.nvrtc_seconds = c.code.seconds;
  kiln__report.pch = c.code.pch;
  kiln__report.helper = c.code.helper;
  kiln_status made = kiln__module_adopt(&c, &m);
  if (made) return made;
  memcpy(m->key, q->key, sizeof q->key);
  if (s) {
    *out = m; /* holds the log */
    return s;
  }
  /* A source whose headers cannot be known is compiled every time. */
  *out = m->headers.uncacheable ? m : kiln__table_insert(m);
  return KILN_OK;
}

static double kiln__seconds_since(const struct timespec *t0) {
  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

/* A memo of the compile that gave m, or NULL when one could not recall it: a module that
 * reached header files (its key leans on the working folder, its freshness on the files) or
 * that is not in the table (uncacheable headers), or a link with the device runtime, whose
 * library the key reads from disk. */
static kiln_compile_memo *kiln__memo_of(const kiln__options *t, const kiln__cache_query *q,
                                        const kiln_module *m) {
  if (q->cwd_in_key || m->headers.n || m->headers.uncacheable ||
      (t->opts.flags & KILN_COMPILE_DEVICE_RUNTIME))
    return NULL;
  kiln_compile_memo *memo = calloc(1, sizeof *memo);
  if (!memo) return NULL; /* no memo is only slower */
  memcpy(memo->key, q->key, sizeof memo->key);
  kiln__hash_hex(q->key, memo->hex);
  /* An -arch of the options alone gives way to $KILN_ARCH or a device and is the arch where
   * neither is: which holds may change, so such a memo checks the arch again as a compile
   * would choose it, the -arch kept for the case without either. */
  if (t->arch_alone && strlen(t->options_arch) >= sizeof memo->options_arch) {
    free(memo);
    return NULL; /* no -arch NVRTC takes is that long */
  }
  if (t->arch_alone) snprintf(memo->options_arch, sizeof memo->options_arch, "%s", t->options_arch);
  int named =
      ((t->opts.arch && *t->opts.arch) || (t->opts.code && *t->opts.code)) && !t->arch_alone;
  if (!named) {
    const char *suffix = q->arch + 3; /* "sm_90a": the digits, then the suffix */
    while (*suffix >= '0' && *suffix <= '9') suffix++;
    memo->arch_num = q->arch_num;
    snprintf(memo->suffix, sizeof memo->suffix, "%s", suffix);
  }
  memo->lineinfo_env = t->lineinfo_env;
  memo->lineinfo_off = t->lineinfo_env && kiln__options_lineinfo_off();
  memo->device_debug = t->device_debug;
  return memo;
}

kiln_status kiln_module_from_source_memo(const char *src, const kiln_compile_opts *opts,
                                         kiln_module **out, kiln_compile_memo **memo) {
  KILN__NEED(out);
  *out = NULL;
  if (memo) *memo = NULL;
  if (!src) return kiln__fail(KILN_ERROR_INVALID, "the source is NULL");
  /* nvcc's spellings first: the key, the arch and NVRTC all see the translated options. */
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  memset(&kiln__report, 0, sizeof kiln__report);
  kiln__options translated;
  kiln_status s = kiln__options_translate(opts, &translated);
  if (s) return s;
  kiln__cache_query q;
  s = kiln__module_compile(src, &translated.opts, out, &q);
  if (!s && memo) *memo = kiln__memo_of(&translated, &q, *out);
  kiln__options_free(&translated);
  kiln__report.seconds = kiln__seconds_since(&t0);
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_module_from_source(const char *src, const kiln_compile_opts *opts,
                                    kiln_module **out) {
  return kiln_module_from_source_memo(src, opts, out, NULL);
}

int kiln_module_recall(const kiln_compile_memo *memo, kiln_module **out) {
  if (!out) return 0;
  *out = NULL;
  if (!memo) return 0;
  /* What the compile read from the environment must read the same now: the same inputs then
   * give the same key, without the source being hashed again. */
  const char *env_arch, *env_lineinfo;
  kiln__options_env(&env_arch, &env_lineinfo);
  if (memo->lineinfo_env && kiln__options_lineinfo_off_in(env_lineinfo) != memo->lineinfo_off)
    return 0;
  if (kiln__options_device_debug() != memo->device_debug) return 0;
  if (memo->arch_num) {
    const kiln__nvrtc_id *id = kiln__nvrtc_known_id();
    char suffix[4];
    int n = 0;
    if (!id) return 0;
    kiln_compile_opts alone = {.arch = memo->options_arch};
    int options_arch = memo->options_arch[0] && !kiln__options_arch_follows(env_arch);
    kiln_status s = kiln__compile_arch_pick(options_arch ? &alone : NULL, id, env_arch, &n, suffix);
    if (s || n != memo->arch_num || strcmp(suffix, memo->suffix) != 0) {
      kiln__clear_error(); /* the compile that follows tells what is wrong */
      return 0;
    }
  }
  pthread_mutex_lock(&kiln__table_lock);
  kiln_module *m = kiln__table_find(memo->key);
  if (m) __atomic_add_fetch(&m->refs, 1, __ATOMIC_ACQ_REL);
  pthread_mutex_unlock(&kiln__table_lock);
  if (!m) return 0; /* trimmed from the table since */
  if (!kiln__module_fresh(m)) {
    kiln_module_free(m);
    return 0;
  }
  kiln__cache_count(KILN__MEMORY_HITS);
  memset(&kiln__report, 0, sizeof kiln__report);
  kiln__report.origin = KILN_ORIGIN_MEMORY;
  memcpy(kiln__report.key, memo->hex, sizeof memo->hex);
  /* Not timed: two clock reads would cost a sixth of it. seconds stays 0. */
  kiln__clear_error();
  *out = m;
  return 1;
}

void kiln_compile_memo_free(kiln_compile_memo *memo) { free(memo); }

const char *kiln_module_arch(const kiln_module *m) { return m ? m->code.arch : NULL; }

const char *kiln_module_log(const kiln_module *m) { return m && m->code.log ? m->code.log : ""; }

const char *kiln_module_ptx(const kiln_module *m, size_t *size) {
  if (size) *size = m ? m->code.ptx_size : 0;
  return m ? m->code.ptx : NULL;
}

const void *kiln_module_cubin(const kiln_module *m, size_t *size) {
  if (size) *size = m ? m->code.cubin_size : 0;
  return m ? m->code.cubin : NULL;
}

int kiln_module_function_count(const kiln_module *m) { return m ? m->n_kernels : 0; }

const char *kiln_module_function_name(const kiln_module *m, int i) {
  return m && i >= 0 && i < m->n_kernels ? m->kernels[i].name : NULL;
}

/* The unqualified tail of a plain name: "scale" of "ns::scale". */
static const char *kiln__tail(const char *plain) {
  const char *t = plain, *p;
  while ((p = strstr(t, "::"))) t = p + 2;
  return t;
}

static void kiln__append_kernel(const kiln__kernel *k, int first) {
  kiln__fail_append("%s%s", first ? " " : ", ", k->plain);
  if (strcmp(k->plain, k->name) != 0) kiln__fail_append(" (%s)", k->name);
}

kiln_status kiln_module_get_function(kiln_module *m, const char *name, kiln_function **out) {
  KILN__NEED(m);
  KILN__NEED(out);
  *out = NULL;
  if (!name) return kiln__fail(KILN_ERROR_INVALID, "the kernel name is NULL");
  /* An exact PTX entry name or a name expression decides alone. */
  const char *want = name;
  for (int i = 0; i < m->code.n_names; i++)
    if (strcmp(m->code.names[i], name) == 0) want = m->code.lowered[i];
  for (int i = 0; i < m->n_kernels; i++)
    if (strcmp(m->kernels[i].name, want) == 0) {
      *out = &m->functions[i];
      kiln__clear_error();
      return KILN_OK;
    }
  /* Then plain names, qualified ("ns::scale") or not ("scale"). */
  int found = -1, matches = 0;
  for (int i = 0; i < m->n_kernels; i++) {
    const char *plain = m->kernels[i].plain;
    if (strcmp(plain, name) == 0 || strcmp(kiln__tail(plain), name) == 0) {
      if (found < 0) found = i;
      matches++;
    }
  }
  if (matches == 1) {
    *out = &m->functions[found];
    kiln__clear_error();
    return KILN_OK;
  }
  if (matches > 1) {
    kiln__fail(KILN_ERROR_AMBIGUOUS,
               "'%s' matches %d kernels; name one by its mangled name or a name expression:", name,
               matches);
    int first = 1;
    for (int i = 0; i < m->n_kernels; i++) {
      const char *plain = m->kernels[i].plain;
      if (strcmp(plain, name) == 0 || strcmp(kiln__tail(plain), name) == 0) {
        kiln__append_kernel(&m->kernels[i], first);
        first = 0;
      }
    }
    return KILN_ERROR_AMBIGUOUS;
  }
  if (m->n_kernels == 0)
    return kiln__fail(KILN_ERROR_NOT_FOUND,
                      "no kernel '%s' (in PyCUDA's words, cuModuleGetFunction failed: named "
                      "symbol not found): the module has no __global__ functions",
                      name);
  kiln__fail(KILN_ERROR_NOT_FOUND,
             "no kernel '%s' in the module (in PyCUDA's words, cuModuleGetFunction failed: "
             "named symbol not found); it has",
             name);
  for (int i = 0; i < m->n_kernels; i++) kiln__append_kernel(&m->kernels[i], i == 0);
  return KILN_ERROR_NOT_FOUND;
}

const char *kiln_function_name(const kiln_function *f) { return f ? f->kernel->name : NULL; }

const char *kiln_function_signature(const kiln_function *f) {
  if (!f) return NULL;
  return f->signature ? f->signature : f->kernel->plain;
}
int kiln_function_param_count(const kiln_function *f) { return f ? f->kernel->n_params : 0; }

const kiln_param *kiln_function_params(const kiln_function *f) {
  return f ? f->kernel->params : NULL;
}

int kiln_function_params_by_size(const kiln_function *f) { return f ? f->kernel->by_size : 0; }

/* ---- Loading ------------------------------------------------------------------------------ */

/* The CUBIN runs on a device of the same major version and at least its minor (sm_90a only
 * on sm_90); any other device of a newer arch gets the PTX, compiled by the driver. */
static const void *kiln__module_image(const kiln_module *m, const kiln_device_info *info) {
  int dev = info->major * 10 + info->minor;
  int arch = m->code.arch_num;
  int specific = strlen(m->code.arch) > 3 && m->code.arch[strlen(m->code.arch) - 1] >= 'a';
  if (m->code.cubin && arch / 10 == info->major && (specific ? arch == dev : arch <= dev))
    return m->code.cubin;
  if (!specific && arch <= dev) return m->code.ptx;
  return NULL;
}

kiln_status kiln__module_load_locked(kiln_module *m, kiln__device *d) {
  if (m->lib) return KILN_OK;
  const void *image = kiln__module_image(m, &d->info);
  if (!image)
    return kiln__fail(KILN_ERROR_INVALID,
                      "the module was compiled for %s, which cannot run on device %d "
                      "(%s, sm_%d%d); compile it for that device",
                      m->code.arch, d->ordinal, d->info.name, d->info.major, d->info.minor);
  KILN__CU(LibraryLoadData, (&m->lib, image, NULL, NULL, 0, NULL, NULL, 0));
  return KILN_OK;
}

kiln_status kiln__module_function_ready(kiln_function *f, kiln__device *d) {
  if (KILN__LIKELY(__atomic_load_n(&f->ready_device, __ATOMIC_ACQUIRE) == d->ordinal))
    return KILN_OK;
  kiln_module *m = f->module;
  pthread_mutex_lock(&m->load_lock);
  kiln_status s = kiln__module_load_locked(m, d);
  CUresult rc = CUDA_SUCCESS;
  const char *call = "cuLibraryGetKernel";
  if (!s && !f->handle) rc = kiln__driver.LibraryGetKernel(&f->handle, m->lib, f->kernel->name);
  if (!s && !rc) {
    call = "cuKernelGetAttribute";
    rc = kiln__driver.KernelGetAttribute(&f->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                         f->handle, d->dev);
    if (!rc)
      rc = kiln__driver.KernelGetAttribute(&f->static_shared, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                                           f->handle, d->dev);
    f->dynamic_shared_allowed = d->info.max_shared_per_block - f->static_shared;
    /* A kernel's own cluster shape, so a grid that is not whole clusters is named before the
     * launch; a device without clusters may refuse the question, which means none. */
    static const CUfunction_attribute cluster[3] = {CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH,
                                                    CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT,
                                                    CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH};
    for (int i = 0; i < 3 && !rc; i++) {
      int v = 0;
      if (d->info.major < 9 ||
          kiln__driver.KernelGetAttribute(&v, cluster[i], f->handle, d->dev) != CUDA_SUCCESS ||
          v < 0)
        v = 0;
      f->cluster_dims[i] = (unsigned)v;
    }
  }
  if (!s && rc) s = kiln__cuda_fail(call, (int)rc);
  if (!s) __atomic_store_n(&f->ready_device, d->ordinal, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&m->load_lock);
  return s;
}
