/* The module state and the helpers every file shares. */
#include "state.h"

#include <string.h>

kpy_state *kpy_state_of_module(PyObject *module) { return PyModule_GetState(module); }

kpy_state *kpy_state_of_type(PyTypeObject *tp) {
  /* Found along the MRO, so a Python subclass of DeviceArray (which has no module) finds the
   * state of its kiln base; the first entry is kiln's own type in every other case. */
#if PY_VERSION_HEX >= 0x030B0000
  PyObject *module = PyType_GetModuleByDef(tp, &kpy_module_def);
#else
  PyObject *module = NULL, *mro = tp->tp_mro;
  for (Py_ssize_t i = 0; !module && mro && i < PyTuple_GET_SIZE(mro); i++) {
    PyTypeObject *t = (PyTypeObject *)PyTuple_GET_ITEM(mro, i);
    PyObject *m = (t->tp_flags & Py_TPFLAGS_HEAPTYPE) ? ((PyHeapTypeObject *)t)->ht_module : NULL;
    if (m && PyModule_GetDef(m) == &kpy_module_def) module = m;
  }
  if (!module) PyErr_Format(PyExc_TypeError, "%.100s is no kiln type", tp->tp_name);
#endif
  return module ? PyModule_GetState(module) : NULL;
}

int kpy_state_intern(kpy_state *st) {
#define KPY__INTERN(field, text) \
  if (!(st->str.field = PyUnicode_InternFromString(text))) return -1;
  KPY_STRINGS(KPY__INTERN)
#undef KPY__INTERN
  return 0;
}

/* st->ref as an array: all its members are object pointers (Py_CLEAR itself writes a
 * PyTypeObject * through a PyObject **). */
#define KPY_REFS(st) ((PyObject **)&(st)->ref)
#define KPY_N_REFS (sizeof(struct kpy_refs) / sizeof(PyObject *))
#define KPY_STRS(st) ((PyObject **)&(st)->str)
#define KPY_N_STRS (sizeof(struct kpy_strings) / sizeof(PyObject *))
_Static_assert(sizeof(struct kpy_refs) % sizeof(PyObject *) == 0, "kpy_refs holds pointers only");

int kpy_state_traverse(kpy_state *st, visitproc visit, void *arg) {
  for (size_t i = 0; i < KPY_N_REFS; i++) Py_VISIT(KPY_REFS(st)[i]);
  Py_VISIT(st->deferred);
  Py_VISIT(st->after_copies);
  Py_VISIT(st->pin_callback);
  return 0;
}

void kpy_state_clear(kpy_state *st) {
  for (size_t i = 0; i < KPY_N_REFS; i++) Py_CLEAR(KPY_REFS(st)[i]);
  for (size_t i = 0; i < KPY_N_STRS; i++) Py_CLEAR(KPY_STRS(st)[i]);
  Py_CLEAR(st->deferred);
  Py_CLEAR(st->after_copies);
}

PyTypeObject *kpy_add_type(PyObject *module, PyType_Spec *spec, PyTypeObject *base) {
  return kpy_add_type_bases(module, spec, (PyObject *)base);
}

PyTypeObject *kpy_add_type_bases(PyObject *module, PyType_Spec *spec, PyObject *bases) {
  PyTypeObject *tp = (PyTypeObject *)PyType_FromModuleAndSpec(module, spec, bases);
  if (tp && PyModule_AddType(module, tp) < 0) Py_CLEAR(tp);
  return tp;
}

int kpy_get_optional_attr(PyObject *obj, PyObject *name, PyObject **out) {
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(obj, name, out);
#else
  *out = PyObject_GetAttr(obj, name);
  if (*out) return 1;
  if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
  PyErr_Clear();
  return 0;
#endif
}

const char *kpy_cstring(PyObject *str, const char *what) {
  Py_ssize_t n;
  const char *s = PyUnicode_AsUTF8AndSize(str, &n);
  if (s && strlen(s) != (size_t)n) {
    PyErr_Format(PyExc_ValueError,
                 "%s holds a NUL character ('\\0'), where C would end it; pass the text "
                 "without it",
                 what);
    return NULL;
  }
  return s;
}

PyObject *kpy_call_method(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames) {
  PyObject *method = PyObject_GetAttr(self, name);
  if (!method) return NULL;
  PyObject *r = PyObject_Vectorcall(method, args, (size_t)nargs, kwnames);
  Py_DECREF(method);
  return r;
}

void kpy_raised_set_aside(kpy_raised *r) {
#if PY_VERSION_HEX >= 0x030C0000
  r->exc = PyErr_GetRaisedException();
#else
  PyErr_Fetch(&r->type, &r->value, &r->tb);
#endif
}

void kpy_raised_put_back(kpy_raised *r) {
  PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
  PyErr_SetRaisedException(r->exc);
#else
  PyErr_Restore(r->type, r->value, r->tb);
#endif
}

int kpy_handle_bytes(PyObject *obj, unsigned char *out, size_t n, const char *what,
                     const char *from) {
  Py_buffer view;
  if (PyUnicode_Check(obj) || PyObject_GetBuffer(obj, &view, PyBUF_C_CONTIGUOUS) < 0) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s is the %zu bytes %s gives (bytes or bytearray), not %.100s",
                 what, n, from, Py_TYPE(obj)->tp_name);
    return -1;
  }
  int ok = (size_t)view.len == n;
  if (ok) memcpy(out, view.buf, n);
  else
    PyErr_Format(PyExc_ValueError, "%s is %zu bytes (what %s gives), not %zd", what, n, from,
                 view.len);
  PyBuffer_Release(&view);
  return ok ? 0 : -1;
}
