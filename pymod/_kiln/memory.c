/* Device memory: DeviceAllocation (kiln.mem_alloc), the blocking copies, and the pool's figures
 * and upkeep. */
#include "memory.h"

#include "errors.h"

#include <inttypes.h>

static PyObject *kpy_mem_alloc(PyObject *module, PyObject *arg) {
  kpy_state *st = kpy_state_of_module(module);
  Py_ssize_t nbytes = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
  if (nbytes == -1 && PyErr_Occurred()) return NULL;
  if (nbytes <= 0) {
    PyErr_Format(PyExc_ValueError, "mem_alloc() needs a positive number of bytes, not %zd", nbytes);
    return NULL;
  }
  kiln_deviceptr p = 0;
  kiln_status s = kiln_mem_alloc((size_t)nbytes, &p);
  if (s) return kpy_raise(st, s);
  PyTypeObject *tp = st->ref.DeviceAllocation_type;
  kpy_allocation *self = (kpy_allocation *)tp->tp_alloc(tp, 0);
  if (!self) {
    kiln_mem_free(p);
    return NULL;
  }
  self->ptr = p;
  self->size = (size_t)nbytes;
  return (PyObject *)self;
}

PyObject *kpy_allocation_pooled(kpy_state *st, size_t nbytes, kiln_stream stream,
                                PyObject *stream_owner) {
  PyTypeObject *tp = st->ref.DeviceAllocation_type;
  kpy_allocation *self = (kpy_allocation *)tp->tp_alloc(tp, 0);
  if (!self) return NULL;
  kiln_status s = kiln_mem_alloc_async(nbytes, stream, &self->ptr);
  if (s) {
    Py_DECREF(self);
    return kpy_raise(st, s);
  }
  self->size = nbytes;
  self->pooled = 1;
  self->device = kiln_device_current();
  self->stream = stream;
  self->stream_owner = Py_XNewRef(stream_owner);
  return (PyObject *)self;
}

/* Frees the memory: pool memory where it was made, whichever device is current. */
static kiln_status kpy_allocation_release(kpy_allocation *self) {
  if (!self->ptr) return KILN_OK;
  kiln_status s;
  if (self->pooled) {
    int current = kiln_device_current();
    if (current != self->device) kiln_device_set_current(self->device);
    s = kiln_mem_free_async(self->ptr, self->size, self->stream);
    if (current != self->device) kiln_device_set_current(current);
  } else {
    s = kiln_mem_free(self->ptr);
  }
  if (!s) self->ptr = 0;
  return s;
}

static void kpy_allocation_dealloc(PyObject *op) {
  kpy_allocation *self = (kpy_allocation *)op;
  PyTypeObject *tp = Py_TYPE(op);
  kpy_allocation_release(self); /* a failure here has no one to tell */
  Py_CLEAR(self->stream_owner);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_allocation_free(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_status s = kpy_allocation_release((kpy_allocation *)op);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_allocation_int(PyObject *op) {
  return PyLong_FromUnsignedLongLong(((kpy_allocation *)op)->ptr);
}

static PyObject *kpy_allocation_repr(PyObject *op) {
  kpy_allocation *self = (kpy_allocation *)op;
  char addr[32];
  PyOS_snprintf(addr, sizeof addr, "0x%" PRIx64, (uint64_t)self->ptr);
  if (!self->ptr) return PyUnicode_FromFormat("<kiln.DeviceAllocation (freed)>");
  return PyUnicode_FromFormat("<kiln.DeviceAllocation of %zu bytes at %s>", self->size, addr);
}

static PyObject *kpy_allocation_get_size(PyObject *op, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(((kpy_allocation *)op)->size);
}

static PyMethodDef kpy_allocation_methods[] = {
    {"free", kpy_allocation_free, METH_NOARGS, "Frees the memory now rather than when collected."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_allocation_getset[] = {
    {"size", kpy_allocation_get_size, NULL, "Size in bytes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_allocation_slots[] = {
    {Py_tp_dealloc, kpy_allocation_dealloc},
    {Py_tp_repr, kpy_allocation_repr},
    {Py_tp_methods, kpy_allocation_methods},
    {Py_tp_getset, kpy_allocation_getset},
    {Py_nb_int, kpy_allocation_int},
    {Py_nb_index, kpy_allocation_int},
    {Py_tp_doc, (void *)"Device memory from kiln.mem_alloc(); int() gives its address. "
                        "Freed when collected or by .free()."},
    {0, NULL},
};

static PyType_Spec kpy_allocation_spec = {"kiln.DeviceAllocation", sizeof(kpy_allocation), 0,
                                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
                                              Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                          kpy_allocation_slots};

/* The device side of a copy: an allocation (its size bounds the copy) or an int address
 * (the engine checks the range against the driver's record of the allocation). */
static int kpy_device_side(kpy_state *st, PyObject *obj, size_t nbytes, const char *what,
                           kiln_deviceptr *out) {
  if (Py_IS_TYPE(obj, st->ref.DeviceAllocation_type)) {
    kpy_allocation *a = (kpy_allocation *)obj;
    if (!a->ptr) {
      PyErr_Format(PyExc_ValueError, "the %s allocation was freed", what);
      return -1;
    }
    if (nbytes > a->size) {
      PyErr_Format(PyExc_ValueError, "copying %zu bytes, but the %s allocation has %zu", nbytes,
                   what, a->size);
      return -1;
    }
    *out = a->ptr;
    return 0;
  }
  if (PyLong_Check(obj)) {
    unsigned long long v = PyLong_AsUnsignedLongLong(obj);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = v;
    return 0;
  }
  PyErr_Format(PyExc_TypeError,
               "the %s must be a kiln.DeviceAllocation or an int address, "
               "not %.100s",
               what, Py_TYPE(obj)->tp_name);
  return -1;
}

/* The host side: a C-contiguous numpy array, writeable when it is the destination. */
static PyArrayObject *kpy_host_side(PyObject *obj, int writeable, const char *what) {
  if (!PyArray_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "the %s must be a numpy array, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  PyArrayObject *a = (PyArrayObject *)obj;
  if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a)) {
    PyErr_Format(PyExc_ValueError,
                 "the %s array is not contiguous; pass "
                 "numpy.ascontiguousarray(a)",
                 what);
    return NULL;
  }
  if (writeable && !PyArray_ISWRITEABLE(a)) {
    PyErr_Format(PyExc_ValueError, "the %s array is read-only", what);
    return NULL;
  }
  return a;
}

/* One blocking copy between a numpy array and device memory; the host array's size is the
 * copy's. args are (dest, src) as PyCUDA orders them. */
static PyObject *kpy_memcpy(PyObject *module, PyObject *const *args, Py_ssize_t n, int to_device) {
  kpy_state *st = kpy_state_of_module(module);
  const char *name = to_device ? "memcpy_htod" : "memcpy_dtoh";
  if (n != 2) {
    PyErr_Format(PyExc_TypeError, "%s(dest, src) takes 2 arguments (%zd given)", name, n);
    return NULL;
  }
  PyObject *host_obj = to_device ? args[1] : args[0], *dev_obj = to_device ? args[0] : args[1];
  PyArrayObject *host = kpy_host_side(host_obj, !to_device, to_device ? "source" : "destination");
  kiln_deviceptr dev;
  if (!host) return NULL;
  size_t nbytes = (size_t)PyArray_NBYTES(host);
  if (kpy_device_side(st, dev_obj, nbytes, to_device ? "destination" : "source", &dev) < 0)
    return NULL;
  void *data = PyArray_DATA(host);
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = to_device ? kiln_memcpy_htod(dev, data, nbytes) : kiln_memcpy_dtoh(data, dev, nbytes);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_memcpy_htod(PyObject *module, PyObject *const *args, Py_ssize_t n) {
  return kpy_memcpy(module, args, n, 1);
}

static PyObject *kpy_memcpy_dtoh(PyObject *module, PyObject *const *args, Py_ssize_t n) {
  return kpy_memcpy(module, args, n, 0);
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
  return Py_BuildValue("{sKsKsKsK}", "reserved", (unsigned long long)p.reserved, "reserved_high",
                       (unsigned long long)p.reserved_high, "used", (unsigned long long)p.used,
                       "used_high", (unsigned long long)p.used_high);
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

static PyMethodDef kpy_memory_functions[] = {
    {"mem_alloc", kpy_mem_alloc, METH_O,
     "mem_alloc(nbytes): device memory, freed when the allocation is collected."},
    {"memcpy_htod", (PyCFunction)(void (*)(void))kpy_memcpy_htod, METH_FASTCALL,
     "memcpy_htod(dest, src): copies the numpy array src to device memory dest."},
    {"memcpy_dtoh", (PyCFunction)(void (*)(void))kpy_memcpy_dtoh, METH_FASTCALL,
     "memcpy_dtoh(dest, src): copies device memory src into the numpy array dest."},
    {"mem_info", kpy_mem_info, METH_NOARGS, "(free, total) bytes of the current device."},
    {"pool_stats", kpy_pool_stats, METH_NOARGS,
     "The device memory pool: reserved, reserved_high, used, used_high (bytes)."},
    {"pool_trim", (PyCFunction)(void (*)(void))kpy_pool_trim, METH_VARARGS | METH_KEYWORDS,
     "pool_trim(keep_bytes=0): gives the pool's unused memory back to the driver."},
    {NULL, NULL, 0, NULL},
};

int kpy_memory_init(PyObject *module, kpy_state *st) {
  st->ref.DeviceAllocation_type = kpy_add_type(module, &kpy_allocation_spec, NULL);
  if (!st->ref.DeviceAllocation_type) return -1;
  return PyModule_AddFunctions(module, kpy_memory_functions);
}
