/* Host memory: page-locked numpy arrays, and the staging of pageable copies. */
#include "hostmem.h"

#include "errors.h"
#include "mirror.h"
#include "pin.h"
#include "shape.h"
#include "wait.h"

#include <string.h>

/* What a page-locked array stands on (its .base, PyCUDA's PagelockedHostAllocation): the
 * memory, given back when the last array over it goes. */
typedef struct kpy_pagelocked_memory {
  PyObject_HEAD
  void *p; /* owned */
  size_t nbytes;
  unsigned flags; /* what it was allocated with, KILN_HOST_PORTABLE among them */
} kpy_pagelocked_memory;

static void kpy_pagelocked_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  kiln_host_free(((kpy_pagelocked_memory *)op)->p);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_pagelocked_device_pointer(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_deviceptr dp;
  kiln_status s = kiln_host_get_device_pointer(((kpy_pagelocked_memory *)op)->p, &dp);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return PyLong_FromUnsignedLongLong(dp);
}

/* The flags the allocation asked for, kept: cuMemHostGetFlags has been seen to leave PORTABLE
 * out for a small allocation made after others in the same process (an H200, driver 580). */
static PyObject *kpy_pagelocked_flags(PyObject *op, PyObject *unused) {
  (void)unused;
  return PyLong_FromUnsignedLong(((kpy_pagelocked_memory *)op)->flags);
}

/* Freeing memory that arrays still point at would let them read freed memory; the memory goes
 * with the last array over it instead, so free() has nothing to do now. */
PyObject *kpy_host_free_later(PyObject *op, PyObject *unused) {
  (void)op;
  (void)unused;
  Py_RETURN_NONE;
}

static PyObject *kpy_pagelocked_get_size(PyObject *op, void *closure) {
  (void)closure;
  return PyLong_FromSize_t(((kpy_pagelocked_memory *)op)->nbytes);
}

static PyMethodDef kpy_pagelocked_methods[] = {
    {"get_device_pointer", kpy_pagelocked_device_pointer, METH_NOARGS,
     "get_device_pointer($self, /)\n--\n\nThe address kernels use for this memory, when it was "
     "allocated with host_alloc_flags.DEVICEMAP."},
    {"get_flags", kpy_pagelocked_flags, METH_NOARGS,
     "get_flags($self, /)\n--\n\nThe host_alloc_flags it was allocated with (PORTABLE always "
     "among them)."},
    {"free", kpy_host_free_later, METH_NOARGS,
     "free($self, /)\n--\n\nReturns at once: the memory goes with the last array over it, so "
     "that no array is left over freed memory."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_pagelocked_getset[] = {
    {"size", kpy_pagelocked_get_size, NULL, "Size in bytes.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_pagelocked_slots[] = {
    {Py_tp_dealloc, kpy_pagelocked_dealloc},
    {Py_tp_methods, kpy_pagelocked_methods},
    {Py_tp_getset, kpy_pagelocked_getset},
    {Py_tp_doc, (void *)"Page-locked host memory under a pagelocked_empty array (its .base); "
                        "given back when the last array over it goes."},
    {0, NULL},
};

static PyType_Spec kpy_pagelocked_spec = {
    "kiln.PagelockedHostAllocation", sizeof(kpy_pagelocked_memory), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    kpy_pagelocked_slots};

/* Memory kiln allocates holds no Python objects: read as their pointers, its bytes would crash
 * the interpreter. 0 for a dtype without them; -1 with TypeError. */
static int kpy_host_dtype_check(PyArray_Descr *dtype) {
  if (!PyDataType_REFCHK(dtype)) return 0;
  PyErr_Format(PyExc_TypeError,
               "dtype %S holds Python objects, which page-locked, managed or device memory "
               "cannot hold; use numpy.empty for an array of objects",
               (PyObject *)dtype);
  return -1;
}

PyObject *kpy_host_array_over(PyArray_Descr *dtype, int ndim, const npy_intp *dims, int fortran,
                              void *data, PyObject *owner) {
  if (kpy_host_dtype_check(dtype) < 0) {
    Py_DECREF(owner);
    return NULL;
  }
  Py_INCREF(dtype); /* NewFromDescr steals it */
  PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, dtype, ndim, (npy_intp *)dims, NULL, data,
                                       (fortran ? NPY_ARRAY_FARRAY : NPY_ARRAY_CARRAY), NULL);
  if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) { /* steals owner */
    Py_XDECREF(arr);
    if (!arr) Py_DECREF(owner);
    return NULL;
  }
  return arr;
}

PyObject *kpy_pagelocked_array_with_flags(kpy_state *st, PyArray_Descr *dtype, int ndim,
                                          const npy_intp *dims, int fortran, int zero,
                                          unsigned mem_flags) {
  Py_ssize_t nbytes = PyDataType_ELSIZE(dtype);
  for (int i = 0; i < ndim; i++) {
    if (dims[i] < 0 || (dims[i] && nbytes > PY_SSIZE_T_MAX / dims[i])) {
      PyErr_SetString(PyExc_ValueError, "negative or too large a shape");
      return NULL;
    }
    nbytes *= dims[i];
  }
  void *p = NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_host_alloc_with_flags((size_t)nbytes, mem_flags, &p);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  if (zero) memset(p, 0, (size_t)nbytes);
  PyTypeObject *tp = st->ref.PagelockedHostAllocation_type;
  kpy_pagelocked_memory *owner = PyObject_New(kpy_pagelocked_memory, tp);
  if (!owner) {
    kiln_host_free(p);
    return NULL;
  }
  owner->p = p;
  owner->nbytes = (size_t)nbytes;
  owner->flags = mem_flags | KILN_HOST_PORTABLE; /* kiln_host_alloc_with_flags adds it */
  return kpy_host_array_over(dtype, ndim, dims, fortran, p, (PyObject *)owner);
}

PyObject *kpy_pagelocked_array(kpy_state *st, PyArray_Descr *dtype, int ndim, const npy_intp *dims,
                               int fortran, int zero) {
  return kpy_pagelocked_array_with_flags(st, dtype, ndim, dims, fortran, zero, 0);
}

int kpy_host_array_parse(PyObject *args, PyObject *kwargs, const char *fmt,
                         kpy_host_array_args *a) {
  static char *kwlist[] = {(char *)"shape", (char *)"dtype", (char *)"order", (char *)"mem_flags",
                           NULL};
  PyObject *shape_obj;
  const char *order = "C";
  a->dtype = NULL;
  a->mem_flags = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, PyArray_DescrConverter,
                                   &a->dtype, &order, &a->mem_flags))
    return -1;
  a->fortran = order[0] == 'F' && !order[1];
  if (!a->fortran && !(order[0] == 'C' && !order[1])) {
    PyErr_Format(PyExc_ValueError, "order must be 'C' or 'F', not '%s'", order);
    goto fail;
  }
  if (!a->dtype) a->dtype = PyArray_DescrFromType(NPY_DOUBLE);
  if (kpy_host_dtype_check(a->dtype) < 0) goto fail; /* before anything is allocated */
  Py_ssize_t shape[KPY_MAX_DIMS];
  if (kpy_shape_parse(shape_obj, &a->ndim, shape) < 0) goto fail;
  a->nbytes = (size_t)PyDataType_ELSIZE(a->dtype);
  for (int i = 0; i < a->ndim; i++) {
    if (shape[i] < 0 || (shape[i] && a->nbytes > (size_t)PY_SSIZE_T_MAX / (size_t)shape[i])) {
      PyErr_SetString(PyExc_ValueError, "negative or too large a shape");
      goto fail;
    }
    a->nbytes *= (size_t)shape[i];
    a->dims[i] = shape[i];
  }
  return 0;
fail:
  Py_CLEAR(a->dtype);
  return -1;
}

static PyObject *kpy_pagelocked(PyObject *module, PyObject *args, PyObject *kwargs, int zero,
                                const char *fmt) {
  kpy_state *st = kpy_state_of_module(module);
  kpy_host_array_args a;
  if (kpy_host_array_parse(args, kwargs, fmt, &a) < 0) return NULL;
  PyObject *arr =
      kpy_pagelocked_array_with_flags(st, a.dtype, a.ndim, a.dims, a.fortran, zero, a.mem_flags);
  Py_DECREF(a.dtype);
  return arr;
}

static PyObject *kpy_pagelocked_empty(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_pagelocked(module, args, kwargs, 0, "O|O&sI:pagelocked_empty");
}

static PyObject *kpy_pagelocked_zeros(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_pagelocked(module, args, kwargs, 1, "O|O&sI:pagelocked_zeros");
}

/* ---- Registered host memory ---------------------------------------------------------------- */

/* What register_host_memory's array stands on: the array it was given (its base, as PyCUDA
 * names it), page-locked until this is collected or unregister() is called. */
typedef struct kpy_registered {
  PyObject_HEAD
  PyObject *base; /* the registered array, strong */
  void *ptr;      /* NULL once unregistered */
  int kilns;      /* the memory was page-locked by kiln already (pin.h), which unlocks it */
} kpy_registered;

static kiln_status kpy_registered_unregister_now(kpy_registered *self) {
  if (!self->ptr) return KILN_OK;
  void *p = self->ptr;
  self->ptr = NULL;
  return self->kilns ? KILN_OK : kiln_host_unregister(p);
}

static PyObject *kpy_registered_unregister(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_status s = kpy_registered_unregister_now((kpy_registered *)op);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  Py_RETURN_NONE;
}

static int kpy_registered_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((kpy_registered *)op)->base);
  return 0;
}

static int kpy_registered_clear(PyObject *op) {
  Py_CLEAR(((kpy_registered *)op)->base);
  return 0;
}

static void kpy_registered_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  kpy_registered_unregister_now((kpy_registered *)op); /* before the memory can go */
  kpy_registered_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_registered_get_base(PyObject *op, void *closure) {
  (void)closure;
  PyObject *base = ((kpy_registered *)op)->base;
  return Py_NewRef(base ? base : Py_None);
}

static PyObject *kpy_registered_device_pointer(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_registered *self = (kpy_registered *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!self->ptr) {
    PyErr_SetString(PyExc_ValueError, "the memory was unregistered: it has no device address");
    return NULL;
  }
  kiln_deviceptr dp;
  kiln_status s = kiln_host_get_device_pointer(self->ptr, &dp);
  if (s) return kpy_raise(st, s);
  return PyLong_FromUnsignedLongLong(dp);
}

static PyMethodDef kpy_registered_methods[] = {
    {"get_device_pointer", kpy_registered_device_pointer, METH_NOARGS,
     "get_device_pointer($self, /)\n--\n\nThe address kernels use for this memory, when it was "
     "registered with mem_host_register_flags.DEVICEMAP."},
    {"unregister", kpy_registered_unregister, METH_NOARGS,
     "unregister($self, /)\n--\n\nEnds the page-locking now; the memory itself stays the "
     "array's."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_registered_getset[] = {
    {"base", kpy_registered_get_base, NULL, "The array that was registered.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_registered_slots[] = {
    {Py_tp_dealloc, kpy_registered_dealloc},
    {Py_tp_traverse, kpy_registered_traverse},
    {Py_tp_clear, kpy_registered_clear},
    {Py_tp_methods, kpy_registered_methods},
    {Py_tp_getset, kpy_registered_getset},
    {Py_tp_doc, (void *)"Host memory page-locked by register_host_memory, until this is "
                        "collected or unregister() is called."},
    {0, NULL},
};

static PyType_Spec kpy_registered_spec = {"kiln.RegisteredHostMemory", sizeof(kpy_registered), 0,
                                          Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                              Py_TPFLAGS_IMMUTABLETYPE |
                                              Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                          kpy_registered_slots};

/* register_host_memory(ary, flags=0): an array over ary's memory, page-locked while it lives. */
static PyObject *kpy_register_host_memory(PyObject *module, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kwlist[] = {(char *)"ary", (char *)"flags", NULL};
  PyObject *obj;
  unsigned flags = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|I:register_host_memory", kwlist, &obj, &flags))
    return NULL;
  if (!PyArray_Check(obj)) {
    PyErr_Format(PyExc_TypeError, "register_host_memory() takes a numpy array, not %.100s",
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  PyArrayObject *a = (PyArrayObject *)obj;
  if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a)) {
    PyErr_SetString(PyExc_ValueError, "register_host_memory() needs a contiguous array; pass "
                                      "numpy.ascontiguousarray(a)");
    return NULL;
  }
  if (PyArray_NBYTES(a) == 0) {
    PyErr_SetString(PyExc_ValueError, "register_host_memory() needs an array of at least one "
                                      "byte");
    return NULL;
  }
  void *p = PyArray_DATA(a);
  /* An array kiln page-locked itself for its repeated copies (pin.h) is so until the array is
   * collected, which the registration outlives by holding it: the program's registration is
   * that one, portable and mapped, where the driver would refuse a second. */
  int kilns = kpy_pin_serves(st, p, (size_t)PyArray_NBYTES(a), flags);
  kiln_status s = KILN_OK;
  if (!kilns) {
    Py_BEGIN_ALLOW_THREADS
      s = kiln_host_register(p, (size_t)PyArray_NBYTES(a), flags);
    Py_END_ALLOW_THREADS
  }
  if (s) return kpy_raise(st, s);
  PyTypeObject *tp = st->ref.RegisteredHostMemory_type;
  kpy_registered *owner = PyObject_GC_New(kpy_registered, tp);
  if (!owner) {
    if (!kilns) kiln_host_unregister(p);
    return NULL;
  }
  owner->base = Py_NewRef(obj);
  owner->ptr = p;
  owner->kilns = kilns;
  PyObject_GC_Track(owner);
  PyArray_Descr *dtype = PyArray_DESCR(a);
  Py_INCREF(dtype);
  int writeable = PyArray_ISWRITEABLE(a) ? NPY_ARRAY_WRITEABLE : 0;
  PyObject *view = PyArray_NewFromDescr(
      &PyArray_Type, dtype, PyArray_NDIM(a), PyArray_DIMS(a), PyArray_STRIDES(a), p,
      (PyArray_FLAGS(a) & (NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_F_CONTIGUOUS)) | NPY_ARRAY_ALIGNED |
          writeable,
      NULL); /* steals dtype */
  if (!view || PyArray_SetBaseObject((PyArrayObject *)view, (PyObject *)owner) < 0) {
    Py_XDECREF(view);
    if (!view) Py_DECREF(owner);
    return NULL;
  }
  return view;
}

static kiln_status kpy_small_get_poll(void *event, int *done) {
  return kiln_event_query((kiln_event)event, done);
}

int kpy_small_get(kpy_state *st, void *data, kiln_deviceptr p, size_t n, kiln_stream stream) {
  int device = kiln_device_current();
  if (n > KPY_SMALL_GET_MAX || st->small_get_busy || device < 0) return 0;
  kiln_staging_info staging;
  kiln_staging_get_info(&staging);
  if (n >= staging.min_bytes) return 0; /* the stager's (KILN_STAGING_MIN may be small) */
  kiln_status s = KILN_OK;
  if (!st->small_get) {
    if (st->small_get_before < KPY_SMALL_GET_AFTER) {
      st->small_get_before++;
      return 0;
    }
    s = kiln_host_alloc(KPY_SMALL_GET_MAX, &st->small_get);
    if (!s && (s = kiln_event_create(0, &st->small_get_done))) {
      kiln_host_free(st->small_get);
      st->small_get = NULL;
    }
    if (s) return 0; /* no buffer: the copy goes the driver's way */
    st->small_get_device = device;
  }
  if (device != st->small_get_device) return 0;
  if (st->small_get_pending) {
    int done = 0;
    if (kiln_event_query(st->small_get_done, &done) || !done) return 0;
    st->small_get_pending = 0;
  }
  unsigned long long work = kiln_work_count();
  s = kiln_memcpy_dtoh_async(st->small_get, p, n, stream);
  if (!s) s = kiln_event_record(st->small_get_done, stream);
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  /* The GIL goes in the wait: the buffer is this thread's until the copy is out of it. */
  st->small_get_busy = 1;
  /* The event follows the copy, the last of the stream's work: the wait is the stream's. */
  int r = kpy_wait(st, kpy_small_get_poll, st->small_get_done, -1,
                   (uintptr_t)stream <= 1 ? "the default stream" : "the stream");
  st->small_get_busy = 0;
  if (r < 0) {
    st->small_get_pending = 1; /* reused once the event says the copy is over */
    return -1;
  }
  /* On the legacy stream, what was queued there before the copy is done too. */
  if (!stream) kpy_wait_copied(st, device, work);
  memcpy(data, st->small_get, n);
  return 1;
}

/* The ring and its events, on device; 0 when made. */
static int kpy_small_put_make(kpy_state *st, int device) {
  kiln_event *done = PyMem_Calloc(KPY_SMALL_PUT_SLOTS, sizeof *done);
  void *ring = NULL;
  kiln_status s = done ? kiln_host_alloc(KPY_SMALL_PUT_SLOT * KPY_SMALL_PUT_SLOTS, &ring)
                       : KILN_ERROR_NO_MEMORY;
  for (int i = 0; !s && i < KPY_SMALL_PUT_SLOTS; i++) s = kiln_event_create(0, &done[i]);
  if (s) {
    for (int i = 0; done && i < KPY_SMALL_PUT_SLOTS; i++) kiln_event_destroy(done[i]);
    PyMem_Free(done);
    if (ring) kiln_host_free(ring);
    return -1;
  }
  st->small_put = ring;
  st->small_put_done = done;
  st->small_put_device = device;
  return 0;
}

int kpy_small_put(kpy_state *st, int device, kiln_deviceptr p, const void *data, size_t n) {
  if (n > KPY_SMALL_PUT_SLOT || st->small_put_device < 0) return 0;
  if (device < 0 || device != kiln_device_current()) return 0;
  kiln_staging_info staging;
  kiln_staging_get_info(&staging);
  if (n >= staging.min_bytes) return 0; /* the stager's (KILN_STAGING_MIN may be small) */
  if (!st->small_put) {
    if (st->small_put_before < KPY_SMALL_GET_AFTER) {
      st->small_put_before++;
      return 0;
    }
    if (kpy_small_put_make(st, device) < 0) {
      st->small_put_device = -1; /* not tried again: the driver's way it is */
      return 0;
    }
  }
  if (device != st->small_put_device) return 0;
  int i = st->small_put_next, done = 0;
  if (kiln_event_query(st->small_put_done[i], &done) || !done) return 0;
  char *slot = (char *)st->small_put + (size_t)i * KPY_SMALL_PUT_SLOT;
  memcpy(slot, data, n);
  kiln_status s = kiln_memcpy_htod_async(p, slot, n, NULL);
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  if ((s = kiln_event_record(st->small_put_done[i], NULL))) {
    /* The slot may still be read by the copy, and nothing would say when it is over: the ring
     * is left as it is and not used again. */
    st->small_put_device = -1;
    kpy_raise(st, s);
    return -1;
  }
  st->small_put_next = (i + 1) % KPY_SMALL_PUT_SLOTS;
  st->small_put_work = kiln_work_count();
  return 1;
}

int kpy_small_put_follows(kpy_state *st) {
  return st->small_put && st->small_put_device >= 0 && st->small_put_work == kiln_work_count();
}

void kpy_hostmem_free(kpy_state *st) {
  /* A copy a Ctrl-C left queued may still write the buffer: it is left to the process then. */
  if (st->small_get && !st->small_get_pending) kiln_host_free(st->small_get);
  kiln_event_destroy(st->small_get_done);
  st->small_get = NULL;
  st->small_get_done = NULL;
  /* So may a copy still queued from a slot of the ring read it. */
  if (st->small_put) {
    int idle = st->small_put_device >= 0;
    for (int i = 0; i < KPY_SMALL_PUT_SLOTS; i++) {
      int done = 0;
      if (kiln_event_query(st->small_put_done[i], &done) || !done) idle = 0;
    }
    if (idle) kiln_host_free(st->small_put);
    for (int i = 0; i < KPY_SMALL_PUT_SLOTS; i++) kiln_event_destroy(st->small_put_done[i]);
    PyMem_Free(st->small_put_done);
    st->small_put = NULL;
    st->small_put_done = NULL;
  }
}

PyObject *kpy_host_view(kpy_state *st, PyObject *owner, kiln_deviceptr p, size_t size) {
  if (size > (size_t)PY_SSIZE_T_MAX) {
    PyErr_Format(PyExc_ValueError, "a buffer of %zu bytes is larger than Python allows", size);
    return NULL;
  }
  void *host = NULL;
  kiln_status s = size ? kiln_pointer_host_address(p, size, &host) : KILN_OK;
  if (s) return kpy_raise(st, s);
  npy_intp dims[1] = {(npy_intp)size};
  PyArray_Descr *bytes = PyArray_DescrFromType(NPY_UINT8);
  if (!bytes) return NULL;
  /* An empty view reads nothing; any address but NULL keeps numpy from allocating one. */
  PyObject *arr =
      kpy_host_array_over(bytes, 1, dims, 0, size ? host : (void *)st, Py_NewRef(owner));
  Py_DECREF(bytes); /* kpy_host_array_over took its own */
  if (!arr) return NULL;
  PyObject *view = PyMemoryView_FromObject(arr);
  Py_DECREF(arr);
  return view;
}

PyObject *kpy_as_buffer(kpy_state *st, PyObject *owner, kiln_deviceptr base, size_t total,
                        PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"size", (char *)"offset", NULL};
  Py_ssize_t size, offset = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "n|n:as_buffer", kwlist, &size, &offset))
    return NULL;
  if (size < 0 || offset < 0 || (size_t)offset > total || (size_t)size > total - (size_t)offset) {
    PyErr_Format(PyExc_ValueError,
                 "as_buffer(size=%zd, offset=%zd) does not fit the allocation's %zu bytes", size,
                 offset, total);
    return NULL;
  }
  return kpy_host_view(st, owner, base + (kiln_deviceptr)offset, (size_t)size);
}

static PyObject *kpy_host_view_of(PyObject *module, PyObject *args) {
  PyObject *owner, *address;
  Py_ssize_t size;
  if (!PyArg_ParseTuple(args, "OO!n:_host_view", &owner, &PyLong_Type, &address, &size))
    return NULL;
  unsigned long long p = PyLong_AsUnsignedLongLong(address); /* no wrapping, unlike "K" */
  if (p == (unsigned long long)-1 && PyErr_Occurred()) {
    PyErr_Format(PyExc_ValueError, "the address %R is not one of 64 bits", address);
    return NULL;
  }
  if (size < 0) {
    PyErr_Format(PyExc_ValueError, "a buffer of %zd bytes: the size must be >= 0", size);
    return NULL;
  }
  return kpy_host_view(kpy_state_of_module(module), owner, (kiln_deviceptr)p, (size_t)size);
}

static PyObject *kpy_staging_info(PyObject *module, PyObject *unused) {
  (void)unused;
  kiln_staging_info i;
  kiln_staging_get_info(&i);
  Py_ssize_t pinned = 0, pinned_bytes = 0;
  kpy_state *st = kpy_state_of_module(module);
  kpy_pin_counts(st, &pinned, &pinned_bytes);
  Py_ssize_t small = st->small_get ? (Py_ssize_t)KPY_SMALL_GET_MAX : 0;
  Py_ssize_t ring = st->small_put ? (Py_ssize_t)(KPY_SMALL_PUT_SLOT * KPY_SMALL_PUT_SLOTS) : 0;
  Py_ssize_t mirror_slots, mirrors_held;
  unsigned long long mirror_reads;
  kpy_mirror_counts(st, &mirror_slots, &mirrors_held, &mirror_reads);
  return Py_BuildValue("{snsnsisKsKsnsnsnsnsnsnsK}", "min_bytes",
                       (Py_ssize_t)(i.min_bytes > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : i.min_bytes),
                       "chunk_bytes", (Py_ssize_t)i.chunk_bytes, "threads", i.threads, "copies",
                       (unsigned long long)i.copies, "bytes", (unsigned long long)i.bytes,
                       "pinned_buffers", pinned, "pinned_bytes", pinned_bytes, "small_buffer_bytes",
                       small, "small_put_bytes", ring, "mirror_slots", mirror_slots, "mirrors_held",
                       mirrors_held, "mirror_reads", mirror_reads);
}

static PyMethodDef kpy_hostmem_functions[] = {
    {"_host_view", kpy_host_view_of, METH_VARARGS,
     "_host_view(owner, address, size, /)\n--\n\nA writable memoryview of size bytes of managed "
     "or page-locked host memory at address, keeping owner alive (as_buffer)."},
    {"pagelocked_empty", (PyCFunction)(void (*)(void))kpy_pagelocked_empty,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_empty($module, shape, dtype='float64', order='C', mem_flags=0)\n--\n\nA numpy "
     "array in page-locked host memory; mem_flags are kiln.driver.host_alloc_flags (it is "
     "always portable)."},
    {"pagelocked_zeros", (PyCFunction)(void (*)(void))kpy_pagelocked_zeros,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_zeros($module, shape, dtype='float64', order='C', mem_flags=0)\n--\n\nThe "
     "same, zeroed."},
    {"register_host_memory", (PyCFunction)(void (*)(void))kpy_register_host_memory,
     METH_VARARGS | METH_KEYWORDS,
     "register_host_memory($module, ary, flags=0)\n--\n\nAn array over ary's memory, "
     "page-locked while it lives; its .base is a RegisteredHostMemory whose .base is ary."},
    {"staging_info", kpy_staging_info, METH_NOARGS,
     "staging_info($module, /)\n--\n\nHow large pageable copies are staged: min_bytes, "
     "chunk_bytes, threads, the copies and bytes staged so far, and the pinned_buffers and "
     "pinned_bytes of large arrays copied again and again, page-locked in place, and "
     "small_buffer_bytes, the page-locked buffer of small blocking copies to the host (0 "
     "until the ninth such copy), small_put_bytes, the page-locked ring of small blocking "
     "copies to the device (0 until the ninth such copy), and the host mirrors of reduction "
     "results: mirror_slots (0 "
     "until the ninth reduction), mirrors_held by live results, and the mirror_reads they "
     "answered."},
    {NULL, NULL, 0, NULL},
};

int kpy_hostmem_init(PyObject *module, kpy_state *st) {
  st->ref.RegisteredHostMemory_type = kpy_add_type(module, &kpy_registered_spec, NULL);
  if (!st->ref.RegisteredHostMemory_type) return -1;
  st->ref.PagelockedHostAllocation_type = kpy_add_type(module, &kpy_pagelocked_spec, NULL);
  if (!st->ref.PagelockedHostAllocation_type) return -1;
  return PyModule_AddFunctions(module, kpy_hostmem_functions);
}
