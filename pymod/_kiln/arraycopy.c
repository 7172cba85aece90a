/* Copies of a DeviceArray's elements: host and device, device and device, and assignment. One
 * bulk copy where the bytes line up (a contiguous array and a host array in the same order);
 * otherwise a contiguous temporary on the device and kiln._ops.copy between it and the array. */
#include "arraycopy.h"

#include "errors.h"
#include "hooks.h"
#include "hostmem.h"
#include "memory.h"
#include "pin.h"
#include "stream.h"
#include "views.h"
#include "wait.h"

#include <string.h>

int kpy_on_parse(kpy_state *st, PyObject *arg, kpy_on *on) {
  on->arg = arg;
  on->wait = 0;
  return kpy_stream_parse(st, arg, &on->handle);
}

/* ---- Between host and device -------------------------------------------------------------- */

/* kpy_small_put of n bytes of data into dev's memory, its use on the legacy stream noted so that
 * the memory's free, when it lives on another stream, waits for the copy: 1 when queued, 0 when
 * not taken, -1 with the error raised. */
static int kpy_copy_put(kpy_state *st, kpy_array *dev, const void *data, size_t n) {
  int r = kpy_small_put(st, dev->device, dev->ptr, data, n);
  if (r <= 0) return r;
  return kpy_array_used_on(st, (PyObject *)dev, NULL) < 0 ? -1 : 1;
}

/* Copies n bytes between dev's memory and the data of the contiguous numpy array host. With
 * stream= None the copy blocks. On a kiln.Stream it is queued and the stream keeps host alive
 * until it is seen to be done (and dev's memory, when the stream is not its own), unless the
 * caller asks for it done (on->wait), as on other streams. On any other
 * stream (an int handle, another library's stream object) it is queued and then waited for: nothing
 * kiln holds past the call could keep host alive, as that stream knows nothing of it (the same rule
 * as In/Out in a launch); kiln.Stream.from_handle gives a queued copy there. */
static int kpy_copy_between_host(kpy_state *st, kpy_array *dev, PyObject *host, size_t n,
                                 int to_host, const kpy_on *on) {
  if (kpy_array_check_memory(st, dev) < 0) return -1;
  kiln_deviceptr p = dev->ptr;
  void *data = PyArray_DATA((PyArrayObject *)host);
  kiln_stream h = on->handle;
  kiln_status s;
  if (!n) return 0;
  /* Whether the call returns with the copy done: on any stream but a kiln.Stream, and on one
   * when the caller asks (on->wait). */
  int blocking = on->wait || !kpy_stream_is_kiln(st, on->arg);
  /* A small copy to the host that blocks goes through kiln's page-locked buffer, queued at
   * once and then waited for. */
  if (to_host && blocking) {
    /* A reduction's result whose host mirror holds is read from it, no copy queued. */
    int r = n == (size_t)dev->nbytes ? kpy_mirror_get(st, &dev->mirror, dev->device, data, n) : 0;
    if (!r) r = kpy_small_get(st, data, p, n, h);
    if (r) return r < 0 ? -1 : 0;
  }
  /* A small copy to the device is queued from a page-locked slot of kiln's and not waited for
   * (kpy_small_put), once the stream's earlier work is over (below) or right behind the ring's
   * last copy: only such copies are then in flight, as after the driver's own copy from
   * pageable memory. */
  int put = !to_host && on->arg == Py_None, r;
  if (put && kpy_small_put_follows(st) && (r = kpy_copy_put(st, dev, data, n)))
    return r < 0 ? -1 : 0;
  /* A copy that blocks waits behind its stream's work first, where Ctrl-C can end the wait:
   * once queued, it may not be left behind with host given back. */
  unsigned long long work = kiln_work_count();
  if (blocking && kpy_wait_before_copy(st, h) < 0) return -1;
  if (blocking) kpy_pin_reused(st, (PyArrayObject *)host, n);
  if (put && (r = kpy_copy_put(st, dev, data, n))) return r < 0 ? -1 : 0;
  if (on->arg == Py_None) {
    Py_BEGIN_ALLOW_THREADS
      s = to_host ? kiln_memcpy_dtoh(data, p, n) : kiln_memcpy_htod(p, data, n);
    Py_END_ALLOW_THREADS
    if (!s) kpy_wait_copied(st, kiln_device_current(), work);
  } else {
    /* A large pageable copy is staged by host threads before the call returns; memory kiln
     * page-locked in place is waited for as pageable memory would be (pin.h). */
    int queued = !blocking && !kpy_pin_touches(st, data, n);
    Py_BEGIN_ALLOW_THREADS
      s = to_host ? kiln_memcpy_dtoh_async(data, p, n, h) : kiln_memcpy_htod_async(p, data, n, h);
      if (!s && !queued) s = kiln_stream_synchronize(h);
    Py_END_ALLOW_THREADS
    if (!s && queued &&
        (kpy_stream_keep(on->arg, host) < 0 || kpy_array_used_on(st, (PyObject *)dev, h) < 0))
      return -1;
  }
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  return 0;
}

/* kpy_copy_between_host as a copy (kpy_copies_begin): the array's memory, read first, may be
 * let go by another thread while this one waits or copies without the GIL. */
static int kpy_copy(kpy_state *st, kpy_array *dev, PyObject *host, size_t n, int to_host,
                    const kpy_on *on) {
  kpy_copies_begin(st);
  int r = kpy_copy_between_host(st, dev, host, n, to_host, on);
  kpy_copies_end(st);
  return r;
}

static int kpy_same_shape(const kpy_array *a, PyArrayObject *h) {
  int same = PyArray_NDIM(h) == a->ndim;
  for (int i = 0; same && i < a->ndim; i++) same = PyArray_DIM(h, i) == a->shape[i];
  return same;
}

/* A host array an array copies to or from (PyCUDA's rules): an ndarray of its dtype and size,
 * of any shape (its elements taken in C order when the shape differs), writable to receive. */
static int kpy_check_host(kpy_array *a, PyObject *host, int receive, const char *what) {
  if (!PyArray_Check(host)) {
    PyErr_Format(PyExc_TypeError, "%s must be a numpy array, not %.100s", what,
                 Py_TYPE(host)->tp_name);
    return -1;
  }
  PyArrayObject *h = (PyArrayObject *)host;
  if (receive && !PyArray_ISWRITEABLE(h)) {
    PyErr_Format(PyExc_ValueError, "%s is read-only", what);
    return -1;
  }
  if (!PyArray_EquivTypes(PyArray_DESCR(h), a->dtype)) {
    /* PyCUDA's get raises TypeError there, its set ValueError */
    PyErr_Format(receive ? PyExc_TypeError : PyExc_ValueError,
                 "%s has dtype %R; the DeviceArray has %R", what, (PyObject *)PyArray_DESCR(h),
                 (PyObject *)a->dtype);
    return -1;
  }
  if (PyArray_SIZE(h) != a->size) {
    PyObject *hs = PyObject_GetAttrString(host, "shape"), *as = kpy_shape_tuple(a->shape, a->ndim);
    if (hs && as)
      PyErr_Format(PyExc_ValueError,
                   "%s has shape %R, %zd elements; the DeviceArray has shape %R, %zd elements",
                   what, hs, (Py_ssize_t)PyArray_SIZE(h), as, a->size);
    Py_XDECREF(hs);
    Py_XDECREF(as);
    return -1;
  }
  return 0;
}

/* Whether a's elements lie packed, in an order that may be neither C's nor Fortran's (a
 * transposed array's, as to_gpu keeps it): its strides, taken smallest first over the axes
 * longer than one, begin at the itemsize and each step over the last axis whole. */
static int kpy_packed(const kpy_array *a) {
  Py_ssize_t strides[KPY_MAX_DIMS], shape[KPY_MAX_DIMS];
  int n = 0;
  for (int i = 0; i < a->ndim; i++) {
    if (a->shape[i] == 1) continue;
    if (a->strides[i] <= 0) return 0;
    int j = n++; /* insertion by stride */
    for (; j > 0 && strides[j - 1] > a->strides[i]; j--) {
      strides[j] = strides[j - 1];
      shape[j] = shape[j - 1];
    }
    strides[j] = a->strides[i];
    shape[j] = a->shape[i];
  }
  Py_ssize_t step = a->itemsize;
  for (int j = 0; j < n; j++) {
    if (strides[j] != step) return 0;
    step *= shape[j];
  }
  return 1;
}

/* Whether the host array h lays its elements out as a does, packed: then one copy of all the
 * bytes moves the elements. */
static int kpy_packed_alike(const kpy_array *a, PyArrayObject *h) {
  if (!kpy_same_shape(a, h)) return 0;
  for (int i = 0; i < a->ndim; i++)
    if (a->shape[i] != 1 && a->strides[i] != PyArray_STRIDE(h, i)) return 0;
  return kpy_packed(a);
}

/* Whether a is contiguous in the order fortran names. */
static int kpy_in_order(const kpy_array *a, int fortran) {
  return a->flags & (fortran ? KPY_F_CONTIGUOUS : KPY_C_CONTIGUOUS);
}

/* A new host array of a's shape with a's strides (a packed, kpy_packed), page-locked when
 * asked: a view over page-locked memory in C order, which holds the same bytes. */
static PyObject *kpy_alike_host_array(kpy_state *st, const kpy_array *a, npy_intp *dims,
                                      int pagelocked) {
  npy_intp strides[KPY_MAX_DIMS];
  for (int i = 0; i < a->ndim; i++) strides[i] = a->strides[i];
  PyObject *base = NULL;
  void *data = NULL;
  if (pagelocked) {
    base = kpy_pagelocked_array(st, a->dtype, a->ndim, dims, 0, 0);
    if (!base) return NULL;
    data = PyArray_DATA((PyArrayObject *)base);
  }
  Py_INCREF(a->dtype); /* NewFromDescr steals it */
  PyObject *ary = PyArray_NewFromDescr(&PyArray_Type, a->dtype, a->ndim, dims, strides, data,
                                       data ? NPY_ARRAY_WRITEABLE : 0, NULL);
  if (!ary || !base) {
    Py_XDECREF(base);
    return ary;
  }
  if (PyArray_SetBaseObject((PyArrayObject *)ary, base) < 0) { /* steals base */
    Py_DECREF(ary);
    return NULL;
  }
  return ary;
}

/* How a's elements go into the host array ary given to get: 1 in one copy, ary laid out as a
 * (packed in another order, other); 0 through C order, or Fortran order (*fortran set) when
 * ary has a's shape; -1 with the error raised when ary cannot take them. */
static int kpy_get_target(kpy_array *a, PyObject *ary, int other, const char *what, int *fortran) {
  if (kpy_check_host(a, ary, 1, what) < 0) return -1;
  PyArrayObject *h = (PyArrayObject *)ary;
  if (other && kpy_packed_alike(a, h)) return 1;
  if (PyArray_IS_C_CONTIGUOUS(h)) *fortran = 0;
  else if (PyArray_IS_F_CONTIGUOUS(h) && kpy_same_shape(a, h)) *fortran = 1;
  else {
    PyErr_Format(PyExc_ValueError,
                 "%s is not C-contiguous (nor Fortran-contiguous with the array's shape, nor "
                 "laid out as the array); pass one that is, e.g. numpy.empty_like of get()",
                 what);
    return -1;
  }
  return 0;
}

/* a's elements into the host array ary (None: a new one, page-locked when asked); gives back
 * ary, a new reference, or, where ary's shape differs, a view of it in a's shape, as PyCUDA's
 * get returns ary reshaped. A contiguous array is one copy; another goes through a contiguous
 * temporary on the device first. */
static PyObject *kpy_get_into(kpy_state *st, kpy_array *a, PyObject *ary, int pagelocked,
                              const kpy_on *on, const char *what, int reshape_warns) {
  int fortran = kpy_array_fortran_only(a);
  /* packed in another order (a transposed array's, as to_gpu keeps it): a host array laid out
   * alike, as PyCUDA's get gives, takes all the bytes in one copy */
  int other = !(a->flags & (KPY_C_CONTIGUOUS | KPY_F_CONTIGUOUS)) && kpy_packed(a);
  if (ary == Py_None) {
    npy_intp dims[KPY_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) dims[i] = a->shape[i];
    if (other) {
      ary = kpy_alike_host_array(st, a, dims, pagelocked);
      if (ary && a->nbytes && kpy_copy(st, a, ary, (size_t)a->nbytes, 1, on) < 0) Py_CLEAR(ary);
      return ary;
    }
    if (pagelocked) {
      ary = kpy_pagelocked_array(st, a->dtype, a->ndim, dims, fortran, 0);
    } else {
      Py_INCREF(a->dtype); /* NewFromDescr steals it */
      ary = PyArray_NewFromDescr(&PyArray_Type, a->dtype, a->ndim, dims, NULL, NULL, fortran, NULL);
    }
    if (!ary) return NULL;
  } else {
    int how = kpy_get_target(a, ary, other, what, &fortran);
    if (how == 0 && reshape_warns && !kpy_same_shape(a, (PyArrayObject *)ary)) {
      if (PyErr_WarnFormat(PyExc_DeprecationWarning, 1,
                           "get() into an array of another shape is deprecated, as in PyCUDA: "
                           "%s is given back as a view in the array's shape",
                           what) < 0)
        return NULL;
      /* The warning ran the program's code (a filter, showwarning), which may have resized
       * ary: it is looked at again. */
      how = kpy_get_target(a, ary, other, what, &fortran);
    }
    if (how < 0) return NULL;
    if (how == 1) {
      if (a->nbytes && kpy_copy(st, a, ary, (size_t)a->nbytes, 1, on) < 0) return NULL;
      return Py_NewRef(ary);
    }
    Py_INCREF(ary);
  }
  if (a->nbytes) {
    kpy_array *src = kpy_in_order(a, fortran)
                         ? (kpy_array *)Py_NewRef((PyObject *)a)
                         : kpy_array_copy_order(st, a, fortran, on->arg, on->handle);
    if (!src || kpy_copy(st, src, ary, (size_t)a->nbytes, 1, on) < 0) Py_CLEAR(ary);
    Py_XDECREF(src);
  }
  if (ary && !kpy_same_shape(a, (PyArrayObject *)ary)) { /* C-contiguous: a view */
    npy_intp dims[KPY_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) dims[i] = a->shape[i];
    PyArray_Dims shape = {dims, a->ndim};
    Py_SETREF(ary, PyArray_Newshape((PyArrayObject *)ary, &shape, NPY_CORDER));
  }
  return ary;
}

/* The host array host into a. Its elements are taken in C order when its shape differs; a
 * host array in another layout is made contiguous on the host first. */
static int kpy_set_from(kpy_state *st, kpy_array *a, PyObject *host, const kpy_on *on,
                        const char *what) {
  if (kpy_check_host(a, host, 0, what) < 0) return -1;
  if (!a->nbytes) return 0;
  PyArrayObject *h = (PyArrayObject *)host;
  if (kpy_packed_alike(a, h)) return kpy_copy(st, a, host, (size_t)a->nbytes, 0, on);
  Py_INCREF(h);
  if (!kpy_same_shape(a, h)) {
    npy_intp dims[KPY_MAX_DIMS];
    for (int i = 0; i < a->ndim; i++) dims[i] = a->shape[i];
    PyArray_Dims d = {dims, a->ndim};
    Py_SETREF(h, (PyArrayObject *)PyArray_Newshape(h, &d, NPY_CORDER));
    if (!h) return -1;
  }
  int fortran = kpy_array_fortran_only(a);
  if (!(fortran ? PyArray_IS_F_CONTIGUOUS(h) : PyArray_IS_C_CONTIGUOUS(h))) {
    Py_SETREF(h, (PyArrayObject *)PyArray_NewCopy(h, fortran ? NPY_FORTRANORDER : NPY_CORDER));
    if (!h) return -1;
  }
  int rc;
  if (kpy_in_order(a, fortran)) {
    rc = kpy_copy(st, a, (PyObject *)h, (size_t)a->nbytes, 0, on);
  } else { /* through a C-contiguous temporary, on the stream the copies are on */
    kpy_array *t = kpy_array_check_device(a) < 0
                       ? NULL
                       : kpy_array_new(st, a->dtype, a->ndim, a->shape, on->handle,
                                       kpy_stream_owner(st, on->arg, on->handle));
    rc = t && kpy_copy(st, t, (PyObject *)h, (size_t)a->nbytes, 0, on) == 0 &&
                 kpy_ops_copy(st, (PyObject *)a, (PyObject *)t, on->arg) == 0
             ? 0
             : -1;
    Py_XDECREF(t);
  }
  Py_DECREF(h);
  return rc;
}

PyObject *kpy_array_to_host(kpy_state *st, kpy_array *a) {
  kpy_on on = {Py_None, NULL, 0};
  return kpy_get_into(st, a, Py_None, 0, &on, "ary", 0);
}

/* As PyCUDA's: with async_=False the call returns with the copy done, queued on the stream
 * first (so it follows the stream's work) and then waited for; with async_=True it is queued
 * on a kiln.Stream (see kpy_copy). */
PyObject *kpy_array_get(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"ary",    (char *)"pagelocked", (char *)"async_",
                           (char *)"stream", (char *)"out",        NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *ary = Py_None, *stream_obj = Py_None, *out = NULL;
  int pagelocked = 0, async_ = 0;
  kpy_on on;
  if (!st ||
      !PyArg_ParseTupleAndKeywords(args, kwargs, "|OppO$O:get", kwlist, &ary, &pagelocked, &async_,
                                   &stream_obj, &out) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  if (out && ary != Py_None) {
    PyErr_SetString(PyExc_TypeError, "get() takes ary or out (two names of one argument), not "
                                     "both");
    return NULL;
  }
  on.wait = !async_;
  return kpy_get_into(st, (kpy_array *)op, out ? out : ary, pagelocked, &on, out ? "out" : "ary",
                      1);
}

PyObject *kpy_array_get_async(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"stream", (char *)"ary", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *ary = Py_None, *stream_obj = Py_None;
  kpy_on on;
  if (!st ||
      !PyArg_ParseTupleAndKeywords(args, kwargs, "|OO:get_async", kwlist, &stream_obj, &ary) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  return kpy_get_into(st, (kpy_array *)op, ary, 0, &on, "ary", 1);
}

PyObject *kpy_array_copy_to(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"host", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *host, *stream_obj = Py_None;
  kpy_on on;
  if (!st ||
      !PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_to", kwlist, &host, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  if (host == Py_None) {
    PyErr_SetString(PyExc_TypeError, "copy_to() needs the numpy array to copy into");
    return NULL;
  }
  PyObject *r = kpy_get_into(st, (kpy_array *)op, host, 0, &on, "host", 0);
  if (!r) return NULL;
  Py_DECREF(r);
  Py_RETURN_NONE;
}

static int kpy_assign_array(kpy_state *st, kpy_array *dst, kpy_array *src, const kpy_on *on);

/* The elements of the device array b into a (the same count and dtype; the same shape, or
 * both C-contiguous), queued on on's stream: copy_from's and set's copy between arrays. */
static int kpy_copy_between(kpy_state *st, kpy_array *a, kpy_array *b, const kpy_on *on) {
  if (kpy_array_check_memory(st, a) < 0 || kpy_array_check_memory(st, b) < 0) return -1;
  if (b->size != a->size || !PyArray_EquivTypes(b->dtype, a->dtype)) {
    PyErr_Format(PyExc_ValueError, "the source holds %zd elements of %R; this array %zd of %R",
                 b->size, (PyObject *)b->dtype, a->size, (PyObject *)a->dtype);
    return -1;
  }
  int same = b->ndim == a->ndim && !memcmp(b->shape, a->shape, (size_t)a->ndim * sizeof *a->shape);
  if (same) return kpy_assign_array(st, a, b, on);
  if (a->flags & b->flags & KPY_C_CONTIGUOUS) { /* the same elements in C order */
    kiln_status s = kiln_memcpy_dtod_async(a->ptr, b->ptr, (size_t)a->nbytes, on->handle);
    if (s) kpy_raise(st, s);
    return s ? -1 : 0;
  }
  PyErr_SetString(PyExc_ValueError, "the source has another shape; copying between shapes "
                                    "takes two C-contiguous arrays");
  return -1;
}

static PyObject *kpy_array_set_impl(PyObject *op, PyObject *args, PyObject *kwargs, const char *fmt,
                                    int async_first) {
  static char *kwlist[] = {(char *)"ary", (char *)"async_", (char *)"stream", NULL};
  static char *kwlist_async[] = {(char *)"ary", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *ary, *stream_obj = Py_None;
  int async_ = 0;
  kpy_on on;
  int ok =
      st &&
      (async_first
           ? PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist_async, &ary, &stream_obj)
           : PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &ary, &async_, &stream_obj));
  if (!ok || kpy_on_parse(st, stream_obj, &on) < 0) return NULL;
  on.wait = !async_first && !async_; /* set(async_=False) returns with the host array read */
  /* PyCUDA's set takes a GPUArray too: a copy on the device. */
  if (kpy_array_check(st, ary) ? kpy_copy_between(st, (kpy_array *)op, (kpy_array *)ary, &on) < 0
                               : kpy_set_from(st, (kpy_array *)op, ary, &on, "ary") < 0)
    return NULL;
  Py_RETURN_NONE;
}

PyObject *kpy_array_set(PyObject *op, PyObject *args, PyObject *kwargs) {
  return kpy_array_set_impl(op, args, kwargs, "O|pO:set", 0);
}

PyObject *kpy_array_set_async(PyObject *op, PyObject *args, PyObject *kwargs) {
  return kpy_array_set_impl(op, args, kwargs, "O|O:set_async", 1);
}

/* ---- On the device ------------------------------------------------------------------------ */

/* Whether the bytes two layouts touch overlap. */
static int kpy_overlap(const kpy_array *a, const kpy_array *b) {
  Py_ssize_t alo, ahi, blo, bhi;
  if (kpy_layout_extent(a->ndim, a->shape, a->strides, a->itemsize, &alo, &ahi) < 0 ||
      kpy_layout_extent(b->ndim, b->shape, b->strides, b->itemsize, &blo, &bhi) < 0) {
    PyErr_Clear(); /* made by kiln, so never; if it were, copying through a temporary is safe */
    return 1;
  }
  if (alo == ahi || blo == bhi) return 0;
  kiln_deviceptr a0 = a->ptr + (kiln_deviceptr)alo, a1 = a->ptr + (kiln_deviceptr)ahi,
                 b0 = b->ptr + (kiln_deviceptr)blo, b1 = b->ptr + (kiln_deviceptr)bhi;
  return a0 < b1 && b0 < a1;
}

/* src's elements into dst (the same shape after broadcasting src; any dtypes): one device copy
 * when both are contiguous alike with one dtype, else kiln._ops.copy. Memory the two share is
 * read through a copy of src first, as NumPy does. */
static int kpy_assign_array(kpy_state *st, kpy_array *dst, kpy_array *src, const kpy_on *on) {
  if (kpy_array_check_memory(st, dst) < 0 || kpy_array_check_memory(st, src) < 0) return -1;
  if (src->device != dst->device) {
    PyErr_Format(PyExc_ValueError, "the value is on device %d; the array is on device %d",
                 src->device, dst->device);
    return -1;
  }
  kpy_array *b = kpy_array_broadcast(src, dst->ndim, dst->shape);
  if (!b) return -1;
  int same_dtype = PyArray_EquivTypes(dst->dtype, src->dtype), rc = 0;
  if (!dst->nbytes) goto done;
  if (kpy_overlap(dst, b)) {
    if (same_dtype && b->ptr == dst->ptr &&
        !memcmp(b->strides, dst->strides, (size_t)dst->ndim * sizeof *dst->strides))
      goto done; /* the same elements */
    kpy_array *c = kpy_array_copy_order(st, src, 0, on->arg, on->handle);
    Py_SETREF(b, c ? kpy_array_broadcast(c, dst->ndim, dst->shape) : NULL);
    Py_XDECREF(c);
    if (!b) return -1;
  }
  if (same_dtype &&
      ((dst->flags & b->flags & KPY_C_CONTIGUOUS) || (dst->flags & b->flags & KPY_F_CONTIGUOUS))) {
    kiln_status s = kiln_memcpy_dtod_async(dst->ptr, b->ptr, (size_t)dst->nbytes, on->handle);
    if (s) {
      kpy_raise(st, s);
      rc = -1;
    }
  } else {
    rc = kpy_array_check_device(dst) < 0 ||
                 kpy_ops_copy(st, (PyObject *)dst, (PyObject *)b, on->arg) < 0
             ? -1
             : 0;
  }
done:
  Py_DECREF(b);
  return rc;
}

/* value into every element of dst: see kpy_array_ass_subscript. */
static int kpy_assign(kpy_state *st, kpy_array *dst, PyObject *value, const kpy_on *on) {
  if (kpy_array_check(st, value)) return kpy_assign_array(st, dst, (kpy_array *)value, on);
  if (PyLong_Check(value) || PyFloat_Check(value) || PyComplex_Check(value) ||
      PyArray_IsScalar(value, Generic)) {
    if (!dst->size) return 0;
    return kpy_array_check_device(dst) < 0 ? -1 : kpy_ops_fill(st, (PyObject *)dst, value, on->arg);
  }
  /* Host data: converted to dst's dtype (unsafely, as numpy's assignment does), then on the
   * device as it is or through a temporary. */
  Py_INCREF(dst->dtype); /* FromAny steals it */
  PyArrayObject *h = (PyArrayObject *)PyArray_FromAny(
      value, dst->dtype, 0, 0, NPY_ARRAY_CARRAY_RO | NPY_ARRAY_FORCECAST, NULL);
  if (!h) return -1;
  Py_ssize_t strides[KPY_MAX_DIMS], shape[KPY_MAX_DIMS];
  int n = PyArray_NDIM(h), rc = -1;
  for (int i = 0; i < n && i < KPY_MAX_DIMS; i++) shape[i] = PyArray_DIM(h, i);
  if (n > KPY_MAX_DIMS) {
    PyErr_Format(PyExc_ValueError, "the value has more than %d dimensions", KPY_MAX_DIMS);
  } else if (kpy_broadcast_strides(n, shape, NULL, dst->ndim, dst->shape, strides) == 0) {
    if (!dst->size) rc = 0;
    else if (kpy_same_shape(dst, h) && (dst->flags & KPY_C_CONTIGUOUS))
      rc = kpy_copy(st, dst, (PyObject *)h, (size_t)dst->nbytes, 0, on);
    else if (kpy_array_check_device(dst) == 0) {
      kpy_array *t = kpy_array_new(st, dst->dtype, n, shape, on->handle,
                                   kpy_stream_owner(st, on->arg, on->handle));
      rc = t && kpy_copy(st, t, (PyObject *)h, (size_t)t->nbytes, 0, on) == 0
               ? kpy_assign_array(st, dst, t, on)
               : -1;
      Py_XDECREF(t);
    }
  }
  Py_DECREF(h);
  return rc;
}

/* Whether type gives its own `name` (a GPUArray subclass's fill or __getitem__). */
static int kpy_overrides(kpy_state *st, PyTypeObject *type, const char *name) {
  PyObject *mine = PyObject_GetAttrString((PyObject *)type, name);
  PyObject *base = mine ? PyObject_GetAttrString((PyObject *)st->ref.DeviceArray_type, name) : NULL;
  int differ = mine && base && mine != base;
  Py_XDECREF(mine);
  Py_XDECREF(base);
  PyErr_Clear();
  return differ;
}

/* PyCUDA's __setitem__ of a scalar is self[index].fill(value): a GPUArray subclass whose own
 * __getitem__ or fill does more (GPAW's, with kernels of its own) has them called so. 1 when
 * done, 0 when this is not such a case, -1 on an error. */
static int kpy_subclass_fill(kpy_state *st, PyObject *op, PyObject *key, PyObject *value) {
  int scalar = PyLong_Check(value) || PyFloat_Check(value) || PyComplex_Check(value) ||
               PyArray_IsScalar(value, Generic);
  if (!scalar ||
      (!kpy_overrides(st, Py_TYPE(op), "fill") && !kpy_overrides(st, Py_TYPE(op), "__getitem__")))
    return 0;
  PyObject *part = PyObject_GetItem(op, key);
  PyObject *r = part ? PyObject_CallMethod(part, "fill", "O", value) : NULL;
  Py_XDECREF(part);
  Py_XDECREF(r);
  return r ? 1 : -1;
}

int kpy_array_ass_subscript(PyObject *op, PyObject *key, PyObject *value) {
  if (!value) {
    PyErr_SetString(PyExc_ValueError, "cannot delete array elements");
    return -1;
  }
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (st && !Py_IS_TYPE(op, st->ref.DeviceArray_type)) {
    int done = kpy_subclass_fill(st, op, key, value);
    if (done) return done < 0 ? -1 : 0;
  }
  PyObject *view = st ? kpy_array_subscript(op, key) : NULL;
  if (!view) return -1;
  kpy_on on = {Py_None, NULL, 0};
  int rc = kpy_assign(st, (kpy_array *)view, value, &on);
  Py_DECREF(view);
  return rc;
}

PyObject *kpy_array_copy(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"stream", NULL};
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *stream_obj = Py_None;
  kpy_on on;
  if (!st || !PyArg_ParseTupleAndKeywords(args, kwargs, "|O:copy", kwlist, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  kpy_array *a = (kpy_array *)op;
  return (PyObject *)kpy_array_copy_alloc(st, a, a->allocator, kpy_array_fortran_only(a), on.arg,
                                          on.handle);
}

PyObject *kpy_array_copy_from(PyObject *op, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"source", (char *)"stream", NULL};
  kpy_array *a = (kpy_array *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *src, *stream_obj = Py_None;
  kpy_on on;
  if (!st ||
      !PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:copy_from", kwlist, &src, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  if (!kpy_array_check(st, src)) {
    if (kpy_set_from(st, a, src, &on, "the source") < 0) return NULL;
    Py_RETURN_NONE;
  }
  if (kpy_copy_between(st, a, (kpy_array *)src, &on) < 0) return NULL;
  Py_RETURN_NONE;
}

/* ---- kiln.to_device ----------------------------------------------------------------------- */

static PyObject *kpy_to_device(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"array", (char *)"stream", NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *host, *stream_obj = Py_None;
  kpy_on on;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|O:to_device", kwlist, &host, &stream_obj) ||
      kpy_on_parse(st, stream_obj, &on) < 0)
    return NULL;
  if (PyArray_IsScalar(host, Generic)) /* np.float32(3) goes as a 0-d array */
    host = PyArray_FromScalar(host, NULL);
  else Py_INCREF(host);
  if (!host) return NULL;
  kpy_array *a = NULL;
  if (!PyArray_Check(host)) {
    PyErr_Format(PyExc_TypeError,
                 "to_device() takes a numpy array, not %.100s "
                 "(kiln.asarray wraps arrays already on the GPU)",
                 Py_TYPE(host)->tp_name);
    goto done;
  }
  /* A Fortran-ordered array stays so; any other layout is made C-contiguous on the host. */
  int fortran = !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)host) &&
                PyArray_IS_F_CONTIGUOUS((PyArrayObject *)host);
  if (!fortran && !PyArray_IS_C_CONTIGUOUS((PyArrayObject *)host)) {
    Py_SETREF(host, PyArray_NewCopy((PyArrayObject *)host, NPY_CORDER));
    if (!host) goto done;
  }
  PyArrayObject *h = (PyArrayObject *)host;
  Py_ssize_t shape[KPY_MAX_DIMS];
  for (int i = 0; i < PyArray_NDIM(h) && i < KPY_MAX_DIMS; i++) shape[i] = PyArray_DIM(h, i);
  a = kpy_array_new_order(st, PyArray_DESCR(h), PyArray_NDIM(h), shape, fortran, on.handle,
                          kpy_stream_owner(st, stream_obj, on.handle));
  if (a && kpy_copy(st, a, host, (size_t)a->nbytes, 0, &on) < 0) Py_CLEAR(a);
done:
  Py_DECREF(host);
  return (PyObject *)a;
}

static PyMethodDef kpy_arraycopy_functions[] = {
    {"to_device", (PyCFunction)(void (*)(void))kpy_to_device, METH_VARARGS | METH_KEYWORDS,
     "to_device($module, array, stream=None)\n--\n\nA DeviceArray holding a copy of a numpy "
     "array (Fortran order kept, any other layout made C-contiguous)."},
    {NULL, NULL, 0, NULL},
};

int kpy_arraycopy_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_arraycopy_functions);
}
