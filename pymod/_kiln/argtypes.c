/* PyCUDA's argument types: what Function.prepare takes. PyCUDA packs the arguments of a
 * prepared call with the struct module, so its users write struct formats ("PiiP") or NumPy
 * dtypes; kiln packs by the kernel's own signature, and reads these only to check, at prepare
 * time, that they name as many parameters of the same sizes as the kernel has. */
#include "argtypes.h"

#include <ctype.h>
#include <string.h>

/* The size of a struct-module character in native mode (an LP64 Linux), PyCUDA's 'F' and 'D'
 * (complex float and double) included; 0 for one that is not a format character. */
static unsigned kpy_char_size(char c) {
  switch (c) {
  case 'c':
  case 'b':
  case 'B':
  case '?': return 1;
  case 'h':
  case 'H':
  case 'e': return 2;
  case 'i':
  case 'I':
  case 'f': return 4;
  case 'l':
  case 'L':
  case 'q':
  case 'Q':
  case 'n':
  case 'N':
  case 'd':
  case 'P':
  case 'F': return 8;
  case 'D': return 16;
  default: return 0;
  }
}

static int kpy_add(kpy_argtype *out, int cap, int *n, unsigned size, char sign, const char *what) {
  if (*n < cap) {
    out[*n].size = size;
    out[*n].sign = sign;
    PyOS_snprintf(out[*n].what, sizeof out[*n].what, "%s", what);
  }
  (*n)++;
  return 0;
}

/* A struct format: [byte order] then items, each [count] character, blanks between them. */
static int kpy_parse_format(const char *fmt, kpy_argtype *out, int cap, int *n) {
  const char *p = fmt;
  if (*p == '@' || *p == '=' || *p == '<') p++;
  else if (*p == '>' || *p == '!') {
    PyErr_Format(PyExc_ValueError,
                 "argument types '%s' are big-endian ('%c'); CUDA devices are little-endian", fmt,
                 *p);
    return -1;
  }
  while (*p) {
    if (isspace((unsigned char)*p)) {
      p++;
      continue;
    }
    const char *start = p;
    unsigned long count = 0;
    int counted = 0;
    while (isdigit((unsigned char)*p)) {
      count = count * 10 + (unsigned long)(*p++ - '0');
      counted = 1;
      if (count > (1u << 20)) {
        PyErr_Format(PyExc_ValueError, "argument types '%s': the count at '%s' is too large", fmt,
                     start);
        return -1;
      }
    }
    char c = *p;
    if (!c) {
      PyErr_Format(PyExc_ValueError, "argument types '%s' end in a count without a character", fmt);
      return -1;
    }
    p++;
    char what[48];
    PyOS_snprintf(what, sizeof what, "'%.*s'", (int)(p - start), start);
    if (c == 's' || c == 'p') { /* one item of count bytes: a struct passed by value */
      if (!counted || count == 0) {
        PyErr_Format(PyExc_ValueError,
                     "argument types '%s': %s needs its size in bytes before it, as '16s'", fmt,
                     what);
        return -1;
      }
      kpy_add(out, cap, n, (unsigned)count, 0, what);
      continue;
    }
    if (c == 'x') continue; /* padding: no parameter, and kiln aligns by the signature */
    unsigned size = kpy_char_size(c);
    if (!size) {
      PyErr_Format(PyExc_ValueError,
                   "argument types '%s': '%c' is not a struct format character (P a pointer, i "
                   "I l L q Q h H b B integers, f d floats, F D complex, Ns N bytes)",
                   fmt, c);
      return -1;
    }
    if (counted && count == 0) continue;
    char sign = strchr("bhilqn", c)   ? 's'
                : strchr("BHILQN", c) ? 'u'
                : c == 'F'            ? 'c'
                : c == 'D'            ? 'z'
                                      : 0;
    for (unsigned long k = 0; k < (counted ? count : 1); k++) {
      PyOS_snprintf(what, sizeof what, "'%c'", c);
      kpy_add(out, cap, n, size, sign, what);
    }
  }
  return 0;
}

int kpy_argtypes_parse(PyObject *types, kpy_argtype *out, int cap, int *n, PyObject **format) {
  *n = 0;
  *format = NULL;
  if (PyUnicode_Check(types)) {
    const char *fmt = kpy_cstring(types, "the argument types");
    if (!fmt || kpy_parse_format(fmt, out, cap, n) < 0) return -1;
    *format = Py_NewRef(types);
    return 0;
  }
  if (PyBytes_Check(types)) {
    const char *fmt = PyBytes_AS_STRING(types);
    if (strlen(fmt) != (size_t)PyBytes_GET_SIZE(types)) {
      PyErr_SetString(PyExc_ValueError, "the argument types hold a NUL byte ('\\0'), where C "
                                        "would end them; pass them without it");
      return -1;
    }
    if (kpy_parse_format(fmt, out, cap, n) < 0) return -1;
    *format = PyUnicode_DecodeASCII(fmt, PyBytes_GET_SIZE(types), "replace");
    return *format ? 0 : -1;
  }
  /* A tuple copy: a dtype conversion below may run code that changes the caller's list. */
  PyObject *items = PySequence_Tuple(types);
  if (!items) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError,
                 "prepare() takes the argument types as a struct format string ('PiiP') or a "
                 "list of format characters and NumPy dtypes, not %.100s",
                 Py_TYPE(types)->tp_name);
    return -1;
  }
  PyObject *parts = PyList_New(0);
  int rc = parts ? 0 : -1;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(items) && rc == 0; i++) {
    PyObject *item = PyTuple_GET_ITEM(items, i);
    if (PyUnicode_Check(item)) {
      const char *fmt = kpy_cstring(item, "an argument type");
      rc = fmt && kpy_parse_format(fmt, out, cap, n) == 0 ? PyList_Append(parts, item) : -1;
      continue;
    }
    /* Anything but a format, a dtype or a NumPy scalar type is a pointer, as PyCUDA's prepare
     * takes it: prepare([GPUArray, np.int32]), a class standing for what is passed. */
    if (!PyArray_DescrCheck(item) &&
        !(PyType_Check(item) && PyType_IsSubtype((PyTypeObject *)item, &PyGenericArrType_Type))) {
      PyObject *pointer = PyUnicode_FromString("P");
      rc = pointer && kpy_parse_format("P", out, cap, n) == 0 ? PyList_Append(parts, pointer) : -1;
      Py_XDECREF(pointer);
      continue;
    }
    PyArray_Descr *dtype = NULL;
    if (!PyArray_DescrConverter2(item, &dtype) || !dtype) {
      PyErr_Clear();
      Py_XDECREF(dtype);
      PyErr_Format(PyExc_TypeError,
                   "argument type %zd is %.100s; each is a struct format character ('P', 'i', "
                   "'f', '16s') or a NumPy dtype",
                   i, Py_TYPE(item)->tp_name);
      rc = -1;
      break;
    }
    Py_ssize_t size = PyDataType_ELSIZE(dtype);
    char what[48];
    PyObject *name = PyObject_Str((PyObject *)dtype);
    const char *text = name ? PyUnicode_AsUTF8(name) : NULL;
    PyOS_snprintf(what, sizeof what, "dtype %.36s", text ? text : "?");
    if (!text) PyErr_Clear();
    Py_XDECREF(name);
    PyObject *part = dtype->type_num == NPY_VOID ? PyUnicode_FromFormat("%zds", size)
                                                 : PyUnicode_FromFormat("%c", dtype->type);
    char sign = dtype->kind == 'i'   ? 's'
                : dtype->kind == 'u' ? 'u'
                : dtype->kind == 'c' ? (size == 8    ? 'c'
                                        : size == 16 ? 'z'
                                                     : 0)
                                     : 0;
    Py_DECREF(dtype);
    if (!part || PyList_Append(parts, part) < 0) rc = -1;
    Py_XDECREF(part);
    if (rc == 0 && size <= 0) {
      PyErr_Format(PyExc_ValueError, "argument type %zd (%s) has no size", i, what);
      rc = -1;
    }
    if (rc == 0) kpy_add(out, cap, n, (unsigned)size, sign, what);
  }
  Py_DECREF(items);
  if (rc == 0) {
    PyObject *empty = PyUnicode_FromString("");
    *format = empty ? PyUnicode_Join(empty, parts) : NULL;
    Py_XDECREF(empty);
    if (!*format) rc = -1;
  }
  Py_XDECREF(parts);
  return rc;
}
