/* The ground floor: what every engine file shares and the public header does not show, the
 * compiler's attributes and the status helpers of status.c.
 *
 * Internal symbols are named for the file that defines them, kiln__<file>_<thing>
 * (kiln__memory_small_release is in memory.c, kiln__ptx_parse in ptx.c). The status helpers
 * are the exception: every file speaks them, so they keep short names (kiln__fail,
 * kiln__fail_append, kiln__set_cuda_result, kiln__warn, kiln__clear_error here, and
 * kiln__cuda_fail in driver.h). */
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

/* A pointer parameter the call cannot do without is NULL: KILN_ERROR_INVALID naming the call and
 * the parameter. KILN__NEED(out) at the top of a public call returns it, before any work. */
kiln_status kiln__fail_null(const char *call, const char *param);
#define KILN__NEED(p)                                               \
  do {                                                              \
    if (KILN__UNLIKELY(!(p))) return kiln__fail_null(__func__, #p); \
  } while (0)

/* Appends to the message of the failure being reported (a list of kernels, say). */
void kiln__fail_append(const char *fmt, ...) KILN__PRINTF(1, 2);

/* Stores the CUresult kiln_last_cuda_result() reports; call after kiln__fail(). */
void kiln__set_cuda_result(int result);

/* A launch refused before the driver sees it: KILN_ERROR_INVALID with the sentence, and with the
 * CUresult the driver would have given as kiln_last_cuda_result(), so that a binding can raise
 * what a program written for the driver's error catches. */
kiln_status kiln__refuse_launch(int cuda_result, const char *fmt, ...) KILN__PRINTF(2, 3);

/* Hands a warning to the handler set with kiln_set_warning_handler (stderr by default). */
void kiln__warn(const char *fmt, ...) KILN__PRINTF(1, 2);

/* Clears the last error on a successful public call. */
void kiln__clear_error(void);

/* s, with the last error cleared when it is KILN_OK: how a public call returns early, with
 * nothing to do (zero bytes, a NULL to free), keeps kiln_last_error() true. */
kiln_status kiln__done(kiln_status s);

#endif
