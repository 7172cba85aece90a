/* What the engine's files share and the public header does not show. */
#ifndef KILN_INTERNAL_H
#define KILN_INTERNAL_H

#include "kiln.h"

#include <stdarg.h>

#if defined(__GNUC__)
#define KILN__PRINTF(f, a) __attribute__((format(printf, f, a)))
#define KILN__LIKELY(x) __builtin_expect(!!(x), 1)
#define KILN__UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define KILN__PRINTF(f, a)
#define KILN__LIKELY(x) (x)
#define KILN__UNLIKELY(x) (x)
#endif

#define KILN__COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Records the sentence kiln_last_error() returns and gives back s, so a failure reads
 * `return kiln__fail(KILN_ERROR_INVALID, "block.x is %u; ...", x);`. */
kiln_status kiln__fail(kiln_status s, const char *fmt, ...) KILN__PRINTF(2, 3);

/* Appends to the message of the failure being reported (a list of kernels, say). */
void kiln__fail_append(const char *fmt, ...) KILN__PRINTF(1, 2);

/* Records a failed driver call: its CUresult, name and the routine that returned it. Maps
 * out-of-memory and launch failures to their own statuses. */
kiln_status kiln__cuda_fail(const char *call, int result);

/* Stores the CUresult kiln_last_cuda_result() reports; call after kiln__fail(). */
void kiln__set_cuda_result(int result);

/* Hands a warning to the handler set with kiln_set_warning_handler (stderr by default). */
void kiln__warn(const char *fmt, ...) KILN__PRINTF(1, 2);

/* Clears the last error on a successful public call. */
void kiln__clear_error(void);

/* Small string helpers. */
char *kiln__strdup(const char *s);
char *kiln__memdup(const void *p, size_t n);

/* A whole regular file of at most max bytes, NUL-terminated, in a malloc'd buffer; its stat in
 * *st. NULL with errno set when it cannot be read (EISDIR: not a regular file; EFBIG: larger
 * than max). */
struct stat;
char *kiln__read_file(const char *path, size_t max, struct stat *st, size_t *size);

#endif
