/* Device memory: DeviceAllocation (kiln.mem_alloc), the blocking copies, and the pool's figures
 * and upkeep. */
#include "memory.h"

#include "errors.h"
#include "hostmem.h"
#include "pin.h"
#include "stream.h"
#include "wait.h"

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
  self->st = st;
  return (PyObject *)self;
}

PyObject *kpy_pool_alloc(PyObject *module, PyObject *arg) {
  Py_ssize_t nbytes = PyNumber_AsSsize_t(arg, PyExc_OverflowError);
  if (nbytes == -1 && PyErr_Occurred()) return NULL;
  if (nbytes <= 0) {
    PyErr_Format(PyExc_ValueError, "pool_alloc() needs a positive number of bytes, not %zd",
                 nbytes);
    return NULL;
  }
  return kpy_allocation_pooled(kpy_state_of_module(module), (size_t)nbytes, NULL, NULL);
}

int kpy_is_pool_alloc(PyObject *allocator) {
  return PyCFunction_Check(allocator) && PyCFunction_GET_FUNCTION(allocator) == kpy_pool_alloc;
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
  self->st = st;
  self->pooled = 1;
  self->device = kiln_device_current();
  self->stream = stream;
  self->stream_owner = Py_XNewRef(stream_owner);
  return (PyObject *)self;
}

int kpy_allocation_is_pooled(kpy_state *st, PyObject *obj) {
  return obj && Py_IS_TYPE(obj, st->ref.DeviceAllocation_type) && ((kpy_allocation *)obj)->pooled;
}

/* 1 and NULL both name the legacy default stream. */
static int kpy_same_stream(kiln_stream a, kiln_stream b) {
  uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
  return (x == 1 ? 0 : x) == (y == 1 ? 0 : y);
}

/* The use so far on another stream, put into the event (recorded there, when it was put
 * off) and waited for by the memory's own stream: before a use on a third stream takes the
 * event over. */
static kiln_status kpy_allocation_settle(kpy_allocation *a) {
  kiln_status s = KILN_OK;
  if (a->used_later) {
    if (!a->used) s = kiln_event_create(0, &a->used);
    if (!s) s = kiln_event_record(a->used, a->used_on);
    if (!s) a->used_later = 0;
  }
  return s;
}

int kpy_allocation_used_on(kpy_state *st, PyObject *alloc, kiln_stream stream) {
  kpy_allocation *a = (kpy_allocation *)alloc;
  /* kiln.mem_alloc's memory is freed by cuMemFree, which waits for the device itself. */
  if (!a->ptr || !a->pooled || kpy_same_stream(stream, a->stream)) return 0;
  int prior = a->used || a->used_later, again = prior && kpy_same_stream(stream, a->used_on);
  if (again && a->used_later) return 0; /* recorded when it matters */
  kiln_status s = KILN_OK;
  if (prior && !again) {
    /* One event, two streams: the memory's own stream waits for the use so far first. */
    s = kpy_allocation_settle(a);
    if (!s) s = kiln_stream_wait_event(a->stream, a->used);
  }
  int later = kpy_stream_lasts(st, stream);
  if (!s && !later) {
    if (!a->used) s = kiln_event_create(0, &a->used);
    if (!s) s = kiln_event_record(a->used, stream);
  }
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  a->used_on = stream;
  a->used_later = later;
  return 0;
}

/* Frees the memory: pool memory where it was made, whichever device is current, once its
 * last use on another stream is over. The engine keeps small freed blocks by the stream they
 * were freed on, for that stream's next allocations, and frees them there later: on a stream
 * that does not last (another library's, which may be destroyed once this memory is gone; the
 * per-thread default stream, another on each thread), the block is freed on the legacy
 * default stream instead, after the work queued on its own (the per-thread stream's work
 * precedes the legacy stream's anyway). */
static kiln_status kpy_allocation_release(kpy_allocation *self) {
  if (!self->ptr) return KILN_OK;
  kiln_status s;
  if (self->pooled) {
    int current = kiln_device_current();
    if (current != self->device) kiln_device_set_current(self->device);
    int lasts = !self->st || kpy_stream_lasts(self->st, self->stream);
    kiln_stream on = lasts ? self->stream : NULL;
    s = self->used_later && self->st && kpy_stream_lasts(self->st, self->used_on)
            ? kpy_allocation_settle(self)
            : KILN_OK;
    if (!s && self->used) s = kiln_stream_wait_event(on, self->used);
    if (!s && !lasts && (uintptr_t)self->stream != 2) {
      if (!self->used) s = kiln_event_create(0, &self->used);
      if (!s) s = kiln_event_record(self->used, self->stream);
      if (!s) s = kiln_stream_wait_event(on, self->used);
    }
    if (!s) s = kiln_mem_free_async(self->ptr, self->size, on);
    if (!s && self->used) {
      kiln_event_destroy(self->used); /* the wait queued holds what it needs */
      self->used = NULL;
    }
    if (current != self->device) kiln_device_set_current(current);
  } else {
    s = kiln_mem_free(self->ptr);
  }
  if (!s) self->ptr = 0;
  return s;
}

/* While a kiln capture is open, the memory goes to an heir that the capture keeps and lets go
 * when it ends (st->deferred): freeing it now would queue the free, and the wait for its last
 * use, on its own stream, and touching the legacy default stream fails the capture of a
 * blocking stream. So it does, kept in st->after_copies, while a copy of another thread may be
 * using it (kpy_copies_begin). 1 when handed over; 0 when nothing is to be deferred or the heir
 * cannot be made (the memory is then freed now). */
static int kpy_allocation_defer(kpy_allocation *self) {
  PyTypeObject *tp = Py_TYPE(self);
  kpy_state *st = self->st;
  if (!self->ptr || !st || (!st->deferred && !st->copies)) return 0;
  kpy_raised raised; /* a dealloc may run while an exception is being raised */
  kpy_raised_set_aside(&raised);
  int handed = 0;
  if (!st->deferred && !st->after_copies) st->after_copies = PyList_New(0);
  PyObject *keeper = st->deferred ? st->deferred : st->after_copies;
  kpy_allocation *heir = keeper ? (kpy_allocation *)tp->tp_alloc(tp, 0) : NULL;
  if (heir) {
    heir->ptr = self->ptr;
    heir->size = self->size;
    heir->pooled = self->pooled;
    heir->device = self->device;
    heir->stream = self->stream;
    heir->stream_owner = self->stream_owner;
    heir->used = self->used;
    heir->used_on = self->used_on;
    heir->used_later = self->used_later;
    heir->st = self->st;
    if (PyList_Append(keeper, (PyObject *)heir) == 0) {
      self->ptr = 0;
      self->used = NULL;
      self->stream_owner = NULL;
      handed = 1;
    } else {
      heir->ptr = 0; /* still self's: freed below, now */
      heir->used = NULL;
      heir->stream_owner = NULL;
    }
    Py_DECREF(heir);
  }
  kpy_raised_put_back(&raised);
  return handed;
}

void kpy_copies_begin(kpy_state *st) { st->copies++; }

void kpy_copies_end(kpy_state *st) {
  if (--st->copies || !st->after_copies) return;
  kpy_raised raised; /* ends a copy that may have failed */
  kpy_raised_set_aside(&raised);
  PyObject *held = st->after_copies; /* the heirs' frees may start more copies' ends */
  st->after_copies = NULL;
  Py_DECREF(held);
  kpy_raised_put_back(&raised);
}

static int kpy_allocation_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((kpy_allocation *)op)->dict);
  Py_VISIT(((kpy_allocation *)op)->stream_owner);
  return 0;
}

/* Only the program's attributes: stream_owner keeps the stream the memory is freed on. */
static int kpy_allocation_clear(PyObject *op) {
  Py_CLEAR(((kpy_allocation *)op)->dict);
  return 0;
}

static void kpy_allocation_dealloc(PyObject *op) {
  kpy_allocation *self = (kpy_allocation *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  Py_CLEAR(self->dict);
  kpy_allocation_defer(self);
  kpy_allocation_release(self); /* a failure here has no one to tell */
  if (self->used) kiln_event_destroy(self->used);
  Py_CLEAR(self->stream_owner);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_allocation_free(PyObject *op, PyObject *unused) {
  (void)unused;
  /* A second free is PyCUDA's LogicError (device_allocation::free, CUDA_ERROR_INVALID_HANDLE):
   * a program that frees what it freed has lost track of its memory. */
  if (!((kpy_allocation *)op)->ptr)
    return kpy_raise_logic_message(kpy_state_of_type(Py_TYPE(op)),
                                   "free(): the allocation was freed already", 400);
  /* A copy of another thread may be using it: freed when the last such copy ends. */
  if (((kpy_allocation *)op)->st && ((kpy_allocation *)op)->st->copies &&
      kpy_allocation_defer((kpy_allocation *)op))
    Py_RETURN_NONE;
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

/* size: the allocation's bytes, unless the program set its own (PyCUDA's allocation has no
 * size, so a program's is just its attribute); kiln's checks always use the allocation's. */
static PyObject *kpy_allocation_get_size(PyObject *op, void *closure) {
  (void)closure;
  kpy_allocation *self = (kpy_allocation *)op;
  PyObject *own = self->dict ? PyDict_GetItemString(self->dict, "size") : NULL;
  return own ? Py_NewRef(own) : PyLong_FromSize_t(self->size);
}

static int kpy_allocation_set_size(PyObject *op, PyObject *value, void *closure) {
  (void)closure;
  kpy_allocation *self = (kpy_allocation *)op;
  if (!self->dict && !(self->dict = PyDict_New())) return -1;
  if (value) return PyDict_SetItemString(self->dict, "size", value);
  /* del a.size: the allocation's own again */
  if (PyDict_DelItemString(self->dict, "size") < 0 && PyErr_ExceptionMatches(PyExc_KeyError))
    PyErr_Clear();
  return PyErr_Occurred() ? -1 : 0;
}

static PyObject *kpy_allocation_as_buffer(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_allocation *self = (kpy_allocation *)op;
  if (!self->ptr) {
    PyErr_SetString(PyExc_ValueError, "the allocation was freed");
    return NULL;
  }
  return kpy_as_buffer(kpy_state_of_type(Py_TYPE(op)), op, self->ptr, self->size, args, kwargs);
}

static PyMethodDef kpy_allocation_methods[] = {
    {"as_buffer", (PyCFunction)(void (*)(void))kpy_allocation_as_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "as_buffer($self, /, size, offset=0)\n--\n\nsize bytes from offset as a writable "
     "memoryview for the host, where the host can reach the memory (managed or mapped "
     "page-locked memory); plain device memory is a ValueError: copy it instead."},
    {"free", kpy_allocation_free, METH_NOARGS,
     "free($self, /)\n--\n\nFrees the memory now rather than when collected; a second free is "
     "a LogicError, as PyCUDA's."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_allocation_getset[] = {
    {"size", kpy_allocation_get_size, kpy_allocation_set_size,
     "Size in bytes; a program may set its own, which kiln's checks do not use.", NULL},
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef kpy_allocation_members[] = {
    {"__dictoffset__", KPY_T_PYSSIZET, offsetof(kpy_allocation, dict), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot kpy_allocation_slots[] = {
    {Py_tp_dealloc, kpy_allocation_dealloc},
    {Py_tp_repr, kpy_allocation_repr},
    {Py_tp_methods, kpy_allocation_methods},
    {Py_tp_getset, kpy_allocation_getset},
    {Py_tp_members, kpy_allocation_members},
    {Py_tp_traverse, kpy_allocation_traverse},
    {Py_tp_clear, kpy_allocation_clear},
    {Py_nb_int, kpy_allocation_int},
    {Py_nb_index, kpy_allocation_int},
    {Py_tp_doc, (void *)"Device memory from kiln.mem_alloc(); int() gives its address. "
                        "Freed when collected or by .free()."},
    {0, NULL},
};

static PyType_Spec kpy_allocation_spec = {"kiln.DeviceAllocation", sizeof(kpy_allocation), 0,
                                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
                                              Py_TPFLAGS_DISALLOW_INSTANTIATION |
                                              Py_TPFLAGS_HAVE_GC,
                                          kpy_allocation_slots};

/* The device side of a copy: an allocation (its size bounds the copy), an int address, or an
 * object that converts to one with __index__ (PyCUDA's PointerHolderBase, a NumPy integer);
 * the engine checks the range of an address against the driver's record of the allocation. */
int kpy_device_pointer(kpy_state *st, PyObject *obj, size_t nbytes, const char *what,
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
  /* A DeviceArray's __index__ is NumPy's, a one-element integer array's value, never an
   * address; PyCUDA's memcpy_* refuse its GPUArray too. */
  if (PyObject_TypeCheck(obj, st->ref.DeviceArray_type)) {
    PyErr_Format(PyExc_TypeError,
                 "the %s is a DeviceArray; pass its .gpudata (its memory), as PyCUDA's copies "
                 "take, or copy between arrays with dest.set(src)",
                 what);
    return -1;
  }
  if (PyLong_Check(obj) || (PyIndex_Check(obj) && !PyBool_Check(obj) && !PyFloat_Check(obj))) {
    PyObject *i = PyNumber_Index(obj);
    if (!i) return -1;
    unsigned long long v = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (v == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Format(PyExc_ValueError, "the %s address %R is not one (0 to 2**64-1)", what, obj);
      return -1;
    }
    *out = v;
    return 0;
  }
  PyErr_Format(PyExc_TypeError,
               "the %s must be a kiln.DeviceAllocation, an int address or an object with "
               "__index__ (a PointerHolderBase), not %.100s",
               what, Py_TYPE(obj)->tp_name);
  return -1;
}

/* Whether a buffer's struct-module format has Python objects ('O') among its items; the field
 * names of a struct format (between colons) are skipped. */
static int kpy_format_has_objects(const char *format) {
  for (int in_name = 0; format && *format; format++)
    if (*format == ':') in_name = !in_name;
    else if (*format == 'O' && !in_name) return 1;
  return 0;
}

int kpy_host_side(PyObject *obj, int writeable, const char *what, Py_buffer *view) {
  if (PyArray_Check(obj)) {
    PyArrayObject *a = (PyArrayObject *)obj;
    if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a)) {
      PyErr_Format(PyExc_ValueError,
                   "the %s array is not contiguous; pass numpy.ascontiguousarray(a)", what);
      return -1;
    }
    if (writeable && !PyArray_ISWRITEABLE(a)) {
      PyErr_Format(PyExc_ValueError, "the %s array is read-only", what);
      return -1;
    }
    if (PyDataType_REFCHK(PyArray_DESCR(a))) { /* device bytes read as object pointers crash */
      PyErr_Format(PyExc_TypeError,
                   "the %s array's dtype %S holds Python objects, which device memory cannot "
                   "hold",
                   what, (PyObject *)PyArray_DESCR(a));
      return -1;
    }
    /* Any other dtype, even one the buffer protocol cannot describe: the bytes are what move. */
    return PyBuffer_FillInfo(view, obj, PyArray_DATA(a), (Py_ssize_t)PyArray_NBYTES(a), !writeable,
                             PyBUF_SIMPLE);
  }
  int flags = PyBUF_ANY_CONTIGUOUS | PyBUF_FORMAT | (writeable ? PyBUF_WRITABLE : 0);
  if (PyObject_GetBuffer(obj, view, flags) == 0) {
    if (!kpy_format_has_objects(view->format)) return 0;
    PyBuffer_Release(view); /* a memoryview of an array of objects */
    PyErr_Format(PyExc_TypeError,
                 "the %s holds Python objects (its buffer's items are 'O'), which device memory "
                 "cannot hold",
                 what);
    return -1;
  }
  int readonly = PyObject_CheckBuffer(obj) && writeable;
  PyErr_Clear();
  if (readonly) PyErr_Format(PyExc_ValueError, "the %s is read-only", what);
  else
    PyErr_Format(PyExc_TypeError,
                 "the %s must be a numpy array or another contiguous buffer (bytes, bytearray, "
                 "memoryview, a NumPy scalar), not %.100s",
                 what, Py_TYPE(obj)->tp_name);
  return -1;
}

int kpy_copy_queued(kpy_state *st, const kpy_copy_stream *on, PyObject *host) {
  if (kpy_stream_is_kiln(st, on->obj)) return kpy_stream_keep(on->obj, host);
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_stream_synchronize(on->handle);
  Py_END_ALLOW_THREADS
  if (s) kpy_raise(st, s);
  return s ? -1 : 0;
}

/* One copy between a host buffer and device memory; the host buffer's size is the copy's.
 * args are (dest, src) as PyCUDA orders them, then stream for the _async forms. */
static PyObject *kpy_memcpy_between(PyObject *module, PyObject *const *args, Py_ssize_t n,
                                    PyObject *kwnames, int to_device, int async) {
  kpy_state *st = kpy_state_of_module(module);
  const char *name = to_device ? (async ? "memcpy_htod_async" : "memcpy_htod")
                               : (async ? "memcpy_dtoh_async" : "memcpy_dtoh");
  kpy_copy_stream on = {Py_None, NULL, 0};
  /* dest, src and stream by position or by PyCUDA's keywords (PyNX writes dest=, src=). */
  static const char *const names[] = {"dest", "src", "stream"};
  PyObject *given[3] = {NULL, NULL, NULL};
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0, most = async ? 3 : 2;
  if (n > most) {
    PyErr_Format(PyExc_TypeError, "%s(dest, src%s) takes at most %zd arguments (%zd given)", name,
                 async ? ", stream=None" : "", most, n);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < n; i++) given[i] = args[i];
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i);
    Py_ssize_t slot = 0;
    while (slot < most && PyUnicode_CompareWithASCIIString(key, names[slot]) != 0) slot++;
    if (slot == most) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument %R", name, key);
      return NULL;
    }
    if (given[slot]) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", name,
                   names[slot]);
      return NULL;
    }
    given[slot] = args[n + i];
  }
  if (!given[0] || !given[1]) {
    PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s'", name,
                 names[given[0] ? 1 : 0]);
    return NULL;
  }
  if (given[2]) on.obj = given[2];
  if (async && kpy_stream_parse(st, on.obj, &on.handle) < 0) return NULL;
  PyObject *host_obj = to_device ? given[1] : given[0], *dev_obj = to_device ? given[0] : given[1];
  const char *dev_what = to_device ? "destination" : "source";
  /* The address first: its __index__ is Python code, which could free or resize the host
   * buffer once taken. An allocation's size is checked once the buffer gives the bytes. */
  kiln_deviceptr dev;
  if (kpy_device_pointer(st, dev_obj, 0, dev_what, &dev) < 0) return NULL;
  Py_buffer view;
  if (kpy_host_side(host_obj, !to_device, to_device ? "source" : "destination", &view) < 0)
    return NULL;
  size_t nbytes = (size_t)view.len;
  if (Py_IS_TYPE(dev_obj, st->ref.DeviceAllocation_type) &&
      kpy_device_pointer(st, dev_obj, nbytes, dev_what, &dev) < 0) {
    PyBuffer_Release(&view);
    return NULL;
  }
  void *data = view.buf;
  if (!to_device && (!async || !kpy_stream_is_kiln(st, on.obj))) {
    int r = kpy_small_get(st, data, dev, nbytes, async ? on.handle : NULL);
    if (r) {
      PyBuffer_Release(&view);
      if (r < 0) return NULL;
      Py_RETURN_NONE;
    }
  }
  /* A copy that blocks waits behind the stream's work first, where Ctrl-C can end the wait:
   * once queued, the copy may not be left behind with the buffer given back. */
  unsigned long long work = kiln_work_count();
  if ((!async || !kpy_stream_is_kiln(st, on.obj)) &&
      kpy_wait_before_copy(st, async ? on.handle : NULL) < 0) {
    PyBuffer_Release(&view);
    return NULL;
  }
  if (PyArray_Check(host_obj) && (!async || !kpy_stream_is_kiln(st, on.obj)))
    kpy_pin_reused(st, (PyArrayObject *)host_obj, nbytes);
  /* Memory the program gave as pageable and kiln page-locked is waited for, as pageable (pin.h). */
  int waited = async && kpy_stream_is_kiln(st, on.obj) && kpy_pin_touches(st, data, nbytes);
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    if (async)
      s = to_device ? kiln_memcpy_htod_async(dev, data, nbytes, on.handle)
                    : kiln_memcpy_dtoh_async(data, dev, nbytes, on.handle);
    else s = to_device ? kiln_memcpy_htod(dev, data, nbytes) : kiln_memcpy_dtoh(data, dev, nbytes);
    if (!s && waited) s = kiln_stream_synchronize(on.handle);
  Py_END_ALLOW_THREADS
  if (!s && !async) kpy_wait_copied(st, kiln_device_current(), work);
  int failed = s                  ? (kpy_raise(st, s), 1)
               : async && !waited ? kpy_copy_queued(st, &on, host_obj) < 0
                                  : 0;
  PyBuffer_Release(&view);
  if (failed) return NULL;
  Py_RETURN_NONE;
}

/* kpy_memcpy_between as a copy (kpy_copies_begin): it reads the device address, may let the
 * GIL go while it waits for the stream's work, then copies. */
static PyObject *kpy_memcpy(PyObject *module, PyObject *const *args, Py_ssize_t n,
                            PyObject *kwnames, int to_device, int async) {
  kpy_state *st = kpy_state_of_module(module);
  kpy_copies_begin(st);
  PyObject *r = kpy_memcpy_between(module, args, n, kwnames, to_device, async);
  kpy_copies_end(st);
  return r;
}

static PyObject *kpy_memcpy_htod(PyObject *module, PyObject *const *args, Py_ssize_t n,
                                 PyObject *kw) {
  return kpy_memcpy(module, args, n, kw, 1, 0);
}

static PyObject *kpy_memcpy_dtoh(PyObject *module, PyObject *const *args, Py_ssize_t n,
                                 PyObject *kw) {
  return kpy_memcpy(module, args, n, kw, 0, 0);
}

static PyObject *kpy_memcpy_htod_async(PyObject *module, PyObject *const *args, Py_ssize_t n,
                                       PyObject *kw) {
  return kpy_memcpy(module, args, n, kw, 1, 1);
}

static PyObject *kpy_memcpy_dtoh_async(PyObject *module, PyObject *const *args, Py_ssize_t n,
                                       PyObject *kw) {
  return kpy_memcpy(module, args, n, kw, 0, 1);
}

/* A count of bytes or elements: a non-negative int. */
static int kpy_count(PyObject *obj, const char *what, size_t *out) {
  if (!PyIndex_Check(obj) || PyBool_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int, not %.100s", what, Py_TYPE(obj)->tp_name);
    return -1;
  }
  Py_ssize_t v = PyNumber_AsSsize_t(obj, PyExc_OverflowError);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < 0) {
    PyErr_Format(PyExc_ValueError, "%s must not be negative, not %zd", what, v);
    return -1;
  }
  *out = (size_t)v;
  return 0;
}

/* memcpy_dtod(dest, src, size) and memcpy_dtod_async(dest, src, size, stream=None). */
static PyObject *kpy_memcpy_dtod_any(PyObject *module, PyObject *args, PyObject *kwargs,
                                     int async) {
  kpy_state *st = kpy_state_of_module(module);
  /* The synchronous form's list stops before stream. */
  static char *kwlist[] = {(char *)"dest", (char *)"src", (char *)"size", (char *)"stream", NULL};
  static char *kwlist_sync[] = {(char *)"dest", (char *)"src", (char *)"size", NULL};
  PyObject *dest, *src, *size_obj, *stream = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs,
                                   async ? "OOO|O:memcpy_dtod_async" : "OOO:memcpy_dtod",
                                   async ? kwlist : kwlist_sync, &dest, &src, &size_obj, &stream))
    return NULL;
  size_t n;
  kiln_deviceptr d, s_ptr;
  kiln_stream handle = NULL;
  /* The stream may run Python code too: the pointers are read after it. */
  if (kpy_count(size_obj, "size", &n) < 0 || (async && kpy_stream_parse(st, stream, &handle) < 0) ||
      kpy_device_pointers(st, dest, src, n, &d, &s_ptr) < 0)
    return NULL;
  kiln_status s;
  kpy_copies_begin(st);
  Py_BEGIN_ALLOW_THREADS
    s = async ? kiln_memcpy_dtod_async(d, s_ptr, n, handle) : kiln_memcpy_dtod(d, s_ptr, n);
  Py_END_ALLOW_THREADS
  kpy_copies_end(st);
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

static PyObject *kpy_memcpy_dtod(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_memcpy_dtod_any(module, args, kwargs, 0);
}

static PyObject *kpy_memcpy_dtod_async(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_memcpy_dtod_any(module, args, kwargs, 1);
}

int kpy_device_pointers(kpy_state *st, PyObject *dest, PyObject *src, size_t nbytes,
                        kiln_deviceptr *d, kiln_deviceptr *s) {
  if (kpy_device_pointer(st, dest, nbytes, "destination", d) < 0 ||
      kpy_device_pointer(st, src, nbytes, "source", s) < 0)
    return -1;
  if (Py_IS_TYPE(dest, st->ref.DeviceAllocation_type))
    return kpy_device_pointer(st, dest, nbytes, "destination", d);
  return 0;
}

/* memset_d8/d16/d32(dest, data, count) and the _async forms with stream=None: count values of
 * `width` bytes, each `data`. PyCUDA's pages name the count `count` and its binding `size`, so a
 * program may pass it by either keyword. */
static PyObject *kpy_memset_any(PyObject *module, PyObject *args, PyObject *kwargs, int width,
                                int async) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kwlist[] = {(char *)"dest",   (char *)"data", (char *)"count",
                           (char *)"stream", (char *)"size", NULL};
  static char *kwlist_sync[] = {(char *)"dest", (char *)"data", (char *)"count", (char *)"size",
                                NULL};
  char fmt[32];
  PyOS_snprintf(fmt, sizeof fmt, "OO|O%s$O:memset_d%d%s", async ? "O" : "", width * 8,
                async ? "_async" : "");
  PyObject *dest, *data, *count_obj = NULL, *size_obj = NULL, *stream = Py_None;
  if (async ? !PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &dest, &data, &count_obj,
                                           &stream, &size_obj)
            : !PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist_sync, &dest, &data, &count_obj,
                                           &size_obj))
    return NULL;
  /* None is the count not given, as the text signature's default says */
  if (count_obj == Py_None) count_obj = NULL;
  if (size_obj == Py_None) size_obj = NULL;
  if ((count_obj != NULL) == (size_obj != NULL)) {
    PyErr_Format(PyExc_TypeError,
                 "memset_d%d%s takes the count of values once: as its third "
                 "argument, count= or size=",
                 width * 8, async ? "_async" : "");
    return NULL;
  }
  size_t count;
  if (kpy_count(count_obj ? count_obj : size_obj, count_obj ? "count" : "size", &count) < 0)
    return NULL;
  /* A value of the width, read as unsigned: -1 is every bit set, as in C. */
  if (!PyIndex_Check(data) || PyBool_Check(data)) {
    PyErr_Format(PyExc_TypeError, "data must be an int, not %.100s", Py_TYPE(data)->tp_name);
    return NULL;
  }
  long long v = PyLong_AsLongLong(data);
  long long lo = -(1LL << (8 * width - 1)), hi = (1LL << (8 * width)) - 1;
  if ((v == -1 && PyErr_Occurred()) || v < lo || v > hi) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError, "data %R does not fit %d bits (%lld to %lld)", data, 8 * width,
                 lo, hi);
    return NULL;
  }
  if (count > SIZE_MAX / (size_t)width) {
    PyErr_Format(PyExc_ValueError, "count %zu is more than memory holds", count);
    return NULL;
  }
  kiln_deviceptr d;
  kiln_stream handle = NULL;
  /* The stream first: reading another library's stream object may run Python code. */
  if ((async && kpy_stream_parse(st, stream, &handle) < 0) ||
      kpy_device_pointer(st, dest, count * (size_t)width, "destination", &d) < 0)
    return NULL;
  kiln_status s;
  switch (width) {
  case 1:
    s = async ? kiln_memset_async(d, (unsigned char)v, count, handle)
              : kiln_memset_d8(d, (uint8_t)v, count);
    break;
  case 2:
    s = async ? kiln_memset_d16_async(d, (uint16_t)v, count, handle)
              : kiln_memset_d16(d, (uint16_t)v, count);
    break;
  default:
    s = async ? kiln_memset_d32_async(d, (uint32_t)v, count, handle)
              : kiln_memset_d32(d, (uint32_t)v, count);
    break;
  }
  if (s) return kpy_raise(st, s);
  Py_RETURN_NONE;
}

#define KPY_MEMSET(name, width, async)                                        \
  static PyObject *name(PyObject *module, PyObject *args, PyObject *kwargs) { \
    return kpy_memset_any(module, args, kwargs, width, async);                \
  }
KPY_MEMSET(kpy_memset_d8, 1, 0)
KPY_MEMSET(kpy_memset_d16, 2, 0)
KPY_MEMSET(kpy_memset_d32, 4, 0)
KPY_MEMSET(kpy_memset_d8_async, 1, 1)
KPY_MEMSET(kpy_memset_d16_async, 2, 1)
KPY_MEMSET(kpy_memset_d32_async, 4, 1)
#undef KPY_MEMSET

/* mem_alloc_pitch(width, height, access_size) -> (DeviceAllocation, pitch). */
static PyObject *kpy_mem_alloc_pitch(PyObject *module, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kwlist[] = {(char *)"width", (char *)"height", (char *)"access_size", NULL};
  Py_ssize_t width, height;
  unsigned access;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "nnI:mem_alloc_pitch", kwlist, &width, &height,
                                   &access))
    return NULL;
  if (width <= 0 || height <= 0) {
    PyErr_Format(PyExc_ValueError,
                 "mem_alloc_pitch() needs a positive width and height, not %zd "
                 "by %zd",
                 width, height);
    return NULL;
  }
  kiln_deviceptr p = 0;
  size_t pitch = 0;
  kiln_status s = kiln_mem_alloc_pitch((size_t)width, (size_t)height, access, &p, &pitch);
  if (s) return kpy_raise(st, s);
  PyTypeObject *tp = st->ref.DeviceAllocation_type;
  kpy_allocation *a = (kpy_allocation *)tp->tp_alloc(tp, 0);
  if (!a) {
    kiln_mem_free(p);
    return NULL;
  }
  a->ptr = p;
  a->size = pitch * (size_t)height;
  a->st = st;
  PyObject *out = Py_BuildValue("(Nn)", (PyObject *)a, (Py_ssize_t)pitch);
  return out;
}

static PyObject *kpy_mem_info(PyObject *module, PyObject *unused) {
  (void)unused;
  size_t free_b = 0, total_b = 0;
  kiln_status s = kiln_mem_info(&free_b, &total_b);
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  return Py_BuildValue("(nn)", (Py_ssize_t)free_b, (Py_ssize_t)total_b);
}

/* mem_get_address_range(ptr): PyCUDA's (base, size) of the allocation ptr lies in. */
static PyObject *kpy_mem_address_range(PyObject *module, PyObject *ptr_obj) {
  kpy_state *st = kpy_state_of_module(module);
  kiln_deviceptr ptr = 0, base = 0;
  size_t size = 0;
  if (kpy_device_pointer(st, ptr_obj, 0, "ptr", &ptr) < 0) return NULL;
  kiln_status s = kiln_mem_address_range(ptr, &base, &size);
  if (s) return kpy_raise(st, s);
  return Py_BuildValue("(Kn)", (unsigned long long)base, (Py_ssize_t)size);
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
     "mem_alloc($module, nbytes, /)\n--\n\nDevice memory, freed when the allocation is collected."},
    {"pool_alloc", kpy_pool_alloc, METH_O,
     "pool_alloc($module, nbytes, /)\n--\n\nDevice memory from kiln's stream-ordered pool, freed "
     "(in stream order) when the allocation is collected: the allocator of an array made without "
     "one, as its .allocator gives it."},
    {"memcpy_htod", (PyCFunction)(void (*)(void))kpy_memcpy_htod, METH_FASTCALL | METH_KEYWORDS,
     "memcpy_htod($module, dest, src)\n--\n\nCopies the numpy array (or buffer) src to device "
     "memory dest."},
    {"memcpy_dtoh", (PyCFunction)(void (*)(void))kpy_memcpy_dtoh, METH_FASTCALL | METH_KEYWORDS,
     "memcpy_dtoh($module, dest, src)\n--\n\nCopies device memory src into the numpy array "
     "(or buffer) dest."},
    {"memcpy_htod_async", (PyCFunction)(void (*)(void))kpy_memcpy_htod_async,
     METH_FASTCALL | METH_KEYWORDS,
     "memcpy_htod_async($module, dest, src, stream=None)\n--\n\nQueued on stream. On a "
     "kiln.Stream the stream keeps src alive until it is done; on any other stream the copy "
     "is waited for."},
    {"memcpy_dtoh_async", (PyCFunction)(void (*)(void))kpy_memcpy_dtoh_async,
     METH_FASTCALL | METH_KEYWORDS,
     "memcpy_dtoh_async($module, dest, src, stream=None)\n--\n\nQueued on stream; dest holds "
     "the bytes once a kiln.Stream is synchronized (on any other stream, when the call "
     "returns)."},
    {"memcpy_dtod", (PyCFunction)(void (*)(void))kpy_memcpy_dtod, METH_VARARGS | METH_KEYWORDS,
     "memcpy_dtod($module, dest, src, size)\n--\n\nSize bytes from device memory to device "
     "memory."},
    {"memcpy_dtod_async", (PyCFunction)(void (*)(void))kpy_memcpy_dtod_async,
     METH_VARARGS | METH_KEYWORDS,
     "memcpy_dtod_async($module, dest, src, size, stream=None)\n--\n\n"},
    {"memset_d8", (PyCFunction)(void (*)(void))kpy_memset_d8, METH_VARARGS | METH_KEYWORDS,
     "memset_d8($module, dest, data, count=None, *, size=None)\n--\n\nCount bytes set to data."},
    {"memset_d16", (PyCFunction)(void (*)(void))kpy_memset_d16, METH_VARARGS | METH_KEYWORDS,
     "memset_d16($module, dest, data, count=None, *, size=None)\n--\n\nCount 16-bit values set to "
     "data."},
    {"memset_d32", (PyCFunction)(void (*)(void))kpy_memset_d32, METH_VARARGS | METH_KEYWORDS,
     "memset_d32($module, dest, data, count=None, *, size=None)\n--\n\nCount 32-bit values set to "
     "data."},
    {"memset_d8_async", (PyCFunction)(void (*)(void))kpy_memset_d8_async,
     METH_VARARGS | METH_KEYWORDS,
     "memset_d8_async($module, dest, data, count=None, stream=None, *, size=None)\n--\n\n"},
    {"memset_d16_async", (PyCFunction)(void (*)(void))kpy_memset_d16_async,
     METH_VARARGS | METH_KEYWORDS,
     "memset_d16_async($module, dest, data, count=None, stream=None, *, size=None)\n--\n\n"},
    {"memset_d32_async", (PyCFunction)(void (*)(void))kpy_memset_d32_async,
     METH_VARARGS | METH_KEYWORDS,
     "memset_d32_async($module, dest, data, count=None, stream=None, *, size=None)\n--\n\n"},
    {"mem_alloc_pitch", (PyCFunction)(void (*)(void))kpy_mem_alloc_pitch,
     METH_VARARGS | METH_KEYWORDS,
     "mem_alloc_pitch($module, width, height, access_size)\n--\n\n(DeviceAllocation, pitch) "
     "for height rows of width bytes read in elements of access_size (4, 8 or 16) bytes."},
    {"mem_info", kpy_mem_info, METH_NOARGS,
     "mem_info($module, /)\n--\n\n(free, total) bytes of the current device; what kiln keeps for "
     "reuse\n"
     "is handed back first and counts as free, as after PyCUDA's cuMemFree."},
    {"mem_get_address_range", kpy_mem_address_range, METH_O,
     "mem_get_address_range($module, ptr, /)\n--\n\n(base, size): the first address and the "
     "size in bytes of the device allocation ptr lies in, as cuMemGetAddressRange."},
    {"pool_stats", kpy_pool_stats, METH_NOARGS,
     "pool_stats($module, /)\n--\n\nThe device memory pool: reserved, reserved_high, used, "
     "used_high (bytes)."},
    {"pool_trim", (PyCFunction)(void (*)(void))kpy_pool_trim, METH_VARARGS | METH_KEYWORDS,
     "pool_trim($module, keep_bytes=0)\n--\n\nGives the pool's unused memory back to the "
     "driver."},
    {NULL, NULL, 0, NULL},
};

int kpy_memory_init(PyObject *module, kpy_state *st) {
  st->ref.DeviceAllocation_type = kpy_add_type(module, &kpy_allocation_spec, NULL);
  if (!st->ref.DeviceAllocation_type) return -1;
  return PyModule_AddFunctions(module, kpy_memory_functions);
}
