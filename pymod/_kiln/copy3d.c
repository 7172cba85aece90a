/* PyCUDA's Memcpy2D and Memcpy3D in C: kiln/_memcpy.py gathers their attributes into two
 * sides, and _memcpy_3d reads them (host buffers, strided numpy windows too; device addresses;
 * Arrays) and hands them to the engine's kiln_memcpy_3d, which checks the shape first. */
#include "copy3d.h"

#include "context.h"
#include "cuarray.h"
#include "errors.h"
#include "memory.h"
#include "pin.h"
#include "stream.h"
#include "wait.h"

#include <string.h>

/* A host side of a 2D or 3D copy: as kpy_host_side, but a numpy array may be strided too (a
 * window of a larger array, its rows pitch apart), its strides not negative: the bytes from
 * its first element to one past its last bound the copy. */
static int kpy_strided_host_side(PyObject *obj, int writeable, const char *what, Py_buffer *view) {
  PyArrayObject *a = PyArray_Check(obj) ? (PyArrayObject *)obj : NULL;
  if (!a || PyArray_IS_C_CONTIGUOUS(a) || PyArray_IS_F_CONTIGUOUS(a))
    return kpy_host_side(obj, writeable, what, view);
  if (writeable && !PyArray_ISWRITEABLE(a)) {
    PyErr_Format(PyExc_ValueError, "the %s array is read-only", what);
    return -1;
  }
  Py_ssize_t extent = PyArray_SIZE(a) ? PyArray_ITEMSIZE(a) : 0;
  for (int i = 0; i < PyArray_NDIM(a) && extent; i++) {
    if (PyArray_STRIDE(a, i) < 0) {
      PyErr_Format(PyExc_ValueError,
                   "the %s array has a negative stride; a copy of rows goes forward from its "
                   "first element",
                   what);
      return -1;
    }
    extent += (PyArray_DIM(a, i) - 1) * PyArray_STRIDE(a, i);
  }
  return PyBuffer_FillInfo(view, obj, PyArray_DATA(a), extent, !writeable, PyBUF_SIMPLE);
}

/* One side, given as (kind, memory, x_in_bytes, y, z, pitch, height): its numbers, and the
 * device address of device (2) memory, in *side; its memory in *memory (borrowed from the
 * tuple). Reading the numbers and the address runs their __index__, Python code, so both
 * sides are read before either's buffer is taken (kpy_copy_side_take). */
static int kpy_copy_side_parse(kpy_state *st, PyObject *tuple, int is_dst, kiln_copy_side *side,
                               PyObject **memory) {
  const char *what = is_dst ? "destination" : "source";
  Py_ssize_t at[5];
  memset(side, 0, sizeof *side);
  if (!PyTuple_Check(tuple)) {
    PyErr_Format(PyExc_TypeError, "the %s of a 2D or 3D copy is not set", what);
    return -1;
  }
  if (!PyArg_ParseTuple(tuple, "IOnnnnn", &side->kind, memory, &at[0], &at[1], &at[2], &at[3],
                        &at[4])) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "the %s's x_in_bytes, y, z, pitch and height are ints, not %R",
                   what, tuple);
    }
    return -1;
  }
  for (int i = 0; i < 5; i++)
    if (at[i] < 0) {
      PyErr_Format(PyExc_ValueError, "the %s's offsets, pitch and height are not negative", what);
      return -1;
    }
  side->x_in_bytes = (size_t)at[0];
  side->y = (size_t)at[1];
  side->z = (size_t)at[2];
  side->pitch = (size_t)at[3];
  side->height = (size_t)at[4];
  if (side->kind == KILN_COPY_DEVICE)
    return kpy_device_pointer(st, *memory, 0, what, &side->device);
  return 0;
}

/* The memory of a side read by kpy_copy_side_parse: a buffer for host (1) and unified (4)
 * memory, held in *view until released; an Array for an array (3). *keep is what a queued copy
 * must keep alive (the buffer, the Array). */
static int kpy_copy_side_take(kpy_state *st, PyObject *memory, int is_dst, kiln_copy_side *side,
                              Py_buffer *view, PyObject **keep) {
  const char *what = is_dst ? "destination" : "source";
  if (side->kind == KILN_COPY_DEVICE) return 0;
  if (side->kind == KILN_COPY_ARRAY) {
    kiln_array *a;
    if (kpy_cuarray_get(st, memory, what, &a) < 0) return -1;
    side->array = a;
    *keep = memory;
    return 0;
  }
  if (kpy_strided_host_side(memory, is_dst, what, view) < 0) return -1;
  side->host = view->buf;
  side->host_size = (size_t)view->len;
  *keep = memory;
  return 0;
}

static int kpy_copy_side_host(const kiln_copy_side *side) {
  return side->kind != KILN_COPY_DEVICE && side->kind != KILN_COPY_ARRAY;
}

/* Whether a host side's buffer meets memory kiln page-locked in place (pin.h). */
static int kpy_copy_side_pinned(kpy_state *st, const kiln_copy_side *side) {
  return (side->kind == KILN_COPY_HOST || side->kind == KILN_COPY_UNIFIED) && side->host &&
         kpy_pin_touches(st, side->host, side->host_size);
}

static PyObject *kpy_memcpy_3d_sides(PyObject *module, PyObject *args) {
  kpy_state *st = kpy_state_of_module(module);
  PyObject *src_t, *dst_t;
  Py_ssize_t width, height, depth;
  int unaligned, async;
  kpy_copy_stream on = {Py_None, NULL, 1};
  /* Memcpy3DPeer's: each side's context (None: the current one); without them, one device. */
  PyObject *src_ctx = NULL, *dst_ctx = NULL;
  int peer = 0, src_device = 0, dst_device = 0;
  if (!PyArg_ParseTuple(args, "OOnnnppO|OO:_memcpy_3d", &src_t, &dst_t, &width, &height, &depth,
                        &unaligned, &async, &on.obj, &src_ctx, &dst_ctx))
    return NULL;
  if (src_ctx || dst_ctx) {
    peer = 1;
    if (kpy_context_device(st, src_ctx ? src_ctx : Py_None, 1, "the source's context",
                           &src_device) < 0 ||
        kpy_context_device(st, dst_ctx ? dst_ctx : Py_None, 1, "the destination's context",
                           &dst_device) < 0)
      return NULL;
  }
  if (width < 0 || height < 0 || depth < 0) {
    PyErr_Format(PyExc_ValueError,
                 "a copy's width_in_bytes, height and depth are not negative: %zd, %zd, %zd", width,
                 height, depth);
    return NULL;
  }
  if (async && kpy_stream_parse(st, on.obj, &on.handle) < 0) return NULL;
  kiln_copy_side src, dst;
  Py_buffer views[2];
  PyObject *keep[2];
  PyObject *result = NULL;
  kiln_status s;
  int waits;
  PyObject *memory[2];
  views[0].obj = views[1].obj = keep[0] = keep[1] = NULL;
  if (kpy_copy_side_parse(st, src_t, 0, &src, &memory[0]) < 0 ||
      kpy_copy_side_parse(st, dst_t, 1, &dst, &memory[1]) < 0)
    return NULL;
  /* A NumPy array's buffer last: NumPy counts no buffer it hands out, so Python code that
   * taking another host buffer runs could free it, where other exporters refuse. */
  kiln_copy_side *sides[2] = {&src, &dst};
  int first = kpy_copy_side_host(&src) && PyArray_Check(memory[0]) && kpy_copy_side_host(&dst) &&
              !PyArray_Check(memory[1]);
  for (int k = 0; k < 2; k++) {
    int i = first ? 1 - k : k;
    if (kpy_copy_side_take(st, memory[i], i, sides[i], &views[i], &keep[i]) < 0) goto done;
  }
  if ((s = kiln_memcpy_3d_check(&src, &dst, (size_t)width, (size_t)height, (size_t)depth))) {
    kpy_raise(st, s);
    goto done;
  }
  /* As kpy_memcpy: a blocking copy waits behind the work before it where Ctrl-C can end the
   * wait, and an async one on another library's stream is waited for after. */
  waits = !async || !kpy_stream_is_kiln(st, on.obj);
  if (waits && kpy_wait_before_copy(st, async ? on.handle : NULL) < 0) goto done;
  Py_BEGIN_ALLOW_THREADS
    if (peer)
      s = async ? kiln_memcpy_3d_peer_async(&src, src_device, &dst, dst_device, (size_t)width,
                                            (size_t)height, (size_t)depth, on.handle)
                : kiln_memcpy_3d_peer(&src, src_device, &dst, dst_device, (size_t)width,
                                      (size_t)height, (size_t)depth);
    else
      s = async
              ? kiln_memcpy_3d_async(&src, &dst, (size_t)width, (size_t)height, (size_t)depth,
                                     on.handle)
              : kiln_memcpy_3d(&src, &dst, (size_t)width, (size_t)height, (size_t)depth, unaligned);
  Py_END_ALLOW_THREADS
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  /* A queued copy with host memory kiln page-locked in place is waited for, as the pageable
   * memory the program gave (pin.h). */
  if (async && !waits && (kpy_copy_side_pinned(st, &src) || kpy_copy_side_pinned(st, &dst))) {
    Py_BEGIN_ALLOW_THREADS
      s = kiln_stream_synchronize(on.handle);
    Py_END_ALLOW_THREADS
    if (s) {
      kpy_raise(st, s);
      goto done;
    }
    waits = 1;
  }
  for (int i = 0; i < 2; i++)
    if (async && !waits && keep[i] && kpy_copy_queued(st, &on, keep[i]) < 0) goto done;
  result = Py_NewRef(Py_None);
done:
  for (int i = 0; i < 2; i++)
    if (views[i].obj) PyBuffer_Release(&views[i]);
  if (src.kind == KILN_COPY_ARRAY && src.array) kpy_cuarray_put(keep[0]);
  if (dst.kind == KILN_COPY_ARRAY && dst.array) kpy_cuarray_put(keep[1]);
  return result;
}

/* kpy_memcpy_3d_sides as a copy (kpy_copies_begin): it reads the device addresses, may wait
 * for the stream's work without the GIL, then copies. */
static PyObject *kpy_memcpy_3d(PyObject *module, PyObject *args) {
  kpy_state *st = kpy_state_of_module(module);
  kpy_copies_begin(st);
  PyObject *r = kpy_memcpy_3d_sides(module, args);
  kpy_copies_end(st);
  return r;
}

static PyMethodDef kpy_copy3d_functions[] = {
    {"_memcpy_3d", kpy_memcpy_3d, METH_VARARGS,
     "_memcpy_3d($module, src, dst, width_in_bytes, height, depth, unaligned, async_, stream, "
     "src_context=None, dst_context=None, /)\n--\n\nMemcpy2D's, Memcpy3D's and "
     "Memcpy3DPeer's copy: each side (kind, memory, x_in_bytes, y, z, pitch, height); the "
     "contexts, given, make it a copy between devices."},
    {NULL, NULL, 0, NULL},
};

int kpy_copy3d_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_copy3d_functions);
}
