/* Arguments into parameters, by the kernel's signature. Every refusal names the argument,
 * the parameter's class and what it takes, before anything reaches the GPU. */
#include "args.h"

#include "arrayobj.h"
#include "errors.h"
#include "interop.h"
#include "managed.h"
#include "memory.h"
#include "stream.h"
#include "transfer.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* Fails with `type`, naming argument `index` of kernel f and its parameter class. */
KPY_PRINTF(4, 5)
static int kpy_arg_error(PyObject *type, const kiln_function *f, int index, const char *fmt, ...) {
  char detail[640];
  va_list ap;
  va_start(ap, fmt);
  PyOS_vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  const kiln_param *p = &kiln_function_params(f)[index];
  PyErr_Format(type, "argument %d of %s (a %s parameter): %s", index, kiln_function_signature(f),
               kiln_param_class_name(p->cls), detail);
  return -1;
}

typedef struct kpy_int_range {
  long long lo;
  unsigned long long hi;
  const char *what;
} kpy_int_range;

static kpy_int_range kpy_range_of(kiln_param_class cls) {
  switch (cls) {
  case KILN_PARAM_I8: return (kpy_int_range){-128, 127, "a signed 8-bit int"};
  case KILN_PARAM_U8: return (kpy_int_range){0, 255, "an unsigned 8-bit int"};
  case KILN_PARAM_B8: return (kpy_int_range){-128, 255, "an 8-bit int"};
  case KILN_PARAM_I16: return (kpy_int_range){-32768, 32767, "a signed 16-bit int"};
  case KILN_PARAM_U16: return (kpy_int_range){0, 65535, "an unsigned 16-bit int"};
  case KILN_PARAM_B16: return (kpy_int_range){-32768, 65535, "a 16-bit int"};
  case KILN_PARAM_I32: return (kpy_int_range){INT32_MIN, INT32_MAX, "a signed 32-bit int"};
  case KILN_PARAM_U32: return (kpy_int_range){0, UINT32_MAX, "an unsigned 32-bit int"};
  case KILN_PARAM_B32: return (kpy_int_range){INT32_MIN, UINT32_MAX, "a 32-bit int"};
  case KILN_PARAM_I64: return (kpy_int_range){INT64_MIN, INT64_MAX, "a signed 64-bit int"};
  case KILN_PARAM_U64:
  case KILN_PARAM_PTR: return (kpy_int_range){0, UINT64_MAX, "an unsigned 64-bit value"};
  default: return (kpy_int_range){INT64_MIN, UINT64_MAX, "a 64-bit value"};
  }
}

/* A Python int into an integer or pointer parameter of `size` bytes, range-checked. */
static int kpy_pack_int(const kiln_function *f, int index, PyObject *value, void *slot) {
  const kiln_param *p = &kiln_function_params(f)[index];
  kpy_int_range r = kpy_range_of(p->cls);
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(value, &overflow);
  unsigned long long u;
  if (v == -1 && PyErr_Occurred()) return -1;
  if (overflow > 0) {
    u = PyLong_AsUnsignedLongLong(value);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Clear();
      overflow = 2;
    }
  }
  if (overflow < 0 || overflow == 2 || (overflow == 0 && v < r.lo) || (overflow > 0 && u > r.hi) ||
      (overflow == 0 && v >= 0 && (unsigned long long)v > r.hi)) {
    PyObject *repr = PyObject_Repr(value);
    const char *text = repr ? PyUnicode_AsUTF8(repr) : NULL;
    kpy_arg_error(PyExc_ValueError, f, index, "%.60s does not fit %s (%lld to %llu)",
                  text ? text : "the value", r.what, r.lo, r.hi);
    Py_XDECREF(repr);
    return -1;
  }
  if (overflow == 0) u = (unsigned long long)v;
  /* Little-endian: the low bytes of the two's-complement value are the narrower int. */
  memcpy(slot, &u, p->size);
  return 0;
}

/* A real number into 8 bytes as a double (wide) or 4 as a float, never a double's bytes where
 * a float goes. */
static int kpy_pack_real(const kiln_function *f, int index, double d, int wide, void *slot) {
  if (wide) {
    memcpy(slot, &d, sizeof d);
    return 0;
  }
  if (isfinite(d) && fabs(d) > (double)FLT_MAX)
    return kpy_arg_error(PyExc_ValueError, f, index, "%g does not fit a 32-bit float", d);
  float x = (float)d;
  memcpy(slot, &x, sizeof x);
  return 0;
}

/* A real number into an f32 or f64 parameter. */
static int kpy_pack_float(const kiln_function *f, int index, double d, void *slot) {
  return kpy_pack_real(f, index, d, kiln_function_params(f)[index].cls == KILN_PARAM_F64, slot);
}

/* Whether obj is a number: a Python int, float, complex or bool, a NumPy number or bool, or a
 * 0-d NumPy array of one. */
static int kpy_is_number(PyObject *obj) {
  if (PyLong_Check(obj) || PyFloat_Check(obj) || PyComplex_Check(obj) ||
      PyArray_IsScalar(obj, Number) || PyArray_IsScalar(obj, Bool))
    return 1;
  return PyArray_Check(obj) && PyArray_NDIM((PyArrayObject *)obj) == 0 &&
         strchr("biufc", PyArray_DESCR((PyArrayObject *)obj)->kind) != NULL;
}

/* Whether parameter index of f is a complex number as its C++ signature names it
 * (kiln::complex<float>, pycuda::complex<double>, thrust::complex<float>, std::complex<...>):
 * 1 for float parts, 2 for double parts, 0 when it is not or the signature does not say (an
 * extern "C" kernel's). Read from the signature's text at each call that passes a number for
 * a struct parameter: a scan of a short string, beside a launch's microseconds, and kept off
 * every other argument's way (kiln._signature splits the same text for inspect.signature). */
static int kpy_param_complex(const kiln_function *f, int index) {
  const char *sig = kiln_function_signature(f);
  size_t n = strlen(sig);
  if (!n || sig[n - 1] != ')') return 0;
  /* The parameter list: from the '(' that matches the final ')'. */
  const char *open = NULL;
  int depth = 0;
  for (const char *q = sig + n - 1; q >= sig && !open; q--) {
    if (*q == ')') depth++;
    else if (*q == '(' && --depth == 0) open = q;
  }
  if (!open) return 0;
  const char *start = open + 1, *end = NULL;
  int at = 0;
  depth = 0;
  for (const char *q = start; q < sig + n; q++) {
    if (*q == '(' || *q == '<' || *q == '[') {
      depth++;
    } else if ((*q == ')' || *q == '>' || *q == ']') && depth > 0) {
      depth--;
    } else if ((*q == ',' && depth == 0) || q == sig + n - 1) {
      if (at++ == index) {
        end = q;
        break;
      }
      start = q + 1;
    }
  }
  if (!end) return 0;
  while (start < end && *start == ' ') start++;
  if (strncmp(start, "const ", 6) == 0) start += 6;
  while (end > start && end[-1] == ' ') end--;
  if (end - start >= 6 && strncmp(end - 6, " const", 6) == 0) end -= 6;
  static const struct {
    const char *text;
    int parts;
  } names[] = {{"complex<float>", 1}, {"complex<double>", 2}};
  unsigned size = kiln_function_params(f)[index].size;
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    size_t len = strlen(names[i].text);
    const char *name = end - len;
    if (end - start >= (ptrdiff_t)len && strncmp(name, names[i].text, len) == 0 &&
        (name == start || name[-1] == ':') && size == 8u * (unsigned)names[i].parts)
      return names[i].parts;
  }
  return 0;
}

/* A number into a complex parameter: real and imaginary parts, each a float (parts 1) or a
 * double (2). Real numbers are complex with no imaginary part, as PyCUDA's packing and NumPy's
 * casts take them. */
static int kpy_pack_complex(const kiln_function *f, int index, PyObject *obj, int parts,
                            void *slot) {
  Py_complex c = PyComplex_AsCComplex(obj);
  if (c.real == -1.0 && PyErr_Occurred()) return -1;
  char *at = slot;
  if (kpy_pack_real(f, index, c.real, parts == 2, at) < 0) return -1;
  return kpy_pack_real(f, index, c.imag, parts == 2, at + 4 * parts);
}

/* Bytes of exactly the parameter's size: bytes, bytearray, memoryview, numpy scalars and
 * arrays (a structured scalar, np.float16, an int32 array of 4 for an int4). */
static int kpy_pack_bytes(const kiln_function *f, int index, PyObject *obj, void *slot) {
  const kiln_param *p = &kiln_function_params(f)[index];
  Py_buffer view;
  if (PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0) {
    PyErr_Clear();
    return kpy_arg_error(PyExc_TypeError, f, index,
                         "expected bytes or a numpy scalar or array of %u bytes (a struct), "
                         "got %.100s",
                         p->size, Py_TYPE(obj)->tp_name);
  }
  int ok = view.len == (Py_ssize_t)p->size;
  if (ok) memcpy(slot, view.buf, p->size);
  Py_ssize_t len = view.len;
  PyBuffer_Release(&view);
  if (!ok)
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "got %zd bytes; the parameter is a struct of %u bytes (aligned to %u)",
                         len, p->size, p->align);
  return 0;
}

/* The classes of integers whose sign is unknown, or of 64-bit values that may be pointers. */
static int kpy_sized_class(kiln_param_class cls) {
  return cls == KILN_PARAM_B8 || cls == KILN_PARAM_B16 || cls == KILN_PARAM_B32 ||
         cls == KILN_PARAM_B64;
}

static int kpy_is_pointer_class(kiln_param_class cls) {
  return cls == KILN_PARAM_PTR || cls == KILN_PARAM_B64;
}

/* Whether tp is a program's subclass of In or Out (a class statement makes a heap type; the
 * flag first, so that a NumPy scalar, of a static type, costs no walk of its bases). */
static int kpy_is_transfer_subclass(kpy_state *st, PyTypeObject *tp) {
  return (tp->tp_flags & Py_TPFLAGS_HEAPTYPE) &&
         (PyType_IsSubtype(tp, st->ref.In_type) || PyType_IsSubtype(tp, st->ref.Out_type));
}

/* In, Out, InOut: checks the array and records the transfer; the engine fills the pointer. */
static int kpy_pack_transfer(const kiln_function *f, int index, kpy_transfer *t,
                             kpy_packed *packed) {
  static const char *names[] = {"", "In", "Out", "InOut"};
  PyArrayObject *a = (PyArrayObject *)t->array;
  if (!a)
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the %s holds no array: its __init__ did not give one "
                         "(In.__init__(self, array), or self.array = array)",
                         Py_TYPE(t)->tp_name);
  if (!PyArray_IS_C_CONTIGUOUS(a) && !PyArray_IS_F_CONTIGUOUS(a))
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the array in %s is not contiguous; pass numpy.ascontiguousarray(a)",
                         names[t->dir]);
  if ((t->dir & KILN_OUT) && !PyArray_ISWRITEABLE(a))
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the array in %s is read-only; %s writes into it", names[t->dir],
                         names[t->dir]);
  if (packed->n_transfers == KILN_MAX_TRANSFERS)
    return kpy_arg_error(PyExc_ValueError, f, index, "more than %d In/Out/InOut arguments",
                         KILN_MAX_TRANSFERS);
  kiln_transfer *x = &packed->transfers[packed->n_transfers++];
  x->param = index;
  x->dir = t->dir;
  x->host = PyArray_DATA(a);
  x->nbytes = (size_t)PyArray_NBYTES(a);
  return 0;
}

/* A DeviceArray as the address of its element [0, ..., 0]: a kernel indexes it as contiguous
 * memory, so a strided view is refused; its ptr passes that address on purpose. */
static int kpy_pack_array(kpy_state *st, const kiln_function *f, int index, PyObject *obj,
                          void *slot) {
  if (kpy_array_memory_freed(st, (kpy_array *)obj))
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the array's memory was freed (its gpudata.free())");
  if (kpy_array_device(obj) != kiln_device_current())
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the array is on device %d; the launch "
                         "is on device %d",
                         kpy_array_device(obj), kiln_device_current());
  if (!kpy_array_is_contiguous(obj))
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the array is not contiguous (a strided view); pass a.copy() for a "
                         "contiguous copy, or a.ptr (or a.gpudata) to pass its address on "
                         "purpose");
  kiln_deviceptr p = kpy_array_ptr(obj);
  memcpy(slot, &p, sizeof p);
  return 0;
}

/* The error the CUDA array interface reader raised, again, naming the argument. */
static int kpy_arg_reraise(const kiln_function *f, int index) {
  if (!PyErr_ExceptionMatches(PyExc_TypeError) && !PyErr_ExceptionMatches(PyExc_ValueError))
    return -1;
  PyObject *type = PyErr_ExceptionMatches(PyExc_TypeError) ? PyExc_TypeError : PyExc_ValueError;
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *exc = PyErr_GetRaisedException();
#else
  PyObject *exc_type, *exc, *tb;
  PyErr_Fetch(&exc_type, &exc, &tb);
  PyErr_NormalizeException(&exc_type, &exc, &tb);
  Py_XDECREF(exc_type);
  Py_XDECREF(tb);
#endif
  PyObject *text = exc ? PyObject_Str(exc) : NULL;
  const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
  if (s) kpy_arg_error(type, f, index, "%s", s);
  Py_XDECREF(text);
  Py_XDECREF(exc);
  return -1;
}

/* A pointer a __cuda_array_interface__ gave, refused when the driver says the GPU cannot reach
 * it: a NumPy array's address, say, which the kernel would fault on (a fault ends the
 * context). Without a driver or device nothing can tell; the launch then fails saying why. */
static int kpy_check_pointer(kpy_state *st, const kiln_function *f, int index, kiln_deviceptr p) {
  int reachable = 1;
  kiln_status s = kiln_pointer_reachable(p, &reachable);
  if (s == KILN_ERROR_NO_DRIVER || s == KILN_ERROR_NO_DEVICE) return 0;
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  if (reachable) return 0;
  return kpy_arg_error(PyExc_TypeError, f, index,
                       "its __cuda_array_interface__ gives address 0x%llx, which the GPU cannot "
                       "reach: the driver knows it as neither device memory nor page-locked host "
                       "memory (host memory, a NumPy array's, or none at all); copy the data to "
                       "the GPU (kiln.to_device(x), x.cuda() in PyTorch), or wrap a NumPy array "
                       "in kiln.In/Out/InOut",
                       (unsigned long long)p);
}

int kpy_packed_check_pointers(kpy_state *st, const kiln_function *f, const kpy_packed *packed) {
  for (int i = 0; i < packed->n_pointers; i++)
    if (kpy_check_pointer(st, f, packed->pointers[i].index, packed->pointers[i].ptr) < 0) return -1;
  return 0;
}

/* p into slot, an address another library's object gave. Whether the GPU can reach it is asked
 * once the launch's shape is known to be good (a bad shape is the error to give first); past
 * the list's room, now. */
static int kpy_pack_reachable(kpy_state *st, const kiln_function *f, int index, kiln_deviceptr p,
                              void *slot, kpy_packed *packed) {
  memcpy(slot, &p, sizeof p);
  if (p && packed->n_pointers < KPY_MAX_POINTER_CHECKS) {
    packed->pointers[packed->n_pointers].index = index;
    packed->pointers[packed->n_pointers++].ptr = p;
    return 0;
  }
  return kpy_check_pointer(st, f, index, p);
}

/* __cuda_array_interface__ (torch, CuPy, Numba): its data pointer, when its elements lie in C
 * order from there as the kernel will index them. When the interface names the stream the
 * producer last used (v3), the launch's stream waits for it first, without blocking;
 * arguments from one producer stream in a row wait once. */
static int kpy_pack_cai(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                        kpy_packed *packed, int *handled) {
  kpy_cai cai;
  int found = kpy_cai_read(st, obj, KPY_CAI_POINTER, &cai);
  *handled = found != 0;
  if (found <= 0) return found < 0 ? kpy_arg_reraise(f, index) : 0;
  int contiguous = kpy_cai_is_c_contiguous(&cai);
  kpy_cai_release(&cai);
  if (!contiguous)
    return kpy_arg_error(PyExc_ValueError, f, index,
                         "the %.100s is not contiguous (its __cuda_array_interface__ has "
                         "strides), but a kernel indexes it as if it were; pass a "
                         "contiguous copy (x.contiguous() in PyTorch, cupy.ascontiguousarray(x)), "
                         "or its address as an int (x.data_ptr() in PyTorch, "
                         "x.__cuda_array_interface__['data'][0]) to pass it on purpose",
                         Py_TYPE(obj)->tp_name);
  if (kpy_pack_reachable(st, f, index, cai.ptr, slot, packed) < 0) return -1;
  if (cai.has_stream && !(packed->waited && packed->waited_on == cai.stream)) {
    if (kpy_stream_order(st, packed->stream, cai.stream) < 0) return -1;
    packed->waited = 1;
    packed->waited_on = cai.stream;
  }
  return 0;
}

/* An object with __index__ that is an array, not an int, refused where a device pointer is
 * expected: a one-element PyTorch CPU tensor has __index__, and its value taken as an address
 * would be a silent wrong pointer. 0 when obj is no array (it offers neither DLPack nor NumPy's
 * protocols), -1 with the refusal otherwise. */
static int kpy_refuse_array(kpy_state *st, const kiln_function *f, int index, PyObject *obj) {
  PyObject *names[] = {st->str.dlpack, st->str.array_interface, st->str.array_protocol};
  int found = 0;
  for (size_t i = 0; !found && i < sizeof names / sizeof names[0]; i++) {
    PyObject *attr = NULL;
    found = kpy_get_optional_attr(obj, names[i], &attr);
    Py_XDECREF(attr);
    if (found < 0) return -1;
  }
  if (!found) return 0;
  /* DLPack's device types: 2 CUDA memory, 13 CUDA managed memory. */
  PyObject *dev = PyObject_CallMethodNoArgs(obj, st->str.dlpack_device);
  long type = dev && PyTuple_Check(dev) && PyTuple_GET_SIZE(dev) == 2 &&
                      PyLong_Check(PyTuple_GET_ITEM(dev, 0))
                  ? PyLong_AsLong(PyTuple_GET_ITEM(dev, 0))
                  : -1;
  Py_XDECREF(dev);
  PyErr_Clear(); /* no __dlpack_device__, or an odd one: host memory as far as kiln knows */
  if (type == 2 || type == 13)
    return kpy_arg_error(PyExc_TypeError, f, index,
                         "the %.100s is in device memory but offers no __cuda_array_interface__; "
                         "pass kiln.asarray(x), or int(x) to pass its value on purpose",
                         Py_TYPE(obj)->tp_name);
  return kpy_arg_error(PyExc_TypeError, f, index,
                       "the %.100s is an array in host memory, and a kernel needs device memory; "
                       "copy it to the GPU (x.cuda() in PyTorch, kiln.to_device(x)) or wrap a "
                       "NumPy array in kiln.In/Out/InOut; int(x) passes its value on purpose",
                       Py_TYPE(obj)->tp_name);
}

/* PyCUDA's rule for an object kiln does not know: its gpudata attribute is the device pointer
 * (a GPUArray of another library, a holder of an address). The value is an allocation or an
 * int, never an object to look into again; the GPU must be able to reach it, as for
 * __cuda_array_interface__. 1 when obj has no gpudata, 0 when packed, -1 on an error. */
static int kpy_pack_gpudata(kpy_state *st, const kiln_function *f, int index, PyObject *obj,
                            void *slot, kpy_packed *packed) {
  PyObject *value = NULL;
  int found = kpy_get_optional_attr(obj, st->str.gpudata, &value);
  if (found <= 0) return found < 0 ? kpy_arg_reraise(f, index) : 1;
  kiln_deviceptr p = 0;
  int rc = 0;
  if (Py_TYPE(value) == st->ref.DeviceAllocation_type) {
    p = ((kpy_allocation *)value)->ptr;
    if (!p) rc = kpy_arg_error(PyExc_ValueError, f, index, "its gpudata was freed");
  } else if (PyLong_Check(value) || PyArray_IsScalar(value, Integer)) {
    PyObject *i = PyNumber_Index(value);
    unsigned long long u = i ? PyLong_AsUnsignedLongLong(i) : 0;
    Py_XDECREF(i);
    if (PyErr_Occurred()) {
      PyErr_Clear();
      rc = kpy_arg_error(PyExc_ValueError, f, index,
                         "its gpudata is no address (an int from 0 to 2**64 - 1)");
    }
    p = (kiln_deviceptr)u;
  } else {
    rc = kpy_arg_error(PyExc_TypeError, f, index,
                       "its gpudata is a %.100s, where a device pointer (an int or a "
                       "kiln.mem_alloc allocation) was expected",
                       Py_TYPE(value)->tp_name);
  }
  Py_DECREF(value);
  return rc < 0 ? -1 : kpy_pack_reachable(st, f, index, p, slot, packed);
}

int kpy_pack_arg(kpy_state *st, const kiln_function *f, int index, PyObject *obj, void *slot,
                 kpy_packed *packed) {
  kiln_param_class cls = kiln_function_params(f)[index].cls;
  PyTypeObject *tp = Py_TYPE(obj);

  /* A number for a complex parameter is that complex number, never its bytes (a float64's
   * eight would read as a complex<float> of other values). */
  if (cls == KILN_PARAM_AGGREGATE && kpy_is_number(obj)) {
    int parts = kpy_param_complex(f, index);
    if (parts) return kpy_pack_complex(f, index, obj, parts, slot);
  }
  /* The driver's sizes alone (an extern "C" kernel of a binary): a float for a 4- or 8-byte
   * parameter is the float or double it fits, a NumPy float of the parameter's size its bytes,
   * as the kernel cannot be asked which it is. */
  if (kiln_function_params_by_size(f) && kpy_sized_class(cls)) {
    unsigned size = kiln_function_params(f)[index].size;
    if (PyFloat_Check(obj) && (size == 4 || size == 8))
      return kpy_pack_real(f, index, PyFloat_AS_DOUBLE(obj), size == 8, slot);
    if (PyArray_IsScalar(obj, Inexact)) {
      PyArray_Descr *d = PyArray_DescrFromScalar(obj);
      npy_intp elsize = d ? PyDataType_ELSIZE(d) : 0;
      Py_XDECREF(d);
      if (elsize == (npy_intp)size) return kpy_pack_bytes(f, index, obj, slot);
    }
  }

  /* The common cases first: a Python int or float. */
  if (PyLong_CheckExact(obj)) {
    if (cls == KILN_PARAM_F32 || cls == KILN_PARAM_F64) {
      double d = PyLong_AsDouble(obj);
      if (d == -1.0 && PyErr_Occurred()) return -1;
      return kpy_pack_float(f, index, d, slot);
    }
    if (cls == KILN_PARAM_AGGREGATE) goto wrong;
    return kpy_pack_int(f, index, obj, slot);
  }
  if (PyFloat_CheckExact(obj)) {
    if (cls == KILN_PARAM_F32 || cls == KILN_PARAM_F64)
      return kpy_pack_float(f, index, PyFloat_AS_DOUBLE(obj), slot);
    goto wrong;
  }
  if (tp == st->ref.In_type || tp == st->ref.Out_type || tp == st->ref.InOut_type) {
    if (!kpy_is_pointer_class(cls)) goto wrong;
    return kpy_pack_transfer(f, index, (kpy_transfer *)obj, packed);
  }
  if (tp == st->ref.DeviceAllocation_type) {
    if (!kpy_is_pointer_class(cls)) goto wrong;
    kpy_allocation *a = (kpy_allocation *)obj;
    if (!a->ptr) return kpy_arg_error(PyExc_ValueError, f, index, "the allocation was freed");
    memcpy(slot, &a->ptr, sizeof a->ptr);
    return 0;
  }
  if (tp == st->ref.DeviceArray_type) {
    if (!kpy_is_pointer_class(cls)) goto wrong;
    return kpy_pack_array(st, f, index, obj, slot);
  }
  if (kpy_is_transfer_subclass(st, tp)) {
    if (!kpy_is_pointer_class(cls)) goto wrong;
    return kpy_pack_transfer(f, index, (kpy_transfer *)obj, packed);
  }
  if (PyArray_Check(obj)) {
    if (cls == KILN_PARAM_AGGREGATE) return kpy_pack_bytes(f, index, obj, slot);
    /* An array of one element into a number's parameter is that element, as PyCUDA's packing
     * reads it, which packs an array's bytes: a reduction's result brought to the host, 0-d;
     * np.float32(x) of a one-element array x, which is such an array still (an ODE solver's
     * tolerance). Its value is converted to the parameter's type, as a scalar's is. */
    if (PyArray_SIZE((PyArrayObject *)obj) == 1 && !kpy_is_pointer_class(cls)) {
      PyObject *scalar = PyArray_ToScalar(PyArray_DATA((PyArrayObject *)obj), (PyArrayObject *)obj);
      if (!scalar) return -1;
      int rc = PyArray_Check(scalar)
                   ? kpy_arg_error(PyExc_TypeError, f, index, "an array of %.100s is no number",
                                   Py_TYPE(scalar)->tp_name)
                   : kpy_pack_arg(st, f, index, scalar, slot, packed);
      Py_DECREF(scalar);
      return rc;
    }
    if (kpy_is_pointer_class(cls) && kpy_managed_array(st, obj)) { /* kernels reach it */
      if (!PyArray_ISCONTIGUOUS((PyArrayObject *)obj) && !PyArray_ISFORTRAN((PyArrayObject *)obj) &&
          PyArray_SIZE((PyArrayObject *)obj) > 1)
        return kpy_arg_error(PyExc_ValueError, f, index,
                             "a strided view of a managed array does not pass as a pointer; "
                             "pass a contiguous one");
      kiln_deviceptr p = (kiln_deviceptr)(uintptr_t)PyArray_DATA((PyArrayObject *)obj);
      memcpy(slot, &p, sizeof p);
      return 0;
    }
    if (kpy_is_pointer_class(cls))
      return kpy_arg_error(PyExc_TypeError, f, index,
                           "a numpy array lives in host memory; wrap it in kiln.In, kiln.Out "
                           "or kiln.InOut to pass it to a kernel");
    goto wrong;
  }
  if (cls == KILN_PARAM_AGGREGATE) {
    if (PyObject_CheckBuffer(obj)) return kpy_pack_bytes(f, index, obj, slot);
    goto wrong;
  }
  if (cls == KILN_PARAM_F32 || cls == KILN_PARAM_F64) {
    if (PyFloat_Check(obj) || PyLong_Check(obj) || PyArray_IsScalar(obj, Number)) {
      double d = PyFloat_AsDouble(obj);
      if (d == -1.0 && PyErr_Occurred()) return -1;
      return kpy_pack_float(f, index, d, slot);
    }
    goto wrong;
  }
  /* A device array first: torch tensors also have __index__, for one-element tensors. */
  if (kpy_is_pointer_class(cls) && !PyLong_Check(obj) && !PyArray_IsScalar(obj, Integer)) {
    if (kpy_array_check(st, obj)) return kpy_pack_array(st, f, index, obj, slot); /* a subclass */
    int handled = 0;
    if (kpy_pack_cai(st, f, index, obj, slot, packed, &handled) < 0) return -1;
    if (handled) return 0;
    int rc = kpy_pack_gpudata(st, f, index, obj, slot, packed);
    if (rc <= 0) return rc;
    if (PyIndex_Check(obj) && !PyArray_IsScalar(obj, Generic) &&
        kpy_refuse_array(st, f, index, obj) < 0)
      return -1;
  }
  /* A NumPy integer of the parameter's width goes as its bits, whatever the two signs: C
   * converts an unsigned int to an int so, and PyCUDA packs a NumPy scalar by its own type
   * (a program's np.uint32 seed for an int parameter). A Python int, of no width, and a NumPy
   * integer of another width are range-checked below; a pointer never takes a negative. */
  if (PyArray_IsScalar(obj, Integer) && cls >= KILN_PARAM_B8 && cls <= KILN_PARAM_U64 &&
      cls != KILN_PARAM_B64) {
    PyArray_Descr *d = PyArray_DescrFromScalar(obj);
    npy_intp elsize = d ? PyDataType_ELSIZE(d) : 0;
    Py_XDECREF(d);
    if (elsize == (npy_intp)kiln_function_params(f)[index].size) {
      PyArray_ScalarAsCtype(obj, slot); /* little-endian, as the device */
      return 0;
    }
  }
  /* Integer and pointer classes: ints of any kind (bool, numpy integers, __index__). */
  if (PyLong_Check(obj) || PyArray_IsScalar(obj, Integer) || PyArray_IsScalar(obj, Bool) ||
      (!PyFloat_Check(obj) && !PyArray_IsScalar(obj, Inexact) && PyIndex_Check(obj))) {
    /* NumPy's bool has no __index__: it counts as 0 or 1, as Python's does. */
    PyObject *i =
        PyArray_IsScalar(obj, Bool) ? PyLong_FromLong(PyObject_IsTrue(obj)) : PyNumber_Index(obj);
    if (!i) return -1;
    int rc = kpy_pack_int(f, index, i, slot);
    Py_DECREF(i);
    return rc;
  }
wrong:
  switch (cls) {
  case KILN_PARAM_PTR:
  case KILN_PARAM_B64:
    return kpy_arg_error(PyExc_TypeError, f, index,
                         "expected a device pointer (kiln.In/Out/InOut, a kiln.mem_alloc "
                         "allocation, an object with __cuda_array_interface__ or gpudata, or "
                         "an int), "
                         "got %.100s",
                         tp->tp_name);
  case KILN_PARAM_F32:
  case KILN_PARAM_F64:
    return kpy_arg_error(PyExc_TypeError, f, index, "expected a real number, got %.100s",
                         tp->tp_name);
  case KILN_PARAM_AGGREGATE: return kpy_pack_bytes(f, index, obj, slot);
  default:
    if (kiln_function_params_by_size(f) && kpy_sized_class(cls))
      return kpy_arg_error(PyExc_TypeError, f, index,
                           "expected an int or a float of %u bytes (the binary gives the "
                           "parameter's size, not its type), got %.100s",
                           kiln_function_params(f)[index].size, tp->tp_name);
    return kpy_arg_error(PyExc_TypeError, f, index, "expected an int, got %.100s", tp->tp_name);
  }
}

size_t kpy_slots_fill(const kiln_function *f, kpy_slot *slots, int n) {
  const kiln_param *p = kiln_function_params(f);
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    off = (off + p[i].align - 1) / p[i].align * p[i].align;
    kpy_slot *s = &slots[i];
    s->offset = off;
    s->size = p[i].size;
    kpy_int_range r = kpy_range_of(p[i].cls);
    s->lo = r.lo;
    s->hi = r.hi;
    s->kind = p[i].cls == KILN_PARAM_F32   ? KPY_SLOT_F32
              : p[i].cls == KILN_PARAM_F64 ? KPY_SLOT_F64
              : p[i].cls == KILN_PARAM_AGGREGATE ||
                      !(p[i].size == 1 || p[i].size == 2 || p[i].size == 4 || p[i].size == 8)
                  ? KPY_SLOT_OTHER
                  : KPY_SLOT_INT;
    off += p[i].size;
  }
  return off ? off : 1;
}

/* The value of a Python int of at most one digit (|v| < 2**30), without a call; 0 when it is
 * larger, for PyLong_AsLongLongAndOverflow to read. */
static inline int kpy_small_int(PyObject *obj, long long *v) {
#if PY_VERSION_HEX >= 0x030C0000
  if (!PyUnstable_Long_IsCompact((PyLongObject *)obj)) return 0;
  *v = (long long)PyUnstable_Long_CompactValue((PyLongObject *)obj);
  return 1;
#else
  Py_ssize_t size = Py_SIZE(obj);
  if (size < -1 || size > 1) return 0;
  *v = size * (long long)((PyLongObject *)obj)->ob_digit[0];
  return 1;
#endif
}

/* Whether kpy_pack_args' first pass takes obj for slot s: a Python int for an integer or
 * pointer parameter, a Python float for a floating one. */
static inline int kpy_slot_fast(const kpy_slot *s, PyObject *obj) {
  PyTypeObject *tp = Py_TYPE(obj);
  return tp == &PyLong_Type
             ? s->kind == KPY_SLOT_INT
             : tp == &PyFloat_Type && (s->kind == KPY_SLOT_F32 || s->kind == KPY_SLOT_F64);
}

/* 0 when packing obj runs no Python code (an int, a float, In/Out/InOut, a DeviceAllocation, a
 * DeviceArray, of exactly those types); 1 when it may. */
static int kpy_arg_runs_code(kpy_state *st, PyObject *obj) {
  PyTypeObject *tp = Py_TYPE(obj);
  return !(tp == &PyLong_Type || tp == &PyFloat_Type || tp == st->ref.In_type ||
           tp == st->ref.Out_type || tp == st->ref.InOut_type ||
           tp == st->ref.DeviceAllocation_type || tp == st->ref.DeviceArray_type ||
           kpy_is_transfer_subclass(st, tp));
}

int kpy_pack_args(kpy_state *st, const kiln_function *f, const kpy_slot *slots, int n,
                  PyObject *const *args, unsigned char *storage, void **params,
                  kpy_packed *packed) {
  int rest = 0;
  packed->arrays = 0;
  for (int i = 0; i < n; i++) {
    const kpy_slot *s = &slots[i];
    PyObject *obj = args[i];
    unsigned char *slot = storage + s->offset;
    params[i] = slot;
    if (!kpy_slot_fast(s, obj)) {
      rest = 1;
      continue;
    }
    if (s->kind == KPY_SLOT_INT) {
      long long v;
      int overflow = 0;
      if (!kpy_small_int(obj, &v)) {
        v = PyLong_AsLongLongAndOverflow(obj, &overflow);
        if (v == -1 && PyErr_Occurred()) return -1;
      }
      /* Out of range, or past INT64_MAX (an unsigned 64-bit value): the whole story there. */
      if (overflow || v < s->lo || (v > 0 && (unsigned long long)v > s->hi)) {
        if (kpy_pack_arg(st, f, i, obj, slot, packed) < 0) return -1;
        continue;
      }
      /* Little-endian: the low bytes of the two's-complement value are the narrower int. */
      switch (s->size) {
      case 1: *slot = (unsigned char)v; break;
      case 2: {
        uint16_t x = (uint16_t)v;
        memcpy(slot, &x, 2);
        break;
      }
      case 4: {
        uint32_t x = (uint32_t)v;
        memcpy(slot, &x, 4);
        break;
      }
      default: memcpy(slot, &v, 8); break;
      }
    } else if (s->kind == KPY_SLOT_F64) {
      double d = PyFloat_AS_DOUBLE(obj);
      memcpy(slot, &d, sizeof d);
    } else if (kpy_pack_float(f, i, PyFloat_AS_DOUBLE(obj), slot) < 0) {
      return -1;
    }
  }
  if (!rest) return 0;
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < n; i++) {
      PyObject *obj = args[i];
      if (kpy_slot_fast(&slots[i], obj) || kpy_arg_runs_code(st, obj) != !pass) continue;
      if (kpy_pack_arg(st, f, i, obj, params[i], packed) < 0) return -1;
      if (kpy_array_check(st, obj)) packed->arrays = 1;
    }
  return 0;
}
