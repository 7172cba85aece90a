/* kiln: compile CUDA C++ source strings at run time, load and launch them.
 *
 * This header is the whole public contract of libkiln. What is not declared here is not API.
 *
 * Every call returns a kiln_status. On failure, kiln_last_error() gives a sentence naming
 * what failed and why (which call, which CUresult, which parameter); it is thread-local and
 * valid until the next kiln call on the same thread.
 *
 * A NULL where a call needs a pointer (a handle, an out parameter) is KILN_ERROR_INVALID, naming
 * the call and the parameter; the calls that return no status give 0, NULL or "" for a NULL
 * handle. A kernel that takes parameters is refused a launch with params NULL.
 *
 * Freeing or destroying NULL (or a device pointer of 0) is a no-op that leaves the last error as
 * it was, so that the cleanup after a failure may run before the failure is read; every other
 * success, one with nothing to do (a copy of 0 bytes) included, clears it.
 *
 * libcuda and libnvrtc are opened with dlopen on first use, never linked: compiling works on a
 * machine with no GPU and no driver, and a missing driver is KILN_ERROR_NO_DRIVER, not a crash.
 */
#ifndef KILN_H
#define KILN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KILN_VERSION_MAJOR 0
#define KILN_VERSION_MINOR 1
#define KILN_VERSION_PATCH 0

/* One table makes the status enum, its names and its strings (KILN_OK is 0 and not in it). */
#define KILN_STATUS_MAP(X)                                       \
  X(NO_DRIVER, "no CUDA driver could be loaded")                 \
  X(NO_DEVICE, "no CUDA device is available")                    \
  X(NO_NVRTC, "NVRTC could not be loaded")                       \
  X(COMPILE, "NVRTC compilation failed")                         \
  X(CUDA, "a CUDA driver call failed")                           \
  X(LAUNCH, "a kernel launch failed")                            \
  X(OUT_OF_MEMORY, "out of device memory")                       \
  X(NOT_FOUND, "no kernel of that name in the module")           \
  X(AMBIGUOUS, "the kernel name matches more than one overload") \
  X(PTX, "the PTX could not be parsed")                          \
  X(CACHE_IO, "kernel cache I/O error")                          \
  X(INVALID, "invalid argument")                                 \
  X(NO_MEMORY, "out of host memory")                             \
  X(INTERRUPTED, "a wait for the GPU was given up; its work goes on")

typedef enum kiln_status {
  KILN_OK = 0,
#define KILN__STATUS_ENUM(name, msg) KILN_ERROR_##name,
  KILN_STATUS_MAP(KILN__STATUS_ENUM)
#undef KILN__STATUS_ENUM
      KILN__STATUS_COUNT
} kiln_status;

const char *kiln_status_name(kiln_status s);   /* "KILN_ERROR_COMPILE" */
const char *kiln_status_string(kiln_status s); /* "NVRTC compilation failed" */

/* The detail of the last failure on this thread; "" when the last call succeeded. */
const char *kiln_last_error(void);

/* The CUresult of the last failed driver call on this thread (0 when the failure was not a
 * driver call), and its name, e.g. "CUDA_ERROR_ILLEGAL_ADDRESS" (NULL for 0). */
int kiln_last_cuda_result(void);
const char *kiln_cuda_result_name(int result);
/* 1 when the last failure on this thread was a launch kiln refused before the driver saw it
 * (KILN_ERROR_INVALID; kiln_last_cuda_result() is then what the driver would have said). */
int kiln_last_error_is_launch_refusal(void);

/* ---- Devices --------------------------------------------------------------------------- */

typedef struct kiln_device_info {
  char name[256];
  int major, minor;    /* compute capability */
  size_t total_memory; /* bytes */
  int multiprocessors;
  int max_threads_per_block;
  int max_block[3];
  int max_grid[3];
  int max_shared_per_block;       /* bytes, without opting in */
  int max_shared_per_block_optin; /* bytes, the most a kernel can opt in to */
} kiln_device_info;

kiln_status kiln_device_count(int *count);
kiln_status kiln_device_get_info(int device, kiln_device_info *out);

/* kiln works in the primary context of its current device (device 0 unless changed), the
 * context the CUDA runtime, PyTorch and CuPy use, so their pointers and streams are kiln's. */
kiln_status kiln_device_set_current(int device);
int kiln_device_current(void);
kiln_status kiln_synchronize(void); /* waits for all work of the current device */
/* Waits for all work of every device kiln has set up, each in its primary context, and leaves
 * the thread's current device as it was; the first failure, after waiting for the rest. What a
 * program's end calls, where a context of its own would have been destroyed (which waits, and
 * so prints what kernels' printf wrote). Sets nothing up: with no device used, nothing. */
kiln_status kiln_synchronize_all(void);

/* One attribute of a device: attribute is a CUdevice_attribute, numbered as cuda.h numbers
 * CU_DEVICE_ATTRIBUTE_* (CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK is 1). Reads the device
 * without setting it up (no context is made). */
kiln_status kiln_device_get_attribute(int device, int attribute, int *value);
kiln_status kiln_device_pci_bus_id(int device, char *out, size_t cap); /* "0000:3b:00.0" */
kiln_status kiln_device_from_pci_bus_id(const char *pci_bus_id, int *device);

/* The driver is opened and initialized (cuInit) at the first GPU use; kiln_driver_init does it
 * now, for programs that want to know early. */
kiln_status kiln_driver_init(void);
kiln_status kiln_driver_version(int *version); /* cuDriverGetVersion: 13000 is CUDA 13.0 */
int kiln_driver_header_version(void);          /* CUDA_VERSION of the cuda.h kiln was built with */

/* ---- The context of the current device ---------------------------------------------------
 *
 * kiln makes no contexts: each device has one, its primary context, which the CUDA runtime,
 * PyTorch and CuPy use too. Pushing a context is making a device current on this thread and
 * remembering the one before; popping returns to it. Limits and cache configuration belong to
 * the primary context, so they hold for every library in the process. */
kiln_status kiln_context_push(int device); /* sets the device up and makes it current now */
kiln_status kiln_context_pop(int *device); /* *device: the one popped (NULL: not wanted) */
int kiln_context_depth(void);              /* pushes of this thread not yet popped */
/* The driver's handle of device's primary context (a CUcontext), setting the device up but
 * leaving this thread's current device as it was: for code that hands it to another library. */
kiln_status kiln_context_handle(int device, uintptr_t *out);

/* limit is a CUlimit (0 stack size, 1 printf FIFO size, 2 malloc heap size, ...); config a
 * CUfunc_cache (0 none, 1 prefer shared, 2 prefer L1, 3 equal) or a CUsharedconfig (0
 * default, 1 four-byte banks, 2 eight-byte banks). */
kiln_status kiln_context_get_limit(int limit, size_t *value);
kiln_status kiln_context_set_limit(int limit, size_t value);
kiln_status kiln_context_get_cache_config(int *config);
kiln_status kiln_context_set_cache_config(int config);
kiln_status kiln_context_get_shared_config(int *config);
kiln_status kiln_context_set_shared_config(int config);
kiln_status kiln_context_api_version(unsigned *version);

/* ---- Compiling -------------------------------------------------------------------------- */

typedef struct kiln_module kiln_module;     /* compiled code, shared; loaded on first launch */
typedef struct kiln_function kiln_function; /* borrowed from its module */

typedef struct kiln_compile_opts {
  const char *arch;           /* "sm_90"; NULL: the options' -code or -gencode, else
                                 $KILN_ARCH, else the current device's (clamped to what NVRTC
                                 supports), else with no device the options' -arch, else the
                                 oldest arch this NVRTC supports */
  const char *const *options; /* extra options, NVRTC's or nvcc's (kiln translates these:
                                 "-D X" -> "-DX", -O3 dropped, -code and -gencode taken as the
                                 fields below, -arch as the paragraph above says, -rdc=true as
                                 KILN_COMPILE_DEVICE_RUNTIME) */
  int n_options;
  const char *const *include_dirs; /* searched before the toolkit's include folder */
  int n_include_dirs;
  const char *const *name_expressions; /* e.g. "axpy<float>", for templates */
  int n_name_expressions;
  const char *const *header_names;   /* headers given in memory: the name #include uses */
  const char *const *header_sources; /* and the text of each */
  int n_headers;
  const char *code;           /* nvcc's -code: "sm_90" builds for that arch ("compute_90"
                                 too); with arch as well, it must not be older. NULL: arch
                                 alone decides */
  const char *cache_dir;      /* the kernel cache folder for this compile, instead of
                                 $KILN_CACHE_DIR and the rest; NULL: the usual one */
  unsigned flags;             /* KILN_COMPILE_* */
  const char *device_runtime; /* with KILN_COMPILE_DEVICE_RUNTIME: libcudadevrt.a, or the
                                 folder holding it; NULL: beside NVRTC, then under
                                 $CUDA_HOME, $CUDA_PATH and /usr/local/cuda */
} kiln_compile_opts;

/* Compile without the kernel cache on disk (the in-process table still answers). */
#define KILN_COMPILE_NO_CACHE 1u
/* Relocatable device code (-rdc=true) linked with the device runtime, libcudadevrt.a, so a
 * kernel can launch kernels: with nvJitLink when it can be opened (no driver needed), else
 * with the driver's linker. The linked CUBIN is cached like any other. */
#define KILN_COMPILE_DEVICE_RUNTIME 2u
/* Relocatable device code (-rdc=true) left unlinked, nvcc's -dc: the module's CUBIN is an
 * input of kiln_module_link, not a module to launch from. Wins over DEVICE_RUNTIME. */
#define KILN_COMPILE_RELOCATABLE 4u

/* Compiles src with NVRTC (one run gives CUBIN and PTX), unless the in-process table or the
 * kernel cache on disk (below) already holds it: the same source, options, arch and headers
 * give the same code without NVRTC. opts may be NULL. On KILN_ERROR_COMPILE, *out is still set when
 * a log exists (read it with kiln_module_log, then free the module); otherwise *out is NULL. */
kiln_status kiln_module_from_source(const char *src, const kiln_compile_opts *opts,
                                    kiln_module **out);
void kiln_module_free(kiln_module *m); /* NULL is a no-op */

/* The in-process table behind kiln_module_from_source keeps each module it compiled, so a
 * repeated compile is free. Modules no one else holds are kept up to a bound, by default 256
 * modules in all: past it the least recently used of them are freed (their code, and their
 * library on the device when it was loaded). A module someone holds is never freed, and goes
 * once let go while the table is over its bound. Setting the bound frees at once what is over
 * it and gives the bound before; 0 keeps only modules that are held. */
size_t kiln_module_table_set_limit(size_t limit);
size_t kiln_module_table_limit(void);
size_t kiln_module_table_count(void); /* modules in the table now, held or not */

/* A memo of a compile, for a caller that can tell cheaply that it has the same source and
 * options again (Python does, by the identity and cached hash of its strings): the module is
 * then found without hashing the source. kiln_module_from_source_memo is
 * kiln_module_from_source that also gives, on success, a memo in *memo, or NULL when the
 * module cannot be recalled so: its source reaches a header file (or the key depends on the
 * working folder), it links the device runtime. Free it with kiln_compile_memo_free. */
typedef struct kiln_compile_memo kiln_compile_memo;
kiln_status kiln_module_from_source_memo(const char *src, const kiln_compile_opts *opts,
                                         kiln_module **out, kiln_compile_memo **memo);
/* 1 with *out holding a reference to the module kiln_module_from_source would give now for the
 * source and options memo was made from, when the in-process table still has it and nothing
 * that compile read from the environment has changed ($KILN_ARCH and the current device's arch
 * when the options named none, $KILN_LINEINFO); it counts as a memory hit. 0 with *out NULL
 * otherwise: compile with kiln_module_from_source_memo. Never compiles, never blocks on I/O.
 * Its report (kiln_compile_last_report) is a memory hit with seconds 0: it is not timed. */
int kiln_module_recall(const kiln_compile_memo *memo, kiln_module **out);

/* Device debugging (NVRTC's -G: no optimization, device code a debugger steps through) for
 * every compile from now on whose options do not give -G already; 0 turns it off. PyCUDA's
 * set_debugging. The option is part of the compile's key, so a debug build never stands in for
 * an ordinary one. */
void kiln_compile_set_device_debug(int on);
void kiln_compile_memo_free(kiln_compile_memo *memo); /* NULL is a no-op */

/* The NVRTC kiln compiles with, for `python -m kiln doctor` and bug reports: it opens NVRTC
 * (KILN_ERROR_NO_NVRTC, saying where kiln looked, when it cannot). */
typedef struct kiln_nvrtc_info {
  int major, minor;
  char path[4096];        /* the library file opened, resolved; "" when unknown */
  char include_dir[4096]; /* the toolkit's headers (cuda_fp16.h); "" when none was found */
  char cccl_dir[4096];    /* its cccl folder (<cuda/std/...>, CUB), or "" */
  int n_archs;
  int archs[64]; /* sm_XY as XY, ascending */
} kiln_nvrtc_info;
kiln_status kiln_nvrtc_get_info(kiln_nvrtc_info *out);

/* The arch a compile that names none gets: $KILN_ARCH, else the current device's clamped to
 * what NVRTC supports, else with no device the oldest it supports ("sm_90"). */
kiln_status kiln_compile_default_arch(char *arch, size_t cap);

/* What this thread's last kiln_module_from_source did, for logs and tools: where the code came
 * from, how long it took, whether NVRTC made or reused a precompiled header. */
typedef enum kiln_compile_origin {
  KILN_ORIGIN_NONE = 0,   /* no call yet, or it failed before a lookup */
  KILN_ORIGIN_MEMORY = 1, /* the in-process table */
  KILN_ORIGIN_DISK = 2,   /* an entry of the kernel cache */
  KILN_ORIGIN_NVRTC = 3   /* compiled */
} kiln_compile_origin;
typedef struct kiln_compile_report {
  kiln_compile_origin origin;
  int stale;            /* a table entry was there, but a header it reached had changed */
  int pch;              /* 0: no precompiled header; 1: NVRTC made one; 2: it reused one */
  double seconds;       /* the whole call; 0 for kiln_module_recall, which is not timed */
  double nvrtc_seconds; /* NVRTC's run, 0 when it did not run */
  uint64_t evictions;   /* cache entries the process evicted during the call */
  char key[65];         /* the cache key in hex, "" before a lookup */
  int helper; /* where NVRTC ran: 0 in this process, 1 in a compile helper of the process's,
                 2 in the lasting compile helper of the cache folder */
} kiln_compile_report;
void kiln_compile_last_report(kiln_compile_report *out);

const char *kiln_module_arch(const kiln_module *m); /* "sm_90" */
const char *kiln_module_log(const kiln_module *m);  /* NVRTC log; "" when empty */
const char *kiln_module_ptx(const kiln_module *m, size_t *size);
const void *kiln_module_cubin(const kiln_module *m, size_t *size); /* NULL if none */

int kiln_module_function_count(const kiln_module *m);
const char *kiln_module_function_name(const kiln_module *m, int i); /* the PTX entry name */

/* Finds a kernel by its plain name ("multiply_them"), whether declared extern "C" or as a C++
 * function, by its mangled entry name, or by a name expression given at compile time.
 * KILN_ERROR_NOT_FOUND lists the module's kernels; KILN_ERROR_AMBIGUOUS lists the overloads. */
kiln_status kiln_module_get_function(kiln_module *m, const char *name, kiln_function **out);

/* Writes what m holds into the folder dir (which must exist): source (when not NULL) as
 * kernel.cu, and kernel.ptx, kernel.cubin (when there is one) and kernel.log: nvcc's kept
 * files, for reading what was compiled. */
kiln_status kiln_module_save(const kiln_module *m, const char *source, const char *dir);

/* Loads prebuilt code: a CUBIN, a fatbin or PTX (text, NUL-terminated or not). Kernel
 * signatures come from the PTX when there is PTX; for a CUBIN or fatbin they come from the
 * driver (parameter sizes, sharpened by mangled names), which needs a CUDA device. */
kiln_status kiln_module_from_image(const void *image, size_t size, kiln_module **out);

/* An option of the driver's loader: a CUjit_option number and its integer value. */
typedef struct kiln_jit_option {
  int option;
  long long value;
} kiln_jit_option;

/* kiln_module_from_image loaded now, on the current device, by the driver's loader with these
 * options (PyCUDA's module_from_buffer options; PTX is compiled here rather than at the first
 * launch). The loader's info and error logs are written, NUL-terminated, into info_log and
 * error_log when they are not NULL and hold more than the NUL (sizes in bytes; at most 1 MiB
 * of each is kept), whether the load succeeds or not; a load
 * that fails says the error log in its message too. The log buffers are kiln's: options naming
 * them, options whose values are pointers, and unknown numbers are KILN_ERROR_INVALID. */
kiln_status kiln_module_from_image_jit(const void *image, size_t size,
                                       const kiln_jit_option *options, int n_options,
                                       char *info_log, size_t info_size, char *error_log,
                                       size_t error_size, kiln_module **out);

/* Linking several pieces of device code into one CUBIN (PyCUDA's DynamicModule): relocatable
 * CUBINs (compiled with KILN_COMPILE_RELOCATABLE, nvcc's -dc), PTX, fatbins, objects and
 * libraries such as libcudadevrt.a, each given by its bytes or by its file. The kinds are
 * numbered as cuda.h's CUjitInputType. */
typedef enum kiln_link_kind {
  KILN_LINK_CUBIN = 0,
  KILN_LINK_PTX = 1,
  KILN_LINK_FATBIN = 2,
  KILN_LINK_OBJECT = 3,
  KILN_LINK_LIBRARY = 4,
} kiln_link_kind;
typedef struct kiln_link_input {
  kiln_link_kind kind;
  const void *data; /* the bytes (size of them), or NULL and path */
  size_t size;
  const char *path; /* the file, when data is NULL */
  const char *name; /* what the linker's messages call it; NULL: "input" */
} kiln_link_input;
/* Links inputs for arch ("sm_90"; NULL: the arch a compile naming none takes) with nvJitLink,
 * which needs no driver, else with the driver's linker. *cubin is malloc'd (release it with
 * free()); load it with kiln_module_from_image. A link that fails is KILN_ERROR_COMPILE with
 * the linker's log in the message. */
kiln_status kiln_link(const kiln_link_input *inputs, int n_inputs, const char *arch, void **cubin,
                      size_t *size);
/* kiln_link with the driver's JIT options (PyCUDA's DynamicModule link_options and Linker
 * options), as kiln_module_from_image_jit takes them: the link is then the driver's linker's,
 * in the current context (it needs a device), as PyCUDA's is. A link option that names the
 * target replaces arch's. */
kiln_status kiln_link_jit(const kiln_link_input *inputs, int n_inputs, const char *arch,
                          const kiln_jit_option *options, int n_options, void **cubin,
                          size_t *size);
kiln_status kiln_module_from_file(const char *path, kiln_module **out);

/* A module as bytes to send to another process or machine (pickling): its compiled code (CUBIN
 * and PTX), its kernels' names and signatures, in the cache entry's checksummed format, without
 * its source. *out is malloc'd; release it with free(). */
kiln_status kiln_module_serialize(const kiln_module *m, unsigned char **out, size_t *size);
/* The module those bytes hold, checked whole (format, length, checksum) before anything is
 * read; no NVRTC and no device: the code loads on the first launch, as a cache hit's does. */
kiln_status kiln_module_deserialize(const void *data, size_t size, kiln_module **out);

/* ---- Where NVRTC comes from -------------------------------------------------------------- *
 *
 * NVRTC is opened on the first compile: $KILN_NVRTC_PATH alone when set; else libnvrtc.so.13,
 * then .12, each looked for on the loader path, in the folders given here (the Python package
 * passes the lib folders of NVIDIA's wheels nvidia-cuda-nvrtc), in $CONDA_PREFIX/lib, then
 * under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda (lib64). The CUDA headers are those beside the
 * library that opened. */
kiln_status kiln_nvrtc_set_search_path(const char *dirs); /* ':'-separated; before a compile */
/* kiln-nvrtc, the compile helper (built beside libkiln): a compile that could go through a
 * precompiled header runs in it, so that the PCH files it keeps in the cache folder serve
 * later processes too (docs/cache.md). NULL or "" turns it off; $KILN_NVRTC_HELPER, a path or
 * 0, rules over it. Without a helper, PCH files serve the process that made them. */
kiln_status kiln_nvrtc_set_helper(const char *path);
/* Opens NVRTC if needed; *lib: the library file, *include_dir and *cccl_dir: the header folders
 * passed to every compile ("" when none was found). The strings live as long as the process. */
kiln_status kiln_nvrtc_where(const char **lib, const char **include_dir, const char **cccl_dir);

/* ---- The kernel cache ------------------------------------------------------------------- *
 *
 * kiln_module_from_source keeps what it compiles in a folder: $KILN_CACHE_DIR, else
 * $XDG_CACHE_HOME/kiln, else ~/.cache/kiln ($KILN_CACHE=0 turns it off). Each entry is one file
 * named by a SHA-256 key over the format version, NVRTC's version, the arch, the options, the
 * name expressions, the source and in-memory headers; it records the user headers the source
 * can reach, and a hit needs them unchanged. $KILN_CACHE_PATH lists read-only folders searched
 * after the main one. $KILN_CACHE_MAX_BYTES (default 1 GiB) bounds the main folder; the least
 * recently used entries go first. */

typedef struct kiln_cache_stats { /* this process's, since it started */
  uint64_t memory_hits;           /* answered by the in-process table */
  uint64_t disk_hits;             /* answered by an entry on disk */
  uint64_t misses;      /* looked up on disk and compiled: no entry, a stale or a damaged one */
  uint64_t compiles;    /* NVRTC runs, cached or not */
  uint64_t stores;      /* entries written */
  uint64_t evictions;   /* entries removed to keep the bound */
  uint64_t corrupt;     /* damaged entries found (each also a warning) */
  uint64_t pch_created; /* NVRTC runs that made a precompiled header of a source's #includes */
  uint64_t pch_used;    /* NVRTC runs that reused one */
} kiln_cache_stats;
void kiln_cache_get_stats(kiln_cache_stats *out);

typedef struct kiln_cache_info {
  int enabled; /* 0 when off, or when the folder cannot be used (see reason) */
  int writable;
  char dir[4096];
  char layers[4096]; /* the read-only folders in use, ':'-separated */
  char reason[5120]; /* why it is off or read-only; "" when neither */
  uint64_t entries, bytes, max_bytes;
  uint64_t hits, misses, evictions; /* counted in the folder by every process that used it */
  uint64_t pch_files, pch_bytes;    /* precompiled headers kept by running processes (pch/),
                                       counted against max_bytes */
} kiln_cache_info;
kiln_status kiln_cache_get_info(kiln_cache_info *out);

typedef struct kiln_cache_entry {
  const char *path;
  const char *key; /* 64 hex digits */
  int layer;       /* 0: the main folder; i: the i-th read-only folder */
  uint64_t bytes;
  int64_t last_used;   /* seconds since the epoch */
  const char *arch;    /* "" when the entry cannot be read */
  const char *kernels; /* their plain names, ", "-separated */
  const char *problem; /* NULL, or why the entry would not load */
} kiln_cache_entry;
/* Calls visit for every entry of every folder; a nonzero return stops the walk. */
kiln_status kiln_cache_list(int (*visit)(const kiln_cache_entry *e, void *ctx), void *ctx);

/* Removes least recently used entries of the main folder until it holds at most max_bytes
 * (0: $KILN_CACHE_MAX_BYTES); entries being read or written by another process stay. */
kiln_status kiln_cache_prune(uint64_t max_bytes, uint64_t *removed);
kiln_status kiln_cache_clear(uint64_t *removed);

/* ---- Warnings ----------------------------------------------------------------------------
 *
 * What kiln survives but a user should hear of (a damaged cache entry it replaced, a cache
 * folder it cannot write) goes to a handler, by default one line on stderr. The handler runs
 * on the thread of the kiln call that found the problem. */
typedef void (*kiln_warning_handler)(const char *message, void *ctx);
void kiln_set_warning_handler(kiln_warning_handler fn, void *ctx); /* NULL: stderr again */

/* ---- Signatures ------------------------------------------------------------------------- */

/* What the PTX says of a parameter, sharpened by the mangled name when there is one (PTX
 * alone does not tell int from unsigned, nor a pointer from a 64-bit integer). */
typedef enum kiln_param_class {
  KILN_PARAM_B8, /* 8-bit integer, sign unknown (extern "C") */
  KILN_PARAM_I8,
  KILN_PARAM_U8, /* also bool */
  KILN_PARAM_B16,
  KILN_PARAM_I16,
  KILN_PARAM_U16,
  KILN_PARAM_B32, /* 32-bit integer, sign unknown */
  KILN_PARAM_I32,
  KILN_PARAM_U32,
  KILN_PARAM_B64, /* 64 bits: a pointer or a 64-bit integer (extern "C") */
  KILN_PARAM_I64,
  KILN_PARAM_U64,
  KILN_PARAM_PTR, /* known to be a pointer */
  KILN_PARAM_F32,
  KILN_PARAM_F64,
  KILN_PARAM_AGGREGATE /* .align N .b8 x[S]: a struct, vector type, __half, ... */
} kiln_param_class;

typedef struct kiln_param {
  kiln_param_class cls;
  unsigned size;  /* bytes */
  unsigned align; /* bytes */
} kiln_param;

const char *kiln_function_name(const kiln_function *f); /* the PTX entry name */
/* The kernel as its source declares it, for messages: "cpp(float *, const float *, int)" from
 * a C++ kernel's mangled name, else its plain name ("multiply_them" of an extern "C" one). */
const char *kiln_function_signature(const kiln_function *f);
int kiln_function_param_count(const kiln_function *f);
const kiln_param *kiln_function_params(const kiln_function *f);
/* 1 when the driver described the parameters by their sizes alone (a kernel of a CUBIN or
 * fatbinary whose name is not C++'s, so says nothing of its types): a b8, b16, b32 or b64
 * parameter may then be a float as well as an int. 0 when kiln read them from PTX. */
int kiln_function_params_by_size(const kiln_function *f);
const char *kiln_param_class_name(kiln_param_class c); /* "i32", "ptr", "struct", ... */

/* A kernel's attributes on the current device (loading the module there first): attribute is a
 * CUfunction_attribute (0 max threads per block, 1 static shared bytes, 2 constant bytes, 3
 * local bytes, 4 registers, 5 PTX version, 6 binary version, 8 max dynamic shared bytes, ...);
 * config a CUfunc_cache. */
kiln_status kiln_function_get_attribute(kiln_function *f, int attribute, int *value);
kiln_status kiln_function_set_attribute(kiln_function *f, int attribute, int value);
kiln_status kiln_function_set_cache_config(kiln_function *f, int config);

/* ---- Memory ----------------------------------------------------------------------------- */

typedef uint64_t kiln_deviceptr;

/* The address and size of a module's __constant__ or __device__ variable on the current device
 * (the module is loaded there first), for kiln_memcpy_htod and the like. name is the variable's
 * name as the PTX has it, or its C++ name ("ns::table"); an unknown one is KILN_ERROR_NOT_FOUND
 * listing the module's variables, found before the GPU is touched when the module has PTX. */
kiln_status kiln_module_get_global(kiln_module *m, const char *name, kiln_deviceptr *ptr,
                                   size_t *size);
int kiln_module_global_count(kiln_module *m);               /* variables its PTX declares */
const char *kiln_module_global_name(kiln_module *m, int i); /* the PTX name of the i-th */

/* Streams and events are the driver's own CUstream and CUevent: the same struct tags as
 * cuda.h, so a CUstream (or PyTorch's or CuPy's, as an integer cast back) converts to a
 * kiln_stream without a cast, while a stream passed where an event goes does not compile.
 * NULL is the legacy default stream. */
typedef struct CUstream_st *kiln_stream;
typedef struct CUevent_st *kiln_event;

kiln_status kiln_mem_alloc(size_t nbytes, kiln_deviceptr *out);
kiln_status kiln_mem_free(kiln_deviceptr p); /* 0 is a no-op */
kiln_status kiln_memcpy_htod(kiln_deviceptr dst, const void *src, size_t nbytes);
kiln_status kiln_memcpy_dtoh(void *dst, kiln_deviceptr src, size_t nbytes);

/* Stream-ordered memory from the device's pool, which keeps freed memory for reuse; freed
 * blocks of up to 1 MiB are kept by kiln itself for the next allocation on the same stream.
 * The free is ordered on its stream only, as cuMemFreeAsync's: work on another stream that
 * uses the block must be ordered before it (an event recorded there and waited for on the
 * free's stream), else the block may be reused under it. kiln's Python arrays do so.
 * A kept block is freed on its stream later (kiln_pool_trim, out of memory): free on a stream
 * that outlives kiln's use of the pool, or that kiln_stream_destroy destroys (it frees the
 * blocks kept for it), never on one another library destroys behind kiln's back. Free with the size
 * that was asked for. Out of memory is retried once after handing unused memory back to the driver;
 * the error says how much was asked and how much is free. */
kiln_status kiln_mem_alloc_async(size_t nbytes, kiln_stream stream, kiln_deviceptr *out);
kiln_status kiln_mem_free_async(kiln_deviceptr p, size_t nbytes, kiln_stream stream); /* 0: no-op */
kiln_status kiln_memcpy_htod_async(kiln_deviceptr dst, const void *src, size_t nbytes,
                                   kiln_stream stream);
kiln_status kiln_memcpy_dtoh_async(void *dst, kiln_deviceptr src, size_t nbytes,
                                   kiln_stream stream);
kiln_status kiln_memcpy_dtod_async(kiln_deviceptr dst, kiln_deviceptr src, size_t nbytes,
                                   kiln_stream stream);
kiln_status kiln_memset_async(kiln_deviceptr dst, unsigned char value, size_t nbytes,
                              kiln_stream stream);

kiln_status kiln_memcpy_dtod(kiln_deviceptr dst, kiln_deviceptr src, size_t nbytes);
/* count values of 1, 2 or 4 bytes from dst, which must be aligned to the value's size. */
kiln_status kiln_memset_d8(kiln_deviceptr dst, uint8_t value, size_t count);
kiln_status kiln_memset_d16(kiln_deviceptr dst, uint16_t value, size_t count);
kiln_status kiln_memset_d32(kiln_deviceptr dst, uint32_t value, size_t count);
kiln_status kiln_memset_d16_async(kiln_deviceptr dst, uint16_t value, size_t count,
                                  kiln_stream stream);
kiln_status kiln_memset_d32_async(kiln_deviceptr dst, uint32_t value, size_t count,
                                  kiln_stream stream);

/* height rows of width values of 1, 2 or 4 bytes (value_bytes), the rows pitch bytes apart
 * (a multiple of the value's size, at least the row's bytes), as cuMemsetD2D*: the whole
 * stretch must lie in one allocation. The async form is ordered on stream. */
kiln_status kiln_memset_2d(kiln_deviceptr dst, size_t pitch, uint32_t value, unsigned value_bytes,
                           size_t width, size_t height);
kiln_status kiln_memset_2d_async(kiln_deviceptr dst, size_t pitch, uint32_t value,
                                 unsigned value_bytes, size_t width, size_t height,
                                 kiln_stream stream);

/* ---- CUDA arrays ---------------------------------------------------------------------- */

/* A CUDA array: device memory laid out for the texture units, rows of elements of one format
 * and 1, 2 or 4 channels, reached by copies (its handle is what a texture or surface object is
 * made over). Made in the current device's context. */
typedef struct kiln_array kiln_array;

/* An element's format, CUarray_format's values. */
#define KILN_ARRAY_UINT8 0x01u
#define KILN_ARRAY_UINT16 0x02u
#define KILN_ARRAY_UINT32 0x03u
#define KILN_ARRAY_INT8 0x08u
#define KILN_ARRAY_INT16 0x09u
#define KILN_ARRAY_INT32 0x0au
#define KILN_ARRAY_HALF 0x10u
#define KILN_ARRAY_FLOAT 0x20u
/* Flags, CUDA_ARRAY3D_*'s values: layers (depth counts them), surface loads and stores, the
 * six faces of a cube (width == height, depth 6, or a multiple of 6 when layered), gathers. */
#define KILN_ARRAY_LAYERED 0x01u
#define KILN_ARRAY_SURFACE_LDST 0x02u
#define KILN_ARRAY_CUBEMAP 0x04u
#define KILN_ARRAY_TEXTURE_GATHER 0x08u

typedef struct kiln_array_desc {
  size_t width;  /* elements in a row, at least 1 */
  size_t height; /* rows; 0 for a 1D array */
  size_t depth;  /* slices (or layers); 0 for a 1D or 2D array */
  unsigned format;
  unsigned num_channels; /* 1, 2 or 4 */
  unsigned flags;
} kiln_array_desc;

/* A new array of desc's shape, as cuArrayCreate (depth 0 and no flags) or cuArray3DCreate.
 * The descriptor is checked before the device: the format, the channels, a width of 0, flags
 * kiln does not know, a depth a 1D array cannot have, a cubemap's shape, a size past memory. */
kiln_status kiln_array_create(const kiln_array_desc *desc, kiln_array **out);
/* Destroys the array (cuArrayDestroy) in the context of the device it was made on, whichever
 * is current; the handle is gone even when the driver fails. NULL is a no-op. */
kiln_status kiln_array_free(kiln_array *a);
const kiln_array_desc *kiln_array_descriptor(const kiln_array *a); /* as created */
size_t kiln_array_element_size(const kiln_array *a); /* bytes of one element, all channels */
uintptr_t kiln_array_handle(const kiln_array *a);    /* the CUarray */

/* nbytes from byte offset of the array (its rows end to end) and host or device memory, or
 * another array, as cuMemcpyHtoA, cuMemcpyAtoH, cuMemcpyDtoA, cuMemcpyAtoD and cuMemcpyAtoA,
 * which CUDA documents for 1D arrays. A copy past an array's end, or a device side past its
 * allocation, is refused before the driver sees it. */
kiln_status kiln_memcpy_htoa(kiln_array *dst, size_t offset, const void *src, size_t nbytes);
kiln_status kiln_memcpy_atoh(void *dst, const kiln_array *src, size_t offset, size_t nbytes);
kiln_status kiln_memcpy_dtoa(kiln_array *dst, size_t offset, kiln_deviceptr src, size_t nbytes);
kiln_status kiln_memcpy_atod(kiln_deviceptr dst, const kiln_array *src, size_t offset,
                             size_t nbytes);
kiln_status kiln_memcpy_atoa(kiln_array *dst, size_t dst_offset, const kiln_array *src,
                             size_t src_offset, size_t nbytes);

/* One side of a 2D or 3D copy (kiln_memcpy_3d): host memory (KILN_COPY_HOST, host_size
 * bytes at host), device memory (KILN_COPY_DEVICE, at device), either (KILN_COPY_UNIFIED,
 * host_size bytes at host: the driver tells which) or a CUDA array (KILN_COPY_ARRAY, array,
 * whose own rows and slices the copy goes by: pitch and height are not read); the copy's first
 * byte at x_in_bytes, row y, slice z of it, its rows pitch bytes apart and its slices height
 * rows apart (3D only). */
#define KILN_COPY_HOST 1u
#define KILN_COPY_DEVICE 2u
#define KILN_COPY_ARRAY 3u
#define KILN_COPY_UNIFIED 4u
typedef struct kiln_copy_side {
  unsigned kind;
  const void *host;
  size_t host_size; /* the copy must stay inside it */
  kiln_deviceptr device;
  size_t x_in_bytes, y, z;
  size_t pitch, height;
  const kiln_array *array; /* borrowed */
} kiln_copy_side;

/* depth slices of height rows of width_in_bytes each, from src to dst, as cuMemcpy2D (one
 * slice from slice 0; cuMemcpy2DUnaligned with unaligned set, for device pitches that
 * cuMemAllocPitch did not give) or cuMemcpy3D. Rows may not be wider than a side's pitch, nor
 * a side's slices hold fewer rows than the copy's (when it has slices: depth above 1 or z); a host
 * side's whole stretch must lie in its host_size bytes, a device side's in one allocation, an
 * array side's in the array's rows, rows and slices (x_in_bytes and width_in_bytes whole
 * elements). The
 * async form is ordered on stream (its host memory should be page-locked, else the copy is done
 * before it returns). */
kiln_status kiln_memcpy_3d(const kiln_copy_side *src, const kiln_copy_side *dst,
                           size_t width_in_bytes, size_t height, size_t depth, int unaligned);
kiln_status kiln_memcpy_3d_async(const kiln_copy_side *src, const kiln_copy_side *dst,
                                 size_t width_in_bytes, size_t height, size_t depth,
                                 kiln_stream stream);
/* The checks of kiln_memcpy_3d that need no device: the kinds, pitches, heights, the host
 * and array sides' sizes and offsets that would wrap. */
kiln_status kiln_memcpy_3d_check(const kiln_copy_side *src, const kiln_copy_side *dst,
                                 size_t width_in_bytes, size_t height, size_t depth);

/* kiln_memcpy_3d between devices, as cuMemcpy3DPeer: a device side is memory of its device
 * (src_device, dst_device), checked there; a host side is as for kiln_memcpy_3d. */
kiln_status kiln_memcpy_3d_peer(const kiln_copy_side *src, int src_device,
                                const kiln_copy_side *dst, int dst_device, size_t width_in_bytes,
                                size_t height, size_t depth);
kiln_status kiln_memcpy_3d_peer_async(const kiln_copy_side *src, int src_device,
                                      const kiln_copy_side *dst, int dst_device,
                                      size_t width_in_bytes, size_t height, size_t depth,
                                      kiln_stream stream);

/* Managed (unified) memory, reachable from the host and every device, as cuMemAllocManaged:
 * flags KILN_MEM_ATTACH_GLOBAL (any stream may use it) or KILN_MEM_ATTACH_HOST (the host
 * alone, until attached to a stream). Free it with kiln_mem_free. kiln_stream_attach_mem
 * attaches length bytes of it from p (0: the whole allocation) to stream, as
 * cuStreamAttachMemAsync: KILN_MEM_ATTACH_GLOBAL, _HOST or _SINGLE (that stream alone). */
#define KILN_MEM_ATTACH_GLOBAL 1u
#define KILN_MEM_ATTACH_HOST 2u
#define KILN_MEM_ATTACH_SINGLE 4u
kiln_status kiln_mem_alloc_managed(size_t nbytes, unsigned flags, kiln_deviceptr *out);
kiln_status kiln_stream_attach_mem(kiln_stream stream, kiln_deviceptr p, size_t length,
                                   unsigned flags);

/* The profiler's collection on or off, for a tool that starts with it off (nsys, ncu), as
 * cuProfilerStart and cuProfilerStop. */
kiln_status kiln_profiler_start(void);
kiln_status kiln_profiler_stop(void);

/* height rows of at least width bytes, each row starting at a multiple of *pitch bytes, read
 * in elements of element_bytes (4, 8 or 16), as cuMemAllocPitch. */
kiln_status kiln_mem_alloc_pitch(size_t width, size_t height, unsigned element_bytes,
                                 kiln_deviceptr *out, size_t *pitch);

/* Free and total bytes of the current device. What kiln keeps for reuse (freed arrays' blocks,
 * the pool's unused memory) is handed back to the driver first, so it counts as free, as after
 * cuMemFree. kiln_mem_alloc and kiln_mem_alloc_pitch hand it back too before they give up for
 * want of memory. */
kiln_status kiln_mem_info(size_t *free_bytes, size_t *total_bytes);

/* The allocation p lies in: its first address and its size in bytes, as cuMemGetAddressRange
 * (a module's variable kiln handed out is its own allocation). KILN_ERROR_INVALID, with the
 * driver's CUresult, where p is no device memory of the current context. */
kiln_status kiln_mem_address_range(kiln_deviceptr p, kiln_deviceptr *base, size_t *size);

/* Whether a kernel on the current device can reach the memory at p, as far as the driver can
 * tell: 1 for device or managed memory and page-locked host memory (mapped for the device);
 * 0 for an address the driver knows nothing of (pageable host memory, say a NumPy array's
 * data, or no memory at all) on a device that cannot reach pageable memory. A device that can
 * (CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: HMM, ATS) reaches every host address: 1. p = 0
 * is reachable (an empty array's address, never read). */
kiln_status kiln_pointer_reachable(kiln_deviceptr p, int *reachable);

typedef struct kiln_pool_stats {
  uint64_t reserved, reserved_high; /* bytes the pool holds from the driver, and the most */
  uint64_t used, used_high;         /* bytes handed out, and the most */
} kiln_pool_stats;
kiln_status kiln_pool_get_stats(kiln_pool_stats *out);
kiln_status kiln_pool_trim(size_t keep_bytes); /* gives unused blocks back to the driver */

/* Page-locked host memory: copies from and to it run at the DMA engine's speed. It is always
 * portable (page-locked for every device); the flags add the driver's others. */
#define KILN_HOST_PORTABLE 1u      /* CU_MEMHOSTALLOC_PORTABLE, always set */
#define KILN_HOST_DEVICEMAP 2u     /* mapped into the device's address space */
#define KILN_HOST_WRITECOMBINED 4u /* write-combined: fast to write from the host, slow to read */
kiln_status kiln_host_alloc(size_t nbytes, void **out);
kiln_status kiln_host_alloc_with_flags(size_t nbytes, unsigned flags, void **out);
kiln_status kiln_host_free(void *p); /* NULL is a no-op */

/* Page-locks memory the program already has (cuMemHostRegister; flags KILN_HOST_PORTABLE,
 * always set, and KILN_HOST_DEVICEMAP), until kiln_host_unregister. */
kiln_status kiln_host_register(void *p, size_t nbytes, unsigned flags);
kiln_status kiln_host_unregister(void *p);

/* The address kernels use for page-locked host memory mapped into the device's space
 * (KILN_HOST_DEVICEMAP; with unified addressing the host's own), and the flags it was
 * allocated with by kiln_host_alloc_with_flags (KILN_HOST_*, as cuMemHostGetFlags, which knows
 * no registered memory). */
kiln_status kiln_host_get_device_pointer(void *p, kiln_deviceptr *out);
kiln_status kiln_host_get_flags(void *p, unsigned *out);

/* The host address at which nbytes from p are read and written: managed memory (the same
 * address) or page-locked host memory. KILN_ERROR_INVALID, before any host access, for memory
 * the host cannot reach (device memory, or an address the driver does not know) and for a
 * range running past its allocation. */
kiln_status kiln_pointer_host_address(kiln_deviceptr p, size_t nbytes, void **out);

/* Copies between pageable host memory and a device of at least min_bytes (the memcpy calls,
 * and In/Out past the 256 KiB that go through one pinned buffer) are staged: split into chunks
 * that several host threads copy through a ring of page-locked buffers while the DMA engine
 * moves the chunks before, about 3x the driver's own pageable speed. Page-locked memory goes
 * to the DMA engine directly. $KILN_STAGING_MIN, $KILN_STAGING_CHUNK (bytes, or with k, m, g;
 * "off" for min_bytes turns staging off) and $KILN_STAGING_THREADS set them, read once. A
 * device's ring (2 x threads x chunk bytes, page-locked) and its threads are made on its first
 * staged copy. */
typedef struct kiln_staging_info {
  size_t min_bytes, chunk_bytes;
  int threads;
  uint64_t copies, bytes; /* staged so far in this process */
} kiln_staging_info;
void kiln_staging_get_info(kiln_staging_info *out);

/* ---- Memory and events shared with another process (IPC) ----------------------------------
 *
 * A handle is 64 opaque bytes naming device memory or an event of this process, to be sent to
 * another process (a pipe, a socket, pickled) and opened there. CUDA opens a handle only in
 * another process than the one that made it: opening one's own fails (KILN_ERROR_CUDA,
 * CUDA_ERROR_INVALID_CONTEXT, with a sentence saying so). */
#define KILN_IPC_HANDLE_SIZE 64
typedef struct kiln_ipc_mem_handle {
  unsigned char bytes[KILN_IPC_HANDLE_SIZE];
} kiln_ipc_mem_handle;
typedef struct kiln_ipc_event_handle {
  unsigned char bytes[KILN_IPC_HANDLE_SIZE];
} kiln_ipc_event_handle;

/* The handle of the allocation p is the start of: memory kiln_mem_alloc (cuMemAlloc) made on
 * the current device. A handle names a whole allocation, so p must be its first byte (send an
 * offset beside the handle); pool memory (kiln_mem_alloc_async, kiln's arrays) and managed
 * memory cannot be shared this way, and are refused with a sentence saying so. */
kiln_status kiln_ipc_mem_get_handle(kiln_deviceptr p, kiln_ipc_mem_handle *out);
/* Maps the memory another process shared into the current device's context: *out its address
 * here, *size (NULL: not wanted) its bytes (0 if the driver cannot tell). flags: 0, or
 * KILN_IPC_LAZY_ENABLE_PEER_ACCESS, which lets memory of another device be mapped, peer access
 * enabled as needed. Unmap it with kiln_ipc_mem_close, with the same device current, before the
 * other process frees it. */
#define KILN_IPC_LAZY_ENABLE_PEER_ACCESS 1u
kiln_status kiln_ipc_mem_open(const kiln_ipc_mem_handle *handle, unsigned flags,
                              kiln_deviceptr *out, size_t *size);
kiln_status kiln_ipc_mem_close(kiln_deviceptr p);
/* The handle of an event made with KILN_EVENT_INTERPROCESS | KILN_EVENT_DISABLE_TIMING
 * (another is refused by the driver, with a sentence saying what it needs). */
kiln_status kiln_ipc_event_get_handle(kiln_event event, kiln_ipc_event_handle *out);
/* The event another process shared, in the current device's context: record it, wait for it,
 * query it as any event of this process; free it with kiln_event_destroy. */
kiln_status kiln_ipc_event_open(const kiln_ipc_event_handle *handle, kiln_event *out);

/* ---- Peer access between devices ---------------------------------------------------------
 *
 * A kernel on one device may read and write another device's memory once the first device's
 * context has peer access to the second's. kiln's contexts are the devices' primary contexts,
 * so access enabled here holds for every library in the process. */

/* 1 when device's kernels can be given access to peer's memory, else 0. A device is not its
 * own peer: it reaches its own memory always, and the answer is 0, as the driver gives. */
kiln_status kiln_device_can_access_peer(int device, int peer, int *can);
/* The current device's context gains (loses) access to device peer's memory. flags must be 0.
 * Enabling twice, or disabling what was not enabled, is the driver's error (KILN_ERROR_CUDA,
 * CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED or _NOT_ENABLED) with a sentence naming both devices. */
kiln_status kiln_context_enable_peer_access(int peer, unsigned flags);
kiln_status kiln_context_disable_peer_access(int peer);

/* nbytes from src, memory of device src_device, to dst, memory of device dst_device (the two
 * may be the same device), as cuMemcpyPeer: no peer access is needed. Each side is checked in
 * its own device's context to lie in one allocation. The async form is ordered on stream. */
kiln_status kiln_memcpy_peer(kiln_deviceptr dst, int dst_device, kiln_deviceptr src, int src_device,
                             size_t nbytes);
kiln_status kiln_memcpy_peer_async(kiln_deviceptr dst, int dst_device, kiln_deviceptr src,
                                   int src_device, size_t nbytes, kiln_stream stream);

/* ---- Streams and events ------------------------------------------------------------------
 *
 * A stream made by PyTorch or CuPy is used as it is; NULL is the legacy default stream. */

#define KILN_STREAM_NON_BLOCKING 1u /* does not wait for the legacy default stream */

kiln_status kiln_stream_create(unsigned flags, int priority, kiln_stream *out);
kiln_status kiln_stream_destroy(kiln_stream stream);
kiln_status kiln_stream_priority_range(int *least,
                                       int *greatest); /* greatest is the lowest number */
kiln_status kiln_stream_synchronize(kiln_stream stream);
kiln_status kiln_stream_query(kiln_stream stream, int *done); /* done: 1 when all work finished */
kiln_status kiln_stream_wait_event(kiln_stream stream, kiln_event event);
/* How many operations (launches, copies, memsets, graph launches, waits for an event) kiln has
 * queued in this process so far, on any stream and thread: two equal readings say that kiln
 * queued nothing in between, so memory only kiln could reach has not been written since the
 * first. Each is counted as it is about to be queued. */
unsigned long long kiln_work_count(void);

kiln_status kiln_event_create(int timing, kiln_event *out);
/* The driver's event flags, as cuda.h numbers CU_EVENT_*. */
#define KILN_EVENT_BLOCKING_SYNC 1u  /* a synchronize sleeps instead of spinning */
#define KILN_EVENT_DISABLE_TIMING 2u /* for waiting only; cheaper */
#define KILN_EVENT_INTERPROCESS 4u   /* shareable with another process; needs DISABLE_TIMING */
kiln_status kiln_event_create_with_flags(unsigned flags, kiln_event *out);
kiln_status kiln_event_destroy(kiln_event event);
kiln_status kiln_event_record(kiln_event event, kiln_stream stream);
kiln_status kiln_event_synchronize(kiln_event event);
kiln_status kiln_event_query(kiln_event event, int *done);
kiln_status kiln_event_elapsed_ms(kiln_event start, kiln_event end, float *ms);

/* ---- Launching -------------------------------------------------------------------------- */

typedef struct kiln_launch_config {
  unsigned grid[3];
  unsigned block[3];
  unsigned shared;    /* dynamic shared memory, bytes */
  kiln_stream stream; /* NULL is the legacy default stream */
} kiln_launch_config;

/* Launches f asynchronously. params[i] points at parameter i's bytes, as for cuLaunchKernel.
 * Block, grid and shared memory are checked against the device's and the kernel's limits
 * first, with a sentence naming the limit (KILN_ERROR_INVALID, kiln_last_error_is_launch_refusal()
 * 1, and kiln_last_cuda_result() the CUresult the driver would have given: mostly
 * CUDA_ERROR_INVALID_VALUE; CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES for more threads than the
 * kernel's registers allow; CUDA_ERROR_INVALID_CLUSTER_SIZE for a cluster's shape). */
kiln_status kiln_function_launch(kiln_function *f, const kiln_launch_config *cfg, void **params);

/* Checks cfg as kiln_function_launch does (the shape, then the device's and the kernel's
 * limits, loading the module on the device first), without launching. */
kiln_status kiln_function_check_launch(kiln_function *f, const kiln_launch_config *cfg);

/* Host data a parameter receives as a device pointer (PyCUDA's In, Out, InOut). */
typedef enum kiln_transfer_dir {
  KILN_IN = 1, /* copied host to device before the launch */
  /* Copied device to host after it. The device memory starts as zeros, as a new cuMemAlloc's
   * does under PyCUDA's Out: a kernel that accumulates into an output (an atomicAdd histogram)
   * counts from zero, never from what an earlier call left in reused memory. */
  KILN_OUT = 2,
  KILN_INOUT = 3
} kiln_transfer_dir;

/* The most transfers one call takes. */
#define KILN_MAX_TRANSFERS 64

typedef struct kiln_transfer {
  int param; /* which parameter gets the device pointer */
  kiln_transfer_dir dir;
  void *host; /* contiguous host memory (const for KILN_IN) */
  size_t nbytes;
} kiln_transfer;

/* Launches f with transfers: device memory for each transfer comes from kiln's reusable
 * buffers (no cuMemAlloc per call), its address is written into *params[t.param], inputs are
 * copied in, the kernel runs, outputs are copied back, and the call returns when the host
 * buffers hold the results. With elapsed_s non-NULL, the kernel's own time in seconds
 * (measured with events) is stored there. */
kiln_status kiln_function_call(kiln_function *f, const kiln_launch_config *cfg, void **params,
                               const kiln_transfer *transfers, int n_transfers, double *elapsed_s);

/* The same, queued on cfg->stream and returning at once: device memory for the transfers comes
 * from the pool and goes back to it in stream order; inputs are read before it returns (the
 * driver stages pageable memory); outputs are in the host buffers once the stream has been
 * synchronized, so they must stay alive until then. A copy into pageable memory makes the driver
 * wait for it: use page-locked buffers for outputs that should not block. */
kiln_status kiln_function_call_async(kiln_function *f, const kiln_launch_config *cfg, void **params,
                                     const kiln_transfer *transfers, int n_transfers);

/* How a call with transfers waits for the GPU where it would otherwise block in the driver
 * (cuStreamSynchronize, or a copy into pageable memory, which the driver makes wait for the
 * kernel): the call queues the launch, then calls wait(arg, stream), which returns KILN_OK once
 * the work queued on stream so far is done (kiln_stream_query says so), or any other status to
 * give up. A caller that must stay responsive (Python's Ctrl-C) polls in it. Giving up leaves
 * the GPU's work running: the call then queues nothing more that writes the host buffers, and
 * returns that status (KILN_ERROR_INTERRUPTED with a message when wait gave that); device memory
 * the work still uses is reused only once an event says it is over (without stream-ordered
 * pools it is never freed). wait is called from the calling thread, at most once per call. */
typedef kiln_status (*kiln_wait_fn)(void *arg, kiln_stream stream);

/* kiln_function_call and kiln_function_call_async with wait (NULL: the driver's own wait). The
 * asynchronous one calls wait only when an output is pageable, where the driver would block. */
kiln_status kiln_function_call_waiting(kiln_function *f, const kiln_launch_config *cfg,
                                       void **params, const kiln_transfer *transfers,
                                       int n_transfers, double *elapsed_s, kiln_wait_fn wait,
                                       void *wait_arg);
kiln_status kiln_function_call_async_waiting(kiln_function *f, const kiln_launch_config *cfg,
                                             void **params, const kiln_transfer *transfers,
                                             int n_transfers, kiln_wait_fn wait, void *wait_arg);

/* ---- Extended launches -------------------------------------------------------------------
 *
 * What cuLaunchKernelEx adds to a plain launch. A zeroed struct is a plain launch. */
typedef struct kiln_launch_options {
  /* Blocks per thread-block cluster (compute capability 9.0 and newer); {0, 0, 0} is none, or
   * the kernel's own __cluster_dims__. Each must divide the grid's dimension; more than 8
   * blocks (the portable size, up to 16) is allowed for the kernel first. */
  unsigned cluster[3];
  /* A cooperative launch: the grid may synchronize as a whole (cooperative_groups'
   * this_grid().sync()). The grid must fit on the device at once, which is checked against the
   * occupancy calculator before the launch. */
  int cooperative;
  /* Programmatic dependent launch (compute capability 9.0 and newer): this kernel may begin
   * while the one before it on the stream finishes, from its
   * cudaTriggerProgrammaticLaunchCompletion(); it waits in cudaGridDependencySynchronize(). */
  int programmatic;
} kiln_launch_options;

/* kiln_function_launch with options (NULL or zeroed: the plain launch), through
 * cuLaunchKernelEx. Each option is checked before the driver sees it (KILN_ERROR_INVALID with
 * a sentence): the device's compute capability, the cluster's shape and size and that one
 * cluster fits on a multiprocessor, the cooperative grid against the blocks that can be
 * resident at once. */
kiln_status kiln_function_launch_ex(kiln_function *f, const kiln_launch_config *cfg,
                                    const kiln_launch_options *opts, void **params);

/* ---- Occupancy (the driver's calculator, on the current device) ------------------------- */

/* Blocks of block_threads threads with shared bytes of dynamic shared memory that can be
 * resident on one multiprocessor at once. */
kiln_status kiln_function_max_active_blocks(kiln_function *f, unsigned block_threads, size_t shared,
                                            int *blocks);
/* The block size giving the most resident threads (at most block_limit, 0: no limit) and the
 * smallest grid that fills the device with it. */
kiln_status kiln_function_suggested_block_size(kiln_function *f, size_t shared, int block_limit,
                                               int *min_grid, int *block_threads);
/* The most dynamic shared memory a block of block_threads can have with blocks of them
 * resident on each multiprocessor. */
kiln_status kiln_function_available_dynamic_shared(kiln_function *f, int blocks,
                                                   unsigned block_threads, size_t *bytes);
/* Clusters of cfg's shape (opts->cluster, or the kernel's __cluster_dims__) that can be
 * resident on the device at once; 0 when one does not fit. */
kiln_status kiln_function_max_active_clusters(kiln_function *f, const kiln_launch_config *cfg,
                                              const kiln_launch_options *opts, int *clusters);

/* ---- Graphs ------------------------------------------------------------------------------
 *
 * A recorded sequence of work on one stream, replayed at the cost of one call. Between
 * kiln_graph_begin_capture and kiln_graph_end_capture, what is queued on the stream (kernel
 * launches, device-to-device copies, memsets, copies to and from page-locked memory) is
 * recorded, not run; In/Out transfers are refused there, since their host memory and
 * temporaries would not exist when the graph is replayed. The kernels kiln launched on the
 * stream are the graph's kernels, numbered in launch order: one's arguments can be replaced
 * before a replay without instantiating the graph again. */
typedef struct kiln_graph kiln_graph;

/* Begins recording stream (not the legacy default stream). When another
 * library is already capturing the stream (PyTorch's torch.cuda.graph), kiln's launches are
 * recorded into that capture and the graph only numbers them: it joins, and cannot be
 * launched itself. */
kiln_status kiln_graph_begin_capture(kiln_stream stream, kiln_graph **out);
/* Ends the recording and instantiates the graph. On failure the graph is still the caller's
 * to free. */
kiln_status kiln_graph_end_capture(kiln_graph *g);
/* Whether work queued on stream now would be recorded rather than run. */
kiln_status kiln_stream_is_capturing(kiln_stream stream, int *capturing);

kiln_status kiln_graph_launch(kiln_graph *g, kiln_stream stream);
int kiln_graph_kernel_count(const kiln_graph *g);
int kiln_graph_joined(const kiln_graph *g); /* 1: recorded into another library's capture */
/* The function kernel `index` launches (borrowed), or NULL when index is out of range. */
kiln_function *kiln_graph_kernel_function(const kiln_graph *g, int index);
/* Replaces the arguments of kernel `index` for the replays after it: params as for
 * kiln_function_launch (the bytes are copied now). */
kiln_status kiln_graph_set_kernel_params(kiln_graph *g, int index, void **params);
/* Takes the arguments of every node of from, a capture of the same shape (the same kernels,
 * copies and memsets in the same order), through cuGraphExecUpdate: g then replays what from
 * recorded, without being instantiated again. from is not changed. */
kiln_status kiln_graph_update(kiln_graph *g, const kiln_graph *from);
void kiln_graph_free(kiln_graph *g); /* NULL is a no-op; ends a capture still open */

#ifdef __cplusplus
}
#endif

#endif /* KILN_H */
