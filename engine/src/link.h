/* Relocatable device code linked with the device runtime (libcudadevrt.a), so that kernels can
 * launch kernels: nvJitLink, opened with dlopen like NVRTC, which needs no driver; else the
 * driver's own linker (cuLink*), which needs a device. */
#ifndef KILN_LINK_H
#define KILN_LINK_H

#include "compile.h"

#include <limits.h>
#include <stdint.h>

/* The libcudadevrt.a a compile links: opts->device_runtime (the file, or a folder holding it),
 * else beside the NVRTC library, else in lib64 under $CUDA_HOME, $CUDA_PATH and
 * /usr/local/cuda. Its size goes into the cache key. KILN_ERROR_INVALID naming the places
 * looked at when there is none. */
kiln_status kiln__link_runtime_path(const kiln_compile_opts *opts, char path[PATH_MAX],
                                    uint64_t *bytes);

/* Links code's relocatable CUBIN with the device runtime, replacing it by the linked one. A
 * link error is KILN_ERROR_COMPILE with the linker's log appended to code->log. */
kiln_status kiln__link_device_runtime(const kiln_compile_opts *opts, kiln__code *code);

#endif
