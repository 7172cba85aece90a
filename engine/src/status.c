/* Statuses, their names and strings, the thread-local detail of the last failure, and
 * warnings: the ground floor every other file stands on. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* Long enough for a kernel list or an NVRTC error line; longer sentences are cut. */
#define KILN__MSG_MAX 4096

static _Thread_local char kiln__msg[KILN__MSG_MAX];
static _Thread_local int kiln__cuda_result;
static _Thread_local int kiln__launch_refused; /* the failure is kiln__refuse_launch's */

const char *kiln_status_name(kiln_status s) {
  switch (s) {
  case KILN_OK: return "KILN_OK";
#define KILN__NAME_CASE(name, msg) \
  case KILN_ERROR_##name: return "KILN_ERROR_" #name;
    KILN_STATUS_MAP(KILN__NAME_CASE)
#undef KILN__NAME_CASE
  default: return "KILN_ERROR_UNKNOWN";
  }
}

const char *kiln_status_string(kiln_status s) {
  switch (s) {
  case KILN_OK: return "success";
#define KILN__STRING_CASE(name, msg) \
  case KILN_ERROR_##name: return msg;
    KILN_STATUS_MAP(KILN__STRING_CASE)
#undef KILN__STRING_CASE
  default: return "unknown status";
  }
}

const char *kiln_last_error(void) { return kiln__msg; }

int kiln_last_cuda_result(void) { return kiln__cuda_result; }

int kiln_last_error_is_launch_refusal(void) { return kiln__launch_refused; }

void kiln__clear_error(void) {
  kiln__msg[0] = '\0';
  kiln__cuda_result = 0;
  kiln__launch_refused = 0;
}

kiln_status kiln__done(kiln_status s) {
  if (!s) kiln__clear_error();
  return s;
}

/* The sentence of a failure, with its CUresult (0: none) and whether it refused a launch. */
KILN__PRINTF(3, 0)
static void kiln__vfail(int cuda_result, int launch_refused, const char *fmt, va_list ap) {
  vsnprintf(kiln__msg, sizeof kiln__msg, fmt, ap);
  kiln__cuda_result = cuda_result;
  kiln__launch_refused = launch_refused;
}

kiln_status kiln__fail(kiln_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln__vfail(0, 0, fmt, ap);
  va_end(ap);
  return s;
}

kiln_status kiln__fail_null(const char *call, const char *param) {
  return kiln__fail(KILN_ERROR_INVALID, "%s: %s is NULL, and the call needs it", call, param);
}

void kiln__fail_append(const char *fmt, ...) {
  size_t used = strlen(kiln__msg);
  if (used + 1 >= sizeof kiln__msg) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(kiln__msg + used, sizeof kiln__msg - used, fmt, ap);
  va_end(ap);
}

void kiln__set_cuda_result(int result) { kiln__cuda_result = result; }

kiln_status kiln__refuse_launch(int cuda_result, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  kiln__vfail(cuda_result, 1, fmt, ap);
  va_end(ap);
  return KILN_ERROR_INVALID;
}

/* ---- Warnings ------------------------------------------------------------------------------ */

static void kiln__warn_stderr(const char *message, void *ctx) {
  (void)ctx;
  fprintf(stderr, "kiln: warning: %s\n", message);
}

static kiln_warning_handler kiln__warning_fn = kiln__warn_stderr;
static void *kiln__warning_ctx;

void kiln_set_warning_handler(kiln_warning_handler fn, void *ctx) {
  __atomic_store_n(&kiln__warning_ctx, ctx, __ATOMIC_RELEASE);
  __atomic_store_n(&kiln__warning_fn, fn ? fn : kiln__warn_stderr, __ATOMIC_RELEASE);
}

void kiln__warn(const char *fmt, ...) {
  char message[KILN__MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  kiln_warning_handler fn = __atomic_load_n(&kiln__warning_fn, __ATOMIC_ACQUIRE);
  fn(message, __atomic_load_n(&kiln__warning_ctx, __ATOMIC_ACQUIRE));
}
