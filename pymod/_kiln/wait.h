/* Waits for the GPU that Ctrl-C and a timeout can end: every synchronizing call of the module
 * goes through here. */
#ifndef KPY_WAIT_H
#define KPY_WAIT_H

#include "state.h"

/* What a wait polls: sets *done to 1 once the work waited for has finished; a failure is the
 * engine's status, its message on the calling thread. */
typedef kiln_status (*kpy_poll)(void *what, int *done);

/* Waits until poll says done. It asks once with the GIL held (work already done costs one
 * query), then polls without the GIL: busily for the first 2 ms, as the driver's own
 * synchronize spins, then every 100 µs, taking the GIL back every 10 ms to run signal
 * handlers. timeout is in seconds, negative for none. 0, or -1 with an exception raised: the
 * engine's, KeyboardInterrupt (or whatever a signal handler raised), or TimeoutError; the
 * work queued on the GPU goes on in the last two cases. what_name says what was waited for
 * ("the stream"), in those messages. Call with the GIL held. */
int kpy_wait(kpy_state *st, kpy_poll poll, void *what, double timeout, const char *what_name);

/* The same for a stream's work, an event, and all the work of the current device. */
int kpy_wait_stream(kpy_state *st, kiln_stream stream, double timeout);
int kpy_wait_event(kpy_state *st, kiln_event event, double timeout);
int kpy_wait_device(kpy_state *st, double timeout);

/* Before a copy that blocks, on stream (NULL: the legacy default stream): kpy_wait_stream, so
 * that Ctrl-C can end a wait for the work before it; except that on the legacy stream it is
 * skipped when kiln has queued no work (kiln_work_count) since that stream was last seen done
 * on this device, by such a wait or by kpy_wait_copied. The copy is ordered behind the stream's
 * work by the driver either way: what is skipped is a record and query of an event, about the
 * cost of a small copy itself. Work another library queued meanwhile is then waited for in the
 * driver's copy, where Ctrl-C is not seen. */
int kpy_wait_before_copy(kpy_state *st, kiln_stream stream);

/* After a copy on the legacy stream of device that has finished (it blocked, or it was waited
 * for), with the work count read before it was queued: the stream's work before the copy is done as
 * well, so when the copy was the only work queued since, the stream is known done up to it. */
void kpy_wait_copied(kpy_state *st, int device, unsigned long long work_before);

/* The wait the engine calls inside a call with In/Out (kiln_wait_fn), made while the GIL is
 * released: it polls the stream without the GIL and takes the GIL back through ts (which it
 * keeps current) only every 10 ms, to run signal handlers. When one raised (Ctrl-C) it returns
 * KILN_ERROR_INTERRUPTED, with that exception set on the thread for after the GIL is back. */
typedef struct kpy_released {
  PyThreadState *ts; /* what PyEval_SaveThread gave; restore through it after the call */
} kpy_released;
kiln_status kpy_wait_hook(void *arg, kiln_stream stream);

/* Reads timeout= (None, or seconds: an int or float of 0 or more) into *out, -1 for None. -1
 * with TypeError or ValueError. */
int kpy_wait_timeout(PyObject *obj, double *out);

int kpy_wait_init(PyObject *module, kpy_state *st);

#endif
