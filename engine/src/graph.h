/* Graphs: stream capture, the kernels kiln launched into it, replay and update. */
#ifndef KILN_GRAPH_H
#define KILN_GRAPH_H

#include "device.h"

/* How many kiln captures are open in the process: the launch path reads it (one load) before
 * asking whether its launch is one to note. */
extern int kiln__graph_open;

/* Notes a kernel kiln has just queued on stream: when this thread's capture records that
 * stream, the new kernel node becomes the graph's next kernel. Never fails the launch: a node
 * it cannot find leaves a kernel whose arguments cannot be replaced, said when that is tried. */
void kiln__graph_note_launch(kiln_function *f, CUstream stream);

/* KILN_ERROR_INVALID with a sentence when work queued on stream would be recorded: launches
 * with In/Out transfers, or timed (timed != 0), call it before anything is queued. */
kiln_status kiln__graph_refuse_transfers(CUstream stream, int timed);

#endif
