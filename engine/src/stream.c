/* Streams and events: thin, checked wrappers, each run in the current device's context. The
 * handles are the driver's CUstream and CUevent, so streams of PyTorch or CuPy work as they
 * are. */
#include "device.h"

kiln_status kiln_stream_create(unsigned flags, int priority, void **out) {
  *out = NULL;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (flags & ~(unsigned)KILN_STREAM_NON_BLOCKING)
    return kiln__fail(KILN_ERROR_INVALID, "stream flags are 0 or KILN_STREAM_NON_BLOCKING (1), "
                      "not %u", flags);
  int least = 0, greatest = 0;
  KILN__CU(CtxGetStreamPriorityRange, (&least, &greatest));
  if (priority > least || priority < greatest)
    return kiln__fail(KILN_ERROR_INVALID, "stream priority %d is outside this device's range, "
                      "%d (lowest) to %d (highest)", priority, least, greatest);
  CUstream st = NULL;
  KILN__CU(StreamCreateWithPriority,
           (&st, flags ? CU_STREAM_NON_BLOCKING : CU_STREAM_DEFAULT, priority));
  *out = st;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_priority_range(int *least, int *greatest) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(CtxGetStreamPriorityRange, (least, greatest));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_destroy(void *stream) {
  if (!stream) return KILN_OK;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  kiln__small_release(&d->small, (CUstream)stream, 0); /* no later stream may reuse them */
  KILN__CU(StreamDestroy, ((CUstream)stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_stream_synchronize(void *stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(StreamSynchronize, ((CUstream)stream));
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

kiln_status kiln_stream_query(void *stream, int *done) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  return kiln__ready(kiln__cu.StreamQuery((CUstream)stream), "cuStreamQuery", done);
}

kiln_status kiln_stream_wait_event(void *stream, void *event) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!event) return kiln__fail(KILN_ERROR_INVALID, "the event is NULL");
  KILN__CU(StreamWaitEvent, ((CUstream)stream, (CUevent)event, 0));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_create(int timing, void **out) {
  *out = NULL;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUevent e = NULL;
  KILN__CU(EventCreate, (&e, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING));
  *out = e;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_destroy(void *event) {
  if (!event) return KILN_OK;
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(EventDestroy, ((CUevent)event));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_record(void *event, void *stream) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(EventRecord, ((CUevent)event, (CUstream)stream));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_synchronize(void *event) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(EventSynchronize, ((CUevent)event));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_event_query(void *event, int *done) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  return kiln__ready(kiln__cu.EventQuery((CUevent)event), "cuEventQuery", done);
}

kiln_status kiln_event_elapsed_ms(void *start, void *end, float *ms) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  CUresult rc = kiln__cu.EventElapsedTime(ms, (CUevent)start, (CUevent)end);
  if (rc == CUDA_ERROR_NOT_READY)
    return kiln__fail(KILN_ERROR_INVALID, "an event has not completed yet (or was never "
                      "recorded); synchronize the later one first");
  if (rc == CUDA_ERROR_INVALID_HANDLE)
    return kiln__fail(KILN_ERROR_INVALID, "an event was made without timing; make both with "
                      "timing to measure between them");
  if (rc) return kiln__cuda_fail("cuEventElapsedTime", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}
