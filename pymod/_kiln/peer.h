/* Copies between devices: memcpy_peer and memcpy_peer_async (PyCUDA's). */
#ifndef KPY_PEER_H
#define KPY_PEER_H

#include "state.h"

int kpy_peer_init(PyObject *module, kpy_state *st);

#endif
