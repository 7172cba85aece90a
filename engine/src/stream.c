/* Streams and events: thin, checked wrappers, each run in the current device's context. The
 * handles are the driver's CUstream and CUevent, so streams of PyTorch or CuPy work as they
 * are. */
#include "memory.h"

_Static_assert(KILN_EVENT_BLOCKING_SYNC == CU_EVENT_BLOCKING_SYNC &&
                   KILN_EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING &&
                   KILN_EVENT_INTERPROCESS == CU_EVENT_INTERPROCESS,
               "kiln's event flags are the driver's");

unsigned long long kiln__stream_work;

unsigned long long kiln_work_count(void) {
  return __atomic_load_n(&kiln__stream_work, __ATOMIC_ACQUIRE);
}

kiln_status kiln_stream_create(unsigned flags, int priority, kiln_stream *out) {
  KILN__NEED(out);
  *out = NULL;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (flags & ~(unsigned)KILN_STREAM_NON_BLOCKING)
    return kiln__fail(KILN_ERROR_INVALID,
                      "stream flags are 0 or KILN_STREAM_NON_BLOCKING (1), "
                      "not %u",
                      flags);
  int least = 0, greatest = 0;
  KILN__CU(CtxGetStreamPriorityRange, (&least, &greatest));
  if (priority > least || priority < greatest)
    return kiln__fail(KILN_ERROR_INVALID,
                      "stream priority %d is outside this device's range, "
                      "%d (lowest) to %d (highest)",
                      priority, least, greatest);
  CUstream st = NULL;
  KILN__CU(StreamCreateWithPriority,
           (&st, flags ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT, priority));
  *out = st;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_priority_range(int *least, int *greatest) {
  KILN__NEED(least);
  KILN__NEED(greatest);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(CtxGetStreamPriorityRange, (least, greatest));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_destroy(kiln_stream stream) {
  if (!stream) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  kiln__memory_small_release(d, stream, 0); /* no later stream may reuse them */
  KILN__CU(StreamDestroy, (stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_synchronize(kiln_stream stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(StreamSynchronize, (stream));
  kiln__clear_error();
  return KILN_OK;
}

/* Done: 1 when all its work has finished, 0 while some is pending. */
static kiln_status kiln__ready(CUresult rc, const char *call, int *done) {
  *done = rc == CUDA_SUCCESS;
  if (rc != CUDA_SUCCESS && rc != CUDA_ERROR_NOT_READY) return kiln__cuda_fail(call, (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_query(kiln_stream stream, int *done) {
  KILN__NEED(done);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  return kiln__ready(kiln__driver.StreamQuery(stream), "cuStreamQuery", done);
}

kiln_status kiln_stream_wait_event(kiln_stream stream, kiln_event event) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!event) return kiln__fail(KILN_ERROR_INVALID, "the event is NULL");
  /* Counted as work: what is queued after it, there or on the legacy stream behind it, may
   * now wait for work that kiln_work_count() has seen already. */
  kiln__stream_note_work();
  KILN__CU(StreamWaitEvent, (stream, event, 0));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_create_with_flags(unsigned flags, kiln_event *out) {
  KILN__NEED(out);
  *out = NULL;
  unsigned known = KILN_EVENT_BLOCKING_SYNC | KILN_EVENT_DISABLE_TIMING | KILN_EVENT_INTERPROCESS;
  if (flags & ~known)
    return kiln__fail(KILN_ERROR_INVALID,
                      "event flags are KILN_EVENT_BLOCKING_SYNC (1), KILN_EVENT_DISABLE_TIMING "
                      "(2) and KILN_EVENT_INTERPROCESS (4); 0x%x has others",
                      flags);
  if ((flags & KILN_EVENT_INTERPROCESS) && !(flags & KILN_EVENT_DISABLE_TIMING))
    return kiln__fail(KILN_ERROR_INVALID,
                      "an interprocess event cannot time: add KILN_EVENT_DISABLE_TIMING");
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUevent e = NULL;
  KILN__CU(EventCreate, (&e, flags)); /* kiln's flags are the driver's CU_EVENT_* */
  *out = e;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_create(int timing, kiln_event *out) {
  return kiln_event_create_with_flags(timing ? 0 : KILN_EVENT_DISABLE_TIMING, out);
}

kiln_status kiln_event_destroy(kiln_event event) {
  if (!event) return KILN_OK; /* a no-op, the last error kept (kiln.h) */
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(EventDestroy, (event));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_record(kiln_event event, kiln_stream stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(EventRecord, (event, stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_synchronize(kiln_event event) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(EventSynchronize, (event));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_query(kiln_event event, int *done) {
  KILN__NEED(done);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  return kiln__ready(kiln__driver.EventQuery(event), "cuEventQuery", done);
}

kiln_status kiln_event_elapsed_ms(kiln_event start, kiln_event end, float *ms) {
  KILN__NEED(ms);
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUresult rc = kiln__driver.EventElapsedTime(ms, start, end);
  if (rc == CUDA_ERROR_NOT_READY)
    return kiln__fail(KILN_ERROR_INVALID, "an event has not completed yet (or was never "
                                          "recorded); synchronize the later one first");
  if (rc == CUDA_ERROR_INVALID_HANDLE) {
    kiln__fail(KILN_ERROR_INVALID, "an event was made without timing; make both with timing "
                                   "to measure between them");
    kiln__set_cuda_result((int)rc);
    return KILN_ERROR_INVALID;
  }
  if (rc) return kiln__cuda_fail("cuEventElapsedTime", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}
