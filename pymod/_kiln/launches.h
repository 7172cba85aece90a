/* The recent kernel launches on each stream, kept so that an asynchronous fault, reported by a
 * later call, can say which kernel faulted and which line of Python launched it. */
#ifndef KPY_LAUNCHES_H
#define KPY_LAUNCHES_H

#include "state.h"

/* Notes a launch of `function` (a kiln.Function) on stream from the calling Python frame: its
 * code object and last instruction, turned into a file and line only when a fault is told. A
 * few stores and two reference counts; the GIL guards the table. */
void kpy_launches_record(PyObject *function, kiln_stream stream);

/* A synchronizing call on stream (NULL: the legacy default stream, which waits for every
 * blocking stream) succeeded: the launches recorded on it before have finished cleanly. */
void kpy_launches_settle(kiln_stream stream);

/* A call that waited for the whole device succeeded: every launch recorded has finished. */
void kpy_launches_settle_all(void);

/* The launches not known to have finished, newest first: a list of (kernel name, file, line),
 * file and line None where no Python frame launched it. NULL with an exception set. */
PyObject *kpy_launches_unsettled(void);

/* 1 when that list is whole; 0 when a launch not known to have finished was forgotten to make
 * room (more than the table holds ran since the device was last waited for). */
int kpy_launches_complete(void);

/* How many launches were recorded so far (a counter the notebook extension compares). */
unsigned long long kpy_launches_count(void);

/* Drops every note and the references they hold (the module's clear and free). */
void kpy_launches_clear(void);

/* Adds kiln._launches() and kiln._launch_count(), the private readers of the table. */
int kpy_launches_init(PyObject *module, kpy_state *st);

#endif
