/* Large pageable NumPy arrays that are copied again and again are page-locked in place
 * (cuMemHostRegister) for as long as they live, so that their later copies run at the DMA
 * engine's speed instead of through the stager's host-side memcpy. */
#ifndef KPY_PIN_H
#define KPY_PIN_H

#include "state.h"

/* Copies of at least this many bytes count. Page-locked memory would pay from 64 KiB (on an
 * H200's host it moved 7.6 GB/s there against the driver's pageable 4.4), but cuMemHostRegister
 * locks whole pages, and a smaller array of the heap shares its first and last pages with its
 * neighbours: locked with it, they would make the program's own registration of a neighbour
 * fail as already registered. Arrays this large are nearly always mapped on pages of their
 * own. */
#define KPY_PIN_MIN ((size_t)16 << 20)

/* Called before a blocking copy of nbytes between the device and the data of the numpy array a
 * (one that returns only once the copy is done), with the GIL held. The second such copy of the
 * memory of one array page-locks the whole buffer its data lies in, when that buffer is a numpy
 * array's own memory and at most four times the bytes copied (a small view's copies would not
 * repay registering a much larger array): the registration ends when that array is collected
 * (a weak reference's callback, which numpy runs before it frees the memory), never earlier,
 * so no copy in flight loses it; numpy refuses to resize a weakly referenced array, so its
 * memory never moves meanwhile. Page-locked memory is bounded (a quarter of the machine's
 * memory, and KILN_PIN_REUSED=0 turns it off); past the bound, and whenever the driver
 * refuses, the copy is simply staged as before. Never raises. */
void kpy_pin_reused(kpy_state *st, PyArrayObject *a, size_t nbytes);

/* Whether [p, p + n) meets a buffer kiln page-locked itself. The program gave that memory as
 * pageable, where a copy queued on a stream has read its host memory (to the device) or
 * finished (to the host) by the time the call returns; from page-locked memory it would run
 * later. So a queued copy that meets such a buffer is waited for. */
int kpy_pin_touches(kpy_state *st, const void *p, size_t n);

/* Whether kiln's own registration (pin.h) serves a program's register_host_memory of
 * [p, p + n) with flags: it lies inside one such buffer, which kiln page-locked portable and
 * mapped (the most the program can ask; unmapped where the driver maps none, which then
 * serves no DEVICEMAP). */
int kpy_pin_serves(kpy_state *st, const void *p, size_t n, unsigned flags);

/* The figures staging_info() reports: buffers and bytes page-locked now. */
void kpy_pin_counts(kpy_state *st, Py_ssize_t *buffers, Py_ssize_t *bytes);

/* Unregisters every buffer still page-locked; the module's m_clear calls it. */
void kpy_pin_free(kpy_state *st);

#endif
