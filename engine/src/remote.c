/* Compiling in kiln-nvrtc, the compile helper.
 *
 * NVRTC writes a precompiled header as an image of its own heap and takes it back only at the
 * same address (pch.c). A process that loads kiln finds NVRTC wherever its history and the
 * randomised address space put it, so its PCH files serve it alone, and every new process
 * compiles a kernel that includes CUB from scratch (over a second). kiln-nvrtc is a small
 * program that turns address randomisation off for itself (personality, then it executes
 * itself again), lets no allocation of its own move the mappings NVRTC makes (malloc keeps to
 * the heap), opens NVRTC, and compiles the one source its parent writes to its standard input:
 * each run lays NVRTC out at the same addresses, and the PCH files of one run (kept in the
 * cache folder as lasting files) serve every later one.
 *
 * A compile goes to the helper when it could use a PCH (a cache folder, and a source that
 * begins with #include lines), and when another compile runs NVRTC in this process at the same
 * time: NVRTC does much of its work one compile at a time within a process, so compiles from
 * several threads gain little over one by one (16 small kernels from 16 threads took 0.39-0.51
 * of the serial time on a 16-core H200 host), where as many warm processes take 0.09-0.15 of
 * it. The rest compile in the process, where nothing is gained by a second one. The helper answers
 * with what kiln__compile gives: the status and its sentence, the code, the log, and the PCH
 * counts. It runs the same NVRTC as the process would: the same environment,
 * kiln_nvrtc_set_search_path's folders, and the identity the cache key was made with, which the
 * helper checks. A helper that cannot start, dies or answers nonsense is not tried again in this
 * process, whose compiles run as if there were none; one killed by a signal while compiling is
 * reported as NVRTC's crash, not retried here (the same crash would end this process).
 *
 * The messages on the socket are wire.h's fields, each message after its u64 length; the code in
 * an answer is written as a cache entry holds it (entry.c), and read back with the same checks. */
#include "remote.h"

#include "dup.h"
#include "entry.h"
#include "hash.h"
#include "nvrtc.h"
#include "pch.h"
#include "stdheaders.h"
#include "wire.h"

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define KILN__REMOTE_ASK 0x6b6e7631u    /* "knv1": a request */
#define KILN__REMOTE_ANSWER 0x6b6e7641u /* "knvA": its answer */
/* The most a request or an answer may claim to hold: more is nonsense, not a kernel. */
#define KILN__REMOTE_MAX ((uint64_t)1 << 32)
/* A helper with no request for this long ends. */
#define KILN__REMOTE_IDLE_MS 60000
/* Idle helpers a process keeps, ready for its next compiles (one per compile at once): as
 * many as the machine has cores, within these bounds. */
#define KILN__REMOTE_KEEP_MIN 4
#define KILN__REMOTE_KEEP 64
/* The lasting helper of a cache folder (see "The lasting helper" below): it ends after this
 * long with no compile, or within a second of its socket being removed (cache clear). */
#define KILN__SERVER_IDLE_S 600
/* How long a process waits for the lasting helper's greeting: one busy with another process's
 * compile gives none, and the process asks a helper of its own instead. */
#define KILN__SERVER_HELLO_MS 20
/* A connection with no request for this long is closed, so that no process holds the lasting
 * helper from the others. */
#define KILN__SERVER_QUIET_MS 10000

static pthread_mutex_t kiln__remote_lock = PTHREAD_MUTEX_INITIALIZER;
static char *kiln__remote_path; /* set by kiln_nvrtc_set_helper; NULL: $KILN_NVRTC_HELPER */
static int kiln__remote_broken, kiln__remote_serving;
/* Set once a helper said it cannot turn address randomisation off (a seccomp profile that
 * refuses the personality call): its PCH files would serve no later run, so compiles that could
 * use one run in the process; crowded compiles still go to helpers. */
static int kiln__remote_unfixed;

kiln_status kiln_nvrtc_set_helper(const char *path) {
  char *copy = path && *path ? kiln__dup_str(path) : NULL;
  if (path && *path && !copy)
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the helper's path");
  pthread_mutex_lock(&kiln__remote_lock);
  free(kiln__remote_path);
  kiln__remote_path = copy;
  kiln__remote_broken = 0;
  __atomic_store_n(&kiln__remote_unfixed, 0, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&kiln__remote_lock);
  kiln__clear_error();
  return KILN_OK;
}

/* ---- The messages ------------------------------------------------------------------------- */

/* A list of strings: a count, then each. */
static void kiln__put_strs(kiln__wire_out *w, const char *const *v, int n) {
  kiln__wire_put_u32(w, (uint32_t)(n > 0 ? n : 0));
  for (int i = 0; i < n; i++) kiln__wire_put_str(w, v[i]);
}

static char **kiln__get_strs(kiln__wire_in *r, int *n_out) {
  int n = kiln__wire_get_count(r, 8); /* each string takes its length at least */
  *n_out = 0;
  char **v = r->why ? NULL : calloc((size_t)n + 1, sizeof *v);
  if (!v) {
    kiln__wire_bad(r, "out of memory reading it");
    return NULL;
  }
  for (int i = 0; i < n && !r->why; i++) v[i] = kiln__wire_get_str(r);
  *n_out = n;
  return v;
}

static void kiln__strs_free(char **v, int n) {
  if (!v) return;
  for (int i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* ---- The helper's side -------------------------------------------------------------------- */

/* 1 once address randomisation is off for this process, after executing itself again to turn
 * it off where it was on; 0 where that cannot be done (the helper then compiles all the same,
 * and its PCH files serve no later run: NVRTC refuses them and compiles without). */
static int kiln__remote_fix_layout(char **argv) {
  int p = personality(0xffffffff);
  if (p == -1) return 0;
  if (p & ADDR_NO_RANDOMIZE) return 1;
  if (getenv("KILN__NVRTC_AGAIN")) return 0; /* executed again, and still randomised */
  if (personality((unsigned long)p | ADDR_NO_RANDOMIZE) == -1) return 0;
  setenv("KILN__NVRTC_AGAIN", "1", 1);
  execv("/proc/self/exe", argv);
  return 0;
}

/* Writes all of p; -1 when the other end is gone (no SIGPIPE: MSG_NOSIGNAL). */
static int kiln__send_all(int fd, const unsigned char *p, size_t n) {
  while (n) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads exactly n bytes; 0, 1 at the end of the stream before any byte, -1 on failure or an
 * end within. */
static int kiln__recv_all(int fd, unsigned char *p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = recv(fd, p + got, n - got, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) return got ? -1 : 1;
    got += (size_t)r;
  }
  return 0;
}

/* One message: its length (u64), then its bytes. */
static int kiln__send_message(int fd, const kiln__wire_out *w) {
  unsigned char len[8];
  for (int i = 0; i < 8; i++) len[i] = (unsigned char)((uint64_t)w->n >> (8 * i));
  return kiln__send_all(fd, len, 8) || kiln__send_all(fd, w->p, w->n) ? -1 : 0;
}

/* The next message into *out (malloc'd); 0, 1 at the end of the stream, -1 on failure. */
static int kiln__recv_message(int fd, unsigned char **out, size_t *size) {
  unsigned char len[8];
  int r = kiln__recv_all(fd, len, 8);
  if (r) return r;
  uint64_t n = 0;
  for (int i = 0; i < 8; i++) n |= (uint64_t)len[i] << (8 * i);
  if (n > KILN__REMOTE_MAX) return -1;
  unsigned char *p = malloc(n ? (size_t)n : 1);
  if (!p) return -1;
  if (kiln__recv_all(fd, p, (size_t)n) != 0) {
    free(p);
    return -1;
  }
  *out = p;
  *size = (size_t)n;
  return 0;
}

/* Answers one request: the compile it asks for, as kiln__compile does it here. */
static void kiln__remote_serve(const unsigned char *req, size_t req_size, int fixed,
                               kiln_status loaded, kiln__wire_out *w) {
  kiln__wire_in r = {req, req_size, NULL};
  kiln__nvrtc_id want;
  memset(&want, 0, sizeof want);
  int n_opt = 0, n_inc = 0, n_names = 0, n_hn = 0, n_hs = 0;
  int ask = kiln__wire_get_u32(&r) == KILN__REMOTE_ASK;
  size_t id_size = 0;
  char *id = kiln__wire_get_blob(&r, &id_size);
  char *src = kiln__wire_get_str(&r), *arch = kiln__wire_get_str(&r);
  char *dir = kiln__wire_get_str(&r), *cwd = kiln__wire_get_str(&r);
  unsigned flags = kiln__wire_get_u32(&r);
  char **options = kiln__get_strs(&r, &n_opt), **includes = kiln__get_strs(&r, &n_inc);
  char **names = kiln__get_strs(&r, &n_names);
  char **header_names = kiln__get_strs(&r, &n_hn), **header_sources = kiln__get_strs(&r, &n_hs);
  kiln_status s = loaded;
  if (!ask || r.why || r.left || id_size != sizeof want || n_hn != n_hs)
    s = kiln__fail(KILN_ERROR_INVALID, "the compile helper could not read the request");
  else memcpy(&want, id, sizeof want);
  if (!s && !kiln__nvrtc_is(&want))
    s = kiln__fail(KILN_ERROR_NO_NVRTC, "the compile helper opened another NVRTC (%s)",
                   kiln__nvrtc.lib_path);
  /* The process's working folder, which relative include folders and NVRTC's quoted includes
   * are found from: a kept helper has the one of its first compile. */
  if (!s && *cwd && chdir(cwd) != 0)
    s = kiln__fail(KILN_ERROR_INVALID, "the compile helper cannot enter the working folder %s",
                   cwd);
  kiln__code code;
  memset(&code, 0, sizeof code);
  uint64_t created0 = 0, used0 = 0, created = 0, used = 0;
  kiln__pch_counts(&created0, &used0);
  if (!s) {
    kiln_compile_opts opts = {
        .options = (const char *const *)options,
        .n_options = n_opt,
        .include_dirs = (const char *const *)includes,
        .n_include_dirs = n_inc,
        .name_expressions = (const char *const *)names,
        .n_name_expressions = n_names,
        .header_names = (const char *const *)header_names,
        .header_sources = (const char *const *)header_sources,
        .n_headers = n_hn,
        .flags = flags,
    };
    s = kiln__compile(src, &opts, arch, *dir ? dir : NULL, cwd, &code);
  }
  kiln__pch_counts(&created, &used);
  kiln__wire_put_u32(w, KILN__REMOTE_ANSWER);
  kiln__wire_put_u32(w, (uint32_t)s);
  kiln__wire_put_str(w, s ? kiln_last_error() : "");
  kiln__wire_put_u32(w, (uint32_t)fixed);
  kiln__wire_put_u64(w, created - created0);
  kiln__wire_put_u64(w, used - used0);
  kiln__wire_put_u32(w, (uint32_t)code.pch);
  uint64_t seconds;
  memcpy(&seconds, &code.seconds, sizeof seconds);
  kiln__wire_put_u64(w, seconds);
  /* The code as a cache entry holds it, when there is code; a compile error has its log. */
  if (!s) {
    kiln__entry_put_code(w, &code);
  } else {
    kiln__wire_put_str(w, code.arch);
    kiln__wire_put_str(w, code.log);
  }
  kiln__compile_free_code(&code);
  kiln__strs_free(options, n_opt);
  kiln__strs_free(includes, n_inc);
  kiln__strs_free(names, n_names);
  kiln__strs_free(header_names, n_hn);
  kiln__strs_free(header_sources, n_hs);
  free(id);
  free(src);
  free(arch);
  free(dir);
  free(cwd);
}

/* Answers the requests read from in on out until in's other end closes or none comes for
 * idle_ms: 0, or the exit status of a failure. */
static int kiln__remote_session(int in, int out, int idle_ms, int fixed, kiln_status loaded) {
  for (;;) {
    struct pollfd pfd = {.fd = in, .events = POLLIN};
    int ready;
    while ((ready = poll(&pfd, 1, idle_ms)) < 0 && errno == EINTR) {}
    if (ready <= 0) return 0;
    unsigned char *req = NULL;
    size_t req_size = 0;
    int r = kiln__recv_message(in, &req, &req_size);
    if (r) return r > 0 ? 0 : 3;
    kiln__wire_out w = {0};
    kiln__remote_serve(req, req_size, fixed, loaded, &w);
    free(req);
    int sent = !w.oom && kiln__send_message(out, &w) == 0;
    free(w.p);
    if (!sent) return 5;
  }
}

static kiln_status kiln__remote_load(void) {
  const char *search = getenv("KILN__NVRTC_SEARCH");
  if (search && *search) kiln_nvrtc_set_search_path(search);
  return kiln__nvrtc_load();
}

/* ---- The lasting helper ------------------------------------------------------------------
 *
 * A helper's first use of a PCH file reads its hundreds of MiB into fresh memory, which on some
 * hosts costs twice the compile that uses it (an H200's host: 0.43-0.53 s against 0.2 s in a
 * helper that had used it before). So besides the helpers a process starts for itself, each
 * cache folder has one lasting helper, `kiln-nvrtc --serve <socket>`: detached from the process
 * that started it (a session of its own, its standard streams /dev/null), listening on
 * <cache>/pch/nvrtc-<tag>.sock (the tag: the helper's path and NVRTC's identity), taking one
 * connection at a time from processes of its own user, and ending after KILN__SERVER_IDLE_S
 * without a compile or once its socket is gone. A process asks it first, one connection per
 * compile; when it is busy (no greeting at once), the process asks a helper of its own. So the
 * next process's edit of a kernel with heavy headers meets NVRTC with the PCH in warm memory.
 * KILN_NVRTC_SERVER=0 turns it off. */

/* NVRTC writes its temporary files in $TMPDIR. The lasting helper has the environment of the
 * process that started it, which may have removed its TMPDIR since (a test's own folder): the
 * compiles of every process after it would fail. Where TMPDIR is no folder now, the helper
 * takes the system's, as NVRTC does with none set. */
static void kiln__server_check_tmpdir(void) {
  const char *tmp = getenv("TMPDIR");
  struct stat st;
  if (tmp && (stat(tmp, &st) != 0 || !S_ISDIR(st.st_mode))) unsetenv("TMPDIR");
}

/* The lasting helper's loop on sock: 0 when it ends (idle, its socket removed or taken). */
static int kiln__server_main(const char *sock, int fixed) {
  /* The spawner waits for this first process alone, which ends once the helper it forks
   * listens (or found another listening): the spawner then connects at once. */
  int ready[2];
  if (pipe(ready) != 0) return 1;
  pid_t child = fork();
  if (child < 0) return 1;
  if (child > 0) {
    close(ready[1]);
    unsigned char byte;
    ssize_t got;
    while ((got = read(ready[0], &byte, 1)) < 0 && errno == EINTR) {}
    _exit(got == 1 ? 0 : 1);
  }
  close(ready[0]);
  setsid();
  if (chdir("/") != 0) return 1; /* holds no folder of the process; each request enters its own */
  long max_fd = sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (max_fd > 0 && max_fd < 65536 ? max_fd : 4096); fd++)
    if (fd != ready[1]) close((int)fd);
  const unsigned char byte = 1;
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  if (strlen(sock) >= sizeof a.sun_path) return 1;
  memcpy(a.sun_path, sock, strlen(sock));
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) return 1;
  mode_t mask = umask(077);
  int bound = bind(lfd, (struct sockaddr *)&a, sizeof a);
  umask(mask);
  struct stat mine;
  int listening = bound == 0 && listen(lfd, 8) == 0 && stat(sock, &mine) == 0;
  int another = !listening && errno == EADDRINUSE;
  /* NVRTC is loaded before the spawner hears: it connects at once and waits only
   * KILN__SERVER_HELLO_MS for the greeting, which a helper still loading NVRTC (10-20 ms, more
   * on a busy machine or under a sanitizer) would not give in time. */
  kiln_status loaded = listening ? kiln__remote_load() : KILN_OK;
  if (listening || another) /* there is one to connect to: this, or another's */
    while (write(ready[1], &byte, 1) < 0 && errno == EINTR) {}
  close(ready[1]);
  if (!listening) {
    close(lfd);
    return 0;
  }
  kiln__pch_set_lasting(fixed);
  for (int idle_s = 0; idle_s < KILN__SERVER_IDLE_S;) {
    struct pollfd pfd = {.fd = lfd, .events = POLLIN};
    int waiting = poll(&pfd, 1, 1000);
    struct stat now;
    if (stat(sock, &now) != 0 || now.st_ino != mine.st_ino || now.st_dev != mine.st_dev)
      break; /* removed (cache clear) or another's now */
    if (waiting <= 0) {
      idle_s += waiting == 0;
      continue;
    }
    int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
    if (c < 0) continue;
    kiln__server_check_tmpdir();
    struct ucred who;
    socklen_t len = sizeof who;
    const unsigned char hello = 'k';
    /* A message begun and never finished, or an answer never read, ends the connection rather
     * than holding the helper from every other process. */
    struct timeval stall = {KILN__SERVER_QUIET_MS / 1000, 0};
    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &who, &len) == 0 && who.uid == geteuid() &&
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &stall, sizeof stall) == 0 &&
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &stall, sizeof stall) == 0 &&
        kiln__send_all(c, &hello, 1) == 0)
      kiln__remote_session(c, c, KILN__SERVER_QUIET_MS, fixed, loaded);
    close(c);
    idle_s = 0;
  }
  struct stat now;
  if (stat(sock, &now) == 0 && now.st_ino == mine.st_ino && now.st_dev == mine.st_dev) unlink(sock);
  close(lfd);
  return 0;
}

int kiln__remote_main(int argc, char **argv) {
  int fixed = kiln__remote_fix_layout(argv);
  /* Large allocations from the heap, not from mmap: a source or header read before NVRTC maps
   * its own heap would otherwise move where that lands. */
  mallopt(M_MMAP_MAX, 0);
  kiln__remote_serving = 1;
  signal(SIGPIPE, SIG_IGN);
  if (argc == 3 && strcmp(argv[1], "--serve") == 0) return kiln__server_main(argv[2], fixed);
  kiln_status loaded = kiln__remote_load();
  kiln__pch_set_lasting(fixed);
  /* Requests until the process's end of the socket closes, or none came for a while: an idle
   * helper gives back its memory (NVRTC and the PCH it read hold hundreds of MiB). */
  return kiln__remote_session(0, 1, KILN__REMOTE_IDLE_MS, fixed, loaded);
}

/* ---- The process's side ------------------------------------------------------------------- */

/* The helper to run, or NULL: none set, this is the helper, or it failed before. */
static char *kiln__remote_helper(void) {
  if (kiln__remote_serving) return NULL;
  pthread_mutex_lock(&kiln__remote_lock);
  char *path = NULL;
  if (!kiln__remote_broken) {
    const char *env = getenv("KILN_NVRTC_HELPER");
    const char *use = env && *env ? env : kiln__remote_path;
    if (use && strcmp(use, "0") != 0 && strcmp(use, "off") != 0) path = kiln__dup_str(use);
  }
  pthread_mutex_unlock(&kiln__remote_lock);
  return path;
}

/* Stops using the helper in this process; says why once, unless why is NULL (nothing is
 * wrong, there is only nothing to gain). */
static void kiln__remote_give_up(const char *path, const char *why) {
  pthread_mutex_lock(&kiln__remote_lock);
  int first = !kiln__remote_broken;
  kiln__remote_broken = 1;
  pthread_mutex_unlock(&kiln__remote_lock);
  if (first && why)
    kiln__warn("the compile helper %s %s; compiles run in this process from now on, and "
               "their precompiled headers serve it alone",
               path, why);
}

/* environ with the helper's own variables: the NVRTC this process opened, if it did, and the
 * search path; a NULL-terminated array whose strings are environ's or owned[0..1]. */
static char **kiln__remote_env(char *owned[2]) {
  size_t n = 0;
  while (environ && environ[n]) n++;
  char **env = calloc(n + 3, sizeof *env);
  if (!env) return NULL;
  size_t k = 0;
  const char *lib = kiln__nvrtc_opened();
  for (size_t i = 0; i < n; i++) {
    if (lib && !strncmp(environ[i], "KILN_NVRTC_PATH=", 16)) continue;
    if (!strncmp(environ[i], "KILN__NVRTC_", 12)) continue;
    env[k++] = environ[i];
  }
  char search[4096];
  if (lib && (owned[0] = malloc(strlen(lib) + 17))) {
    sprintf(owned[0], "KILN_NVRTC_PATH=%s", lib);
    env[k++] = owned[0];
  }
  if (kiln__nvrtc_search_path(search, sizeof search) && search[0] &&
      (owned[1] = malloc(strlen(search) + 20))) {
    sprintf(owned[1], "KILN__NVRTC_SEARCH=%s", search);
    env[k++] = owned[1];
  }
  env[k] = NULL;
  return env;
}

/* A helper started and its end of the socket. */
typedef struct kiln__helper {
  pid_t pid;
  int fd;
} kiln__helper;

/* The idle helpers of this process, all started from kiln__remote_idle_path
 * (kiln__remote_owner: a forked child keeps none of them). */
static kiln__helper kiln__remote_idle[KILN__REMOTE_KEEP];
static int kiln__remote_n_idle;
static pid_t kiln__remote_owner;
static char kiln__remote_idle_path[PATH_MAX];

static void kiln__helper_end(kiln__helper *h, int *status) {
  close(h->fd);
  int st = 0;
  pid_t done;
  while ((done = waitpid(h->pid, &st, 0)) < 0 && errno == EINTR) {}
  if (status) *status = done == h->pid ? st : 0;
}

/* An idle helper of this process started from path, or 0 when there is none. */
static int kiln__helper_take(const char *path, kiln__helper *out) {
  pthread_mutex_lock(&kiln__remote_lock);
  if (kiln__remote_owner != getpid()) { /* a forked child: the sockets are its parent's */
    for (int i = 0; i < kiln__remote_n_idle; i++) close(kiln__remote_idle[i].fd);
    kiln__remote_n_idle = 0;
    kiln__remote_owner = getpid();
  }
  /* Another helper now: the old ones end, taken off the list before the lock is let go, so
   * that a thread that comes meanwhile neither ends them again nor takes one. */
  kiln__helper old[KILN__REMOTE_KEEP];
  int n_old = 0;
  if (strcmp(kiln__remote_idle_path, path) != 0) {
    n_old = kiln__remote_n_idle;
    memcpy(old, kiln__remote_idle, (size_t)n_old * sizeof *old);
    kiln__remote_n_idle = 0;
    snprintf(kiln__remote_idle_path, sizeof kiln__remote_idle_path, "%s", path);
  }
  int got = kiln__remote_n_idle > 0;
  if (got) *out = kiln__remote_idle[--kiln__remote_n_idle];
  pthread_mutex_unlock(&kiln__remote_lock);
  for (int i = 0; i < n_old; i++) kiln__helper_end(&old[i], NULL);
  return got;
}

/* Idle helpers kept: the cores this process may run on (its affinity mask, which a
 * container's CPU set narrows), within the bounds; counted when the first helper is kept. */
static int kiln__remote_keep;

static void kiln__remote_count_cores(void) {
  cpu_set_t set;
  long cores =
      sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
  kiln__remote_keep = cores > KILN__REMOTE_KEEP       ? KILN__REMOTE_KEEP
                      : cores > KILN__REMOTE_KEEP_MIN ? (int)cores
                                                      : KILN__REMOTE_KEEP_MIN;
}

/* Keeps h, started from path, for a later compile, or ends it when enough are kept. */
static void kiln__helper_keep(const char *path, kiln__helper *h) {
  static pthread_once_t counted = PTHREAD_ONCE_INIT;
  pthread_once(&counted, kiln__remote_count_cores);
  pthread_mutex_lock(&kiln__remote_lock);
  int kept = kiln__remote_owner == getpid() && kiln__remote_n_idle < kiln__remote_keep &&
             strcmp(kiln__remote_idle_path, path) == 0;
  if (kept) kiln__remote_idle[kiln__remote_n_idle++] = *h;
  pthread_mutex_unlock(&kiln__remote_lock);
  if (!kept) kiln__helper_end(h, NULL);
}

/* Spawns the helper at path with args and kiln__remote_env's environment. Its standard input
 * and output are the socket end `io`, or /dev/null (its standard error too) when io is -1.
 * 0 with *pid, or -1. */
static int kiln__helper_spawn(const char *path, char *const args[], int io, pid_t *pid) {
  posix_spawn_file_actions_t fa;
  char *owned[2] = {NULL, NULL};
  char **env = kiln__remote_env(owned);
  int spawned = -1;
  if (env && posix_spawn_file_actions_init(&fa) == 0) {
    int ok = io >= 0
                 ? posix_spawn_file_actions_adddup2(&fa, io, 0) == 0 &&
                       posix_spawn_file_actions_adddup2(&fa, io, 1) == 0
                 : posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0) == 0 &&
                       posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0) == 0 &&
                       posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0) == 0;
    if (ok) spawned = posix_spawn(pid, path, &fa, NULL, args, env) == 0 ? 0 : -1;
    posix_spawn_file_actions_destroy(&fa);
  }
  free(env);
  free(owned[0]);
  free(owned[1]);
  return spawned;
}

/* Starts the helper at path; 0, or -1. */
static int kiln__helper_start(const char *path, kiln__helper *out) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  char *args[] = {(char *)"kiln-nvrtc", NULL};
  int spawned = kiln__helper_spawn(path, args, sv[1], &out->pid);
  close(sv[1]);
  if (spawned != 0) {
    close(sv[0]);
    return -1;
  }
  out->fd = sv[0];
  return 0;
}

/* ---- The process's side of the lasting helper ----------------------------------------------- */

/* The lasting helper's socket for the helper at path, NVRTC id and the cache folder dir:
 * dir/pch/nvrtc-<tag>.sock into sock; 0 when there is none to use (turned off, or the path is
 * too long for a socket's). The tag also holds the helper program's file as built, the
 * environment that steers which NVRTC the helper opens and where it finds the toolkit's headers,
 * and the digest of kiln's own headers: a process whose environment or kiln differs there meets
 * a lasting helper of its own. */
static int kiln__server_socket(const char *path, const kiln__nvrtc_id *id, const char *dir,
                               char *sock, size_t cap) {
  const char *env = getenv("KILN_NVRTC_SERVER");
  if (env && (strcmp(env, "0") == 0 || strcmp(env, "off") == 0)) return 0;
  kiln__hasher *h = NULL;
  unsigned char key[KILN__KEY_SIZE];
  char hex[2 * KILN__KEY_SIZE + 1];
  if (kiln__hash_begin(&h)) {
    kiln__clear_error();
    return 0;
  }
  kiln__hash_string(h, path);
  /* The helper program itself, as built: one rebuilt or upgraded in place keeps its path. */
  struct stat program;
  if (stat(path, &program) == 0) {
    int64_t stamp[4] = {(int64_t)program.st_ino, (int64_t)program.st_size,
                        (int64_t)program.st_mtim.tv_sec, (int64_t)program.st_mtim.tv_nsec};
    kiln__hash_field(h, stamp, sizeof stamp);
  }
  kiln__hash_field(h, id, sizeof *id);
  const char *names[] = {"KILN_NVRTC_PATH", "LD_LIBRARY_PATH", "CUDA_HOME", "CUDA_PATH",
                         "CONDA_PREFIX",    "KILN_LINEINFO",   "KILN_PCH"};
  for (size_t i = 0; i < KILN__COUNT(names); i++) kiln__hash_string(h, getenv(names[i]));
  char search[4096];
  kiln__hash_string(h, kiln__nvrtc_search_path(search, sizeof search) ? search : NULL);
  /* The headers kiln gives every compile: a helper of a kiln whose headers differ (one left
   * running by the kiln this one replaced) would compile the same key otherwise. */
  kiln__hash_field(h, kiln__stdheaders_digest_kept(), KILN__KEY_SIZE);
  if (kiln__hash_end(h, key)) {
    kiln__clear_error();
    return 0;
  }
  kiln__hash_hex(key, hex);
  struct sockaddr_un a;
  int n = snprintf(sock, cap, "%s/pch/nvrtc-%.16s.sock", dir, hex);
  return n > 0 && (size_t)n < cap && (size_t)n < sizeof a.sun_path;
}

/* A connection to the listening socket sock, checked to be held by this user; -1 with errno.
 * The connect does not wait: a helper stuck in a compile accepts no one, and once its queue of
 * connections is full a blocking connect would wait as long (EAGAIN instead, and the process
 * asks a helper of its own). */
static int kiln__server_connect(const char *sock) {
  struct sockaddr_un a;
  memset(&a, 0, sizeof a);
  a.sun_family = AF_UNIX;
  memcpy(a.sun_path, sock, strlen(sock));
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  int flags = 0;
  if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0 || (flags = fcntl(fd, F_GETFL)) < 0 ||
      fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  struct ucred who;
  socklen_t len = sizeof who;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &who, &len) != 0 || who.uid != geteuid()) {
    close(fd);
    errno = EACCES;
    return -1;
  }
  return fd;
}

/* Starts the lasting helper at path on sock, and waits for the process spawned, which ends
 * once the helper listens: 1 then, 0 when it did not start. */
static int kiln__server_start(const char *path, const char *sock) {
  char folder[PATH_MAX];
  const char *slash = strrchr(sock, '/');
  if (!slash || (size_t)(slash - sock) >= sizeof folder) return 0;
  memcpy(folder, sock, (size_t)(slash - sock));
  folder[slash - sock] = '\0';
  mkdir(folder, 0700); /* the PCH files' folder, made by the first PCH otherwise */
  char *args[] = {(char *)"kiln-nvrtc", (char *)"--serve", (char *)sock, NULL};
  pid_t pid = 0;
  int status = 0;
  if (kiln__helper_spawn(path, args, -1, &pid) != 0) return 0;
  pid_t done;
  while ((done = waitpid(pid, &status, 0)) < 0 && errno == EINTR) {}
  return done == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/* Has the lasting helper on sock answer req, starting it when there is none (started is this
 * process's note that it did, so that it starts one once). 0 with the answer; -1 when it cannot
 * answer now (none, busy, gone, another NVRTC), and the caller asks a helper of its own. */
static int kiln__server_run(const char *path, const char *sock, const kiln__wire_out *req,
                            unsigned char **answer, size_t *answer_size) {
  static int started;
  int fd = kiln__server_connect(sock);
  if (fd < 0 && (errno == ENOENT || errno == ECONNREFUSED) &&
      !__atomic_exchange_n(&started, 1, __ATOMIC_ACQ_REL)) {
    if (errno == ECONNREFUSED) unlink(sock); /* left by one that ended without removing it */
    if (kiln__server_start(path, sock)) fd = kiln__server_connect(sock);
  }
  if (fd < 0) return -1;
  unsigned char hello = 0;
  struct pollfd pfd = {.fd = fd, .events = POLLIN};
  int r = -1;
  if (poll(&pfd, 1, KILN__SERVER_HELLO_MS) == 1 && kiln__recv_all(fd, &hello, 1) == 0 &&
      hello == 'k' && kiln__send_message(fd, req) == 0)
    r = kiln__recv_message(fd, answer, answer_size);
  close(fd);
  if (r != 0) return -1;
  /* Another NVRTC behind the same tag cannot answer for this process; its own helper can. */
  kiln__wire_in peek = {*answer, *answer_size, NULL};
  kiln__wire_get_u32(&peek);
  if ((kiln_status)kiln__wire_get_u32(&peek) == KILN_ERROR_NO_NVRTC) {
    free(*answer);
    *answer = NULL;
    return -1;
  }
  return 0;
}

/* Has a helper answer req: the lasting one on sock (when sock is not ""), else an idle one of
 * this process's, else a new one. 0 with the answer in *answer, and *by 2 for the lasting
 * helper, 1 for one of this process's; -1 with *why set (the helper could not start or ended
 * without an answer); or a signal's number when one killed the helper while it compiled. */
static int kiln__remote_run(const char *path, const char *sock, const kiln__wire_out *req,
                            unsigned char **answer, size_t *answer_size, int *by,
                            const char **why) {
  *by = 2;
  if (sock[0] && kiln__server_run(path, sock, req, answer, answer_size) == 0) return 0;
  *by = 1;
  for (int fresh = 0; fresh < 2; fresh++) {
    kiln__helper h;
    int idle = !fresh && kiln__helper_take(path, &h);
    if (!idle && kiln__helper_start(path, &h) != 0) {
      *why = "could not be started";
      return -1;
    }
    int r = kiln__send_message(h.fd, req) == 0 ? kiln__recv_message(h.fd, answer, answer_size) : -1;
    if (r == 0) {
      kiln__helper_keep(path, &h);
      return 0;
    }
    int status = 0;
    kiln__helper_end(&h, &status);
    /* An idle helper may have ended while it waited (idle too long, or killed): a new one is
     * asked, and only what a new one does is held against the source. */
    if (idle) continue;
    if (WIFSIGNALED(status)) return WTERMSIG(status);
    *why = WIFEXITED(status) && WEXITSTATUS(status) != 0 ? "failed (it exited with an error)"
                                                         : "ended without an answer";
    return -1;
  }
  *why = "ended without an answer";
  return -1;
}

kiln_status kiln__remote_compile(const char *src, const kiln_compile_opts *opts, const char *arch,
                                 const char *pch_dir, const char *cwd, const kiln__nvrtc_id *id,
                                 int crowded, kiln__code *out, int *handled) {
  *handled = 0;
  int pch = id && pch_dir && !__atomic_load_n(&kiln__remote_unfixed, __ATOMIC_ACQUIRE) &&
            kiln__pch_could_use(src, opts, pch_dir, id);
  if (!id || (!pch && !crowded)) return KILN_OK;
  char *path = kiln__remote_helper();
  if (!path) return KILN_OK;

  kiln__wire_out w = {0};
  kiln__wire_put_u32(&w, KILN__REMOTE_ASK);
  kiln__wire_put_blob(&w, id, sizeof *id);
  kiln__wire_put_str(&w, src);
  kiln__wire_put_str(&w, arch);
  kiln__wire_put_str(&w, pch ? pch_dir : ""); /* a crowded compile makes and takes no PCH */
  kiln__wire_put_str(&w, cwd);
  kiln__wire_put_u32(&w, opts ? opts->flags : 0);
  kiln__put_strs(&w, opts ? opts->options : NULL, opts ? opts->n_options : 0);
  kiln__put_strs(&w, opts ? opts->include_dirs : NULL, opts ? opts->n_include_dirs : 0);
  kiln__put_strs(&w, opts ? opts->name_expressions : NULL, opts ? opts->n_name_expressions : 0);
  kiln__put_strs(&w, opts ? opts->header_names : NULL, opts ? opts->n_headers : 0);
  kiln__put_strs(&w, opts ? opts->header_sources : NULL, opts ? opts->n_headers : 0);
  if (w.oom) {
    free(w.p);
    free(path);
    return KILN_OK;
  }
  unsigned char *answer = NULL;
  size_t answer_size = 0;
  const char *why = NULL;
  char sock[PATH_MAX];
  /* The lasting helper is for PCH compiles: it takes one compile at a time. */
  if (!pch || !kiln__server_socket(path, id, pch_dir, sock, sizeof sock)) sock[0] = '\0';
  int by = 0;
  int ran = kiln__remote_run(path, sock, &w, &answer, &answer_size, &by, &why);
  free(w.p);
  if (ran > 0) {
    *handled = 1;
    free(path);
    char said[160]; /* the log too: a compile error is read from its log */
    snprintf(said, sizeof said,
             "NVRTC crashed compiling this source for %s (signal %d in kiln's compile helper)",
             arch, ran);
    memset(out, 0, sizeof *out);
    out->log = kiln__dup_str(said);
    return kiln__fail(KILN_ERROR_COMPILE, "%s", said);
  }
  if (ran < 0) {
    kiln__remote_give_up(path, why);
    free(path);
    return KILN_OK;
  }
  kiln__wire_in r = {answer, answer_size, NULL};
  int ok = kiln__wire_get_u32(&r) == KILN__REMOTE_ANSWER;
  kiln_status s = (kiln_status)kiln__wire_get_u32(&r);
  char *message = kiln__wire_get_str(&r);
  int fixed = (int)kiln__wire_get_u32(&r);
  uint64_t created = kiln__wire_get_u64(&r), used = kiln__wire_get_u64(&r);
  memset(out, 0, sizeof *out);
  out->pch = (int)kiln__wire_get_u32(&r);
  uint64_t seconds = kiln__wire_get_u64(&r);
  memcpy(&out->seconds, &seconds, sizeof seconds);
  if (!s) {
    kiln__entry_get_code(&r, out);
  } else {
    char *built_for = kiln__wire_get_str(&r);
    if (built_for) snprintf(out->arch, sizeof out->arch, "%s", built_for);
    free(built_for);
    out->log = kiln__wire_get_str(&r);
  }
  ok = ok && !r.why && !r.left;
  free(answer);
  if (!ok || (s && s != KILN_ERROR_COMPILE)) {
    /* Nonsense, or the helper's own trouble (another NVRTC, no memory): this process
     * compiles, and says why once. */
    kiln__compile_free_code(out);
    kiln__remote_give_up(path, ok ? message : "answered nonsense");
    free(message);
    free(path);
    return KILN_OK;
  }
  *handled = 1;
  out->helper = by;
  kiln__pch_add_counts(created, used);
  /* Where the helper cannot turn randomisation off (a seccomp profile that refuses the
   * personality call, say), its PCH files serve no later run: the process compiles those. */
  if (!fixed) __atomic_store_n(&kiln__remote_unfixed, 1, __ATOMIC_RELEASE);
  if (s) kiln__fail(s, "%s", message);
  free(message);
  free(path);
  return s;
}
