/* Modules (compiled code and its kernels) and functions (one kernel each). */
#ifndef KILN_MODULE_H
#define KILN_MODULE_H

#include "device.h"
#include "entry.h"

#include <pthread.h>

struct kiln_function {
  kiln_module *module;        /* borrowed: the module owns its functions */
  const kiln__kernel *kernel; /* borrowed from the module: name and parameters */
  CUkernel handle;            /* the driver's; NULL until the module is loaded */
  int ready_device;           /* the device the limits below are for; -1 before any */
  int max_threads;            /* threads per block this kernel can launch with */
  int static_shared;          /* bytes of __shared__ the kernel declares */
  int dynamic_shared_allowed; /* bytes of dynamic shared memory opted in to */
  char *signature;            /* owned: as the source declares it, or NULL for the plain name */
  unsigned cluster_dims[3];   /* the kernel's __cluster_dims__; zeros when it has none */
  /* launch.c's: the last cooperative and cluster shapes found to fit, each packed with its
   * device and answer into one word (read and written whole, so threads never see half of
   * one), so that a repeated launch asks the occupancy calculator once. 0: none yet. */
  uint64_t cooperative_fit, cluster_fit;
};

/* A module-scope variable (__device__, __constant__) found in the PTX, and its address on the
 * device that last asked for it. */
typedef struct kiln__global {
  char *name;  /* the PTX name, mangled or not; owned */
  char *plain; /* the name a user writes: "coeffs", "ns::table"; owned */
  int device;  /* the device ptr and size are for, -1 before any; guarded by load_lock */
  CUdeviceptr ptr;
  size_t size;
} kiln__global;

struct kiln_module {
  int refs; /* atomic; the in-process table holds one */
  unsigned char key[KILN__KEY_SIZE];
  kiln__code code;       /* owned */
  kiln__kernel *kernels; /* owned */
  int n_kernels;
  kiln_function *functions;  /* owned, one per kernel */
  kiln__headers headers;     /* the user headers it was compiled against; a hit needs them
                                unchanged */
  pthread_mutex_t load_lock; /* guards lib and the functions' handles */
  CUlibrary lib;             /* loaded on first launch, context-independent */
  kiln__global *globals;     /* owned; read from the PTX at the first kiln_module_get_global */
  int n_globals;
  int globals_read;         /* guarded by load_lock */
  char *loader_logs;        /* owned: the log buffers of kiln_module_from_image_jit's load, which
                               the library's later loads in other contexts write */
  struct kiln_module *next; /* the table's chain */
  int in_table;             /* guarded by the table's lock; read without it as a hint */
  unsigned long long used;  /* the table's clock at its last use; guarded by its lock */
};

/* A module around what c holds (from the cache, or prebuilt code from image.c); takes it all,
 * leaving c empty, on failure too. */
kiln_status kiln__module_adopt(kiln__cached *c, kiln_module **out);

/* Loads the module for device d if it is not loaded yet; call with m->load_lock held. */
kiln_status kiln__module_load_locked(kiln_module *m, kiln__device *d);

/* Loads the module if needed and reads f's limits for device d. */
kiln_status kiln__module_function_ready(kiln_function *f, kiln__device *d);

#endif
