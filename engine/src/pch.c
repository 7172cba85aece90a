/* Precompiled headers, kept per process.
 *
 * NVRTC writes a PCH as an image of its own heap: a file is only taken by the NVRTC that made
 * it, in the same process (another process's NVRTC refuses it with a warning and compiles
 * without). So kiln keeps PCH files for the life of the process, named with its pid in the
 * cache folder's pch/ subfolder where `cache info` counts them, removes them at exit, and
 * sweeps those of processes that died.
 *
 * A PCH stands for the source's beginning up to its first token that is not a preprocessor
 * directive (NVRTC's header stop). Its key is everything that can change what that beginning
 * means: NVRTC's version, every option (arch, -D, include folders), the in-memory headers (the
 * user's, and kiln's by their digest), the folder of quoted includes and the text of the
 * beginning; the user headers it can reach are recorded and checked before each use, as the
 * cache checks them. A beginning that ends inside an #if is not precompiled: NVRTC's stop could
 * lie past kiln's, outside the key.
 *
 * A PCH is made by the second compile of a beginning in the process, not the first: writing it
 * makes that compile slower, and most beginnings are compiled once (a script's module).
 *
 * Lasting files are the exception, made in kiln-nvrtc, the compile helper (remote.c), whose
 * NVRTC sits at the same addresses in every run: there a PCH is named by its key alone
 * ("<key>.pch", the key also holding the contents of the user headers the beginning reaches
 * and where NVRTC was loaded), made by the first compile of its beginning under a name of the
 * helper's pid and renamed when whole, and taken by every later run. They share the cache's
 * bound, the least recently used going first, and `cache clear` removes them. */
#include "pch.h"

#include "nvrtc.h"
#include "stdheaders.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Files this process keeps at once; each is tens to hundreds of MiB (CUB's BlockReduce: 170). */
#define KILN__PCH_KEEP 4

/* Beginnings compiled once, without a PCH, that this process remembers: writing a PCH costs a
 * first compile a quarter to a half more (8 MiB written for cuda_fp16.h), and only a second
 * compile of the same beginning shows that one will be used. */
#define KILN__PCH_SEEN 32

typedef struct kiln__pch_kept {
  int live, creating, users;
  unsigned char key[KILN__KEY_SIZE];
  char path[PATH_MAX];
  kiln__headers headers;
  uint64_t size, inode, dev;
  int64_t mtime_ns;
  uint64_t last_use;
} kiln__pch_kept;

static pthread_mutex_t kiln__pch_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln__pch_kept kiln__pch_table[KILN__PCH_KEEP];
static uint64_t kiln__pch_clock, kiln__pch_created, kiln__pch_used;
static int kiln__pch_exit_set;
static char kiln__pch_swept[PATH_MAX];
static unsigned char kiln__pch_seen[KILN__PCH_SEEN][KILN__KEY_SIZE];
static int kiln__pch_n_seen, kiln__pch_next_seen;
static int kiln__pch_lasting;

void kiln__pch_set_lasting(int on) { kiln__pch_lasting = on; }

/* 1 when key's beginning was compiled before in this process; else remembers it (the oldest
 * forgotten past KILN__PCH_SEEN) and returns 0. Call with the lock held. */
static int kiln__pch_seen_before(const unsigned char key[KILN__KEY_SIZE]) {
  for (int i = 0; i < kiln__pch_n_seen; i++)
    if (memcmp(kiln__pch_seen[i], key, KILN__KEY_SIZE) == 0) return 1;
  memcpy(kiln__pch_seen[kiln__pch_next_seen], key, KILN__KEY_SIZE);
  kiln__pch_next_seen = (kiln__pch_next_seen + 1) % KILN__PCH_SEEN;
  if (kiln__pch_n_seen < KILN__PCH_SEEN) kiln__pch_n_seen++;
  return 0;
}

/* ---- The beginning a PCH can stand for --------------------------------------------------- */

static const char *kiln__pch_skip_space(const char *p) {
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
    if (p[0] == '/' && p[1] == '/') {
      while (*p && *p != '\n') p++;
    } else if (p[0] == '/' && p[1] == '*') {
      const char *e = strstr(p + 2, "*/");
      if (!e) return p + strlen(p);
      p = e + 2;
    } else {
      return p;
    }
  }
}

/* The directive's name after '#': "include", "if", ... into out. */
static void kiln__pch_directive(const char *p, char *out, size_t cap) {
  p++;
  while (*p == ' ' || *p == '\t') p++;
  size_t n = 0;
  while (n + 1 < cap && ((*p >= 'a' && *p <= 'z') || *p == '_')) out[n++] = *p++;
  out[n] = '\0';
}

/* Length of the beginning: every directive before the first other token; 0 when it holds no
 * #include or ends inside a conditional. */
static size_t kiln__pch_prefix(const char *src) {
  const char *p = src, *end = src;
  int depth = 0, includes = 0;
  for (;;) {
    p = kiln__pch_skip_space(p);
    if (*p != '#') break;
    char name[16];
    kiln__pch_directive(p, name, sizeof name);
    if (!strncmp(name, "if", 2)) depth++; /* if, ifdef, ifndef */
    else if (!strcmp(name, "endif")) depth--;
    else if (!strcmp(name, "include")) includes++;
    /* To the end of the line, through backslash continuations. */
    while (*p && !(*p == '\n' && p[-1] != '\\')) p++;
    end = p;
  }
  if (!*p || depth != 0 || !includes) return 0;
  return (size_t)(end - src);
}

/* ---- Files -------------------------------------------------------------------------------- */

static void kiln__pch_forget(kiln__pch_kept *k) {
  if (k->path[0]) unlink(k->path);
  kiln__headers_free(&k->headers);
  memset(k, 0, sizeof *k);
}

static void kiln__pch_at_exit(void) {
  pthread_mutex_lock(&kiln__pch_lock);
  /* A forked child that exits leaves its parent's files alone: they carry the parent's pid. */
  char mine[32];
  snprintf(mine, sizeof mine, "/%ld-", (long)getpid());
  for (int i = 0; i < KILN__PCH_KEEP; i++)
    if (kiln__pch_table[i].path[0] && strstr(kiln__pch_table[i].path, mine))
      unlink(kiln__pch_table[i].path);
  pthread_mutex_unlock(&kiln__pch_lock);
}

/* "<pid>-<key>.pch" -> pid; 0 when the name is not one of kiln's. */
static long kiln__pch_owner(const char *name) {
  char *end;
  long pid = strtol(name, &end, 10);
  size_t n = strlen(name);
  if (pid <= 0 || *end != '-' || n < 5 || strcmp(name + n - 4, ".pch") != 0) return 0;
  return pid;
}

/* 1 for "<key>.pch", a lasting file: 64 hex digits and the suffix. */
static int kiln__pch_is_lasting(const char *name) {
  if (strlen(name) != 2 * KILN__KEY_SIZE + 4 || strcmp(name + 2 * KILN__KEY_SIZE, ".pch") != 0)
    return 0;
  for (int i = 0; i < 2 * KILN__KEY_SIZE; i++)
    if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return 0;
  return 1;
}

/* What walk does with the files of dir/pch. */
enum { KILN__PCH_COUNT, KILN__PCH_SWEEP, KILN__PCH_CLEAR };

static uint64_t kiln__pch_walk(const char *dir, int what, uint64_t *files) {
  char folder[PATH_MAX], path[PATH_MAX];
  uint64_t bytes = 0;
  if (files) *files = 0;
  if (snprintf(folder, sizeof folder, "%s/pch", dir) >= (int)sizeof folder) return 0;
  DIR *d = opendir(folder);
  if (!d) return 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    /* The lasting compile helper's socket: removed with the files, it ends (remote.c). */
    if (what == KILN__PCH_CLEAR && strncmp(e->d_name, "nvrtc-", 6) == 0 && strlen(e->d_name) > 11 &&
        strcmp(e->d_name + strlen(e->d_name) - 5, ".sock") == 0 &&
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name) < (int)sizeof path) {
      struct stat st;
      if (lstat(path, &st) == 0 && S_ISSOCK(st.st_mode)) unlink(path);
      continue;
    }
    long pid = kiln__pch_owner(e->d_name);
    int lasting = !pid && kiln__pch_is_lasting(e->d_name);
    struct stat st;
    if ((!pid && !lasting) ||
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name) >= (int)sizeof path ||
        lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    int dead = pid && pid != (long)getpid() && kill((pid_t)pid, 0) != 0 && errno == ESRCH;
    if (what != KILN__PCH_COUNT) {
      if ((dead || (what == KILN__PCH_CLEAR && lasting)) && unlink(path) == 0)
        bytes += (uint64_t)st.st_size;
    } else {
      bytes += (uint64_t)st.st_size;
      if (files) (*files)++;
    }
  }
  closedir(d);
  return bytes;
}

void kiln__pch_usage(const char *dir, uint64_t *files, uint64_t *bytes) {
  *bytes = kiln__pch_walk(dir, KILN__PCH_COUNT, files);
}

uint64_t kiln__pch_sweep(const char *dir) { return kiln__pch_walk(dir, KILN__PCH_SWEEP, NULL); }

uint64_t kiln__pch_clear(const char *dir) { return kiln__pch_walk(dir, KILN__PCH_CLEAR, NULL); }

/* Removes the least recently used lasting files of dir/pch until they take at most max
 * bytes (a use touches a file's time). */
static void kiln__pch_trim_lasting(const char *dir, uint64_t max) {
  char folder[PATH_MAX], path[PATH_MAX];
  if (snprintf(folder, sizeof folder, "%s/pch", dir) >= (int)sizeof folder) return;
  for (;;) {
    DIR *d = opendir(folder);
    if (!d) return;
    uint64_t total = 0;
    int64_t oldest_ns = INT64_MAX;
    char oldest[NAME_MAX + 1] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
      struct stat st;
      if (!kiln__pch_is_lasting(e->d_name) ||
          snprintf(path, sizeof path, "%s/%s", folder, e->d_name) >= (int)sizeof path ||
          lstat(path, &st) != 0 || !S_ISREG(st.st_mode))
        continue;
      total += (uint64_t)st.st_size;
      int64_t t = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
      if (t < oldest_ns) oldest_ns = t, snprintf(oldest, sizeof oldest, "%s", e->d_name);
    }
    closedir(d);
    if (total <= max || !oldest[0] ||
        snprintf(path, sizeof path, "%s/%s", folder, oldest) >= (int)sizeof path ||
        unlink(path) != 0)
      return;
  }
}

uint64_t kiln__pch_trim(const char *dir, uint64_t max) {
  pthread_mutex_lock(&kiln__pch_lock);
  for (;;) {
    uint64_t mine = 0;
    kiln__pch_kept *oldest = NULL;
    for (int i = 0; i < KILN__PCH_KEEP; i++) {
      kiln__pch_kept *k = &kiln__pch_table[i];
      if (!k->live || k->creating) continue;
      mine += k->size;
      if (!k->users && (!oldest || k->last_use < oldest->last_use)) oldest = k;
    }
    if (mine <= max || !oldest) break;
    kiln__pch_forget(oldest);
  }
  pthread_mutex_unlock(&kiln__pch_lock);
  kiln__pch_trim_lasting(dir, max);
  return kiln__pch_walk(dir, KILN__PCH_COUNT, NULL);
}

void kiln__pch_add_counts(uint64_t created, uint64_t used) {
  pthread_mutex_lock(&kiln__pch_lock);
  kiln__pch_created += created;
  kiln__pch_used += used;
  pthread_mutex_unlock(&kiln__pch_lock);
}

void kiln__pch_counts(uint64_t *created, uint64_t *used) {
  pthread_mutex_lock(&kiln__pch_lock);
  *created = kiln__pch_created;
  *used = kiln__pch_used;
  pthread_mutex_unlock(&kiln__pch_lock);
}

/* ---- Plans -------------------------------------------------------------------------------- */

static int kiln__pch_intact(const kiln__pch_kept *k) {
  struct stat st;
  return stat(k->path, &st) == 0 && (uint64_t)st.st_size == k->size &&
         (uint64_t)st.st_ino == k->inode && (uint64_t)st.st_dev == k->dev &&
         (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec == k->mtime_ns;
}

kiln_status kiln__pch_key(const char *src, size_t n, const kiln_compile_opts *opts,
                          const char *const *args, int n_args, const char *dir, const char *cwd,
                          const unsigned char kiln_headers[KILN__KEY_SIZE],
                          unsigned char key[KILN__KEY_SIZE]) {
  kiln__hasher *h;
  kiln_status s = kiln__hash_begin(&h);
  if (s) return s;
  char version[96];
  snprintf(version, sizeof version, "kiln-pch 1 nvrtc %d.%d %llu", kiln__nvrtc.major,
           kiln__nvrtc.minor, (unsigned long long)kiln__nvrtc.lib_bytes);
  kiln__hash_string(h, version);
  kiln__hash_field(h, &n_args, sizeof n_args);
  for (int i = 0; i < n_args; i++) kiln__hash_string(h, args[i]);
  int n_headers = opts ? opts->n_headers : 0;
  kiln__hash_field(h, &n_headers, sizeof n_headers);
  for (int i = 0; i < n_headers; i++) {
    kiln__hash_string(h, opts->header_names[i]);
    kiln__hash_string(h, opts->header_sources[i]);
  }
  /* The headers kiln gives every compile, kiln_nvcc_host.h first, which the PCH holds parsed:
   * a lasting file made by a kiln whose texts differ would otherwise be taken for this one's. */
  kiln__hash_field(h, kiln_headers, KILN__KEY_SIZE);
  kiln__hash_string(h, dir); /* where the file lives: another cache folder makes its own */
  kiln__hash_string(h, cwd);
  kiln__hash_field(h, src, n);
  return kiln__hash_end(h, key);
}

static int kiln__pch_wanted_with(const char *dir, int major, int minor) {
  const char *env = getenv("KILN_PCH");
  if (env && (!strcmp(env, "0") || !strcmp(env, "off") || !strcmp(env, "no"))) return 0;
  /* Explicit PCH creation and use came with NVRTC 12.8. */
  if (major < 12 || (major == 12 && minor < 8)) return 0;
  return dir && *dir;
}

static int kiln__pch_wanted(const char *dir) {
  return kiln__pch_wanted_with(dir, kiln__nvrtc.major, kiln__nvrtc.minor);
}

int kiln__pch_could_use(const char *src, const kiln_compile_opts *opts, const char *dir,
                        const kiln__nvrtc_id *id) {
  if (!kiln__pch_wanted_with(dir, id->major, id->minor) || !kiln__pch_prefix(src)) return 0;
  for (int i = 0; opts && i < opts->n_options; i++)
    if (strstr(opts->options[i], "pch")) return 0; /* the user's own PCH options rule */
  return 1;
}

/* The plan for a lasting file (see the top of the file): key is the beginning's, headers what
 * it reaches. Use "<key'>.pch" when there, else make it under this process's pid. */
static void kiln__pch_plan_lasting(const unsigned char key[KILN__KEY_SIZE],
                                   const kiln__headers *headers, const char *dir,
                                   kiln__pch_plan *plan) {
  kiln__hasher *h;
  if (kiln__hash_begin(&h)) return;
  kiln__hash_field(h, key, KILN__KEY_SIZE);
  /* The headers' contents: a header edited makes another file, the old one ages out. */
  for (int i = 0; i < headers->n; i++) {
    const kiln__header *r = &headers->items[i];
    kiln__hash_string(h, r->path);
    kiln__hash_field(h, &r->exists, sizeof r->exists);
    kiln__hash_field(h, r->sha, sizeof r->sha);
  }
  /* Where NVRTC sits: a helper built or linked otherwise lays it out elsewhere, and its
   * files are of no use here. */
  uintptr_t at = (uintptr_t)kiln__nvrtc.CompileProgram;
  kiln__hash_field(h, &at, sizeof at);
  if (kiln__hash_end(h, plan->key)) return;
  char hex[2 * KILN__KEY_SIZE + 1], folder[PATH_MAX];
  kiln__hash_hex(plan->key, hex);
  if (snprintf(folder, sizeof folder, "%s/pch", dir) >= (int)sizeof folder ||
      snprintf(plan->final, sizeof plan->final, "%s/%s.pch", folder, hex) >=
          (int)sizeof plan->final)
    return;
  struct stat st;
  if (stat(plan->final, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0) {
    utimensat(AT_FDCWD, plan->final, NULL, 0); /* its last use, for the bound */
    snprintf(plan->path, sizeof plan->path, "%s", plan->final);
    snprintf(plan->opt, sizeof plan->opt, "--use-pch=%s", plan->path);
    return;
  }
  if ((mkdir(folder, 0700) != 0 && errno != EEXIST) ||
      snprintf(plan->path, sizeof plan->path, "%s/%ld-%s.pch", folder, (long)getpid(), hex) >=
          (int)sizeof plan->path)
    return;
  unlink(plan->path); /* a file left by an earlier process of the same pid */
  plan->creating = 1;
  snprintf(plan->opt, sizeof plan->opt, "--create-pch=%s", plan->path);
}

void kiln__pch_plan_for(const char *src, const kiln_compile_opts *opts, const char *const *args,
                        int n_args, const char *dir, const char *cwd, kiln__pch_plan *plan) {
  memset(plan, 0, sizeof *plan);
  size_t n = kiln__pch_wanted(dir) ? kiln__pch_prefix(src) : 0;
  for (int i = 0; i < n_args && n; i++)
    if (strstr(args[i], "pch")) n = 0; /* the user's own PCH options rule */
  if (!n) return;
  char *prefix = malloc(n + 1);
  if (!prefix) return;
  memcpy(prefix, src, n);
  prefix[n] = '\0';
  unsigned char key[KILN__KEY_SIZE];
  kiln__headers headers = {0};
  int known = kiln__pch_key(src, n, opts, args, n_args, dir, cwd, kiln__stdheaders_digest_kept(),
                            key) == KILN_OK &&
              kiln__headers_scan(prefix, opts, cwd, &headers) == KILN_OK && !headers.uncacheable;
  free(prefix);
  kiln__clear_error();
  if (!known) {
    kiln__headers_free(&headers);
    return;
  }
  if (kiln__pch_lasting) {
    kiln__pch_plan_lasting(key, &headers, dir, plan);
    kiln__headers_free(&headers);
    return;
  }
  char hex[2 * KILN__KEY_SIZE + 1], folder[PATH_MAX];
  kiln__hash_hex(key, hex);
  memcpy(plan->key, key, sizeof key);
  pthread_mutex_lock(&kiln__pch_lock);
  if (strcmp(kiln__pch_swept, dir) != 0) {
    snprintf(kiln__pch_swept, sizeof kiln__pch_swept, "%s", dir);
    kiln__pch_sweep(dir);
  }
  kiln__pch_kept *free_slot = NULL, *oldest = NULL;
  int stale = 0;
  for (int i = 0; i < KILN__PCH_KEEP; i++) {
    kiln__pch_kept *k = &kiln__pch_table[i];
    if (k->live && memcmp(k->key, key, sizeof key) == 0) {
      /* Being made by another thread: this compile goes without. */
      if (!k->creating && kiln__pch_intact(k) && kiln__headers_fresh(&k->headers)) {
        k->users++;
        k->last_use = ++kiln__pch_clock;
        snprintf(plan->path, sizeof plan->path, "%s", k->path);
        snprintf(plan->opt, sizeof plan->opt, "--use-pch=%s", k->path);
      } else if (!k->creating) {
        kiln__pch_forget(k); /* changed on disk, or a header it reaches did */
        free_slot = k;
        stale = 1;
        break;
      }
      pthread_mutex_unlock(&kiln__pch_lock);
      kiln__headers_free(&headers);
      return;
    }
    if (!k->live) free_slot = free_slot ? free_slot : k;
    else if (!k->users && !k->creating && (!oldest || k->last_use < oldest->last_use)) oldest = k;
  }
  /* A beginning seen for the first time compiles without: most are compiled once. One whose
   * PCH was just found stale is made again at once. */
  if (!stale && !kiln__pch_seen_before(key)) {
    pthread_mutex_unlock(&kiln__pch_lock);
    kiln__headers_free(&headers);
    plan->path[0] = '\0';
    return;
  }
  if (!free_slot && oldest) {
    kiln__pch_forget(oldest);
    free_slot = oldest;
  }
  int made = snprintf(folder, sizeof folder, "%s/pch", dir) < (int)sizeof folder &&
             (mkdir(folder, 0700) == 0 || errno == EEXIST) &&
             snprintf(plan->path, sizeof plan->path, "%s/%ld-%s.pch", folder, (long)getpid(), hex) <
                 (int)sizeof plan->path;
  if (free_slot && made) {
    free_slot->live = free_slot->creating = 1;
    memcpy(free_slot->key, key, sizeof key);
    snprintf(free_slot->path, sizeof free_slot->path, "%s", plan->path);
    free_slot->headers = headers;
    headers = (kiln__headers){0};
    free_slot->last_use = ++kiln__pch_clock;
    plan->creating = 1;
    snprintf(plan->opt, sizeof plan->opt, "--create-pch=%s", plan->path);
    unlink(plan->path); /* a file left by an earlier process of the same pid */
    if (!kiln__pch_exit_set) kiln__pch_exit_set = atexit(kiln__pch_at_exit) == 0;
  } else {
    plan->path[0] = '\0';
  }
  pthread_mutex_unlock(&kiln__pch_lock);
  kiln__headers_free(&headers);
}

int kiln__pch_refused(const char *log) {
  /* NVRTC's words when it cannot take a PCH file: it compiles without it and says so. */
  return log && (strstr(log, "PCH") || strstr(log, "precompiled header"));
}

/* After a compile with a lasting file: a made one is renamed to its key's name when whole
 * (NVRTC said nothing against it), a used one that NVRTC refused is removed. */
static void kiln__pch_done_lasting(kiln__pch_plan *plan, int compiled, const char *log) {
  struct stat st;
  int whole = compiled && !kiln__pch_refused(log);
  pthread_mutex_lock(&kiln__pch_lock);
  if (plan->creating) {
    if (whole && stat(plan->path, &st) == 0 && st.st_size > 0 &&
        rename(plan->path, plan->final) == 0)
      kiln__pch_created++;
    else unlink(plan->path);
  } else if (whole) {
    kiln__pch_used++;
  } else if (kiln__pch_refused(log)) {
    unlink(plan->path); /* what NVRTC here cannot take, no later run can */
  }
  pthread_mutex_unlock(&kiln__pch_lock);
  plan->opt[0] = '\0';
}

void kiln__pch_done(kiln__pch_plan *plan, int compiled, const char *log) {
  if (!plan->opt[0]) return;
  if (plan->final[0]) {
    kiln__pch_done_lasting(plan, compiled, log);
    return;
  }
  pthread_mutex_lock(&kiln__pch_lock);
  for (int i = 0; i < KILN__PCH_KEEP; i++) {
    kiln__pch_kept *k = &kiln__pch_table[i];
    if (!k->live || memcmp(k->key, plan->key, sizeof plan->key) != 0) continue;
    if (plan->creating) {
      struct stat st;
      if (compiled && !kiln__pch_refused(log) && stat(k->path, &st) == 0 && st.st_size > 0) {
        k->creating = 0;
        k->size = (uint64_t)st.st_size;
        k->inode = (uint64_t)st.st_ino;
        k->dev = (uint64_t)st.st_dev;
        k->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        kiln__pch_created++;
      } else {
        kiln__pch_forget(k);
      }
    } else {
      k->users--;
      if (kiln__pch_refused(log) && !k->users) kiln__pch_forget(k);
      else if (!kiln__pch_refused(log)) kiln__pch_used++;
    }
    break;
  }
  pthread_mutex_unlock(&kiln__pch_lock);
  kiln__headers_free(&plan->headers);
  plan->opt[0] = '\0';
}
