/* What the extension's files share: the module state and each file's entry points.
 * Every file includes this first; only module.c imports NumPy's C API. */
#ifndef KILN_PY_H
#define KILN_PY_H

#include "state.h"

/* errors.c: raises the exception that fits a failed engine call, with the engine's sentence
 * (CudaError and its subclasses carry .code and .name). Returns NULL. */
PyObject *kpy_raise(kpy_state *st, kiln_status s);
int kpy_errors_init(PyObject *module, kpy_state *st);
/* The engine's warnings wait in a per-thread queue until the call that caused them returns;
 * this issues them as kiln.CacheWarning. -1 when a warning filter made one an error. */
int kpy_flush_warnings(kpy_state *st);

/* transfer.c: In, Out and InOut. */
typedef struct kpy_transfer {
  PyObject_HEAD
  PyObject *array; /* the wrapped numpy array, strong */
  kiln_transfer_dir dir;
} kpy_transfer;
int kpy_transfer_init(PyObject *module, kpy_state *st);

/* memory.c: DeviceAllocation and the memcpy functions. */
typedef struct kpy_allocation {
  PyObject_HEAD
  kiln_deviceptr ptr; /* 0 once freed */
  size_t size;
} kpy_allocation;
int kpy_memory_init(PyObject *module, kpy_state *st);
PyObject *kpy_mem_alloc(PyObject *module, PyObject *arg);
PyObject *kpy_memcpy_htod(PyObject *module, PyObject *const *args, Py_ssize_t n);
PyObject *kpy_memcpy_dtoh(PyObject *module, PyObject *const *args, Py_ssize_t n);

/* device.c */
int kpy_device_init(PyObject *module, kpy_state *st);

/* sourcemodule.c: Module, SourceModule, module_from_buffer. */
int kpy_sourcemodule_init(PyObject *module, kpy_state *st);
PyObject *kpy_module_from_buffer(PyObject *module, PyObject *data);

/* stream.c: Stream and Event. A Stream keeps alive what its queued copies use. */
int kpy_stream_init(PyObject *module, kpy_state *st);
kiln_stream kpy_stream_handle(PyObject *stream);
int kpy_stream_keep(PyObject *stream, PyObject *obj);

/* array.c: DeviceArray and its makers, asarray, page-locked host arrays. */
int kpy_array_init(PyObject *module, kpy_state *st);
kiln_deviceptr kpy_array_ptr(PyObject *array);
int kpy_array_device(PyObject *array);
PyObject *kpy_empty(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *kpy_zeros(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *kpy_to_device(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *kpy_asarray(PyObject *module, PyObject *obj);
PyObject *kpy_pagelocked_empty(PyObject *module, PyObject *args, PyObject *kwargs);
PyObject *kpy_pagelocked_zeros(PyObject *module, PyObject *args, PyObject *kwargs);

/* cache.c: the kernel cache's statistics and upkeep. */
extern PyMethodDef kpy_cache_methods[];

/* function.c: Function and its vectorcall. */
int kpy_function_init(PyObject *module, kpy_state *st);
PyObject *kpy_function_new(kpy_state *st, PyObject *sourcemodule, kiln_function *f);

/* args.c: one argument into its parameter's bytes. */
typedef struct kpy_packed {
  kiln_transfer transfers[KILN_MAX_TRANSFERS];
  int n_transfers;
} kpy_packed;
int kpy_pack_arg(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                 kpy_packed *packed);
/* Reads a launch shape (an int or a tuple of 1 to 3 ints) into dims, missing ones 1. */
int kpy_parse_dims(PyObject *obj, const char *what, unsigned dims[3]);
/* Reads stream= (None, an int handle, or an object that names its handle). */
int kpy_parse_stream(kpy_state *st, PyObject *obj, kiln_stream *stream);

#endif
