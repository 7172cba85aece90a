/* Precompiled headers: the run of preprocessor lines a source begins with (its #include
 * lines, mostly), compiled once by NVRTC into a PCH file and reused by every later compile in
 * the process whose beginning, options and headers are the same. */
#ifndef KILN_PCH_H
#define KILN_PCH_H

#include "hash.h"
#include "headers.h"
#include "nvrtc.h"

#include <limits.h>
#include <stdint.h>

/* What one compile does about a PCH: nothing (opt[0] == 0), create one, or use one. */
typedef struct kiln__pch_plan {
  char opt[PATH_MAX + 16]; /* "--create-pch=<file>" or "--use-pch=<file>"; "" for none */
  int creating;
  unsigned char key[KILN__KEY_SIZE];
  char path[PATH_MAX];
  char final[PATH_MAX];  /* a lasting file's name once whole; "" for this process's own */
  kiln__headers headers; /* owned: what the beginning reaches, while creating */
} kiln__pch_plan;

/* Decides the plan for src compiled with the NVRTC options args[0..n_args) (all of them: the
 * arch, folders and the user's), the in-memory headers of opts, cwd as the folder of quoted
 * includes; PCH files live in dir/pch. No plan (never a failure) when dir is NULL, the source
 * begins with no #include, NVRTC is older than 12.8, $KILN_PCH=0, or a header it reaches
 * cannot be known. */
void kiln__pch_plan_for(const char *src, const kiln_compile_opts *opts, const char *const *args,
                        int n_args, const char *dir, const char *cwd, kiln__pch_plan *plan);

/* The key of a PCH of src's first n bytes (its beginning) compiled with args[0..n_args), the
 * in-memory headers of opts, dir and cwd, where kiln's own headers have the digest
 * kiln_headers (kiln__stdheaders_digest_kept(): a parameter so that a test can vary it). */
kiln_status kiln__pch_key(const char *src, size_t n, const kiln_compile_opts *opts,
                          const char *const *args, int n_args, const char *dir, const char *cwd,
                          const unsigned char kiln_headers[KILN__KEY_SIZE],
                          unsigned char key[KILN__KEY_SIZE]);

/* 1 when a compile of src with opts, cache folder dir and NVRTC id could go through a PCH:
 * what kiln__pch_plan_for would look at further, without NVRTC open. */
int kiln__pch_could_use(const char *src, const kiln_compile_opts *opts, const char *dir,
                        const kiln__nvrtc_id *id);

/* After the compile: a created file is kept for later compiles when NVRTC says it made it
 * (log, the compile's log); a used one is dropped when NVRTC did not take it. */
void kiln__pch_done(kiln__pch_plan *plan, int compiled, const char *log);

/* 1 when log, a compile's, says NVRTC could not take or make its PCH file. */
int kiln__pch_refused(const char *log);

/* The PCH files in dir/pch and their bytes, every process's. */
void kiln__pch_usage(const char *dir, uint64_t *files, uint64_t *bytes);

/* Drops this process's least recently used PCH files until those it keeps take at most max
 * bytes; returns the bytes of every process's PCH files left in dir/pch, for the bound. */
uint64_t kiln__pch_trim(const char *dir, uint64_t max);

/* Removes PCH files of dir/pch that no live process uses; returns the bytes removed. */
uint64_t kiln__pch_sweep(const char *dir);

/* The same, and the lasting files besides: `cache clear`. */
uint64_t kiln__pch_clear(const char *dir);

/* Lasting files (1) in place of this process's own: for the compile helper, whose NVRTC
 * sits at the same addresses in every run, so that a later run can take its files. */
void kiln__pch_set_lasting(int on);

/* Adds the counts of a compile made in the helper to this process's. */
void kiln__pch_add_counts(uint64_t created, uint64_t used);

/* This process's PCH reuse counts: compiles that created one, and that used one. */
void kiln__pch_counts(uint64_t *created, uint64_t *used);

#endif
