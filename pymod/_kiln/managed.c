/* Managed (unified) memory as PyCUDA has it: managed_empty gives a NumPy array over memory from
 * cuMemAllocManaged, whose .base is a ManagedAllocation; the array is written and read on the
 * host, and passes to a kernel as the memory's address (args.c asks kpy_managed_array). The
 * memory is freed with the ManagedAllocation, which lives as long as any array over it: its
 * free() returns at once, so no array is ever left over freed memory. */
#include "managed.h"

#include "errors.h"
#include "hostmem.h"
#include "stream.h"

#include <inttypes.h>
#include <string.h>
#include <unistd.h>

typedef struct kpy_managed {
  PyObject_HEAD
  kiln_deviceptr ptr;
  size_t size;
} kpy_managed;

static void kpy_managed_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  kiln_mem_free(((kpy_managed *)op)->ptr); /* nothing to tell of a failure here */
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_managed_int(PyObject *op) {
  return PyLong_FromUnsignedLongLong(((kpy_managed *)op)->ptr);
}

static PyObject *kpy_managed_as_buffer(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_managed *self = (kpy_managed *)op;
  return kpy_as_buffer(kpy_state_of_type(Py_TYPE(op)), op, self->ptr, self->size, args, kwargs);
}

static PyObject *kpy_managed_pointer(PyObject *op, PyObject *unused) {
  (void)unused;
  return kpy_managed_int(op);
}

static PyObject *kpy_managed_repr(PyObject *op) {
  kpy_managed *self = (kpy_managed *)op;
  char addr[32];
  PyOS_snprintf(addr, sizeof addr, "0x%" PRIx64, (uint64_t)self->ptr);
  return PyUnicode_FromFormat("<kiln.ManagedAllocation of %zu bytes at %s>", self->size, addr);
}

static PyObject *kpy_managed_get_size(PyObject *op, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(((kpy_managed *)op)->size);
}

/* attach(mem_flags, stream=None): cuStreamAttachMemAsync over the whole allocation. */
static PyObject *kpy_managed_attach(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return NULL;
  static char *kwlist[] = {(char *)"mem_flags", (char *)"stream", NULL};
  unsigned flags;
  PyObject *stream_obj = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "I|O:attach", kwlist, &flags, &stream_obj))
    return NULL;
  kiln_stream stream = NULL;
  if (kpy_stream_parse(st, stream_obj, &stream) < 0) return NULL;
  kiln_status s = kiln_stream_attach_mem(stream, ((kpy_managed *)op)->ptr, 0, flags);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyMethodDef kpy_managed_methods[] = {
    {"get_device_pointer", kpy_managed_pointer, METH_NOARGS,
     "get_device_pointer($self, /)\n--\n\nThe memory's address, the same on the host and the "
     "devices."},
    {"attach", (PyCFunction)(void (*)(void))kpy_managed_attach, METH_VARARGS | METH_KEYWORDS,
     "attach($self, /, mem_flags, stream=None)\n--\n\nWho may use the memory: "
     "mem_attach_flags.GLOBAL (any stream), HOST (the host alone) or SINGLE (the host and "
     "stream alone), ordered on stream."},
    {"as_buffer", (PyCFunction)(void (*)(void))kpy_managed_as_buffer, METH_VARARGS | METH_KEYWORDS,
     "as_buffer($self, /, size, offset=0)\n--\n\nsize bytes from offset as a writable "
     "memoryview for the host, as PyCUDA's DeviceAllocation.as_buffer."},
    {"free", kpy_host_free_later, METH_NOARGS,
     "free($self, /)\n--\n\nReturns at once: the memory goes with the last array over it, so "
     "that no array is left over freed memory."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_managed_getset[] = {
    {"size", kpy_managed_get_size, NULL, "Size in bytes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_managed_slots[] = {
    {Py_tp_dealloc, kpy_managed_dealloc},
    {Py_tp_repr, kpy_managed_repr},
    {Py_tp_methods, kpy_managed_methods},
    {Py_tp_getset, kpy_managed_getset},
    {Py_nb_int, kpy_managed_int},
    {Py_nb_index, kpy_managed_int},
    {Py_tp_doc, (void *)"Managed memory under a kiln.driver.managed_empty array (its .base); "
                        "int() gives its address. Freed with the last array over it."},
    {0, NULL},
};

static PyType_Spec kpy_managed_spec = {"kiln.ManagedAllocation", sizeof(kpy_managed), 0,
                                       Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
                                           Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                       kpy_managed_slots};

int kpy_managed_array(kpy_state *st, PyObject *arr) {
  PyObject *base = PyArray_BASE((PyArrayObject *)arr);
  while (base && PyArray_Check(base)) base = PyArray_BASE((PyArrayObject *)base);
  return base && Py_IS_TYPE(base, st->ref.ManagedAllocation_type);
}

/* Zeroes managed memory from the host, where it is reachable, or where it is larger than the
 * host's memory, on the device: pages the host touches stay on the host, and a host of less
 * memory would end the process before the last of them. */
static int kpy_managed_zero(kpy_state *st, kiln_deviceptr ptr, size_t nbytes) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || nbytes <= (size_t)pages * (size_t)page) {
    memset((void *)(uintptr_t)ptr, 0, nbytes);
    return 0;
  }
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_memset_d8(ptr, 0, nbytes);
    if (!s) s = kiln_synchronize(); /* before the host reads it */
  Py_END_ALLOW_THREADS
  return s ? (kpy_raise(st, s), -1) : 0;
}

/* managed_empty / managed_zeros(shape, dtype=float64, order="C", mem_flags=0) */
static PyObject *kpy_managed_array_new(PyObject *module, PyObject *args, PyObject *kwargs, int zero,
                                       const char *fmt) {
  kpy_state *st = kpy_state_of_module(module);
  kpy_host_array_args a;
  if (kpy_host_array_parse(args, kwargs, fmt, &a) < 0) return NULL;
  PyObject *arr = NULL;
  kpy_managed *owner = NULL;
  /* PyCUDA's default of 0 is no attachment the driver takes: GLOBAL, as CUDA's own default. */
  unsigned flags = a.mem_flags ? a.mem_flags : KILN_MEM_ATTACH_GLOBAL;
  if (flags != KILN_MEM_ATTACH_GLOBAL && flags != KILN_MEM_ATTACH_HOST) {
    PyErr_Format(PyExc_ValueError,
                 "managed memory is made attached GLOBAL (1) or HOST (2), not "
                 "%u; attach() changes it later",
                 flags);
    goto done;
  }
  PyTypeObject *tp = st->ref.ManagedAllocation_type;
  if (!(owner = (kpy_managed *)tp->tp_alloc(tp, 0))) goto done;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_mem_alloc_managed(a.nbytes ? a.nbytes : 1, flags, &owner->ptr);
  Py_END_ALLOW_THREADS
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  owner->size = a.nbytes;
  if (zero && a.nbytes && kpy_managed_zero(st, owner->ptr, a.nbytes) < 0) goto done;
  arr = kpy_host_array_over(a.dtype, a.ndim, a.dims, a.fortran, (void *)(uintptr_t)owner->ptr,
                            (PyObject *)owner);
  owner = NULL; /* the array's, or released with it */
done:
  Py_XDECREF(owner);
  Py_DECREF(a.dtype);
  return arr;
}

static PyObject *kpy_managed_empty(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_managed_array_new(module, args, kwargs, 0, "O|O&sI:managed_empty");
}

static PyObject *kpy_managed_zeros(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_managed_array_new(module, args, kwargs, 1, "O|O&sI:managed_zeros");
}

/* The 2D memsets: memset_d2d8/16/32(dest, pitch, data, width, height), PyCUDA's names, and their
 * async forms. */
static PyObject *kpy_memset_2d(PyObject *module, PyObject *args, PyObject *kwargs, unsigned bytes,
                               int async, const char *fmt) {
  kpy_state *st = kpy_state_of_module(module);
  /* The blocking forms take no stream: their list ends before it. */
  static char *kwlist[] = {(char *)"dest",
                           (char *)"pitch",
                           (char *)"data",
                           (char *)"width",
                           (char *)"height",
                           (char *)"stream",
                           NULL};
  static char *kwlist_blocking[] = {(char *)"dest",  (char *)"pitch",  (char *)"data",
                                    (char *)"width", (char *)"height", NULL};
  PyObject *dest, *value_obj, *stream_obj = Py_None;
  Py_ssize_t pitch, width, height;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, async ? kwlist : kwlist_blocking, &dest,
                                   &pitch, &value_obj, &width, &height, &stream_obj))
    return NULL;
  /* An int of the value's bytes, signed or not (-1 is all ones), as memset_d8 and kin take. */
  long long v = PyLong_Check(value_obj) ? PyLong_AsLongLong(value_obj) : -1;
  if (!PyLong_Check(value_obj) || (v == -1 && PyErr_Occurred()) || v < -(1LL << (8 * bytes - 1)) ||
      v >= (1LL << (8 * bytes))) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "data is an int of %u bytes, signed or not, not %R", bytes,
                 value_obj);
    return NULL;
  }
  unsigned long long value = (unsigned long long)v & ((1ULL << (8 * bytes)) - 1);
  if (pitch < 0 || width < 0 || height < 0) {
    PyErr_SetString(PyExc_ValueError, "pitch, width and height are counts >= 0");
    return NULL;
  }
  PyObject *index = PyNumber_Index(dest);
  if (!index) {
    PyErr_Format(PyExc_TypeError,
                 "dest is device memory (a DeviceAllocation or an address), "
                 "not %.100s",
                 Py_TYPE(dest)->tp_name);
    return NULL;
  }
  unsigned long long ptr = PyLong_AsUnsignedLongLong(index);
  Py_DECREF(index);
  if (PyErr_Occurred()) return NULL;
  kiln_stream stream = NULL;
  if (async && kpy_stream_parse(st, stream_obj, &stream) < 0) return NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = async ? kiln_memset_2d_async((kiln_deviceptr)ptr, (size_t)pitch, (uint32_t)value, bytes,
                                     (size_t)width, (size_t)height, stream)
              : kiln_memset_2d((kiln_deviceptr)ptr, (size_t)pitch, (uint32_t)value, bytes,
                               (size_t)width, (size_t)height);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

#define KPY_MEMSET_2D(bits, bytes)                                                       \
  static PyObject *kpy_memset_d2d##bits(PyObject *m, PyObject *a, PyObject *k) {         \
    return kpy_memset_2d(m, a, k, bytes, 0, "OnOnn:memset_d2d" #bits);                   \
  }                                                                                      \
  static PyObject *kpy_memset_d2d##bits##_async(PyObject *m, PyObject *a, PyObject *k) { \
    return kpy_memset_2d(m, a, k, bytes, 1, "OnOnn|O:memset_d2d" #bits "_async");        \
  }
KPY_MEMSET_2D(8, 1)
KPY_MEMSET_2D(16, 2)
KPY_MEMSET_2D(32, 4)

static PyObject *kpy_start_profiler(PyObject *module, PyObject *unused) {
  (void)unused;
  kiln_status s = kiln_profiler_start();
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_stop_profiler(PyObject *module, PyObject *unused) {
  (void)unused;
  kiln_status s = kiln_profiler_stop();
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  Py_RETURN_NONE;
}

#define KPY_MEMSET_2D_DEF(bits)                                                                    \
  {"memset_d2d" #bits, (PyCFunction)(void (*)(void))kpy_memset_d2d##bits,                          \
   METH_VARARGS | METH_KEYWORDS,                                                                   \
   "memset_d2d" #bits "($module, dest, pitch, data, width, height)\n--\n\n"                        \
   "height rows of width " #bits "-bit values set to data, the rows pitch bytes apart."},          \
      {"memset_d2d" #bits "_async", (PyCFunction)(void (*)(void))kpy_memset_d2d##bits##_async,     \
       METH_VARARGS | METH_KEYWORDS,                                                               \
       "memset_d2d" #bits "_async($module, dest, pitch, data, width, height, stream=None)\n--\n\n" \
       "The same, queued on stream."}

static PyMethodDef kpy_managed_functions[] = {
    {"managed_empty", (PyCFunction)(void (*)(void))kpy_managed_empty, METH_VARARGS | METH_KEYWORDS,
     "managed_empty($module, shape, dtype='float64', order='C', mem_flags=0)\n--\n\n"
     "A numpy array over managed memory, which the host and kernels both reach: pass it to a "
     "kernel as it is, synchronize before the host reads it. mem_flags: "
     "mem_attach_flags.GLOBAL (0 too) or HOST."},
    {"managed_zeros", (PyCFunction)(void (*)(void))kpy_managed_zeros, METH_VARARGS | METH_KEYWORDS,
     "managed_zeros($module, shape, dtype='float64', order='C', mem_flags=0)\n--\n\n"
     "managed_empty's array, zeroed."},
    KPY_MEMSET_2D_DEF(8),
    KPY_MEMSET_2D_DEF(16),
    KPY_MEMSET_2D_DEF(32),
    {"start_profiler", kpy_start_profiler, METH_NOARGS,
     "start_profiler($module, /)\n--\n\nTurns the profiler's collection on (cuProfilerStart), "
     "for a tool started with it off."},
    {"stop_profiler", kpy_stop_profiler, METH_NOARGS,
     "stop_profiler($module, /)\n--\n\nTurns it off (cuProfilerStop)."},
    {NULL, NULL, 0, NULL},
};

int kpy_managed_init(PyObject *module, kpy_state *st) {
  st->ref.ManagedAllocation_type = kpy_add_type(module, &kpy_managed_spec, NULL);
  if (!st->ref.ManagedAllocation_type) return -1;
  return PyModule_AddFunctions(module, kpy_managed_functions);
}
