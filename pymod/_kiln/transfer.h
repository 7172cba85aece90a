/* In, Out and InOut: a numpy array and which way its data goes around a launch. */
#ifndef KPY_TRANSFER_H
#define KPY_TRANSFER_H

#include "state.h"

typedef struct kpy_transfer {
  PyObject_HEAD
  PyObject *array; /* the wrapped numpy array, strong */
  kiln_transfer_dir dir;
} kpy_transfer;

int kpy_transfer_init(PyObject *module, kpy_state *st);

#endif
