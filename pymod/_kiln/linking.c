/* _link(inputs, arch=None, options=None): kiln_link_jit from Python, for
 * kiln.compiler.DynamicModule; options are the driver's JIT options, (jit_option, int) pairs,
 * as PyCUDA's link_options. Each input
 * is (kind, data, path, name): kind a kiln_link_kind (cuda.h's CUjitInputType), data a buffer
 * or None, path a file (str or os.PathLike) when data is None, name a str or None. The buffers
 * and paths are held while the link runs without the GIL. */
#include "linking.h"

#include "errors.h"
#include "sourcemodule.h"

#include <string.h>

typedef struct kpy_link_args {
  kiln_link_input *in;
  Py_buffer *views; /* views[i].obj set: that input's buffer is held */
  PyObject **held;  /* the path's bytes and the name's str, per input: 2 each */
  Py_ssize_t n;
} kpy_link_args;

static void kpy_link_args_free(kpy_link_args *a) {
  for (Py_ssize_t i = 0; i < a->n; i++) {
    if (a->views && a->views[i].obj) PyBuffer_Release(&a->views[i]);
    if (a->held) {
      Py_XDECREF(a->held[2 * i]);
      Py_XDECREF(a->held[2 * i + 1]);
    }
  }
  PyMem_Free(a->in);
  PyMem_Free(a->views);
  PyMem_Free(a->held);
}

/* One input, item i of the sequence; -1 with an exception naming it. */
static int kpy_link_input(PyObject *item, Py_ssize_t i, kpy_link_args *a) {
  PyObject *kind, *data, *path, *name;
  if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) != 4) {
    PyErr_Format(PyExc_TypeError,
                 "input %zd of the link must be (kind, data, path, name), not "
                 "%.100s",
                 i, Py_TYPE(item)->tp_name);
    return -1;
  }
  kind = PyTuple_GET_ITEM(item, 0), data = PyTuple_GET_ITEM(item, 1);
  path = PyTuple_GET_ITEM(item, 2), name = PyTuple_GET_ITEM(item, 3);
  long k = PyLong_Check(kind) ? PyLong_AsLong(kind) : -1;
  if (k < KILN_LINK_CUBIN || k > KILN_LINK_LIBRARY) {
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError,
                 "input %zd of the link has kind %R, not a jit_input_type "
                 "(CUBIN, PTX, FATBINARY, OBJECT or LIBRARY)",
                 i, kind);
    return -1;
  }
  kiln_link_input *in = &a->in[i];
  in->kind = (kiln_link_kind)k;
  if (data != Py_None) {
    if (PyObject_GetBuffer(data, &a->views[i], PyBUF_SIMPLE) < 0) return -1;
    if (a->views[i].len == 0) {
      PyErr_Format(PyExc_ValueError, "input %zd of the link is empty", i);
      return -1;
    }
    in->data = a->views[i].buf;
    in->size = (size_t)a->views[i].len;
  } else if (path == Py_None) {
    PyErr_Format(PyExc_ValueError, "input %zd of the link has neither data nor a path", i);
    return -1;
  } else {
    if (!PyUnicode_FSConverter(path, &a->held[2 * i])) return -1;
    in->path = PyBytes_AS_STRING(a->held[2 * i]);
  }
  if (name != Py_None) {
    if (!PyUnicode_Check(name)) {
      PyErr_Format(PyExc_TypeError, "the name of input %zd of the link is a str, not %.100s", i,
                   Py_TYPE(name)->tp_name);
      return -1;
    }
    a->held[2 * i + 1] = Py_NewRef(name);
    if (!(in->name = PyUnicode_AsUTF8(name))) return -1;
  }
  return 0;
}

static PyObject *kpy_link(PyObject *module, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kwlist[] = {(char *)"inputs", (char *)"arch", (char *)"options", NULL};
  PyObject *inputs, *arch = Py_None, *py_options = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:_link", kwlist, &inputs, &arch, &py_options))
    return NULL;
  const char *arch_text = NULL;
  if (arch != Py_None && !(arch_text = kpy_cstring(arch, "the arch"))) return NULL;
  kiln_jit_option *options;
  int n_options;
  if (kpy_jit_options(py_options, "the link's", &options, &n_options) < 0) return NULL;
  /* A tuple of its own, which holds each input while it is read: reading one runs the program's
   * code (a path's __fspath__, a buffer's), which may change a list given. */
  PyObject *seq = PySequence_Tuple(inputs);
  if (!seq) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "the link's inputs must be a sequence, not %.100s",
                   Py_TYPE(inputs)->tp_name);
    }
    PyMem_Free(options);
    return NULL;
  }
  kpy_link_args a = {0};
  Py_ssize_t n = PyTuple_GET_SIZE(seq);
  PyObject *result = NULL;
  a.in = PyMem_Calloc((size_t)n + 1, sizeof *a.in);
  a.views = PyMem_Calloc((size_t)n + 1, sizeof *a.views);
  a.held = PyMem_Calloc(2 * (size_t)n + 1, sizeof *a.held);
  if (!a.in || !a.views || !a.held) {
    PyErr_NoMemory();
    goto done;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    a.n = i + 1;
    if (kpy_link_input(PyTuple_GET_ITEM(seq, i), i, &a) < 0) goto done;
  }
  void *cubin = NULL;
  size_t size = 0;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_link_jit(a.in, (int)n, arch_text, options, n_options, &cubin, &size);
  Py_END_ALLOW_THREADS
  if (s) {
    kpy_raise(st, s);
    goto done;
  }
  result = PyBytes_FromStringAndSize(cubin, (Py_ssize_t)size);
  free(cubin);
done:
  kpy_link_args_free(&a);
  Py_DECREF(seq);
  PyMem_Free(options);
  return result;
}

static PyMethodDef kpy_link_functions[] = {
    {"_link", (PyCFunction)(void (*)(void))kpy_link, METH_VARARGS | METH_KEYWORDS,
     "_link(inputs, arch=None, options=None)\n--\n\n"
     "The CUBIN linked from inputs, a sequence of (kind, data, path, name): kind a "
     "jit_input_type, data a buffer (or None and path a file); options, (jit_option, int) "
     "pairs, make it the driver linker's. kiln.compiler.DynamicModule calls it."},
    {NULL, NULL, 0, NULL},
};

int kpy_link_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_link_functions);
}
