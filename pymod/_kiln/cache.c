/* The kernel cache from Python: this process's counts, the folder's state, upkeep. */
#include "cache.h"

#include "errors.h"

/* A dict from alternating names and values; each value is a new reference (or NULL). */
static PyObject *kpy_dict_of(int n, const char *const *names, PyObject **values) {
  PyObject *d = PyDict_New();
  for (int i = 0; i < n; i++) {
    if (d && (!values[i] || PyDict_SetItemString(d, names[i], values[i]) < 0)) Py_CLEAR(d);
    Py_XDECREF(values[i]);
  }
  return d;
}

static PyObject *kpy_cache_stats(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  kiln_cache_stats s;
  kiln_cache_get_stats(&s);
  const char *names[] = {"memory_hits", "disk_hits", "misses",      "compiles", "stores",
                         "evictions",   "corrupt",   "pch_created", "pch_used"};
  uint64_t v[] = {s.memory_hits, s.disk_hits, s.misses,      s.compiles, s.stores,
                  s.evictions,   s.corrupt,   s.pch_created, s.pch_used};
  PyObject *values[(sizeof v / sizeof v[0])];
  for (size_t i = 0; i < (sizeof v / sizeof v[0]); i++)
    values[i] = PyLong_FromUnsignedLongLong(v[i]);
  return kpy_dict_of((int)(sizeof v / sizeof v[0]), names, values);
}

static PyObject *kpy_cache_info(PyObject *module, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_module(module);
  kiln_cache_info info;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_cache_get_info(&info);
  Py_END_ALLOW_THREADS
  if (kpy_flush_warnings(st) < 0) return NULL;
  if (s) return kpy_raise(st, s);
  const char *names[] = {"enabled",   "writable",  "dir",       "layers", "reason",
                         "entries",   "bytes",     "max_bytes", "hits",   "misses",
                         "evictions", "pch_files", "pch_bytes"};
  PyObject *values[] = {
      PyBool_FromLong(info.enabled),
      PyBool_FromLong(info.writable),
      PyUnicode_DecodeFSDefault(info.dir),
      PyUnicode_DecodeFSDefault(info.layers),
      PyUnicode_DecodeFSDefault(info.reason),
      PyLong_FromUnsignedLongLong(info.entries),
      PyLong_FromUnsignedLongLong(info.bytes),
      PyLong_FromUnsignedLongLong(info.max_bytes),
      PyLong_FromUnsignedLongLong(info.hits),
      PyLong_FromUnsignedLongLong(info.misses),
      PyLong_FromUnsignedLongLong(info.evictions),
      PyLong_FromUnsignedLongLong(info.pch_files),
      PyLong_FromUnsignedLongLong(info.pch_bytes),
  };
  return kpy_dict_of(13, names, values);
}

static int kpy_cache_visit(const kiln_cache_entry *e, void *ctx) {
  PyObject *list = ctx;
  const char *names[] = {"path",      "key",  "layer",   "bytes",
                         "last_used", "arch", "kernels", "problem"};
  PyObject *values[] = {
      PyUnicode_DecodeFSDefault(e->path),
      PyUnicode_FromString(e->key),
      PyLong_FromLong(e->layer),
      PyLong_FromUnsignedLongLong(e->bytes),
      PyLong_FromLongLong(e->last_used),
      PyUnicode_FromString(e->arch),
      PyUnicode_DecodeUTF8(e->kernels, (Py_ssize_t)strlen(e->kernels), "replace"),
      e->problem ? PyUnicode_FromString(e->problem) : Py_NewRef(Py_None),
  };
  PyObject *d = kpy_dict_of(8, names, values);
  int failed = !d || PyList_Append(list, d) < 0;
  Py_XDECREF(d);
  return failed; /* stops the walk; the error is already set */
}

static PyObject *kpy_cache_list(PyObject *module, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_module(module);
  PyObject *list = PyList_New(0);
  if (!list) return NULL;
  /* The visitor builds Python objects, so the walk keeps the GIL. */
  kiln_status s = kiln_cache_list(kpy_cache_visit, list);
  if (PyErr_Occurred() || kpy_flush_warnings(st) < 0) {
    Py_DECREF(list);
    return NULL;
  }
  if (s) {
    Py_DECREF(list);
    return kpy_raise(st, s);
  }
  return list;
}

static PyObject *kpy_cache_prune(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"max_bytes", NULL};
  PyObject *max = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:cache_prune", kwlist, &max)) return NULL;
  unsigned long long max_bytes = 0;
  if (max != Py_None) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(max, &overflow);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (overflow < 0 || (!overflow && v < 1)) {
      PyErr_SetString(PyExc_ValueError, "max_bytes must be at least 1; cache_clear() empties "
                                        "the cache");
      return NULL;
    }
    max_bytes = (unsigned long long)v;
    if (overflow) { /* a bound past 2**64 bytes keeps everything, as 2**64 - 1 does */
      max_bytes = PyLong_AsUnsignedLongLong(max);
      if (max_bytes == (unsigned long long)-1 && PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
        PyErr_Clear();
      }
    }
  }
  kpy_state *st = kpy_state_of_module(module);
  uint64_t removed = 0;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_cache_prune(max_bytes, &removed);
  Py_END_ALLOW_THREADS
  if (kpy_flush_warnings(st) < 0) return NULL;
  if (s) return kpy_raise(st, s);
  return PyLong_FromUnsignedLongLong(removed);
}

static PyObject *kpy_cache_clear(PyObject *module, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_module(module);
  uint64_t removed = 0;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_cache_clear(&removed);
  Py_END_ALLOW_THREADS
  if (kpy_flush_warnings(st) < 0) return NULL;
  if (s) return kpy_raise(st, s);
  return PyLong_FromUnsignedLongLong(removed);
}

/* module_table(limit=None): the in-process table's (modules, limit), setting the limit first
 * when one is given. */
static PyObject *kpy_module_table(PyObject *module, PyObject *args, PyObject *kwargs) {
  (void)module;
  static char *kwlist[] = {(char *)"limit", NULL};
  PyObject *limit = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:module_table", kwlist, &limit)) return NULL;
  if (limit != Py_None) {
    Py_ssize_t n = PyLong_Check(limit) ? PyLong_AsSsize_t(limit) : -1;
    if (n < 0) {
      if (PyErr_Occurred() && !PyErr_ExceptionMatches(PyExc_OverflowError)) return NULL;
      PyErr_Clear();
      PyErr_Format(PyExc_ValueError,
                   "limit must be a number of modules, an int of 0 or more, not %R", limit);
      return NULL;
    }
    kiln_module_table_set_limit((size_t)n);
  }
  return Py_BuildValue("(nn)", (Py_ssize_t)kiln_module_table_count(),
                       (Py_ssize_t)kiln_module_table_limit());
}

static PyMethodDef kpy_cache_functions[] = {
    {"module_table", (PyCFunction)(void (*)(void))kpy_module_table, METH_VARARGS | METH_KEYWORDS,
     "module_table($module, /, limit=None)\n--\n\n(modules, limit) of the in-process table of "
     "compiled modules, setting its limit first when given. Modules no one holds are kept up to "
     "the limit "
     "(256 by default), least recently used freed first."},
    {"cache_stats", kpy_cache_stats, METH_NOARGS,
     "cache_stats($module, /)\n--\n\nThis process's cache counts: memory_hits, disk_hits, "
     "misses, compiles, stores, evictions, corrupt, and pch_created, pch_used (NVRTC runs "
     "that made or reused a precompiled header)."},
    {"cache_info", kpy_cache_info, METH_NOARGS,
     "cache_info($module, /)\n--\n\nThe cache folder: dir, layers, enabled, writable, reason, "
     "entries, bytes, max_bytes and the hits, misses and evictions every process recorded "
     "there; pch_files and pch_bytes, the precompiled headers running processes keep in it."},
    {"cache_list", kpy_cache_list, METH_NOARGS,
     "cache_list($module, /)\n--\n\nEvery cache entry, least recently used first, as dicts: "
     "path, key, layer, bytes, last_used, arch, kernels, problem."},
    {"cache_prune", (PyCFunction)(void (*)(void))kpy_cache_prune, METH_VARARGS | METH_KEYWORDS,
     "cache_prune($module, max_bytes=None)\n--\n\nRemoves least recently used entries until "
     "the folder holds at most max_bytes ($KILN_CACHE_MAX_BYTES by default); returns how many "
     "went."},
    {"cache_clear", kpy_cache_clear, METH_NOARGS,
     "cache_clear($module, /)\n--\n\nRemoves every entry of the main cache folder; returns "
     "how many went."},
    {NULL, NULL, 0, NULL},
};

int kpy_cache_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_cache_functions);
}
