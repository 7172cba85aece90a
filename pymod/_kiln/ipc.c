/* Memory shared with another process, PyCUDA's way: mem_get_ipc_handle(devptr) gives the
 * allocation's handle as 64 bytes, which pickle and pipes carry; IPCMemoryHandle(handle) in the
 * other process maps the memory, and passes as its address wherever kiln takes one (int() and
 * __index__). Closed by close() or when collected, on the device it was opened on. */
#include "ipc.h"

#include "errors.h"
#include "memory.h"

#include <inttypes.h>

typedef struct kpy_ipc_memory {
  PyObject_HEAD
  kiln_deviceptr ptr; /* 0 once closed */
  size_t size;
  int device; /* current when it was opened: the memory is mapped in its context */
} kpy_ipc_memory;

static PyObject *kpy_mem_get_ipc_handle(PyObject *module, PyObject *devptr) {
  kpy_state *st = kpy_state_of_module(module);
  kiln_deviceptr p;
  if (kpy_device_pointer(st, devptr, 0, "memory to share", &p) < 0) return NULL;
  kiln_ipc_mem_handle h;
  kiln_status s = kiln_ipc_mem_get_handle(p, &h);
  if (s) return kpy_raise(st, s);
  return PyBytes_FromStringAndSize((const char *)h.bytes, sizeof h.bytes);
}

/* IPCMemoryHandle(ipc_handle, flags=ipc_mem_flags.LAZY_ENABLE_PEER_ACCESS). */
static PyObject *kpy_ipc_memory_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  static char *kwlist[] = {(char *)"ipc_handle", (char *)"flags", NULL};
  PyObject *handle_obj, *flags_obj = NULL;
  if (!st || !PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:IPCMemoryHandle", kwlist, &handle_obj,
                                          &flags_obj))
    return NULL;
  kiln_ipc_mem_handle h;
  if (kpy_handle_bytes(handle_obj, h.bytes, sizeof h.bytes, "an IPC memory handle",
                       "mem_get_ipc_handle()") < 0)
    return NULL;
  unsigned long flags = KILN_IPC_LAZY_ENABLE_PEER_ACCESS;
  if (flags_obj) {
    flags = PyLong_Check(flags_obj) ? PyLong_AsUnsignedLong(flags_obj) : (unsigned long)-1;
    if (flags > KILN_IPC_LAZY_ENABLE_PEER_ACCESS) {
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError,
                   "flags are 0 or ipc_mem_flags.LAZY_ENABLE_PEER_ACCESS (1), not %R", flags_obj);
      return NULL;
    }
  }
  kpy_ipc_memory *self = (kpy_ipc_memory *)tp->tp_alloc(tp, 0);
  if (!self) return NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_ipc_mem_open(&h, (unsigned)flags, &self->ptr, &self->size);
  Py_END_ALLOW_THREADS
  if (s) {
    Py_DECREF(self);
    return kpy_raise(st, s);
  }
  self->device = kiln_device_current();
  return (PyObject *)self;
}

/* Unmaps the memory in the context it was mapped in, whichever device is current. */
static kiln_status kpy_ipc_memory_release(kpy_ipc_memory *self) {
  if (!self->ptr) return KILN_OK;
  int current = kiln_device_current();
  if (current != self->device) kiln_device_set_current(self->device);
  kiln_status s = kiln_ipc_mem_close(self->ptr);
  if (current != self->device) kiln_device_set_current(current);
  if (!s) self->ptr = 0;
  return s;
}

static void kpy_ipc_memory_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  kpy_ipc_memory_release((kpy_ipc_memory *)op); /* a failure here has no one to tell */
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_ipc_memory_close(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_ipc_memory *self = (kpy_ipc_memory *)op;
  if (!self->ptr) {
    PyErr_SetString(PyExc_ValueError, "the IPCMemoryHandle is closed already");
    return NULL;
  }
  kiln_status s = kpy_ipc_memory_release(self);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_ipc_memory_int(PyObject *op) {
  kpy_ipc_memory *self = (kpy_ipc_memory *)op;
  if (!self->ptr) {
    PyErr_SetString(PyExc_ValueError, "the IPCMemoryHandle was closed: its memory is no longer "
                                      "mapped in this process");
    return NULL;
  }
  return PyLong_FromUnsignedLongLong(self->ptr);
}

static PyObject *kpy_ipc_memory_get_size(PyObject *op, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(((kpy_ipc_memory *)op)->size);
}

static PyObject *kpy_ipc_memory_repr(PyObject *op) {
  kpy_ipc_memory *self = (kpy_ipc_memory *)op;
  if (!self->ptr) return PyUnicode_FromString("<kiln.IPCMemoryHandle (closed)>");
  char addr[32];
  PyOS_snprintf(addr, sizeof addr, "0x%" PRIx64, (uint64_t)self->ptr);
  return PyUnicode_FromFormat("<kiln.IPCMemoryHandle of %zu bytes at %s on device %d>", self->size,
                              addr, self->device);
}

static PyMethodDef kpy_ipc_memory_methods[] = {
    {"close", kpy_ipc_memory_close, METH_NOARGS,
     "close($self, /)\n--\n\nUnmaps the memory now rather than when collected; the other "
     "process's allocation stays. A second close() is a ValueError."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_ipc_memory_getset[] = {
    {"size", kpy_ipc_memory_get_size, NULL, "The shared allocation's size in bytes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_ipc_memory_slots[] = {
    {Py_tp_new, kpy_ipc_memory_new},
    {Py_tp_dealloc, kpy_ipc_memory_dealloc},
    {Py_tp_repr, kpy_ipc_memory_repr},
    {Py_tp_methods, kpy_ipc_memory_methods},
    {Py_tp_getset, kpy_ipc_memory_getset},
    {Py_nb_int, kpy_ipc_memory_int},
    {Py_nb_index, kpy_ipc_memory_int},
    {Py_tp_doc, (void *)"IPCMemoryHandle(ipc_handle, flags=1)\n--\n\nDevice memory another "
                        "process shared (its mem_get_ipc_handle() bytes), mapped into the "
                        "current device's context; int() gives its address, and it passes as "
                        "one to kernels and copies. Unmapped by close() or when collected."},
    {0, NULL},
};

static PyType_Spec kpy_ipc_memory_spec = {"kiln.IPCMemoryHandle", sizeof(kpy_ipc_memory), 0,
                                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
                                          kpy_ipc_memory_slots};

static PyMethodDef kpy_ipc_functions[] = {
    {"mem_get_ipc_handle", kpy_mem_get_ipc_handle, METH_O,
     "mem_get_ipc_handle($module, devptr, /)\n--\n\nThe 64-byte IPC handle (bytes) of the "
     "allocation devptr starts: mem_alloc's memory, for IPCMemoryHandle in another process."},
    {NULL, NULL, 0, NULL},
};

int kpy_ipc_init(PyObject *module, kpy_state *st) {
  st->ref.IPCMemoryHandle_type = kpy_add_type(module, &kpy_ipc_memory_spec, NULL);
  if (!st->ref.IPCMemoryHandle_type) return -1;
  return PyModule_AddFunctions(module, kpy_ipc_functions);
}
