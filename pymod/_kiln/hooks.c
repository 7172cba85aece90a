/* Calls into kiln._ops, where the kernels the array object needs are generated and launched;
 * contiguous copies made with them. */
#include "hooks.h"

#include "errors.h"
#include "stream.h"

/* Importing may run other threads: a module another thread stored meanwhile wins. */
PyObject *kpy_ops_module(kpy_state *st) {
  if (st->ref.ops_module) return st->ref.ops_module;
  PyObject *m = PyImport_ImportModule("kiln._ops");
  if (!m) return NULL;
  if (st->ref.ops_module) Py_DECREF(m);
  else st->ref.ops_module = m;
  return st->ref.ops_module;
}

/* kiln._ops.<name>(a, b, stream), its result dropped. Looked up at each call (a kernel's
 * launch costs far more), so that kiln._ops may replace its functions. */
static int kpy_ops_call(kpy_state *st, const char *name, PyObject *a, PyObject *b,
                        PyObject *stream) {
  PyObject *m = kpy_ops_module(st);
  PyObject *f = m ? PyObject_GetAttrString(m, name) : NULL;
  if (!f) return -1;
  PyObject *args[] = {a, b, stream};
  PyObject *r = PyObject_Vectorcall(f, args, 3, NULL);
  Py_DECREF(f);
  if (!r) return -1;
  Py_DECREF(r);
  return 0;
}

int kpy_ops_copy(kpy_state *st, PyObject *dst, PyObject *src, PyObject *stream) {
  return kpy_ops_call(st, "copy", dst, src, stream);
}

int kpy_ops_fill(kpy_state *st, PyObject *dst, PyObject *value, PyObject *stream) {
  return kpy_ops_call(st, "fill", dst, value, stream);
}

kpy_array *kpy_array_copy_order(kpy_state *st, kpy_array *a, int fortran, PyObject *stream_obj,
                                kiln_stream stream) {
  return kpy_array_copy_alloc(st, a, NULL, fortran, stream_obj, stream);
}

kpy_array *kpy_array_copy_alloc(kpy_state *st, kpy_array *a, PyObject *allocator, int fortran,
                                PyObject *stream_obj, kiln_stream stream) {
  if (kpy_array_check_device(a) < 0 || kpy_array_check_memory(st, a) < 0) return NULL;
  kpy_array *c = kpy_array_new_from(st, allocator, a->dtype, a->ndim, a->shape, fortran, stream,
                                    kpy_stream_owner(st, stream_obj, stream));
  if (!c || !c->nbytes) return c;
  /* An allocator is Python code, which may have freed a's memory: checked again after it */
  if (allocator && kpy_array_check_memory(st, a) < 0) {
    Py_DECREF(c);
    return NULL;
  }
  if (a->flags & (fortran ? KPY_F_CONTIGUOUS : KPY_C_CONTIGUOUS)) {
    kiln_status s = kiln_memcpy_dtod_async(c->ptr, a->ptr, (size_t)a->nbytes, stream);
    if (s) {
      Py_DECREF(c);
      return (kpy_array *)kpy_raise(st, s);
    }
  } else if (kpy_ops_copy(st, (PyObject *)c, (PyObject *)a, stream_obj) < 0) {
    Py_CLEAR(c);
  }
  return c;
}
