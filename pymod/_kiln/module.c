/* kiln._kiln: multi-phase init, the module state, and the module-level functions. */
#define KPY_IMPORT_ARRAY /* the one file that imports NumPy's C API */
#include "kpy.h"

static PyObject *kpy_synchronize(PyObject *module, PyObject *unused) {
  (void)unused;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
  s = kiln_synchronize();
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_mem_info(PyObject *module, PyObject *unused) {
  (void)unused;
  size_t free_b = 0, total_b = 0;
  kiln_status s = kiln_mem_info(&free_b, &total_b);
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  return Py_BuildValue("(nn)", (Py_ssize_t)free_b, (Py_ssize_t)total_b);
}

static PyObject *kpy_pool_stats(PyObject *module, PyObject *unused) {
  (void)unused;
  kiln_pool_stats p;
  kiln_status s = kiln_pool_get_stats(&p);
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  return Py_BuildValue("{sKsKsKsK}", "reserved", (unsigned long long)p.reserved,
                       "reserved_high", (unsigned long long)p.reserved_high, "used",
                       (unsigned long long)p.used, "used_high", (unsigned long long)p.used_high);
}

static PyObject *kpy_staging_info(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  kiln_staging_info i;
  kiln_staging_get_info(&i);
  return Py_BuildValue("{snsnsisKsK}", "min_bytes", (Py_ssize_t)(i.min_bytes > PY_SSIZE_T_MAX
                       ? PY_SSIZE_T_MAX : i.min_bytes), "chunk_bytes", (Py_ssize_t)i.chunk_bytes,
                       "threads", i.threads, "copies", (unsigned long long)i.copies, "bytes",
                       (unsigned long long)i.bytes);
}

static PyObject *kpy_pool_trim(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"keep_bytes", NULL};
  Py_ssize_t keep = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|n:pool_trim", kwlist, &keep)) return NULL;
  if (keep < 0) {
    PyErr_SetString(PyExc_ValueError, "keep_bytes must not be negative");
    return NULL;
  }
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
  s = kiln_pool_trim((size_t)keep);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  Py_RETURN_NONE;
}

static PyMethodDef kpy_methods[] = {
    {"mem_alloc", kpy_mem_alloc, METH_O,
     "mem_alloc(nbytes): device memory, freed when the allocation is collected."},
    {"memcpy_htod", (PyCFunction)(void (*)(void))kpy_memcpy_htod, METH_FASTCALL,
     "memcpy_htod(dest, src): copies the numpy array src to device memory dest."},
    {"memcpy_dtoh", (PyCFunction)(void (*)(void))kpy_memcpy_dtoh, METH_FASTCALL,
     "memcpy_dtoh(dest, src): copies device memory src into the numpy array dest."},
    {"synchronize", kpy_synchronize, METH_NOARGS,
     "Waits for all work on the current device; raises the error of any that failed."},
    {"empty", (PyCFunction)(void (*)(void))kpy_empty, METH_VARARGS | METH_KEYWORDS,
     "empty(shape, dtype=float64, stream=None): an uninitialized DeviceArray."},
    {"zeros", (PyCFunction)(void (*)(void))kpy_zeros, METH_VARARGS | METH_KEYWORDS,
     "zeros(shape, dtype=float64, stream=None): a DeviceArray of zeros."},
    {"to_device", (PyCFunction)(void (*)(void))kpy_to_device, METH_VARARGS | METH_KEYWORDS,
     "to_device(array, stream=None): a DeviceArray holding a copy of a numpy array."},
    {"asarray", kpy_asarray, METH_O,
     "asarray(obj): a DeviceArray over the memory of a GPU array (torch, CuPy, ...) that offers "
     "__cuda_array_interface__ or __dlpack__; no copy."},
    {"pagelocked_empty", (PyCFunction)(void (*)(void))kpy_pagelocked_empty,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_empty(shape, dtype=float64): a numpy array in page-locked host memory."},
    {"pagelocked_zeros", (PyCFunction)(void (*)(void))kpy_pagelocked_zeros,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_zeros(shape, dtype=float64): the same, zeroed."},
    {"mem_info", kpy_mem_info, METH_NOARGS, "(free, total) bytes of the current device."},
    {"pool_stats", kpy_pool_stats, METH_NOARGS,
     "The device memory pool: reserved, reserved_high, used, used_high (bytes)."},
    {"pool_trim", (PyCFunction)(void (*)(void))kpy_pool_trim, METH_VARARGS | METH_KEYWORDS,
     "pool_trim(keep_bytes=0): gives the pool's unused memory back to the driver."},
    {"staging_info", kpy_staging_info, METH_NOARGS,
     "How large pageable copies are staged: min_bytes, chunk_bytes, threads, and the copies "
     "and bytes staged so far."},
    {"module_from_buffer", kpy_module_from_buffer, METH_O,
     "module_from_buffer(data): a Module from a CUBIN, a fatbin or PTX (bytes, or str PTX)."},
    {NULL, NULL, 0, NULL},
};

static int kpy_exec(PyObject *module) {
  if (PyArray_ImportNumPyAPI() < 0) return -1;
  kpy_state *st = kpy_state_of_module(module);
  if (kpy_state_intern(st) < 0) return -1;
  if (PyModule_AddFunctions(module, kpy_cache_methods) < 0) return -1;
  if (kpy_errors_init(module, st) < 0 || kpy_transfer_init(module, st) < 0 ||
      kpy_memory_init(module, st) < 0 || kpy_device_init(module, st) < 0 ||
      kpy_sourcemodule_init(module, st) < 0 || kpy_function_init(module, st) < 0 ||
      kpy_stream_init(module, st) < 0 || kpy_array_init(module, st) < 0)
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
  kpy_state_clear(kpy_state_of_module(module));
  return 0;
}

static void kpy_free(void *module) { kpy_clear((PyObject *)module); }

static PyModuleDef_Slot kpy_slots[] = {
    {Py_mod_exec, (void *)kpy_exec},
    {0, NULL},
};

static struct PyModuleDef kpy_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "kiln._kiln",
    .m_doc = "kiln's extension module: compile CUDA C++ with NVRTC and launch it.",
    .m_size = sizeof(kpy_state),
    .m_methods = kpy_methods,
    .m_slots = kpy_slots,
    .m_traverse = kpy_traverse,
    .m_clear = kpy_clear,
    .m_free = kpy_free,
};

PyMODINIT_FUNC PyInit__kiln(void);
PyMODINIT_FUNC PyInit__kiln(void) { return PyModuleDef_Init(&kpy_def); }
