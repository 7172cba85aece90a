/* Opening NVRTC and finding the toolkit headers that go with it. */
#include "nvrtc.h"

#include "hash.h"

#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

kiln__nvrtc_table kiln__nvrtc;

static pthread_once_t kiln__nvrtc_once = PTHREAD_ONCE_INIT;
static kiln_status kiln__nvrtc_status = KILN_ERROR_NO_NVRTC; /* until it opens */
static char kiln__nvrtc_msg[1024];

/* Folders given by kiln_nvrtc_set_search_path (NVIDIA's wheels' lib folders, from Python):
 * read once, under the pthread_once that opens NVRTC, and by the note's name. */
static pthread_mutex_t kiln__search_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kiln__search_path;

int kiln__nvrtc_search_path(char *out, size_t cap) {
  pthread_mutex_lock(&kiln__search_lock);
  int n = snprintf(out, cap, "%s", kiln__search_path ? kiln__search_path : "");
  pthread_mutex_unlock(&kiln__search_lock);
  return n >= 0 && (size_t)n < cap;
}

kiln_status kiln_nvrtc_set_search_path(const char *dirs) {
  char *copy = NULL;
  if (dirs && *dirs && !(copy = strdup(dirs)))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the NVRTC search path");
  pthread_mutex_lock(&kiln__search_lock);
  char *old = kiln__search_path;
  kiln__search_path = copy;
  pthread_mutex_unlock(&kiln__search_lock);
  free(old);
  return KILN_OK;
}

/* NVRTC opens libnvrtc-builtins.so.X.Y by its soname when it first compiles; in a folder
 * off the loader path (NVIDIA's wheels put both in nvidia/cu13/lib) that fails, unless the
 * library is already loaded, which a soname lookup finds first. */
static void kiln__nvrtc_open_builtins(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  const char prefix[] = "libnvrtc-builtins.so.";
  for (struct dirent *e; (e = readdir(d));) {
    char path[PATH_MAX];
    if (strncmp(e->d_name, prefix, sizeof prefix - 1) != 0) continue;
    int n = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (n > 0 && (size_t)n < sizeof path) dlopen(path, RTLD_NOW | RTLD_LOCAL); /* kept open */
  }
  closedir(d);
}

/* Opens dir/soname, then the builtins library beside it; NULL when it does not open. */
static void *kiln__nvrtc_open_in(const char *dir, size_t len, const char *soname) {
  char path[PATH_MAX];
  int n = snprintf(path, sizeof path, "%.*s/%s", (int)len, dir, soname);
  if (n <= 0 || (size_t)n >= sizeof path || access(path, R_OK) != 0) return NULL;
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h) {
    path[len] = '\0';
    kiln__nvrtc_open_builtins(path);
  }
  return h;
}

/* KILN_NVRTC_PATH alone when set. Otherwise the newest NVRTC (libnvrtc.so.13, then .12), and
 * for each: the loader path, so that a machine whose loader finds NVRTC keeps it; the search
 * path (NVIDIA's pip wheels), which serves an environment with no toolkit; $CONDA_PREFIX/lib;
 * the toolkit folders. */
static void *kiln__nvrtc_open(char *tried, size_t tried_size) {
  const char *env = getenv("KILN_NVRTC_PATH");
  if (env && *env) {
    snprintf(tried, tried_size, "KILN_NVRTC_PATH=%s", env);
    void *h = dlopen(env, RTLD_NOW | RTLD_LOCAL);
    char dir[PATH_MAX];
    const char *slash = strrchr(env, '/');
    if (h && slash && (size_t)(slash - env) < sizeof dir) { /* its builtins, off the loader path */
      memcpy(dir, env, (size_t)(slash - env));
      dir[slash - env] = '\0';
      kiln__nvrtc_open_builtins(dir);
    }
    return h;
  }
  const char *sonames[] = {"libnvrtc.so.13", "libnvrtc.so.12"};
  const char *conda = getenv("CONDA_PREFIX");
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  char dir[PATH_MAX];
  void *h = NULL;
  for (size_t i = 0; i < KILN__COUNT(sonames) && !h; i++) {
    if ((h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL))) break;
    pthread_mutex_lock(&kiln__search_lock);
    for (const char *p = kiln__search_path; p && *p && !h;) {
      size_t len = strcspn(p, ":");
      if (len) h = kiln__nvrtc_open_in(p, len, sonames[i]);
      p += len + (p[len] == ':');
    }
    pthread_mutex_unlock(&kiln__search_lock);
    if (!h && conda && *conda && snprintf(dir, sizeof dir, "%s/lib", conda) < (int)sizeof dir)
      h = kiln__nvrtc_open_in(dir, strlen(dir), sonames[i]);
    for (size_t r = 0; r < KILN__COUNT(roots) && !h; r++) {
      if (roots[r] && *roots[r] &&
          snprintf(dir, sizeof dir, "%s/lib64", roots[r]) < (int)sizeof dir)
        h = kiln__nvrtc_open_in(dir, strlen(dir), sonames[i]);
    }
  }
  if (!h)
    snprintf(tried, tried_size,
             "libnvrtc.so.13 and libnvrtc.so.12 on the loader path, in NVIDIA's pip wheels "
             "(nvidia-cuda-nvrtc), under $CONDA_PREFIX/lib and under $CUDA_HOME, $CUDA_PATH "
             "and /usr/local/cuda");
  return h;
}

/* Joins a and b into out; 0 when it does not fit. */
static int kiln__join(char *out, size_t cap, const char *a, const char *b) {
  int n = snprintf(out, cap, "%s%s", a, b);
  return n >= 0 && (size_t)n < cap;
}

static int kiln__has_fp16_header(const char *dir) {
  char path[PATH_MAX];
  return kiln__join(path, sizeof path, dir, "/cuda_fp16.h") && access(path, R_OK) == 0;
}

/* The toolkit's include folder: beside the NVRTC that was loaded (lib/../include, which is
 * also CUDA 13's wheels' nvidia/cu13/include; CUDA 12's wheels' nvidia/cuda_runtime/include;
 * conda's targets/x86_64-linux/include), else under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda,
 * $CONDA_PREFIX. */
static void kiln__nvrtc_find_includes(void *symbol) {
  Dl_info info;
  char lib[PATH_MAX], cand[PATH_MAX];
  if (dladdr(symbol, &info) && info.dli_fname && realpath(info.dli_fname, lib)) {
    char *slash = strrchr(lib, '/');
    if (slash) {
      *slash = '\0';
      const char *rel[] = {"/../include", "/../../cuda_runtime/include",
                           "/../targets/x86_64-linux/include"};
      for (size_t i = 0; i < KILN__COUNT(rel); i++) {
        char real[PATH_MAX];
        if (kiln__join(cand, sizeof cand, lib, rel[i]) && realpath(cand, real) &&
            kiln__has_fp16_header(real) &&
            kiln__join(kiln__nvrtc.include_dir, sizeof kiln__nvrtc.include_dir, real, ""))
          return;
      }
    }
  }
  const char *conda = getenv("CONDA_PREFIX");
  char conda_targets[PATH_MAX];
  if (!conda || !*conda ||
      !kiln__join(conda_targets, sizeof conda_targets, conda, "/targets/x86_64-linux"))
    conda_targets[0] = '\0';
  const char *roots[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda", conda,
                         conda_targets};
  for (size_t r = 0; r < KILN__COUNT(roots); r++) {
    if (!roots[r] || !*roots[r]) continue;
    if (kiln__join(cand, sizeof cand, roots[r], "/include") && kiln__has_fp16_header(cand) &&
        kiln__join(kiln__nvrtc.include_dir, sizeof kiln__nvrtc.include_dir, cand, ""))
      return;
  }
}

static void kiln__nvrtc_load_once(void) {
  char tried[512];
  void *h = kiln__nvrtc_open(tried, sizeof tried);
  if (!h) {
    snprintf(kiln__nvrtc_msg, sizeof kiln__nvrtc_msg,
             "NVRTC could not be loaded (tried %s); install the CUDA toolkit's NVRTC or set "
             "KILN_NVRTC_PATH to libnvrtc.so",
             tried);
    kiln__nvrtc_status = KILN_ERROR_NO_NVRTC;
    return;
  }
  struct {
    const char *name;
    void **slot;
  } symbols[] = {
#define KILN__SYMBOL(member) {"nvrtc" #member, (void **)&kiln__nvrtc.member}
      KILN__SYMBOL(GetErrorString),
      KILN__SYMBOL(Version),
      KILN__SYMBOL(GetNumSupportedArchs),
      KILN__SYMBOL(GetSupportedArchs),
      KILN__SYMBOL(CreateProgram),
      KILN__SYMBOL(DestroyProgram),
      KILN__SYMBOL(CompileProgram),
      KILN__SYMBOL(GetPTXSize),
      KILN__SYMBOL(GetPTX),
      KILN__SYMBOL(GetCUBINSize),
      KILN__SYMBOL(GetCUBIN),
      KILN__SYMBOL(GetProgramLogSize),
      KILN__SYMBOL(GetProgramLog),
      KILN__SYMBOL(AddNameExpression),
      KILN__SYMBOL(GetLoweredName),
#undef KILN__SYMBOL
  };
  for (size_t i = 0; i < KILN__COUNT(symbols); i++) {
    *symbols[i].slot = dlsym(h, symbols[i].name);
    if (!*symbols[i].slot) {
      snprintf(kiln__nvrtc_msg, sizeof kiln__nvrtc_msg,
               "the NVRTC that was loaded has no %s; kiln needs NVRTC 12 or newer",
               symbols[i].name);
      kiln__nvrtc_status = KILN_ERROR_NO_NVRTC;
      return;
    }
  }
  kiln__nvrtc.Version(&kiln__nvrtc.major, &kiln__nvrtc.minor);
  int n = 0;
  if (kiln__nvrtc.GetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0 ||
      !(kiln__nvrtc.archs = calloc((size_t)n, sizeof(int))) ||
      kiln__nvrtc.GetSupportedArchs(kiln__nvrtc.archs) != NVRTC_SUCCESS) {
    snprintf(kiln__nvrtc_msg, sizeof kiln__nvrtc_msg,
             "NVRTC %d.%d did not list the architectures it supports", kiln__nvrtc.major,
             kiln__nvrtc.minor);
    kiln__nvrtc_status = KILN_ERROR_NO_NVRTC;
    return;
  }
  kiln__nvrtc.n_archs = n;
  /* Two builds of one NVRTC version can differ (a patch release fixing codegen); the size of
   * the library tells them apart for the cache key at the cost of one stat. */
  Dl_info info;
  struct stat st;
  if (dladdr(*symbols[0].slot, &info) && info.dli_fname && stat(info.dli_fname, &st) == 0) {
    kiln__nvrtc.lib_bytes = (uint64_t)st.st_size;
    if (!realpath(info.dli_fname, kiln__nvrtc.lib_path)) kiln__nvrtc.lib_path[0] = '\0';
  }
  kiln__nvrtc_find_includes(*symbols[0].slot);
  /* CCCL (CUB, Thrust, <cuda/std/...>): include/cccl from CUDA 13 on (the toolkit's, and the
   * nvidia-cuda-cccl wheel's nvidia/cu13/include/cccl); CUDA 12's wheel keeps it in
   * nvidia/cuda_cccl/include, beside the runtime's nvidia/cuda_runtime/include. */
  char cccl[PATH_MAX];
  if (kiln__nvrtc.include_dir[0] &&
      ((kiln__join(cccl, sizeof cccl, kiln__nvrtc.include_dir, "/cccl") &&
        access(cccl, R_OK) == 0) ||
       (kiln__join(cccl, sizeof cccl, kiln__nvrtc.include_dir, "/../../cuda_cccl/include/cub") &&
        access(cccl, R_OK) == 0 &&
        kiln__join(cccl, sizeof cccl, kiln__nvrtc.include_dir, "/../../cuda_cccl/include"))))
    kiln__join(kiln__nvrtc.cccl_dir, sizeof kiln__nvrtc.cccl_dir, cccl, "");
  __atomic_store_n(&kiln__nvrtc_status, KILN_OK, __ATOMIC_RELEASE);
}

const char *kiln__nvrtc_opened(void) {
  if (__atomic_load_n(&kiln__nvrtc_status, __ATOMIC_ACQUIRE) != KILN_OK) return NULL;
  return kiln__nvrtc.lib_path[0] ? kiln__nvrtc.lib_path : NULL;
}

kiln_status kiln__nvrtc_load(void) {
  pthread_once(&kiln__nvrtc_once, kiln__nvrtc_load_once);
  if (KILN__LIKELY(kiln__nvrtc_status == KILN_OK)) return KILN_OK;
  return kiln__fail(kiln__nvrtc_status, "%s", kiln__nvrtc_msg);
}

kiln_status kiln_nvrtc_where(const char **lib, const char **include_dir, const char **cccl_dir) {
  kiln_status s = kiln__nvrtc_load();
  if (s) return s;
  if (lib) *lib = kiln__nvrtc.lib_path;
  if (include_dir) *include_dir = kiln__nvrtc.include_dir;
  if (cccl_dir) *cccl_dir = kiln__nvrtc.cccl_dir;
  return KILN_OK;
}

int kiln__nvrtc_clamp_arch(const kiln__nvrtc_id *id, int want) {
  int best = 0;
  for (int i = 0; i < id->n_archs; i++)
    if (id->archs[i] <= want && id->archs[i] > best) best = id->archs[i];
  return best;
}

/* ---- Knowing NVRTC without opening it ------------------------------------------------------ */

static pthread_mutex_t kiln__id_lock = PTHREAD_MUTEX_INITIALIZER;
static int kiln__id_known;
static kiln__nvrtc_id kiln__id;

static int kiln__nvrtc_open_now(void) {
  return __atomic_load_n(&kiln__nvrtc_status, __ATOMIC_ACQUIRE) == KILN_OK;
}

static void kiln__id_of_open(kiln__nvrtc_id *id) {
  memset(id, 0, sizeof *id);
  id->major = kiln__nvrtc.major;
  id->minor = kiln__nvrtc.minor;
  id->lib_bytes = kiln__nvrtc.lib_bytes;
  for (int i = 0; i < kiln__nvrtc.n_archs && id->n_archs < KILN__MAX_ARCHS; i++)
    id->archs[id->n_archs++] = kiln__nvrtc.archs[i];
}

int kiln__nvrtc_is(const kiln__nvrtc_id *id) {
  if (!kiln__nvrtc_open_now()) return 0;
  kiln__nvrtc_id open;
  kiln__id_of_open(&open);
  return memcmp(&open, id, sizeof open) == 0;
}

/* The note's name: a digest of the environment that steers which NVRTC opens. */
static int kiln__note_path(char *out, size_t cap, const char *dir) {
  const char *names[] = {"KILN_NVRTC_PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
                         "CONDA_PREFIX"};
  kiln__hasher *h;
  if (kiln__hash_begin(&h)) return 0;
  for (size_t i = 0; i < KILN__COUNT(names); i++) kiln__hash_string(h, getenv(names[i]));
  pthread_mutex_lock(&kiln__search_lock);
  kiln__hash_string(h, kiln__search_path);
  pthread_mutex_unlock(&kiln__search_lock);
  unsigned char key[KILN__KEY_SIZE];
  char hex[2 * KILN__KEY_SIZE + 1];
  if (kiln__hash_end(h, key)) return 0;
  kiln__hash_hex(key, hex);
  int n = snprintf(out, cap, "%s/nvrtc-%.16s", dir, hex);
  return n > 0 && (size_t)n < cap;
}

/* What the note checks: the library file and the loader's cache (ldconfig rewrites it when a
 * library is installed that could now be found first). */
static void kiln__file_stamp(const char *path, long long stamp[3]) {
  struct stat st;
  stamp[0] = stamp[1] = stamp[2] = -1;
  if (stat(path, &st) == 0) {
    stamp[0] = (long long)st.st_size;
    stamp[1] = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    stamp[2] = (long long)st.st_ino;
  }
}

/* The next of the note's numbers, a space or newline before it: 0 at anything else. Not
 * sscanf: a new process's first disk hit reads the note, and there a dozen cold sscanf calls
 * took 15 to 23 us, this loop under a microsecond. */
static int kiln__note_number(const char **p, long long lo, long long hi, long long *out) {
  const char *s = *p;
  while (*s == ' ' || *s == '\n') s++;
  int negative = *s == '-';
  if (negative) s++;
  if (*s < '0' || *s > '9') return 0;
  unsigned long long v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (ULLONG_MAX - (unsigned)(*s - '0')) / 10) return 0;
    v = v * 10 + (unsigned)(*s - '0');
  }
  if (v > (unsigned long long)LLONG_MAX) return 0;
  long long n = negative ? -(long long)v : (long long)v;
  if (n < lo || n > hi) return 0;
  *out = n;
  *p = s;
  return 1;
}

static int kiln__note_read(const char *note, kiln__nvrtc_id *id) {
  char text[2048], lib[PATH_MAX];
  /* Not through a symlink, not waiting on a FIFO planted there, and no more than a note. */
  int fd = open(note, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return 0;
  struct stat st;
  ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? pread(fd, text, sizeof text - 1, 0) : -1;
  close(fd);
  if (n < 0) return 0;
  text[n] = '\0';
  long long lib_stamp[3], cache_stamp[3], now[3];
  memset(id, 0, sizeof *id);
  char *nl = strchr(text, '\n');
  if (strncmp(text, "kiln nvrtc note 1\n", 18) != 0 || !nl || !(nl = strchr(nl + 1, '\n')))
    return 0;
  size_t len = (size_t)(nl - (text + 18));
  if (len == 0 || len >= sizeof lib) return 0;
  memcpy(lib, text + 18, len);
  lib[len] = '\0';
  /* The two files' stamps (size, mtime in ns, inode; -1 for a missing file), the version, the
   * library's size and the archs. */
  const char *p = nl + 1;
  long long v[4];
  for (int i = 0; i < 3; i++)
    if (!kiln__note_number(&p, -LLONG_MAX, LLONG_MAX, &lib_stamp[i])) return 0;
  for (int i = 0; i < 3; i++)
    if (!kiln__note_number(&p, -LLONG_MAX, LLONG_MAX, &cache_stamp[i])) return 0;
  if (!kiln__note_number(&p, 0, INT_MAX, &v[0]) || !kiln__note_number(&p, 0, INT_MAX, &v[1]) ||
      !kiln__note_number(&p, 0, LLONG_MAX, &v[2]) ||
      !kiln__note_number(&p, 1, KILN__MAX_ARCHS, &v[3]))
    return 0;
  id->major = (int)v[0];
  id->minor = (int)v[1];
  id->lib_bytes = (unsigned long long)v[2];
  id->n_archs = (int)v[3];
  for (int i = 0; i < id->n_archs; i++) {
    long long arch;
    if (!kiln__note_number(&p, 0, INT_MAX, &arch)) return 0;
    id->archs[i] = (int)arch;
  }
  kiln__file_stamp(lib, now);
  if (memcmp(now, lib_stamp, sizeof now) != 0 || now[0] < 0) return 0;
  kiln__file_stamp("/etc/ld.so.cache", now);
  return memcmp(now, cache_stamp, sizeof now) == 0;
}

static void kiln__note_write(const char *note) {
  if (!kiln__nvrtc.lib_path[0]) return;
  long long lib[3], cache[3];
  kiln__file_stamp(kiln__nvrtc.lib_path, lib);
  kiln__file_stamp("/etc/ld.so.cache", cache);
  char tmp[PATH_MAX + 32];
  if (snprintf(tmp, sizeof tmp, "%s.%ld.tmp", note, (long)getpid()) >= (int)sizeof tmp) return;
  /* A fresh file of its own: a symlink or FIFO planted at the name is not written through. */
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  FILE *f = fd < 0 ? NULL : fdopen(fd, "w");
  if (!f) {
    if (fd >= 0) close(fd), unlink(tmp);
    return;
  }
  fprintf(f, "kiln nvrtc note 1\n%s\n%lld %lld %lld %lld %lld %lld %d %d %llu %d",
          kiln__nvrtc.lib_path, lib[0], lib[1], lib[2], cache[0], cache[1], cache[2],
          kiln__nvrtc.major, kiln__nvrtc.minor, (unsigned long long)kiln__nvrtc.lib_bytes,
          kiln__nvrtc.n_archs);
  for (int i = 0; i < kiln__nvrtc.n_archs; i++) fprintf(f, " %d", kiln__nvrtc.archs[i]);
  fputc('\n', f);
  if (fclose(f) != 0 || rename(tmp, note) != 0) unlink(tmp);
}

int kiln__nvrtc_known(kiln__nvrtc_id *out) {
  if (!__atomic_load_n(&kiln__id_known, __ATOMIC_ACQUIRE)) return 0;
  *out = kiln__id; /* written once, before the flag */
  return 1;
}

const kiln__nvrtc_id *kiln__nvrtc_known_id(void) {
  return __atomic_load_n(&kiln__id_known, __ATOMIC_ACQUIRE) ? &kiln__id : NULL;
}

kiln_status kiln__nvrtc_identify(const char *note_dir, int may_write, kiln__nvrtc_id *out) {
  pthread_mutex_lock(&kiln__id_lock);
  kiln_status s = KILN_OK;
  if (!kiln__id_known) {
    char note[PATH_MAX];
    int have_note = note_dir && kiln__note_path(note, sizeof note, note_dir);
    int known = 0;
    if (kiln__nvrtc_open_now()) {
      kiln__id_of_open(&kiln__id);
      known = 1;
    } else if (have_note && kiln__note_read(note, &kiln__id)) {
      known = 1;
    } else if (!(s = kiln__nvrtc_load())) {
      kiln__id_of_open(&kiln__id);
      known = 1;
      if (have_note && may_write) kiln__note_write(note);
    }
    __atomic_store_n(&kiln__id_known, known, __ATOMIC_RELEASE);
  }
  if (!s) *out = kiln__id;
  pthread_mutex_unlock(&kiln__id_lock);
  return s;
}
