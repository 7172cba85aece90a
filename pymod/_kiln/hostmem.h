/* Host memory: page-locked numpy arrays (pagelocked_empty, pagelocked_zeros) and how pageable
 * copies are staged (staging_info). */
#ifndef KPY_HOSTMEM_H
#define KPY_HOSTMEM_H

#include "shape.h"
#include "state.h"

int kpy_hostmem_init(PyObject *module, kpy_state *st);

/* A numpy array of dtype and dims in page-locked memory, C or Fortran order, zeroed when zero
 * is nonzero; freed with the array. A new reference (dtype is not stolen), or NULL with the
 * error raised. */
PyObject *kpy_pagelocked_array(kpy_state *st, PyArray_Descr *dtype, int ndim, const npy_intp *dims,
                               int fortran, int zero);
/* The same with the driver's flags besides (kiln.driver.host_alloc_flags: DEVICEMAP,
 * WRITECOMBINED; the memory is always portable). */
PyObject *kpy_pagelocked_array_with_flags(kpy_state *st, PyArray_Descr *dtype, int ndim,
                                          const npy_intp *dims, int fortran, int zero,
                                          unsigned mem_flags);

/* The arguments of a NumPy array made over memory of kiln's (pagelocked_empty, managed_empty):
 * (shape, dtype=float64, order="C", mem_flags=0), parsed with fmt ("O|O&sI:name"), the shape's
 * bytes counted. dtype is a new reference the caller releases (NULL after a failure). */
typedef struct kpy_host_array_args {
  PyArray_Descr *dtype;
  int ndim, fortran;
  npy_intp dims[KPY_MAX_DIMS];
  size_t nbytes;
  unsigned mem_flags;
} kpy_host_array_args;
int kpy_host_array_parse(PyObject *args, PyObject *kwargs, const char *fmt, kpy_host_array_args *a);

/* A NumPy array of dtype and dims over data, whose base is owner (a new reference taken from
 * the caller, released on failure too); NULL with the error raised. */
PyObject *kpy_host_array_over(PyArray_Descr *dtype, int ndim, const npy_intp *dims, int fortran,
                              void *data, PyObject *owner);

/* The most bytes kpy_small_get takes: its page-locked buffer's size. */
#define KPY_SMALL_GET_MAX ((size_t)1 << 20)

/* The small copies that go the driver's way before the buffer is made: making it costs 0.7 to
 * 1.6 ms (an H200's host), a hundred times what it saves a copy, so a process that reads a
 * result or two never pays for it. */
#define KPY_SMALL_GET_AFTER 8

/* Copies n bytes of device memory p into host memory data, queued on stream and waited for
 * (where Ctrl-C and a device fault end the wait), through a page-locked buffer of kiln's: a
 * small copy into pageable memory costs the driver about 7 us more than one into page-locked
 * memory and a memcpy (an H200: a 4-byte result 20 us against 12.7 after a kernel). 1 when
 * copied; 0 when not taken (over KPY_SMALL_GET_MAX or large enough for the stager, one of the
 * first KPY_SMALL_GET_AFTER, the buffer busy in another thread or still the target of a copy a
 * Ctrl-C left behind, another device), and the caller copies as before;
 * -1 with the error raised. With the GIL held. */
int kpy_small_get(kpy_state *st, void *data, kiln_deviceptr p, size_t n, kiln_stream stream);

/* The ring of kpy_small_put: slots of this many bytes, the most one copy takes, and how many
 * (2 MiB of page-locked memory in all, made once per process). Up to 256 KiB the driver's own
 * pageable copy is slower than a memcpy into a slot and a DMA that overlaps the next memcpy. */
#define KPY_SMALL_PUT_SLOT ((size_t)256 << 10)
#define KPY_SMALL_PUT_SLOTS 8

/* Copies n bytes of host memory data into device memory p as the driver's own blocking copy
 * from pageable memory does, on the legacy default stream, once the caller has waited for the
 * work queued before it (kpy_wait_stream): the bytes are copied into a page-locked slot of
 * kiln's, the copy is queued from there, and the call returns without waiting for it to land
 * (the driver's own returns once its staging buffer holds the bytes, before the DMA is over).
 * So only the copy itself can be in flight when it returns, as with the driver's; the caller's
 * memory is free again at once; work queued after it on the legacy stream, or on any stream
 * that waits for it, sees the bytes. A slot is taken again only once the event after its last
 * copy has passed. device is p's: only a copy into memory of the current device is taken, so
 * that the memory's free, on its own device, can be ordered after it. 1 when queued; 0 when not
 * taken (over KPY_SMALL_PUT_SLOT or large enough for the stager, one of the first
 * KPY_SMALL_GET_AFTER, the slot still in use, another device),
 * and the caller copies as before; -1 with the error raised. With the GIL held. */
int kpy_small_put(kpy_state *st, int device, kiln_deviceptr p, const void *data, size_t n);

/* Whether the last work kiln queued, on any stream, is the ring's last copy: then what can be
 * ahead of a new small copy on the legacy stream is short copies of the ring (and whatever
 * another library queued there since, which kiln cannot see, or another thread of kiln's
 * counted before the ring's copy and queued after it), and the new one is queued behind them
 * without waiting first, so that a run of small copies overlaps the memcpy into one slot with
 * the DMA from the one before. */
int kpy_small_put_follows(kpy_state *st);

/* PyCUDA's free() of host memory under arrays (PagelockedHostAllocation, ManagedAllocation):
 * it returns at once, as the memory goes with the last array over it. A METH_NOARGS method. */
PyObject *kpy_host_free_later(PyObject *op, PyObject *unused);

/* A writable memoryview of size bytes at p for the host (PyCUDA's as_buffer): p must be managed
 * or page-locked host memory, the whole range in its allocation, else a ValueError naming it.
 * The view keeps owner alive. */
PyObject *kpy_host_view(kpy_state *st, PyObject *owner, kiln_deviceptr p, size_t size);

/* PyCUDA's as_buffer(size, offset=0) of an allocation of total bytes at base: the arguments
 * read and checked against it, then kpy_host_view. */
PyObject *kpy_as_buffer(kpy_state *st, PyObject *owner, kiln_deviceptr base, size_t total,
                        PyObject *args, PyObject *kwargs);

/* Frees the buffer; the module's m_free calls it. */
void kpy_hostmem_free(kpy_state *st);

#endif
