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
