/* The kernel cache on disk.
 *
 * Layout of a folder: <dir>/ab/cdef... (the key in hex, split after two digits) holds one
 * entry (entry.c); <dir>/ab/.cdef....<pid>.<n>.tmp is an entry being written; <dir>/locks
 * holds every key's lock; <dir>/stats the hit, miss and eviction counts of every process (hits
 * written in batches: kiln__hits_note);
 * <dir>/nvrtc-* notes of which NVRTC compiles here (nvrtc.c).
 *
 * Why it is safe to share:
 * - An entry appears by rename(2) of a fully written temporary file, so a reader sees the old
 *   file, the new one or none; a writer killed half-way leaves only a .tmp file, which the
 *   next eviction pass removes. A torn file (a power cut before the data reached the disk) fails
 *   its checksum and is a miss.
 * - The per-key lock is a one-byte fcntl lock on the locks file, at an offset taken from the
 *   key, held from the second lookup to the rename: N processes with a cold cache compile once.
 *   Open-file-description locks (F_OFD_SETLKW) are dropped by the kernel when the holder dies,
 *   and exclude threads of one process too, each taking the lock through its own open(2). One
 *   file for all keys, rather than a lock file per key, spares a file creation per compile and
 *   the question of when a lock file may be removed.
 * - Readers hold a shared flock on the entry while reading it; eviction takes an exclusive one
 *   and the key's lock without waiting, and skips what it cannot get.
 * - Code from the cache runs on the GPU inside the process, so a folder that others can write
 *   is not used at all, and entries that others could have written are not loaded. */
#include "cache.h"

#include "compile.h"
#include "headers.h"
#include "link.h"
#include "nvrtc.h"
#include "pch.h"
#include "ptx.h"
#include "remote.h"
#include "stdheaders.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KILN__DEFAULT_MAX_BYTES ((uint64_t)1 << 30)
#define KILN__MAX_ENTRY_BYTES ((uint64_t)1 << 30)
#define KILN__ONE_READ_BYTES ((off_t)1 << 20)
/* Eviction brings the folder down to this share of the bound, so it does not run at every
 * store once the cache is full. */
#define KILN__EVICT_TO(max) ((max) / 10 * 9)
/* A .tmp file older than this was left by a writer that died. */
#define KILN__STALE_TMP_S 3600

/* ---- Counters ----------------------------------------------------------------------------- */

static uint64_t kiln__counters[KILN__COUNTERS];

void kiln__cache_count(kiln__counter c) {
  __atomic_add_fetch(&kiln__counters[c], 1, __ATOMIC_RELAXED);
}

void kiln_cache_get_stats(kiln_cache_stats *out) {
  if (!out) return;
  uint64_t v[KILN__COUNTERS];
  for (int i = 0; i < KILN__COUNTERS; i++)
    v[i] = __atomic_load_n(&kiln__counters[i], __ATOMIC_RELAXED);
  out->memory_hits = v[KILN__MEMORY_HITS];
  out->disk_hits = v[KILN__DISK_HITS];
  out->misses = v[KILN__MISSES];
  out->compiles = v[KILN__COMPILES];
  out->stores = v[KILN__STORES];
  out->evictions = v[KILN__EVICTIONS];
  out->corrupt = v[KILN__CORRUPT];
  kiln__pch_counts(&out->pch_created, &out->pch_used);
}

/* ---- Where the cache is ------------------------------------------------------------------- */

typedef struct kiln__config {
  int enabled;  /* some folder can be read */
  int readable; /* the main folder exists and is safe to load from */
  int writable; /* ... and can be written */
  char dir[PATH_MAX];
  char layers[4096]; /* n_layers folders, each NUL-terminated, one after the other */
  int n_layers;
  uint64_t max_bytes;
  char reason[PATH_MAX + 1024];
} kiln__config;

static pthread_mutex_t kiln__config_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln__config kiln__cfg;
static char kiln__env_seen[3 * PATH_MAX];
static int kiln__env_read;
static int kiln__write_warned; /* once per configuration */
static uint64_t kiln__stored_since_scan;

static const char *kiln__env_names[] = {"KILN_CACHE", "KILN_CACHE_DIR",  "XDG_CACHE_HOME",
                                        "HOME",       "KILN_CACHE_PATH", "KILN_CACHE_MAX_BYTES"};

/* Creates dir and its missing parents, private to the user. */
static int kiln__mkdirs(const char *dir) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return errno = ENAMETOOLONG, -1;
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = '\0';
      mkdir(p, 0700);
      *s = '/';
    }
  if (mkdir(p, 0700) == 0 || errno == EEXIST) return 0;
  return -1;
}

/* Creates the 256 shard folders once per cache folder, so that storing an entry creates one
 * file and no folder: on ext4 each creation can cost 0.5 ms, a twentieth of a small compile.
 * Called by a store, not by a lookup: a hit reads and makes nothing. */
static void kiln__make_shards(const char *dir) {
  char path[PATH_MAX];
  struct stat st;
  if (snprintf(path, sizeof path, "%s/ff", dir) >= (int)sizeof path || stat(path, &st) == 0) return;
  for (int i = 0; i < 256; i++)
    if (snprintf(path, sizeof path, "%s/%02x", dir, i) < (int)sizeof path) mkdir(path, 0700);
}

/* NULL when st, the folder at path, may hold code this process loads: a folder of this
 * process's user (or, with allow_root, root's) that no one else can write. Else why not. */
static const char *kiln__unsafe_folder(const char *path, const struct stat *st, int allow_root,
                                       char *why, size_t cap) {
  if (!S_ISDIR(st->st_mode)) snprintf(why, cap, "%.360s is not a folder", path);
  else if (st->st_uid != geteuid() && !(allow_root && st->st_uid == 0))
    snprintf(why, cap, "%.360s belongs to user %u, not to this process's user %u", path,
             (unsigned)st->st_uid, (unsigned)geteuid());
  else if (st->st_mode & (S_IWGRP | S_IWOTH))
    snprintf(why, cap,
             "others can write to %.360s (mode %04o), and code loaded from it runs on "
             "the GPU inside this process",
             path, (unsigned)(st->st_mode & 07777));
  else return NULL;
  return why;
}

/* NULL when the folders above real (a real path) let no one else swap a folder below them:
 * each belongs to this user or root, and one that others can write has the sticky bit, which
 * keeps them from renaming what is not theirs (/tmp). */
static const char *kiln__unsafe_parents(const char *real, char *why, size_t cap) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", real);
  for (char *slash = strrchr(p, '/'); slash; slash = strrchr(p, '/')) {
    if (slash == p) slash[1] = '\0';
    else *slash = '\0';
    struct stat st;
    if (stat(p, &st) != 0) {
      snprintf(why, cap, "its parent %.360s cannot be read (%s)", p, strerror(errno));
      return why;
    }
    int others_write = (st.st_mode & S_IWOTH) || ((st.st_mode & S_IWGRP) && st.st_gid != getegid());
    if (st.st_uid != geteuid() && st.st_uid != 0) {
      snprintf(why, cap, "its parent %.360s belongs to user %u, who could replace it", p,
               (unsigned)st.st_uid);
      return why;
    }
    if (others_write && !(st.st_mode & S_ISVTX)) {
      snprintf(why, cap, "others can write to its parent %.360s (mode %04o) and could replace it",
               p, (unsigned)(st.st_mode & 07777));
      return why;
    }
    if (slash == p) break;
  }
  return NULL;
}

/* NULL when code may be loaded from dir; else why not, written into why. known: dir's stat,
 * when the caller has just read it. */
static const char *kiln__unsafe_dir(const char *dir, const struct stat *known, int allow_root,
                                    char *why, size_t cap) {
  struct stat st;
  char real[PATH_MAX];
  if (known) st = *known;
  if (!known && stat(dir, &st) != 0) snprintf(why, cap, "it cannot be read (%s)", strerror(errno));
  else if (kiln__unsafe_folder("it", &st, allow_root, why, cap)) return why;
  else if (!realpath(dir, real)) snprintf(why, cap, "it cannot be resolved (%s)", strerror(errno));
  else return kiln__unsafe_parents(real, why, cap);
  return why;
}

static uint64_t kiln__parse_bytes(const char *s, int *ok) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 10);
  unsigned shift = 0;
  if (*end == 'k' || *end == 'K') shift = 10, end++;
  else if (*end == 'm' || *end == 'M') shift = 20, end++;
  else if (*end == 'g' || *end == 'G') shift = 30, end++;
  *ok = end != s && !*end && !errno && *s != '-' && v <= (UINT64_MAX >> shift);
  return (uint64_t)v << shift;
}

/* The configuration from the environment, or with `only` (a compile's cache_dir) that folder
 * alone as the cache: no read-only layers, the environment's bound and KILN_CACHE=0. */
/* Empties c without writing all of it: a new process's first lookup should not fault in 13 KB
 * of pages it then copies. */
static void kiln__config_reset(kiln__config *c) {
  c->enabled = c->readable = c->writable = c->n_layers = 0;
  c->max_bytes = 0;
  c->dir[0] = c->layers[0] = c->reason[0] = '\0';
}

/* Copies what in holds (its strings up to their ends, its layers as far as they go). */
static void kiln__config_copy(kiln__config *out, const kiln__config *in) {
  out->enabled = in->enabled;
  out->readable = in->readable;
  out->writable = in->writable;
  out->n_layers = in->n_layers;
  out->max_bytes = in->max_bytes;
  memcpy(out->dir, in->dir, strlen(in->dir) + 1);
  memcpy(out->reason, in->reason, strlen(in->reason) + 1);
  const char *end = in->layers;
  for (int i = 0; i < in->n_layers; i++) end += strlen(end) + 1;
  memcpy(out->layers, in->layers, (size_t)(end - in->layers));
  if (!in->n_layers) out->layers[0] = '\0';
}

static void kiln__config_build(kiln__config *c, const char *only) {
  kiln__config_reset(c);
  c->max_bytes = KILN__DEFAULT_MAX_BYTES;
  const char *max = getenv("KILN_CACHE_MAX_BYTES");
  if (max && *max) {
    int ok;
    uint64_t v = kiln__parse_bytes(max, &ok);
    if (ok) c->max_bytes = v;
    else
      kiln__warn("KILN_CACHE_MAX_BYTES=%s is not a byte count (such as 1073741824 or 512M); "
                 "using 1G",
                 max);
  }
  const char *off = getenv("KILN_CACHE");
  if (off && (strcmp(off, "0") == 0 || strcmp(off, "off") == 0 || strcmp(off, "no") == 0)) {
    snprintf(c->reason, sizeof c->reason, "KILN_CACHE=%s turns it off", off);
    return;
  }
  const char *dir = only ? only : getenv("KILN_CACHE_DIR"), *xdg = getenv("XDG_CACHE_HOME");
  const char *home = getenv("HOME");
  int n;
  if (dir && *dir) n = snprintf(c->dir, sizeof c->dir, "%s", dir);
  else if (xdg && xdg[0] == '/') n = snprintf(c->dir, sizeof c->dir, "%s/kiln", xdg);
  else if (home && *home) n = snprintf(c->dir, sizeof c->dir, "%s/.cache/kiln", home);
  else {
    snprintf(c->reason, sizeof c->reason, "neither KILN_CACHE_DIR, XDG_CACHE_HOME nor HOME is set");
    kiln__warn("no kernel cache: %s; kernels are compiled in every process", c->reason);
    return;
  }
  if (n < 0 || (size_t)n >= sizeof c->dir - 80) {
    snprintf(c->reason, sizeof c->reason, "the folder's path is too long");
    kiln__warn("no kernel cache: %s", c->reason);
    return;
  }
  char why[512];
  struct stat there;
  /* Made only when missing: a hit in a new process pays for no mkdir. */
  int found = stat(c->dir, &there) == 0 && S_ISDIR(there.st_mode);
  if (!found && kiln__mkdirs(c->dir) != 0 && access(c->dir, F_OK) != 0) {
    snprintf(c->reason, sizeof c->reason, "%s cannot be created (%s)", c->dir, strerror(errno));
    kiln__warn("no kernel cache: %s; kernels are compiled in every process", c->reason);
  } else if (kiln__unsafe_dir(c->dir, found ? &there : NULL, 0, why, sizeof why)) {
    snprintf(c->reason, sizeof c->reason, "%s is not used: %s", c->dir, why);
    kiln__warn("no kernel cache: %s. Make it private (chmod 700 %s) or set KILN_CACHE_DIR to a "
               "folder of your own",
               c->reason, c->dir);
  } else {
    c->enabled = c->readable = 1;
    c->writable = access(c->dir, W_OK) == 0;
    if (!c->writable)
      snprintf(c->reason, sizeof c->reason, "%s cannot be written (%s)", c->dir, strerror(errno));
  }
  const char *path = only ? NULL : getenv("KILN_CACHE_PATH");
  size_t used = 0;
  for (const char *p = path; p && *p;) {
    const char *colon = strchr(p, ':');
    size_t len = colon ? (size_t)(colon - p) : strlen(p);
    char layer[PATH_MAX];
    if (len && len < sizeof layer) {
      memcpy(layer, p, len);
      layer[len] = '\0';
      if (kiln__unsafe_dir(layer, NULL, 1, why, sizeof why))
        kiln__warn("the read-only kernel cache %s (from KILN_CACHE_PATH) is not used: %s", layer,
                   why);
      else if (used + len + 1 <= sizeof c->layers) {
        memcpy(c->layers + used, layer, len + 1);
        used += len + 1;
        c->n_layers++;
      }
    }
    p = colon ? colon + 1 : p + len;
  }
  if (c->n_layers) c->enabled = 1;
}

/* A copy of the configuration, rebuilt first when the environment changed. */
static void kiln__config_get(kiln__config *out) {
  char seen[sizeof kiln__env_seen];
  size_t used = 0;
  for (size_t i = 0; i < KILN__COUNT(kiln__env_names); i++) {
    const char *v = getenv(kiln__env_names[i]);
    int n = snprintf(seen + used, sizeof seen - used, "%s%c", v ? v : "\x01", '\x02');
    if (n > 0) used += (size_t)n < sizeof seen - used ? (size_t)n : sizeof seen - used - 1;
  }
  pthread_mutex_lock(&kiln__config_lock);
  if (!kiln__env_read || strcmp(seen, kiln__env_seen) != 0) {
    kiln__config_build(&kiln__cfg, NULL);
    memcpy(kiln__env_seen, seen, sizeof seen);
    kiln__env_read = 1;
    kiln__write_warned = 0;
    kiln__stored_since_scan = 0;
  }
  kiln__config_copy(out, &kiln__cfg);
  pthread_mutex_unlock(&kiln__config_lock);
}

/* The configuration a compile uses: its own cache_dir's when it names one, else the
 * environment's (reread when it changed since the last call). */
static void kiln__config_for(const kiln_compile_opts *opts, kiln__config *out) {
  if (opts && opts->cache_dir && *opts->cache_dir) kiln__config_build(out, opts->cache_dir);
  else kiln__config_get(out);
}

/* The i-th folder searched: 0 the main one, then the layers; NULL past the end. */
static const char *kiln__folder(const kiln__config *c, int i) {
  if (i == 0) return c->readable ? c->dir : NULL;
  const char *p = c->layers;
  for (int k = 1; k < i && k <= c->n_layers; k++) p += strlen(p) + 1;
  return i <= c->n_layers ? p : NULL;
}

/* ---- Keys and paths ----------------------------------------------------------------------- */

/* Which NVRTC compiles here, from the note in the cache folder when it can (nvrtc.c). */
static kiln_status kiln__cache_nvrtc(kiln__nvrtc_id *id) {
  if (KILN__LIKELY(kiln__nvrtc_known(id))) return KILN_OK;
  kiln__config c;
  kiln__config_get(&c);
  return kiln__nvrtc_identify(c.readable ? c.dir : NULL, c.writable, id);
}

static kiln_status kiln__cache_key_in(const char *src, const kiln_compile_opts *opts,
                                      const kiln__nvrtc_id *id, const char *arch,
                                      unsigned char key[KILN__KEY_SIZE], char cwd[PATH_MAX],
                                      int *cwd_in_key) {
  *cwd_in_key = 0;
  kiln__hasher *h;
  kiln_status s = kiln__hash_begin(&h);
  if (s) return s;
  int n_opt = opts ? opts->n_options : 0, n_inc = opts ? opts->n_include_dirs : 0;
  int n_names = opts ? opts->n_name_expressions : 0, n_hdr = opts ? opts->n_headers : 0;
  /* Relative include folders and quoted includes depend on the working folder; a source
   * that includes nothing does not, so its entries can be shipped to other machines. */
  int need_cwd = kiln__headers_named(src);
  uint32_t version = KILN__ENTRY_VERSION;
  kiln__hash_string(h, "kiln cache");
  kiln__hash_field(h, &version, sizeof version);
  kiln__hash_field(h, &id->major, sizeof id->major);
  kiln__hash_field(h, &id->minor, sizeof id->minor);
  kiln__hash_field(h, &id->lib_bytes, sizeof id->lib_bytes);
  kiln__hash_string(h, arch);
  kiln__hash_field(h, &n_opt, sizeof n_opt);
  for (int i = 0; i < n_opt; i++) {
    kiln__hash_string(h, opts->options[i]);
    need_cwd |= kiln__headers_named(opts->options[i]) ||
                (opts->options[i] && strncmp(opts->options[i], "-I", 2) == 0);
  }
  kiln__hash_field(h, &n_inc, sizeof n_inc);
  for (int i = 0; i < n_inc; i++) {
    kiln__hash_string(h, opts->include_dirs[i]);
    need_cwd |= opts->include_dirs[i] && opts->include_dirs[i][0] != '/';
  }
  kiln__hash_field(h, &n_hdr, sizeof n_hdr);
  for (int i = 0; i < n_hdr; i++) {
    kiln__hash_string(h, opts->header_names[i]);
    kiln__hash_string(h, opts->header_sources[i]);
    need_cwd |= kiln__headers_named(opts->header_sources[i]);
  }
  kiln__hash_field(h, &n_names, sizeof n_names);
  for (int i = 0; i < n_names; i++) kiln__hash_string(h, opts->name_expressions[i]);
  /* The headers kiln gives NVRTC; and for a link with the device runtime, which one. */
  kiln__stdheaders_hash(h);
  unsigned relocatable = opts && (opts->flags & KILN_COMPILE_RELOCATABLE);
  unsigned linked = !relocatable && opts && (opts->flags & KILN_COMPILE_DEVICE_RUNTIME);
  kiln__hash_field(h, &linked, sizeof linked);
  kiln__hash_field(h, &relocatable, sizeof relocatable);
  if (linked) {
    char runtime[PATH_MAX];
    uint64_t bytes = 0;
    kiln_status found = kiln__link_runtime_path(opts, runtime, &bytes);
    if (found) {
      kiln__hash_end(h, key);
      return found;
    }
    kiln__hash_field(h, &bytes, sizeof bytes);
  }
  kiln__hash_string(h, src);
  cwd[0] = '\0';
  if (need_cwd && !getcwd(cwd, PATH_MAX)) cwd[0] = '\0';
  kiln__hash_string(h, cwd);
  *cwd_in_key = need_cwd;
  return kiln__hash_end(h, key);
}

kiln_status kiln__cache_key(const char *src, const kiln_compile_opts *opts,
                            const kiln__nvrtc_id *id, const char *arch,
                            unsigned char key[KILN__KEY_SIZE], char cwd[PATH_MAX]) {
  int cwd_in_key;
  return kiln__cache_key_in(src, opts, id, arch, key, cwd, &cwd_in_key);
}

/* <dir>/ab/cdef...<suffix>; 0 when it does not fit. */
static int kiln__entry_path(char *out, size_t cap, const char *dir,
                            const unsigned char key[KILN__KEY_SIZE], const char *suffix) {
  char hex[2 * KILN__KEY_SIZE + 1];
  kiln__hash_hex(key, hex);
  int n = snprintf(out, cap, "%s/%.2s/%s%s", dir, hex, hex + 2, suffix);
  return n > 0 && (size_t)n < cap;
}

static int kiln__shard_dir(char *out, size_t cap, const char *dir,
                           const unsigned char key[KILN__KEY_SIZE]) {
  char hex[2 * KILN__KEY_SIZE + 1];
  kiln__hash_hex(key, hex);
  int n = snprintf(out, cap, "%s/%.2s", dir, hex);
  return n > 0 && (size_t)n < cap;
}

/* ---- The folder's own counts -------------------------------------------------------------- */

static void kiln__stats_file(const char *dir, uint64_t add[3], uint64_t out[3]) {
  char path[PATH_MAX];
  if (out) out[0] = out[1] = out[2] = 0;
  if (snprintf(path, sizeof path, "%s/stats", dir) >= (int)sizeof path) return;
  int write = add != NULL;
  /* Never through a symlink, never waiting on a FIFO, only into a regular file. */
  int flags = O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;
  int fd = open(path, write ? O_RDWR | O_CREAT | flags : O_RDONLY | flags, 0600);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return;
  }
  while (flock(fd, write ? LOCK_EX : LOCK_SH) != 0 && errno == EINTR) {}
  char buf[256] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  unsigned long long v[3] = {0, 0, 0};
  if (n <= 0 || sscanf(buf, "hits %llu\nmisses %llu\nevictions %llu", &v[0], &v[1], &v[2]) != 3)
    v[0] = v[1] = v[2] = 0;
  if (write) {
    for (int i = 0; i < 3; i++) v[i] += add[i];
    int len =
        snprintf(buf, sizeof buf, "hits %llu\nmisses %llu\nevictions %llu\n", v[0], v[1], v[2]);
    /* Counts only grow, so the text is cut only when the old one was longer (a file edited
     * by hand); a longer old tail is ignored by the reader anyway. */
    if (len > 0 && pwrite(fd, buf, (size_t)len, 0) == len && n > len) {
      if (ftruncate(fd, len) != 0) {}
    }
  }
  if (out)
    for (int i = 0; i < 3; i++) out[i] = v[i];
  close(fd);
}

/* Disk hits not yet written to the main folder's stats file: a hit writes nothing, so that it
 * is one read. They go into the file with the process's next write to it (a store, an
 * eviction), when it reads the file (kiln_cache_get_info), every KILN__HITS_BATCH hits and at
 * exit; a process that ends without exit(3) (a signal, _exit) leaves its last ones uncounted.
 * Guarded by kiln__config_lock. */
#define KILN__HITS_BATCH 64
static char kiln__hits_dir[PATH_MAX];
static uint64_t kiln__hits_pending;

/* Takes the pending hits of dir (all of them, with dir NULL) out, for the caller to write. */
static uint64_t kiln__hits_take(const char *dir, char out_dir[PATH_MAX]) {
  pthread_mutex_lock(&kiln__config_lock);
  uint64_t n = 0;
  if (kiln__hits_pending && (!dir || strcmp(dir, kiln__hits_dir) == 0)) {
    n = kiln__hits_pending;
    kiln__hits_pending = 0;
    memcpy(out_dir, kiln__hits_dir, PATH_MAX);
  }
  pthread_mutex_unlock(&kiln__config_lock);
  return n;
}

static void kiln__stats_add(const char *dir, uint64_t hits, uint64_t misses, uint64_t evictions) {
  char pending_dir[PATH_MAX];
  uint64_t add[3] = {hits + kiln__hits_take(dir, pending_dir), misses, evictions};
  if (add[0] || add[1] || add[2]) kiln__stats_file(dir, add, NULL);
}

static void kiln__hits_flush(void) {
  char dir[PATH_MAX];
  uint64_t n = kiln__hits_take(NULL, dir);
  if (n) kiln__stats_file(dir, (uint64_t[3]){n, 0, 0}, NULL);
}

/* A child of fork starts with none: its parent writes its own. */
static void kiln__hits_forget(void) { kiln__hits_pending = 0; }

static void kiln__hits_install(void) {
  atexit(kiln__hits_flush);
  pthread_atfork(NULL, NULL, kiln__hits_forget);
}

/* Counts a disk hit in dir, written later (kiln__hits_take). */
static void kiln__hits_note(const char *dir) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, kiln__hits_install);
  char other[PATH_MAX];
  uint64_t moved = 0, due = 0;
  pthread_mutex_lock(&kiln__config_lock);
  if (kiln__hits_pending && strcmp(dir, kiln__hits_dir) != 0) { /* another folder's: write them */
    moved = kiln__hits_pending;
    memcpy(other, kiln__hits_dir, sizeof other);
    kiln__hits_pending = 0;
  }
  if (!kiln__hits_pending) snprintf(kiln__hits_dir, sizeof kiln__hits_dir, "%s", dir);
  if (++kiln__hits_pending >= KILN__HITS_BATCH) {
    due = kiln__hits_pending;
    kiln__hits_pending = 0;
  }
  pthread_mutex_unlock(&kiln__config_lock);
  if (moved) kiln__stats_file(other, (uint64_t[3]){moved, 0, 0}, NULL);
  if (due) kiln__stats_file(dir, (uint64_t[3]){due, 0, 0}, NULL);
}

/* ---- Reading ------------------------------------------------------------------------------ */

static int kiln__read_all(int fd, unsigned char *buf, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, buf + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    got += (size_t)r;
  }
  return 0;
}

/* Opens the entry at path for reading: never through a symlink, never waiting on a FIFO, and
 * only from a shard folder that is as safe as the cache folder itself (in a shared layer, a
 * shard that others can write would let them plant anything). -1 with *why NULL when there
 * is none; -1 with *why set when one may not be read. */
static int kiln__entry_open(const char *path, int allow_root, const char **why) {
  char shard[PATH_MAX], reason[512];
  const char *slash = strrchr(path, '/');
  if (!slash || (size_t)(slash - path) >= sizeof shard) return -1;
  memcpy(shard, path, (size_t)(slash - path));
  shard[slash - path] = '\0';
  int dfd = open(shard, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    if (errno == ENOENT) return -1;
    *why = errno == ENOTDIR || errno == ELOOP ? "its shard folder is not a folder"
                                              : "its shard folder cannot be opened";
    return -1;
  }
  struct stat st;
  int fd = -1;
  if (fstat(dfd, &st) != 0) *why = "its shard folder cannot be read";
  else if (kiln__unsafe_folder("it", &st, allow_root, reason, sizeof reason))
    *why = st.st_uid != geteuid() && !(allow_root && st.st_uid == 0)
               ? "its shard folder belongs to another user"
               : "others can write to its shard folder";
  else if ((fd = openat(dfd, slash + 1,
                        O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY)) < 0 &&
           errno != ENOENT && errno != ENOTDIR)
    *why = errno == ELOOP ? "it is a symbolic link" : "it cannot be opened";
  close(dfd);
  return fd;
}

/* Reads and decodes the entry at path. 1: a good entry in *out; 0: none there; -1: a bad one,
 * with why. *out is empty unless 1. The file is read under a shared lock so eviction leaves it
 * be. */
static int kiln__entry_load(const char *path, const unsigned char *key, int allow_root,
                            kiln__cached *out, struct stat *st, const char **why, int *fd_out) {
  memset(out, 0, sizeof *out); /* a file gone since the scan returns before the decoder runs */
  *why = NULL;
  int fd = kiln__entry_open(path, allow_root, why);
  if (fd < 0) return *why ? -1 : 0;
  while (flock(fd, LOCK_SH) != 0 && errno == EINTR) {}
  unsigned char *buf = NULL, head[KILN__ENTRY_HEADER_SIZE];
  if (fstat(fd, st) != 0 || !S_ISREG(st->st_mode)) *why = "it is not a regular file";
  else if (st->st_uid != geteuid() && !(allow_root && st->st_uid == 0))
    *why = "it belongs to another user";
  else if (st->st_mode & (S_IWGRP | S_IWOTH)) *why = "others can write to it";
  else if ((uint64_t)st->st_size > KILN__MAX_ENTRY_BYTES) *why = "it is larger than any entry";
  else if ((uint64_t)st->st_size < sizeof head)
    *why = st->st_size ? "it is shorter than an entry's header (truncated)" : "it is empty";
  /* An entry of up to a mebibyte (nearly all) in one read; a larger file the header alone
   * first, so that a large file that is no entry costs one small read, not its size in
   * memory. */
  else if (st->st_size <= KILN__ONE_READ_BYTES) {
    if (!(buf = malloc((size_t)st->st_size + 1))) *why = "out of memory reading it";
    else if (kiln__read_all(fd, buf, (size_t)st->st_size) != 0) *why = "it could not be read";
    else if (!(*why = kiln__entry_check_header(buf, (uint64_t)st->st_size, key)))
      *why = kiln__entry_decode(buf, (size_t)st->st_size, key, out);
  } else if (kiln__read_all(fd, head, sizeof head) != 0) *why = "it could not be read";
  else if ((*why = kiln__entry_check_header(head, (uint64_t)st->st_size, key)) != NULL) {
  } else if (!(buf = malloc((size_t)st->st_size + 1))) *why = "out of memory reading it";
  else if (memcpy(buf, head, sizeof head),
           kiln__read_all(fd, buf + sizeof head, (size_t)st->st_size - sizeof head) != 0)
    *why = "it could not be read";
  else *why = kiln__entry_decode(buf, (size_t)st->st_size, key, out);
  free(buf);
  if (fd_out && !*why) *fd_out = fd;
  else close(fd);
  return *why ? -1 : 1;
}

/* Looks key up in the main folder, then in each read-only layer. 1 on a hit whose headers are
 * unchanged, with *out filled; 0 on a miss. A damaged entry is a miss with a
 * warning, unless *damaged is already set (the same lookup, repeated under the lock); sets
 * *damaged. */
static int kiln__cache_find(const kiln__config *c, const unsigned char key[KILN__KEY_SIZE],
                            kiln__cached *out, int *damaged) {
  if (!c->enabled) return 0;
  for (int i = 0;; i++) {
    if (i > c->n_layers) return 0;
    const char *dir = kiln__folder(c, i);
    if (!dir) continue;
    char path[PATH_MAX];
    if (!kiln__entry_path(path, sizeof path, dir, key, "")) continue;
    struct stat st;
    const char *why;
    int fd = -1;
    int r = kiln__entry_load(path, key, i > 0, out, &st, &why, &fd);
    if (r < 0) {
      if (*damaged) continue;
      *damaged = 1;
      kiln__cache_count(KILN__CORRUPT);
      kiln__warn("the kernel cache entry %s is damaged (%s)%s", path, why,
                 i == 0 ? "; it is compiled again and replaced" : "; it is not used");
      continue;
    }
    if (r == 0) continue;
    if (!kiln__headers_fresh(&out->headers)) { /* a header changed since it was compiled */
      kiln__entry_free_cached(out);
      close(fd);
      continue;
    }
    if (i == 0) {
      futimens(fd, NULL); /* recency, for least-recently-used eviction */
      kiln__hits_note(dir);
    }
    close(fd);
    kiln__cache_count(KILN__DISK_HITS);
    return 1;
  }
}

/* ---- The per-key lock --------------------------------------------------------------------- */

/* The key's byte in the locks file: 62 bits of the key, so two keys share a lock only by a
 * collision of SHA-256 prefixes. */
static off_t kiln__lock_offset(const unsigned char key[KILN__KEY_SIZE]) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | key[i];
  return (off_t)(v >> 2);
}

/* Opens <dir>/locks and takes key's lock; nonblocking fails when another holds it. The fd holding
 * the lock, or -1. */
static int kiln__lock_take(const char *dir, const unsigned char key[KILN__KEY_SIZE],
                           int nonblocking) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/locks", dir) >= (int)sizeof path) return -1;
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY, 0600);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return -1;
  }
  struct flock fl = {
      .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = kiln__lock_offset(key), .l_len = 1};
  int rc;
  while ((rc = fcntl(fd, nonblocking ? F_OFD_SETLK : F_OFD_SETLKW, &fl)) != 0 && errno == EINTR) {}
  if (rc != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* The per-key lock in the main folder; fd is -1 when it could not be taken (a read-only
 * folder), and the caller goes on without it. Released by the kernel if the holder dies. */
typedef struct kiln__cache_lock {
  int fd;
} kiln__cache_lock;

static void kiln__cache_lock_key(const kiln__config *c, const unsigned char key[KILN__KEY_SIZE],
                                 kiln__cache_lock *lock) {
  lock->fd = c->writable ? kiln__lock_take(c->dir, key, 0) : -1;
}

static void kiln__cache_unlock(kiln__cache_lock *lock) {
  if (lock->fd >= 0) close(lock->fd); /* closing the description drops its locks */
  lock->fd = -1;
}

/* ---- Eviction ----------------------------------------------------------------------------- */

/* An entry file found by a scan of a folder. */
typedef struct kiln__scanned {
  char shard[3];
  char name[2 * KILN__KEY_SIZE - 1];
  uint64_t bytes;
  int64_t used_ns;
} kiln__scanned;

static int kiln__is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
  return s[n] == '\0';
}

/* Every entry of dir (and, with sweep, removes .tmp files a dead writer left). */
static int kiln__scan_entries(const char *dir, int sweep, kiln__scanned **out, size_t *n_out) {
  *out = NULL;
  *n_out = 0;
  DIR *top = opendir(dir);
  if (!top) return -1;
  size_t n = 0, cap = 0;
  kiln__scanned *files = NULL;
  time_t now = time(NULL);
  struct dirent *d;
  while ((d = readdir(top))) {
    if (!kiln__is_hex(d->d_name, 2)) continue;
    char shard[PATH_MAX];
    snprintf(shard, sizeof shard, "%s/%s", dir, d->d_name);
    DIR *sub = opendir(shard);
    if (!sub) continue;
    struct dirent *e;
    while ((e = readdir(sub))) {
      char path[PATH_MAX];
      if (snprintf(path, sizeof path, "%s/%s", shard, e->d_name) >= (int)sizeof path) continue;
      size_t len = strlen(e->d_name);
      struct stat st;
      if (sweep && e->d_name[0] == '.' && len > 4 && strcmp(e->d_name + len - 4, ".tmp") == 0) {
        if (lstat(path, &st) == 0 && now - st.st_mtime > KILN__STALE_TMP_S) unlink(path);
        continue;
      }
      if (len != 2 * KILN__KEY_SIZE - 2 || !kiln__is_hex(e->d_name, len)) continue;
      if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode)) continue;
      if (n == cap) {
        cap = cap ? 2 * cap : 256;
        kiln__scanned *f = realloc(files, cap * sizeof *f);
        if (!f) break;
        files = f;
      }
      memcpy(files[n].shard, d->d_name, 3);
      memcpy(files[n].name, e->d_name, len + 1);
      files[n].bytes = (uint64_t)st.st_size;
      files[n].used_ns = (int64_t)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
      n++;
    }
    closedir(sub);
  }
  closedir(top);
  *out = files;
  *n_out = n;
  return 0;
}

static int kiln__by_use(const void *a, const void *b) {
  int64_t x = ((const kiln__scanned *)a)->used_ns, y = ((const kiln__scanned *)b)->used_ns;
  return x < y ? -1 : x > y;
}

/* Removes one entry, unless someone is compiling it or reading it. */
static int kiln__evict_one(const char *dir, const kiln__scanned *f) {
  char entry[PATH_MAX], hex[2 * KILN__KEY_SIZE + 1];
  unsigned char key[KILN__KEY_SIZE];
  if (snprintf(entry, sizeof entry, "%s/%s/%s", dir, f->shard, f->name) >= (int)sizeof entry)
    return 0;
  snprintf(hex, sizeof hex, "%s%s", f->shard, f->name);
  for (int i = 0; i < KILN__KEY_SIZE; i++) {
    unsigned hi = (unsigned)(hex[2 * i] <= '9' ? hex[2 * i] - '0' : hex[2 * i] - 'a' + 10);
    unsigned lo =
        (unsigned)(hex[2 * i + 1] <= '9' ? hex[2 * i + 1] - '0' : hex[2 * i + 1] - 'a' + 10);
    key[i] = (unsigned char)(hi << 4 | lo);
  }
  int lfd = kiln__lock_take(dir, key, 1);
  if (lfd < 0) return 0;
  int removed = 0, efd = open(entry, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (efd >= 0 && flock(efd, LOCK_EX | LOCK_NB) == 0 && unlink(entry) == 0) removed = 1;
  if (efd >= 0) close(efd);
  close(lfd);
  return removed;
}

/* Brings dir down to target bytes when it holds more than max. */
static uint64_t kiln__evict(const char *dir, uint64_t max, uint64_t target) {
  kiln__scanned *files;
  size_t n;
  if (kiln__scan_entries(dir, 1, &files, &n) != 0) return 0;
  /* Precompiled headers share the bound: this process's take at most half of it. */
  uint64_t total = kiln__pch_trim(dir, max / 2), removed = 0;
  for (size_t i = 0; i < n; i++) total += files[i].bytes;
  if (total > max && n > 1) qsort(files, n, sizeof *files, kiln__by_use);
  if (total > max) {
    for (size_t i = 0; i < n && total > target; i++)
      if (kiln__evict_one(dir, &files[i])) {
        total -= files[i].bytes;
        removed++;
        kiln__cache_count(KILN__EVICTIONS);
      }
  }
  free(files);
  if (removed) kiln__stats_add(dir, 0, 0, removed);
  return removed;
}

/* ---- Writing ------------------------------------------------------------------------------ */

static int kiln__write_all(int fd, const unsigned char *p, size_t n) {
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

static void kiln__write_failed(const char *dir, const char *what, int err) {
  pthread_mutex_lock(&kiln__config_lock);
  int first = !kiln__write_warned;
  kiln__write_warned = 1;
  pthread_mutex_unlock(&kiln__config_lock);
  if (first)
    kiln__warn("the kernel cache in %s cannot be written (%s: %s); kernels compiled by this "
               "process are not cached",
               dir, what, strerror(err));
}

static void kiln__cache_store_in(const kiln__config *cfg, const unsigned char key[KILN__KEY_SIZE],
                                 const kiln__code *code, const kiln__kernel *kernels, int n_kernels,
                                 const kiln__headers *headers) {
  const kiln__config c = *cfg; /* a store is rare: the copy costs nothing beside it */
  if (!c.readable) return;
  if (!c.writable) {
    kiln__write_failed(c.dir, "the folder", EACCES);
    return;
  }
  unsigned char *buf;
  size_t size;
  if (kiln__entry_encode(key, code, kernels, n_kernels, headers, &buf, &size) != KILN_OK) return;
  static unsigned counter;
  char shard[PATH_MAX], path[PATH_MAX], tmp[PATH_MAX], hex[2 * KILN__KEY_SIZE + 1];
  kiln__hash_hex(key, hex);
  unsigned serial = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
  if (!kiln__shard_dir(shard, sizeof shard, c.dir, key) ||
      !kiln__entry_path(path, sizeof path, c.dir, key, "") ||
      snprintf(tmp, sizeof tmp, "%s/.%s.%ld.%u.tmp", shard, hex + 2, (long)getpid(), serial) >=
          (int)sizeof tmp) {
    free(buf);
    return;
  }
  /* The shard folders are made at the folder's first store (a lookup makes none); one removed
   * since is made again when the file cannot be created in it. */
  kiln__make_shards(c.dir);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT && (mkdir(shard, 0700) == 0 || errno == EEXIST))
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    kiln__write_failed(c.dir, "creating a file", errno);
  } else if (kiln__write_all(fd, buf, size) != 0) {
    int err = errno;
    close(fd);
    unlink(tmp);
    kiln__write_failed(c.dir, "writing an entry", err);
  } else if (close(fd) != 0 || rename(tmp, path) != 0) {
    int err = errno;
    unlink(tmp);
    kiln__write_failed(c.dir, "renaming an entry into place", err);
  } else {
    kiln__cache_count(KILN__STORES);
    kiln__stats_add(c.dir, 0, 1, 0);
    /* The bound is checked by a scan of the folder: on a process's first store, and again
     * each time it has written a sixteenth of the bound since. */
    pthread_mutex_lock(&kiln__config_lock);
    int scan = kiln__stored_since_scan == 0 || kiln__stored_since_scan + size > c.max_bytes / 16;
    kiln__stored_since_scan = scan ? 1 : kiln__stored_since_scan + size;
    pthread_mutex_unlock(&kiln__config_lock);
    if (scan) kiln__evict(c.dir, c.max_bytes, KILN__EVICT_TO(c.max_bytes));
  }
  free(buf);
}

void kiln__cache_store(const unsigned char key[KILN__KEY_SIZE], const kiln__code *code,
                       const kiln__kernel *kernels, int n_kernels, const kiln__headers *headers) {
  kiln__config c;
  kiln__config_get(&c);
  kiln__cache_store_in(&c, key, code, kernels, n_kernels, headers);
}

/* ---- Lookup or compile --------------------------------------------------------------------- */

kiln_status kiln__cache_prepare(const char *src, const kiln_compile_opts *opts,
                                kiln__cache_query *q) {
  kiln_status s = kiln__cache_nvrtc(&q->id);
  if (!s) s = kiln__compile_arch(opts, &q->id, q->arch, sizeof q->arch, &q->arch_num);
  if (!s) s = kiln__cache_key_in(src, opts, &q->id, q->arch, q->key, q->cwd, &q->cwd_in_key);
  return s;
}

/* Compiles running NVRTC in this process now: 0 or 1 (kiln__cache_compile). */
static int kiln__compiling_here;

/* Compiles src and records the headers it can reach; stores the entry when it may. */
static kiln_status kiln__cache_compile(const char *src, const kiln_compile_opts *opts,
                                       const kiln__cache_query *q, const kiln__config *c,
                                       int use_disk, kiln__cached *out) {
  /* Scanned before compiling: a header edited during the compile then reads as changed. */
  char here[PATH_MAX];
  if (!q->cwd[0] && !getcwd(here, sizeof here)) here[0] = '\0';
  kiln_status s = kiln__headers_scan(src, opts, q->cwd[0] ? q->cwd : here, &out->headers);
  if (s) return s;
  kiln__cache_count(KILN__COMPILES);
  const char *pch_dir = c->writable ? c->dir : NULL, *cwd = q->cwd[0] ? q->cwd : here;
  /* One compile at a time runs NVRTC here; one that comes while it runs is crowded and goes
   * to a compile helper, a process of its own (remote.c says why). */
  int idle = 0;
  int alone = __atomic_compare_exchange_n(&kiln__compiling_here, &idle, 1, 0, __ATOMIC_ACQ_REL,
                                          __ATOMIC_ACQUIRE);
  int remote = 0; /* in the compile helper, whose PCH files serve later processes too */
  s = kiln__remote_compile(src, opts, q->arch, pch_dir, cwd, &q->id, !alone, &out->code, &remote);
  if (!remote) s = kiln__compile(src, opts, q->arch, pch_dir, cwd, &out->code);
  if (alone) __atomic_store_n(&kiln__compiling_here, 0, __ATOMIC_RELEASE);
  if (!s && opts && (opts->flags & KILN_COMPILE_DEVICE_RUNTIME) &&
      !(opts->flags & KILN_COMPILE_RELOCATABLE))
    s = kiln__link_device_runtime(opts, &out->code);
  if (s) return s;
  if (out->code.pch == 1) { /* a new PCH file: the next store checks the bound */
    pthread_mutex_lock(&kiln__config_lock);
    kiln__stored_since_scan = 0;
    pthread_mutex_unlock(&kiln__config_lock);
  }
  s = kiln__ptx_parse(out->code.ptx, out->code.ptx_size, &out->kernels, &out->n_kernels);
  if (s) return s;
  /* The key named the NVRTC of the cache folder's note; only code from that one is stored
   * (the helper compiles with no other: it checks). */
  if (use_disk && !out->headers.uncacheable && (remote || kiln__nvrtc_is(&q->id)))
    kiln__cache_store_in(c, q->key, &out->code, out->kernels, out->n_kernels, &out->headers);
  return KILN_OK;
}

kiln_status kiln__cache_get(const char *src, const kiln_compile_opts *opts,
                            const kiln__cache_query *q, kiln__cached *out) {
  memset(out, 0, sizeof *out);
  /* A lookup without the lock (the common hit), then under the key's lock, which another
   * process may hold while it compiles this very source. */
  kiln__config c;
  kiln__config_for(opts, &c);
  int use_disk = c.enabled && !(opts && (opts->flags & KILN_COMPILE_NO_CACHE));
  int hit = 0, damaged = 0;
  kiln__cache_lock lock = {-1};
  if (use_disk && !(hit = kiln__cache_find(&c, q->key, out, &damaged))) {
    kiln__cache_lock_key(&c, q->key, &lock);
    if (lock.fd >= 0) hit = kiln__cache_find(&c, q->key, out, &damaged);
    if (!hit) kiln__cache_count(KILN__MISSES);
  }
  kiln_status s = hit ? KILN_OK : kiln__cache_compile(src, opts, q, &c, use_disk, out);
  kiln__cache_unlock(&lock); /* held until the entry is in place */
  if (s && s != KILN_ERROR_COMPILE) kiln__entry_free_cached(out);
  return s;
}

/* ---- Public: info, list, prune, clear ----------------------------------------------------- */

kiln_status kiln_cache_get_info(kiln_cache_info *out) {
  KILN__NEED(out);
  memset(out, 0, sizeof *out);
  kiln__config c;
  kiln__config_get(&c);
  out->enabled = c.enabled;
  out->writable = c.writable;
  out->max_bytes = c.max_bytes;
  snprintf(out->dir, sizeof out->dir, "%s", c.dir);
  snprintf(out->reason, sizeof out->reason, "%s", c.reason);
  const char *p = c.layers;
  size_t used = 0;
  for (int i = 0; i < c.n_layers; i++) {
    int n = snprintf(out->layers + used, sizeof out->layers - used, "%s%s", i ? ":" : "", p);
    if (n > 0 && (size_t)n < sizeof out->layers - used) used += (size_t)n;
    p += strlen(p) + 1;
  }
  if (!c.dir[0] || access(c.dir, F_OK) != 0) return KILN_OK;
  kiln__scanned *files;
  size_t n;
  if (kiln__scan_entries(c.dir, 0, &files, &n) == 0) {
    out->entries = n;
    for (size_t i = 0; i < n; i++) out->bytes += files[i].bytes;
    free(files);
  }
  kiln__pch_usage(c.dir, &out->pch_files, &out->pch_bytes);
  uint64_t v[3];
  kiln__stats_add(c.dir, 0, 0, 0); /* this process's own hits first */
  kiln__stats_file(c.dir, NULL, v);
  out->hits = v[0];
  out->misses = v[1];
  out->evictions = v[2];
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_cache_list(int (*visit)(const kiln_cache_entry *e, void *ctx), void *ctx) {
  kiln__config c;
  kiln__config_get(&c);
  for (int layer = 0; layer <= c.n_layers; layer++) {
    const char *dir = kiln__folder(&c, layer);
    if (!dir) continue;
    kiln__scanned *files;
    size_t n;
    if (kiln__scan_entries(dir, 0, &files, &n) != 0) continue;
    if (n > 1) qsort(files, n, sizeof *files, kiln__by_use); /* an empty folder's list is NULL */
    int stop = 0;
    for (size_t i = 0; i < n && !stop; i++) {
      char path[PATH_MAX], key[2 * KILN__KEY_SIZE + 1], kernels[4096] = "";
      if (snprintf(path, sizeof path, "%s/%s/%s", dir, files[i].shard, files[i].name) >=
          (int)sizeof path)
        continue;
      snprintf(key, sizeof key, "%s%s", files[i].shard, files[i].name);
      kiln__cached cached;
      struct stat st;
      const char *why;
      /* Another process or thread may have evicted or replaced it since the scan: an entry
       * that is gone is no longer listed. */
      if (kiln__entry_load(path, NULL, layer > 0, &cached, &st, &why, NULL) == 0) continue;
      size_t used = 0;
      for (int k = 0; !why && k < cached.n_kernels; k++) {
        int w = snprintf(kernels + used, sizeof kernels - used, "%s%s", k ? ", " : "",
                         cached.kernels[k].plain);
        if (w > 0 && (size_t)w < sizeof kernels - used) used += (size_t)w;
      }
      kiln_cache_entry e = {path,
                            key,
                            layer,
                            files[i].bytes,
                            (int64_t)(files[i].used_ns / 1000000000LL),
                            why ? "" : cached.code.arch,
                            kernels,
                            why};
      stop = visit(&e, ctx);
      if (!why) kiln__entry_free_cached(&cached);
    }
    free(files);
    if (stop) break;
  }
  kiln__clear_error();
  return KILN_OK;
}

static kiln_status kiln__main_dir(kiln__config *c) {
  kiln__config_get(c);
  if (!c->readable)
    return kiln__fail(KILN_ERROR_CACHE_IO, "no kernel cache folder is in use: %s",
                      c->reason[0] ? c->reason : "it is off");
  return KILN_OK;
}

kiln_status kiln_cache_prune(uint64_t max_bytes, uint64_t *removed) {
  kiln__config c;
  kiln_status s = kiln__main_dir(&c);
  if (s) return s;
  uint64_t max = max_bytes ? max_bytes : c.max_bytes;
  uint64_t r = kiln__evict(c.dir, max, max);
  if (removed) *removed = r;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_cache_clear(uint64_t *removed) {
  kiln__config c;
  kiln_status s = kiln__main_dir(&c);
  if (s) return s;
  kiln__scanned *files;
  size_t n;
  uint64_t r = 0;
  if (kiln__scan_entries(c.dir, 1, &files, &n) == 0) {
    for (size_t i = 0; i < n; i++) r += (uint64_t)kiln__evict_one(c.dir, &files[i]);
    free(files);
  }
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/stats", c.dir) < (int)sizeof path) unlink(path);
  kiln__pch_clear(c.dir); /* lasting ones, and those of processes that died; live ones are in use */
  if (removed) *removed = r;
  kiln__clear_error();
  return KILN_OK;
}
