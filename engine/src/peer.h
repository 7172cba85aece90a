/* Peer access between devices, and what a copy between devices checks of each side. */
#ifndef KILN_PEER_H
#define KILN_PEER_H

#include "memory.h"

/* Makes device's primary context current (setting the device up; the thread's current device
 * stays as it was) and checks there that nbytes from p lie in one allocation (nothing is
 * checked for 0 bytes); *ctx (NULL: not wanted) gets the context. The caller makes the current
 * device's context current again with kiln__device_enter, whatever this returned. */
kiln_status kiln__peer_check(int device, kiln_deviceptr p, size_t nbytes, const char *what,
                             CUcontext *ctx);

#endif
