/* Memory shared with another process: mem_get_ipc_handle and IPCMemoryHandle (PyCUDA's). */
#ifndef KPY_IPC_H
#define KPY_IPC_H

#include "state.h"

int kpy_ipc_init(PyObject *module, kpy_state *st);

#endif
