/* Host mirrors of reduction results. A reduction whose result is a new 0-d array also writes
 * the value, then a flag, into a slot of page-locked host memory the GPU writes across the bus;
 * reading the result on the host (get(), float(), item()) then waits for the flag and copies
 * from that slot, with no copy queued behind the kernel. On an H200 a float32 sum of 10^3 read
 * into a host float took 9.0 us this way against 14.1 us with the copy (the copy engine's turn
 * after the kernel is most of the difference).
 *
 * The mirror holds while nothing can have written the result since the reduction: kiln has
 * queued no work at all since (kiln_work_count), and the result's address has not been handed
 * out (ptr, gpudata, __cuda_array_interface__, __dlpack__, a view), which is how anything else
 * could write it. Otherwise the read is the plain copy from device memory, which stays the
 * result's memory: kernels reading the result read the GPU's own memory, not the bus. */
#ifndef KPY_MIRROR_H
#define KPY_MIRROR_H

#include "state.h"

/* What a result array holds of its mirror: 1 + its slot (0: none), and kiln_work_count() once
 * its reduction was queued. */
typedef struct kpy_mirror {
  int slot;
  unsigned long long work;
} kpy_mirror;

/* Bytes of a slot: the value (up to 16 bytes, a reduction's largest result) and the flag. */
#define KPY_MIRROR_SLOT 32
#define KPY_MIRROR_FLAG 16

/* A slot for the new result of a reduction (nbytes of it) about to be queued on stream
 * (stream_owned: something keeps the stream alive as long as the result, or it is the legacy
 * default stream): its address, for the kernel's mirror parameter, noted in *mirror. 0 when
 * the result gets none: too large, the stream is being captured into a graph (a replay would
 * write a slot long given to another result), every slot held, one of the first few reductions
 * of the process (making the page-locked slots costs more than a few reads save), or the slots
 * could not be made. Never fails. */
kiln_deviceptr kpy_mirror_take(kpy_state *st, kpy_mirror *mirror, size_t nbytes, kiln_stream stream,
                               int stream_owned);

/* After the reduction was queued: the work count from which on the mirror holds. */
void kpy_mirror_queued(kpy_mirror *mirror);

/* The mirror no longer holds (the result's address was handed out, or it is being freed, or its
 * launch failed); its slot is reused once its kernel has written it. No-op without one; st may
 * be NULL (a module already gone). */
void kpy_mirror_drop(kpy_state *st, kpy_mirror *mirror);

/* Reads n bytes, all of a result on device, from its mirror into data, waiting for the
 * kernel's flag (where Ctrl-C and a device fault end the wait). 1 when read; 0 when there is no
 * mirror that holds, and the caller copies as before; -1 with the error raised. With the GIL
 * held. */
int kpy_mirror_get(kpy_state *st, kpy_mirror *mirror, int device, void *data, size_t n);

/* How many slots there are (0 until made), how many results hold one, and the reads they
 * answered so far: staging_info's, for tests and for seeing what a program does. */
void kpy_mirror_counts(kpy_state *st, Py_ssize_t *slots, Py_ssize_t *held,
                       unsigned long long *reads);

/* Frees the slots, after the device's work where a kernel may still write one; the module's
 * m_free calls it. */
void kpy_mirror_free(kpy_state *st);

#endif
