/* Compiles in kiln-nvrtc, a helper process whose NVRTC sits at the same addresses in every run,
 * so that the precompiled headers one run makes, later processes can take (pch.c's lasting
 * files). */
#ifndef KILN_REMOTE_H
#define KILN_REMOTE_H

#include "compile.h"

/* Compiles src as kiln__compile would, in the helper, when it is set (kiln_nvrtc_set_helper,
 * $KILN_NVRTC_HELPER) and the compile could use a PCH, or when crowded (another compile runs
 * NVRTC in this process now); the helper checks that its NVRTC is the one id names (the cache
 * key's). *handled is 0 when the compile must run in this process instead: no helper, nothing
 * to gain, or a helper that could not be started or answered nonsense (it is not tried
 * again). */
kiln_status kiln__remote_compile(const char *src, const kiln_compile_opts *opts, const char *arch,
                                 const char *pch_dir, const char *cwd, const kiln__nvrtc_id *id,
                                 int crowded, kiln__code *out, int *handled);

/* The helper's main: one request on standard input, its answer on standard output. */
int kiln__remote_main(int argc, char **argv);

#endif
