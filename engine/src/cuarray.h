/* CUDA arrays: the handle kiln keeps (the driver's CUarray with the descriptor it was made
 * from), so that a copy is checked against the array's shape without asking the device. */
#ifndef KILN_CUARRAY_H
#define KILN_CUARRAY_H

#include "memory.h"

struct kiln_array {
  CUarray handle; /* owned: destroyed by kiln_array_free */
  kiln_array_desc desc;
  size_t element_bytes; /* one element, its channels together */
  int device;           /* the device whose primary context it was made in */
};

/* The array as rows of bytes: the bytes of a row, the rows of a slice and the slices, each at
 * least 1 (a 1D array is one row, a 2D array one slice). Their product fits a size_t. */
void kiln__cuarray_extent(const kiln_array *a, size_t *row_bytes, size_t *rows, size_t *slices);

#endif
