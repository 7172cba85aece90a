/* Host memory: page-locked numpy arrays (pagelocked_empty, pagelocked_zeros) and how pageable
 * copies are staged (staging_info). */
#ifndef KPY_HOSTMEM_H
#define KPY_HOSTMEM_H

#include "state.h"

int kpy_hostmem_init(PyObject *module, kpy_state *st);

/* A numpy array of dtype and dims in page-locked memory, C or Fortran order, zeroed when zero
 * is nonzero; freed with the array. A new reference (dtype is not stolen), or NULL with the
 * error raised. */
PyObject *kpy_pagelocked_array(kpy_state *st, PyArray_Descr *dtype, int ndim, const npy_intp *dims,
                               int fortran, int zero);

#endif
