/* kiln._kiln: the module definition. Each file adds its own types and functions in its init;
 * this file only runs them in order, and owns the module state's lifetime. */
#define KPY_IMPORT_ARRAY /* the one file that imports NumPy's C API */
#include "state.h"

#include "array.h"
#include "cache.h"
#include "context.h"
#include "copy3d.h"
#include "cuarray.h"
#include "device.h"
#include "errors.h"
#include "ewise.h"
#include "function.h"
#include "graph.h"
#include "hostmem.h"
#include "interop.h"
#include "ipc.h"
#include "launches.h"
#include "linking.h"
#include "managed.h"
#include "memory.h"
#include "mirror.h"
#include "peer.h"
#include "pin.h"
#include "portable.h"
#include "reduce.h"
#include "sourcemodule.h"
#include "stream.h"
#include "transfer.h"
#include "wait.h"

static int kpy_exec(PyObject *module) {
  if (PyArray_ImportNumPyAPI() < 0) return -1;
  kpy_state *st = kpy_state_of_module(module);
  if (kpy_state_intern(st) < 0) return -1;
  /* Exceptions first: every other file raises them. */
  if (kpy_errors_init(module, st) < 0 || kpy_transfer_init(module, st) < 0 ||
      kpy_memory_init(module, st) < 0 || kpy_device_init(module, st) < 0 ||
      kpy_sourcemodule_init(module, st) < 0 || kpy_function_init(module, st) < 0 ||
      kpy_stream_init(module, st) < 0 || kpy_array_init(module, st) < 0 ||
      kpy_interop_init(module, st) < 0 || kpy_hostmem_init(module, st) < 0 ||
      kpy_cache_init(module, st) < 0 || kpy_ewise_init(module, st) < 0 ||
      kpy_reduce_init(module, st) < 0 || kpy_context_init(module, st) < 0 ||
      kpy_wait_init(module, st) < 0 || kpy_portable_init(module, st) < 0 ||
      kpy_launches_init(module, st) < 0 || kpy_graph_init(module, st) < 0 ||
      kpy_link_init(module, st) < 0 || kpy_managed_init(module, st) < 0 ||
      kpy_ipc_init(module, st) < 0 || kpy_peer_init(module, st) < 0 ||
      kpy_cuarray_init(module, st) < 0 || kpy_copy3d_init(module, st) < 0)
    return -1;
  char version[32];
  PyOS_snprintf(version, sizeof version, "%d.%d.%d", KILN_VERSION_MAJOR, KILN_VERSION_MINOR,
                KILN_VERSION_PATCH);
  return PyModule_AddStringConstant(module, "__version__", version);
}

static int kpy_traverse(PyObject *module, visitproc visit, void *arg) {
  return kpy_state_traverse(kpy_state_of_module(module), visit, arg);
}

static int kpy_clear(PyObject *module) {
  kpy_pin_free(kpy_state_of_module(module)); /* its weak references call into the module */
  kpy_state_clear(kpy_state_of_module(module));
  kpy_sourcemodule_free(kpy_state_of_module(module));
  kpy_launches_clear(); /* its notes hold Functions, and through them Modules */
  return 0;
}

static void kpy_free(void *module) {
  kpy_clear((PyObject *)module);
  kpy_reduce_free(kpy_state_of_module((PyObject *)module));
  kpy_mirror_free(kpy_state_of_module((PyObject *)module));
  kpy_stream_free(kpy_state_of_module((PyObject *)module));
  kpy_hostmem_free(kpy_state_of_module((PyObject *)module));
}

static PyModuleDef_Slot kpy_slots[] = {
    {Py_mod_exec, (void *)kpy_exec},
    {0, NULL},
};

PyModuleDef kpy_module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kiln._kiln",
    .m_doc = "kiln's extension module: compile CUDA C++ with NVRTC and launch it.",
    .m_size = sizeof(kpy_state),
    .m_slots = kpy_slots,
    .m_traverse = kpy_traverse,
    .m_clear = kpy_clear,
    .m_free = kpy_free,
};

PyMODINIT_FUNC PyInit__kiln(void);
PyMODINIT_FUNC PyInit__kiln(void) { return PyModuleDef_Init(&kpy_module_def); }
