/* kiln.Module (compiled code, kernels by name) and kiln.SourceModule, the Module that
 * compiles its source; kiln.module_from_buffer for prebuilt code. */
#include "sourcemodule.h"

#include "errors.h"
#include "function.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* A list of str (or os.PathLike for folders) as C strings that live as long as `keep`. The
 * items are read from a tuple copy that `keep` holds: an item's __fspath__ may change the list
 * the caller gave, and another thread may change it while the compile runs without the GIL. */
static int kpy_strings(PyObject *seq, const char *what, int paths, PyObject *keep,
                       const char ***out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!seq || seq == Py_None) return 0;
  if (PyUnicode_Check(seq) || PyBytes_Check(seq)) {
    PyErr_Format(PyExc_TypeError, "%s must be a list of strings, not a single string", what);
    return -1;
  }
  PyObject *items = PySequence_Tuple(seq);
  if (!items) {
    if (!PyErr_ExceptionMatches(PyExc_TypeError)) return -1;
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a list of strings, not %.100s", what,
                 Py_TYPE(seq)->tp_name);
    return -1;
  }
  int kept = PyList_Append(keep, items);
  Py_DECREF(items); /* keep holds it */
  if (kept < 0) return -1;
  Py_ssize_t n = PyTuple_GET_SIZE(items);
  if (n > INT_MAX) {
    PyErr_Format(PyExc_ValueError, "%s has %zd items, more than a compile takes", what, n);
    return -1;
  }
  const char **strs = PyMem_Calloc((size_t)(n ? n : 1), sizeof *strs);
  if (!strs) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = PyTuple_GET_ITEM(items, i), *str = NULL;
    char name[80];
    PyOS_snprintf(name, sizeof name, "%s[%zd]", what, i);
    if (paths && !PyUnicode_Check(item)) {
      PyObject *fs = PyOS_FSPath(item);
      if (fs && PyBytes_Check(fs)) {
        str = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(fs), PyBytes_GET_SIZE(fs));
        Py_DECREF(fs);
      } else {
        str = fs;
      }
      if (!str) PyErr_Clear();
    } else if (PyUnicode_Check(item)) {
      str = Py_NewRef(item);
    }
    if (!str || !PyUnicode_Check(str)) {
      Py_XDECREF(str);
      PyErr_Format(PyExc_TypeError, "%s must be a %s, not %.100s", name,
                   paths ? "str or path" : "str", Py_TYPE(item)->tp_name);
      PyMem_Free(strs);
      return -1;
    }
    strs[i] = kpy_cstring(str, name);
    kept = strs[i] ? PyList_Append(keep, str) : -1; /* a path's str is new: keep it */
    Py_DECREF(str);
    if (kept < 0) {
      PyMem_Free(strs);
      return -1;
    }
  }
  *out = strs;
  *n_out = (int)n;
  return 0;
}

/* headers={"name.h": "source", ...} as two arrays of C strings that live as long as keep. Each
 * name and text is held in keep, not only the dict: another thread may replace an entry while
 * the compile runs without the GIL, and the dict would drop the old string. */
static int kpy_headers(PyObject *headers, PyObject *keep, const char ***names,
                       const char ***sources, int *n_out) {
  *n_out = 0;
  if (!headers || headers == Py_None) return 0;
  if (!PyDict_Check(headers)) {
    PyErr_Format(PyExc_TypeError, "headers must be a dict of name to source text, not %.100s",
                 Py_TYPE(headers)->tp_name);
    return -1;
  }
  /* A snapshot of the entries, so that the count and the entries agree. */
  PyObject *items = PyDict_Items(headers);
  if (!items) return -1;
  int kept = PyList_Append(keep, items);
  Py_DECREF(items); /* keep holds it, and through it every name and text */
  if (kept < 0) return -1;
  Py_ssize_t n = PyList_GET_SIZE(items);
  if (n > INT_MAX) {
    PyErr_Format(PyExc_ValueError, "headers has %zd entries, more than a compile takes", n);
    return -1;
  }
  *names = PyMem_Calloc((size_t)(n ? n : 1), sizeof **names);
  *sources = PyMem_Calloc((size_t)(n ? n : 1), sizeof **sources);
  if (!*names || !*sources) {
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    /* The list of pairs is held by keep and reachable from no Python code. */
    PyObject *pair = PyList_GET_ITEM(items, i);
    PyObject *key = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
    if (!PyUnicode_Check(key) || !PyUnicode_Check(value)) {
      PyErr_Format(PyExc_TypeError,
                   "headers maps a header's name (str) to its text (str); "
                   "got %.100s: %.100s",
                   Py_TYPE(key)->tp_name, Py_TYPE(value)->tp_name);
      return -1;
    }
    if (!((*names)[i] = kpy_cstring(key, "a header's name"))) return -1;
    char what[160];
    PyOS_snprintf(what, sizeof what, "the text of header '%.100s'", (*names)[i]);
    if (!((*sources)[i] = kpy_cstring(value, what))) return -1;
  }
  *n_out = (int)n;
  return 0;
}

/* Whether dir (relative to the working folder when not absolute) holds a file called name. */
static int kpy_dir_has(const char *dir, const char *name) {
  char path[4096];
  struct stat sb;
  int n = PyOS_snprintf(path, sizeof path, "%s/%s", dir, name);
  return n > 0 && (size_t)n < sizeof path && stat(path, &sb) == 0;
}

/* Whether the compile would find a file called name in a folder: include_dirs, -I options or
 * the working folder (a quoted include's first place), searched before PyCUDA's own folder. */
static int kpy_header_on_disk(const kiln_compile_opts *opts, const char *name) {
  for (int i = 0; i < opts->n_include_dirs; i++)
    if (opts->include_dirs[i] && kpy_dir_has(opts->include_dirs[i], name)) return 1;
  for (int i = 0; i < opts->n_options; i++) {
    const char *o = opts->options[i];
    if (o && strncmp(o, "-I", 2) == 0 && o[2] && kpy_dir_has(o + 2, name)) return 1;
  }
  return kpy_dir_has(".", name);
}

/* Whether some text of the compile can reach PyCUDA's headers: the source or a header of
 * headers= naming one, an option (-include), or an include folder, whose files may. The
 * source's naming kiln's complex header, under which those are given, counts too: it is in
 * the source of every generated kernel over complex numbers, which keep=True prints for the
 * program to compile as it is. */
static int kpy_reaches_pycuda_headers(const char *src, PyObject *headers,
                                      const kiln_compile_opts *opts) {
  if (strstr(src, "pycuda-") || strstr(src, "kiln_complex.h") || opts->n_include_dirs > 0) return 1;
  for (int i = 0; i < opts->n_options; i++)
    if (opts->options[i] &&
        (strstr(opts->options[i], "pycuda-") || strncmp(opts->options[i], "-I", 2) == 0))
      return 1;
  if (!headers || !PyDict_Check(headers)) return 0;
  PyObject *needle = PyUnicode_FromString("pycuda-");
  if (!needle) {
    PyErr_Clear();
    return 1; /* give them: a header too many costs nothing */
  }
  int found = 0;
  Py_ssize_t pos = 0;
  PyObject *key, *value; /* borrowed: nothing below runs Python code */
  while (!found && PyDict_Next(headers, &pos, &key, &value))
    found = PyUnicode_Check(value) &&
            PyUnicode_Find(value, needle, 0, PyUnicode_GET_LENGTH(value), 1) >= 0;
  Py_DECREF(needle);
  PyErr_Clear();
  return found;
}

/* PyCUDA's own headers (<pycuda-complex.hpp>, <pycuda-helpers.hpp>, ...), which its SourceModule
 * puts on every compile's include path after the caller's folders, as kiln's in-memory headers
 * (kiln._cgen.PYCUDA_HEADERS) for a compile that can reach them, under the caller's headers=,
 * which win, and without those a folder of the caller's holds, which win as under PyCUDA.
 * Gives a new dict, or headers itself (a new reference) when none is given. */
static PyObject *kpy_with_pycuda_headers(const char *src, PyObject *headers,
                                         const kiln_compile_opts *opts) {
  if (headers && headers != Py_None && !PyDict_Check(headers))
    return Py_NewRef(headers); /* kpy_headers says what is wrong with it */
  if (!kpy_reaches_pycuda_headers(src, headers, opts))
    return Py_NewRef(headers ? headers : Py_None);
  PyObject *cgen = PyImport_ImportModule("kiln._cgen");
  PyObject *ours = cgen ? PyObject_GetAttrString(cgen, "PYCUDA_HEADERS") : NULL;
  Py_XDECREF(cgen);
  PyObject *merged = ours && PyDict_Check(ours) ? PyDict_Copy(ours) : NULL;
  if (ours && !merged && !PyErr_Occurred())
    PyErr_SetString(PyExc_TypeError, "kiln._cgen.PYCUDA_HEADERS is not a dict");
  Py_XDECREF(ours);
  static const char *const pycudas[] = {
      "pycuda-complex.hpp",        "pycuda-complex-impl.hpp",        "pycuda-helpers.hpp",
      "pycuda/pycuda-complex.hpp", "pycuda/pycuda-complex-impl.hpp", "pycuda/pycuda-helpers.hpp"};
  for (size_t i = 0; merged && i < sizeof pycudas / sizeof *pycudas; i++)
    if (kpy_header_on_disk(opts, pycudas[i]) && PyDict_DelItemString(merged, pycudas[i]) < 0)
      Py_CLEAR(merged);
  if (merged && headers && headers != Py_None && PyDict_Update(merged, headers) < 0)
    Py_CLEAR(merged);
  return merged;
}

/* A str or os.PathLike as a str (NULL with TypeError naming `what` otherwise). */
static PyObject *kpy_path(PyObject *obj, const char *what) {
  PyObject *fs = PyOS_FSPath(obj);
  if (!fs) {
    PyErr_Clear();
    PyErr_Format(PyExc_TypeError, "%s must be a str or path, not %.100s", what,
                 Py_TYPE(obj)->tp_name);
    return NULL;
  }
  if (PyBytes_Check(fs)) {
    PyObject *str = PyUnicode_DecodeFSDefaultAndSize(PyBytes_AS_STRING(fs), PyBytes_GET_SIZE(fs));
    Py_DECREF(fs);
    return str;
  }
  return fs;
}

/* nvcc=: PyCUDA's compiler. kiln compiles with NVRTC; a compiler other than nvcc is worth a
 * word, since what it would have done differently does not happen. */
static int kpy_nvcc(PyObject *nvcc) {
  if (!nvcc || nvcc == Py_None) return 0;
  PyObject *path = kpy_path(nvcc, "nvcc");
  if (!path) return -1;
  const char *text = kpy_cstring(path, "nvcc");
  int rc = 0;
  if (!text) rc = -1;
  else {
    const char *base = strrchr(text, '/');
    base = base ? base + 1 : text;
    if (strcmp(base, "nvcc") != 0)
      rc = PyErr_WarnFormat(PyExc_UserWarning, 2,
                            "nvcc=%R is not used: kiln compiles with NVRTC, in this process", path);
  }
  Py_DECREF(path);
  return rc;
}

/* keep=True: the source, PTX, CUBIN and log written to a fresh folder, whose path is printed
 * as PyCUDA prints its compiler's folder. */
static int kpy_keep(kiln_module *m, const char *src) {
  const char *tmp = getenv("TMPDIR");
  char dir[4096];
  PyOS_snprintf(dir, sizeof dir, "%s/kiln-keep-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    PyErr_SetFromErrnoWithFilename(PyExc_OSError, dir);
    return -1;
  }
  kiln_status s = kiln_module_save(m, src, dir);
  if (s) {
    PyErr_Format(PyExc_OSError, "keep: %s", kiln_last_error());
    return -1;
  }
  PySys_WriteStdout("*** compiler output in %s\n", dir);
  return 0;
}

/* Whether the logger behind the compile hook is known to record no hit: its level cache (what
 * Logger.isEnabledFor fills, and logging empties whenever a level changes) holds False for
 * DEBUG, the level kiln._log records hits at. Unknown is not quiet: the hook asks then. The
 * cache is held, not looked up on the logger each time: logging empties a logger's cache with
 * clear(), never gives it another. */
static int kpy_log_quiet(kpy_state *st) {
  PyObject *cache = st->ref.compile_log_cache;
  if (!cache) return 0;
  PyObject *debug = PyLong_FromLong(10); /* logging.DEBUG, a small int: no allocation */
  PyObject *enabled = debug ? PyDict_GetItemWithError(cache, debug) : NULL; /* borrowed */
  Py_XDECREF(debug);
  if (!enabled && PyErr_Occurred()) PyErr_Clear();
  return enabled == Py_False;
}

/* Tells kiln._log's hook what the last compile on this thread did: hook(origin, module), the
 * origin an int (kiln_compile_origin), module NULL when it failed. The hook asks for the whole
 * report (last_compile_report) only when its logger records it, so a table hit costs one call,
 * or none while the logger's level cache says it records no hit. The hook's own failure is
 * reported, never raised: logging must not break a compile. */
static void kpy_report_compile(kpy_state *st, PyObject *module, int recalled) {
  PyObject *hook = st->ref.compile_hook;
  if (!hook || (recalled && kpy_log_quiet(st))) return; /* a recall: a memory hit, no eviction */
  kiln_compile_report r;
  kiln_compile_last_report(&r);
  if (module && (r.origin == KILN_ORIGIN_MEMORY || r.origin == KILN_ORIGIN_DISK) && !r.evictions &&
      kpy_log_quiet(st))
    return;
  Py_INCREF(hook); /* the hook may replace itself */
  PyObject *origin = PyLong_FromLong((long)r.origin);
  PyObject *args[2] = {origin, module ? module : Py_None};
  PyObject *res = origin ? PyObject_Vectorcall(hook, args, 2, NULL) : NULL;
  if (!res) PyErr_WriteUnraisable(hook);
  Py_XDECREF(res);
  Py_XDECREF(origin);
  Py_DECREF(hook);
}

/* The report of this thread's last compile, as a dict (kiln._log reads it). */
static PyObject *kpy_last_compile_report(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  kiln_compile_report r;
  kiln_compile_last_report(&r);
  static const char *origins[] = {"none", "memory", "disk", "nvrtc"};
  static const char *pchs[] = {"none", "made", "used"};
  int origin = r.origin >= 0 && r.origin <= 3 ? (int)r.origin : 0;
  static const char *helpers[] = {"none", "own", "lasting"};
  int pch = r.pch >= 0 && r.pch <= 2 ? r.pch : 0;
  int helper = r.helper >= 0 && r.helper <= 2 ? r.helper : 0;
  return Py_BuildValue("{sssisssdsdsKssss}", "origin", origins[origin], "stale", r.stale, "pch",
                       pchs[pch], "seconds", r.seconds, "nvrtc_seconds", r.nvrtc_seconds,
                       "evictions", (unsigned long long)r.evictions, "key", r.key, "helper",
                       helpers[helper]);
}

/* ---- The memo: a repeated SourceModule(src) answered without hashing src ---------------- */

/* SourceModule's arguments, compared as Python objects, each with the engine's memo of the
 * compile they gave (kiln_module_recall): the same str again, by identity or equality, with
 * the same other arguments, finds the module in the engine's table without its source being
 * hashed or its options translated. Only exact str (and tuples of them, None and False) are
 * kept: a subclass's __hash__ and __eq__ could make different text look the same. A memo
 * holds no module, so the table's bound is the table's alone; what the engine refuses to
 * memo (a source reaching header files) is never kept. 64 sets of 4, least recently used
 * replaced, by the source's hash. */
#define KPY_MEMO_SETS 64
#define KPY_MEMO_WAYS 4

typedef struct kpy_memo_entry {
  PyObject *source;        /* an exact str; NULL when the slot is empty */
  PyObject *extras;        /* the other arguments as a tuple; NULL when all were defaults */
  Py_hash_t hash;          /* the source's */
  kiln_compile_memo *memo; /* owned */
  unsigned long long used;
} kpy_memo_entry;

struct kpy_memo {
  kpy_memo_entry sets[KPY_MEMO_SETS][KPY_MEMO_WAYS];
  unsigned long long tick;
};

static void kpy_memo_empty(kpy_memo_entry *e) {
  /* Strs and tuples of them: dropping them runs no Python code. */
  Py_CLEAR(e->source);
  Py_CLEAR(e->extras);
  kiln_compile_memo_free(e->memo);
  e->memo = NULL;
}

void kpy_sourcemodule_free(kpy_state *st) {
  if (!st->memo) return;
  for (int i = 0; i < KPY_MEMO_SETS; i++)
    for (int w = 0; w < KPY_MEMO_WAYS; w++) kpy_memo_empty(&st->memo->sets[i][w]);
  PyMem_Free(st->memo);
  st->memo = NULL;
}

/* A list or tuple of exact strs as a tuple (None for NULL or None); NULL, without an
 * exception, when it is anything else. */
static PyObject *kpy_memo_strs(PyObject *seq) {
  if (!seq || seq == Py_None) return Py_NewRef(Py_None);
  if (!PyList_CheckExact(seq) && !PyTuple_CheckExact(seq)) return NULL;
  PyObject *t = PySequence_Tuple(seq); /* a list or tuple: no Python code runs */
  if (!t) {
    PyErr_Clear();
    return NULL;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++)
    if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(t, i))) {
      Py_DECREF(t);
      return NULL;
    }
  return t;
}

/* headers= as a tuple of (name, text) pairs in the dict's order, for a dict of exact strs. */
static PyObject *kpy_memo_headers(PyObject *headers) {
  if (!headers || headers == Py_None) return Py_NewRef(Py_None);
  if (!PyDict_CheckExact(headers)) return NULL;
  PyObject *items = PyDict_Items(headers); /* a list of tuples, read without Python code */
  PyObject *t = items ? PyList_AsTuple(items) : NULL;
  Py_XDECREF(items);
  if (!t) {
    PyErr_Clear();
    return NULL;
  }
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t); i++) {
    PyObject *pair = PyTuple_GET_ITEM(t, i);
    if (!PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 0)) ||
        !PyUnicode_CheckExact(PyTuple_GET_ITEM(pair, 1))) {
      Py_DECREF(t);
      return NULL;
    }
  }
  return t;
}

/* The arguments besides the source, as the memo compares them: 1 with *out a tuple, or NULL
 * when every one is its default; 0 when one is of a kind the memo does not keep. */
static int kpy_memo_extras(PyObject *const args[7], PyObject **out) {
  *out = NULL;
  int plain = 1;
  for (int i = 0; i < 7; i++) plain &= !args[i] || args[i] == Py_None;
  if (plain) return 1;
  /* arch, code: None or a str; cache_dir: None, False or a str */
  for (int i = 0; i < 3; i++)
    if (args[i] && args[i] != Py_None && !PyUnicode_CheckExact(args[i]) &&
        !(i == 2 && args[i] == Py_False))
      return 0;
  PyObject *t = PyTuple_New(7);
  if (!t) {
    PyErr_Clear();
    return 0;
  }
  for (int i = 0; i < 7; i++) {
    PyObject *v = i < 3   ? Py_NewRef(args[i] ? args[i] : Py_None)
                  : i < 6 ? kpy_memo_strs(args[i])
                          : kpy_memo_headers(args[i]);
    if (!v) {
      Py_DECREF(t);
      return 0;
    }
    PyTuple_SET_ITEM(t, i, v);
  }
  *out = t;
  return 1;
}

/* Whether e holds these arguments. Strs, None, False and tuples of them compare without
 * Python code and without failing. */
static int kpy_memo_same(const kpy_memo_entry *e, PyObject *source, Py_hash_t hash,
                         PyObject *extras) {
  if (!e->source || e->hash != hash) return 0;
  if (e->source != source && PyObject_RichCompareBool(e->source, source, Py_EQ) != 1) return 0;
  if (!e->extras || !extras) return e->extras == extras;
  return e->extras == extras || PyObject_RichCompareBool(e->extras, extras, Py_EQ) == 1;
}

static kpy_memo_entry *kpy_memo_find(kpy_state *st, PyObject *source, Py_hash_t hash,
                                     PyObject *extras) {
  if (!st->memo) return NULL;
  kpy_memo_entry *set = st->memo->sets[(size_t)hash % KPY_MEMO_SETS];
  for (int w = 0; w < KPY_MEMO_WAYS; w++)
    if (kpy_memo_same(&set[w], source, hash, extras)) {
      set[w].used = ++st->memo->tick;
      return &set[w];
    }
  return NULL;
}

/* Keeps memo (taking it) for these arguments, in their slot or the set's least recently used;
 * a NULL memo forgets them. A memo that cannot be kept is freed: only speed is lost. */
static void kpy_memo_keep(kpy_state *st, PyObject *source, Py_hash_t hash, PyObject *extras,
                          kiln_compile_memo *memo) {
  kpy_memo_entry *e = kpy_memo_find(st, source, hash, extras);
  if (!memo) {
    if (e) kpy_memo_empty(e);
    return;
  }
  if (!e) {
    if (!st->memo && !(st->memo = PyMem_Calloc(1, sizeof *st->memo))) {
      kiln_compile_memo_free(memo);
      return;
    }
    kpy_memo_entry *set = st->memo->sets[(size_t)hash % KPY_MEMO_SETS];
    e = &set[0];
    for (int w = 1; w < KPY_MEMO_WAYS && e->source; w++)
      if (!set[w].source || set[w].used < e->used) e = &set[w];
    kpy_memo_empty(e);
    e->source = Py_NewRef(source);
    e->extras = Py_XNewRef(extras);
    e->hash = hash;
  }
  kiln_compile_memo_free(e->memo);
  e->memo = memo;
  e->used = ++st->memo->tick;
}

/* The Module object of type tp over m, which it takes; told to the compile hook. */
static PyObject *kpy_sourcemodule_wrap(kpy_state *st, PyTypeObject *tp, kiln_module *m,
                                       int recalled) {
  kpy_module *self = (kpy_module *)tp->tp_alloc(tp, 0);
  if (!self) {
    kiln_module_free(m);
    return NULL;
  }
  self->module = m;
  kpy_report_compile(st, (PyObject *)self, recalled);
  return (PyObject *)self;
}

static PyObject *kpy_sourcemodule_make(PyTypeObject *tp, PyObject *args, PyObject *kwargs);

/* kiln.compiler.DEFAULT_NVCC_FLAGS when it holds any (a borrowed reference), else NULL. */
static PyObject *kpy_default_options(kpy_state *st) {
  PyObject *list = st->ref.default_options;
  return list && PyList_GET_SIZE(list) > 0 ? list : NULL;
}

/* Calls of SourceModule itself (a subclass's calls take tp_new): SourceModule(src) with the
 * source alone, seen before, is answered from the memo without the argument tuple and the
 * keyword parsing, a third of such a call; everything else goes to tp_new as a call of the
 * type would. */
static PyObject *kpy_sourcemodule_call(PyObject *type, PyObject *const *args, size_t nargsf,
                                       PyObject *kwnames) {
  PyTypeObject *tp = (PyTypeObject *)type;
  Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
  if (nargs == 1 && !kwnames && PyUnicode_CheckExact(args[0])) {
    kpy_state *st = kpy_state_of_type(tp);
    if (!st) return NULL;
    /* With DEFAULT_NVCC_FLAGS set, the call has options: tp_new's way below. */
    kpy_memo_entry *e = NULL;
    if (!kpy_default_options(st)) {
      Py_hash_t hash = PyObject_Hash(args[0]); /* a str keeps its hash */
      if (hash == -1) return NULL;
      e = kpy_memo_find(st, args[0], hash, NULL);
    }
    kiln_module *found = NULL;
    if (e && kiln_module_recall(e->memo, &found)) return kpy_sourcemodule_wrap(st, tp, found, 1);
  }
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *tuple = PyTuple_New(nargs), *kwargs = nkw ? PyDict_New() : NULL, *obj = NULL;
  if (!tuple || (nkw && !kwargs)) goto done;
  for (Py_ssize_t i = 0; i < nargs; i++) PyTuple_SET_ITEM(tuple, i, Py_NewRef(args[i]));
  for (Py_ssize_t i = 0; i < nkw; i++)
    if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, i), args[nargs + i]) < 0) goto done;
  obj = kpy_sourcemodule_make(tp, tuple, kwargs); /* SourceModule's own __init__: nothing left */
done:
  Py_XDECREF(tuple);
  Py_XDECREF(kwargs);
  return obj;
}

static PyObject *kpy_sourcemodule_make_text(PyTypeObject *tp, PyObject *args, PyObject *kwargs);

/* A source that is not a str is its str(), as PyCUDA writes it into the file nvcc compiles,
 * when its type defines __str__ (codepy's cgen Module renders its C so); bytes, numbers, None
 * and the like are refused, whose str() is only their repr. */
static PyObject *kpy_sourcemodule_make(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  Py_ssize_t nargs = PyTuple_GET_SIZE(args);
  PyObject *source = nargs ? PyTuple_GET_ITEM(args, 0) : NULL;
  if (!source && kwargs && !(source = PyDict_GetItemWithError(kwargs, st->str.source)) &&
      PyErr_Occurred())
    return NULL;
  if (!source || PyUnicode_Check(source)) return kpy_sourcemodule_make_text(tp, args, kwargs);
  if (PyBytes_Check(source) || PyByteArray_Check(source)) {
    PyErr_Format(PyExc_TypeError,
                 "SourceModule() takes the source as a str, not %.100s; "
                 "decode it first",
                 Py_TYPE(source)->tp_name);
    return NULL;
  }
  if (Py_TYPE(source)->tp_str == PyBaseObject_Type.tp_str) {
    PyErr_Format(PyExc_TypeError,
                 "SourceModule() takes the source as a str (or an object whose __str__ renders "
                 "it, as codepy's Module), not %.100s",
                 Py_TYPE(source)->tp_name);
    return NULL;
  }
  PyObject *text = PyObject_Str(source), *made = NULL, *args2 = NULL, *kwargs2 = NULL;
  if (!text) return NULL;
  if (nargs) {
    if ((args2 = PyTuple_New(nargs))) {
      PyTuple_SET_ITEM(args2, 0, Py_NewRef(text));
      for (Py_ssize_t i = 1; i < nargs; i++)
        PyTuple_SET_ITEM(args2, i, Py_NewRef(PyTuple_GET_ITEM(args, i)));
    }
  } else if ((kwargs2 = PyDict_Copy(kwargs)) && PyDict_SetItem(kwargs2, st->str.source, text) < 0)
    Py_CLEAR(kwargs2);
  if (nargs ? args2 != NULL : kwargs2 != NULL)
    made = kpy_sourcemodule_make_text(tp, nargs ? args2 : args, nargs ? kwargs : kwargs2);
  Py_XDECREF(args2);
  Py_XDECREF(kwargs2);
  Py_DECREF(text);
  return made;
}

/* A failed compile's command_line, PyCUDA's nvcc argument list: ["nvrtc", "-arch=sm_90", the
 * options given...] (kiln's own defaults aside); NULL, with no error left, when it cannot be
 * made (the error's command_line is then ["nvrtc"]). */
static PyObject *kpy_command_line(const char *arch, const char **options, int n) {
  PyObject *list = Py_BuildValue("[s]", "nvrtc");
  for (int i = arch ? -1 : 0; list && i < n; i++) {
    PyObject *item =
        i < 0 ? PyUnicode_FromFormat("-arch=%s", arch)
              : PyUnicode_DecodeUTF8(options[i], (Py_ssize_t)strlen(options[i]), "replace");
    if (!item || PyList_Append(list, item) < 0) Py_CLEAR(list);
    Py_XDECREF(item);
  }
  if (!list) PyErr_Clear();
  return list;
}

/* Whether the ' at s[i] separates digits (C++14's 1'000, 0xFF'FF) rather than opening a
 * character literal: the token before it began with a digit, as a number does. */
static int kpy_digit_separator(const char *s, Py_ssize_t i) {
  Py_ssize_t j = i;
  while (j > 0 && (isalnum((unsigned char)s[j - 1]) || s[j - 1] == '_' || s[j - 1] == '.' ||
                   s[j - 1] == '\''))
    j--;
  return j < i && (isdigit((unsigned char)s[j]) ||
                   (s[j] == '.' && j + 1 < i && isdigit((unsigned char)s[j + 1])));
}

/* The length of a raw string's delimiter when s[i] is the " of R"delim( (R not the end of a
 * longer name, but for an encoding prefix: u8R, uR, UR, LR), else -1. */
static Py_ssize_t kpy_raw_delimiter(const char *s, Py_ssize_t n, Py_ssize_t i) {
  if (i < 1 || s[i - 1] != 'R') return -1;
  Py_ssize_t p = i - 1; /* the prefix's first character */
  if (p >= 2 && s[p - 2] == 'u' && s[p - 1] == '8') p -= 2;
  else if (p >= 1 && (s[p - 1] == 'u' || s[p - 1] == 'U' || s[p - 1] == 'L')) p -= 1;
  if (p > 0 && (isalnum((unsigned char)s[p - 1]) || s[p - 1] == '_')) return -1;
  for (Py_ssize_t d = 0; d <= 16 && i + 1 + d < n; d++) {
    char c = s[i + 1 + d];
    if (c == '(') return d;
    if (c == ')' || c == '\\' || c == '"' || c == '\0' || isspace((unsigned char)c)) return -1;
  }
  return -1;
}

/* The source text as nvcc reads it where it holds NUL characters, which would end NVRTC's C
 * string: nvcc's preprocessor takes a NUL in the code or a comment as white space and keeps
 * one in a string or character literal (a program's `// if (c == '\0')` written in a Python
 * string that is not raw holds one). A new str with each NUL written as a space, as the
 * escape \000 in a literal (three digits, so that a digit after it stays a character of its
 * own), or in a raw string R"d(...)d", which has no escapes, as the string closed, "\000",
 * and the string opened again (adjacent literals are one). A NUL after a backslash is dropped,
 * so that the backslash continues the line as in nvcc, or, in a literal, refused (nvcc
 * refuses it too). A backslash at the end of a line is not followed as the line's
 * continuation. */
static PyObject *kpy_source_nul_as_nvcc(const char *s, Py_ssize_t n) {
  enum { CODE, LINE_COMMENT, BLOCK_COMMENT, STRING, CHAR, RAW } in = CODE;
  enum { WORST = 2 * 16 + 16 }; /* the most one NUL becomes: )d" "\000" R"d( */
  Py_ssize_t nuls = 0, delim = 0, delim_at = 0;
  for (Py_ssize_t i = 0; i < n; i++) nuls += s[i] == '\0';
  char *out = PyMem_Malloc((size_t)(n + nuls * WORST + 1));
  if (!out) return PyErr_NoMemory();
  Py_ssize_t k = 0;
  int lone_backslash = 0; /* the last character written a backslash that escapes nothing yet */
  for (Py_ssize_t i = 0; i < n; i++) {
    char c = s[i], next = i + 1 < n ? s[i + 1] : 0;
    if (c == '\0') {
      if (lone_backslash && (in == STRING || in == CHAR)) {
        PyMem_Free(out);
        PyErr_SetString(PyExc_ValueError,
                        "the source holds a backslash before a NUL character ('\\0') in a "
                        "string or character literal, which nvcc refuses too (missing closing "
                        "quote): write '\\\\0' in Python for C's '\\0'");
        return NULL;
      } else if (lone_backslash) {
        /* dropped: a backslash before a NUL and a line's end continues the line, as nvcc's
         * preprocessor reads it */
      } else if (in == STRING || in == CHAR) {
        memcpy(out + k, "\\000", 4);
        k += 4;
      } else if (in == RAW) {
        k += snprintf(out + k, WORST + 1, ")%.*s\" \"\\000\" R\"%.*s(", (int)delim, s + delim_at,
                      (int)delim, s + delim_at);
      } else {
        out[k++] = ' ';
      }
      continue;
    }
    out[k++] = c;
    lone_backslash = c == '\\' && !((in == STRING || in == CHAR) && next && next != '\0');
    switch (in) {
    case CODE:
      if (c == '/' && next == '/') {
        in = LINE_COMMENT;
      } else if (c == '/' && next == '*') {
        in = BLOCK_COMMENT;
        out[k++] = s[++i];
      } else if (c == '"') {
        delim = kpy_raw_delimiter(s, n, i);
        in = delim < 0 ? STRING : RAW;
        delim_at = i + 1;
      } else if (c == '\'' && !kpy_digit_separator(s, i)) {
        in = CHAR;
      }
      break;
    case LINE_COMMENT:
      if (c == '\n') in = CODE;
      break;
    case BLOCK_COMMENT:
      if (c == '*' && next == '/') {
        in = CODE;
        out[k++] = s[++i];
      }
      break;
    case STRING:
    case CHAR:
      if (c == '\\' && next && next != '\0') out[k++] = s[++i]; /* an escape: \" or \\ */
      else if (c == (in == STRING ? '"' : '\'') || c == '\n') in = CODE;
      break;
    case RAW: /* ends at )delim" */
      if (c == ')' && i + delim + 1 < n && memcmp(s + i + 1, s + delim_at, (size_t)delim) == 0 &&
          s[i + 1 + delim] == '"') {
        memcpy(out + k, s + i + 1, (size_t)delim + 1);
        k += delim + 1;
        i += delim + 1;
        in = CODE;
      }
      break;
    }
  }
  PyObject *text = PyUnicode_DecodeUTF8(out, k, "strict");
  PyMem_Free(out);
  return text;
}

/* SourceModule(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None,
 * code=None, cache_dir=None, include_dirs=None, *, name_expressions=None, headers=None): PyCUDA's
 * arguments in PyCUDA's order, and kiln's own after them. */
static PyObject *kpy_sourcemodule_make_text(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp); /* kiln.compiler.DynamicSourceModule subclasses it */
  if (!st) return NULL;
  static char *kwlist[] = {(char *)"source",       (char *)"nvcc",
                           (char *)"options",      (char *)"keep",
                           (char *)"no_extern_c",  (char *)"arch",
                           (char *)"code",         (char *)"cache_dir",
                           (char *)"include_dirs", (char *)"name_expressions",
                           (char *)"headers",      NULL}; /* char * before Python 3.13 */
  PyObject *source, *nvcc = NULL, *options = NULL, *include_dirs = NULL, *arch = Py_None;
  PyObject *code = Py_None, *cache_dir = Py_None, *names = NULL, *headers = NULL;
  int keep = 0, no_extern_c = 0; /* kiln finds kernels with or without extern "C" */
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "U|OOppOOOO$OO:SourceModule", kwlist, &source,
                                   &nvcc, &options, &keep, &no_extern_c, &arch, &code, &cache_dir,
                                   &include_dirs, &names, &headers))
    return NULL;
  (void)no_extern_c;
  if (arch != Py_None && !PyUnicode_Check(arch)) {
    PyErr_Format(PyExc_TypeError, "arch must be a str such as 'sm_90', not %.100s",
                 Py_TYPE(arch)->tp_name);
    return NULL;
  }
  if (code != Py_None && !PyUnicode_Check(code)) {
    PyErr_Format(PyExc_TypeError, "code must be a str such as 'sm_90', not %.100s",
                 Py_TYPE(code)->tp_name);
    return NULL;
  }
  if (kpy_nvcc(nvcc) < 0) return NULL;
  /* PyCUDA's rule: no options, DEFAULT_NVCC_FLAGS's. Held for the call, which may run code
   * (an __fspath__) that replaces the list. */
  PyObject *defaults = !options || options == Py_None ? kpy_default_options(st) : NULL;
  if (defaults) options = defaults;
  Py_XINCREF(defaults);
  /* The memo first: the same arguments as an earlier call give its module while the engine
   * finds it unchanged. keep=True writes files, so it takes the whole path. Taken before any
   * of the arguments' own code (an __fspath__) could run, and never across a release of the
   * GIL. */
  PyObject *extras = NULL;
  Py_hash_t hash = -1;
  int memoizable = 0;
  if (!keep && PyUnicode_CheckExact(source)) {
    PyObject *rest[7] = {arch, code, cache_dir, options, include_dirs, names, headers};
    memoizable = kpy_memo_extras(rest, &extras);
    if (memoizable && (hash = PyObject_Hash(source)) == -1) return NULL;
  }
  if (memoizable) {
    kpy_memo_entry *e = kpy_memo_find(st, source, hash, extras);
    kiln_module *found = NULL;
    if (e && kiln_module_recall(e->memo, &found)) {
      Py_XDECREF(extras);
      Py_XDECREF(defaults);
      return kpy_sourcemodule_wrap(st, tp, found, 1);
    }
  }
  /* Everything the compile reads is held here: the arguments themselves too, since a keyword
   * argument is borrowed from a dict that an __fspath__ below may change. */
  PyObject *keep_alive = Py_BuildValue("[OOOO]", source, arch, code, cache_dir);
  if (!keep_alive) {
    Py_XDECREF(extras);
    Py_XDECREF(defaults);
    return NULL;
  }
  kiln_compile_opts opts = {0};
  const char **o = NULL, **inc = NULL, **nm = NULL, **hn = NULL, **hs = NULL;
  kiln_module *m = NULL;
  kiln_compile_memo *memo = NULL;
  PyObject *self = NULL;
  Py_ssize_t src_size;
  const char *src = PyUnicode_AsUTF8AndSize(source, &src_size);
  if (src && strlen(src) != (size_t)src_size) { /* (a NUL in it) */
    PyObject *clean = kpy_source_nul_as_nvcc(src, src_size);
    src = clean && PyList_Append(keep_alive, clean) == 0 ? PyUnicode_AsUTF8(clean) : NULL;
    Py_XDECREF(clean);
  }
  if (!src) goto done;
  if (kpy_strings(options, "options", 0, keep_alive, &o, &opts.n_options) < 0 ||
      kpy_strings(include_dirs, "include_dirs", 1, keep_alive, &inc, &opts.n_include_dirs) < 0 ||
      kpy_strings(names, "name_expressions", 0, keep_alive, &nm, &opts.n_name_expressions) < 0)
    goto done;
  opts.options = o;
  opts.include_dirs = inc;
  opts.name_expressions = nm;
  PyObject *all_headers = kpy_with_pycuda_headers(src, headers, &opts);
  int given = all_headers ? kpy_headers(all_headers, keep_alive, &hn, &hs, &opts.n_headers) : -1;
  Py_XDECREF(all_headers); /* keep_alive holds its entries */
  if (given < 0) goto done;
  opts.header_names = hn;
  opts.header_sources = hs;
  if (arch != Py_None && !(opts.arch = kpy_cstring(arch, "arch"))) goto done;
  if (code != Py_None && !(opts.code = kpy_cstring(code, "code"))) goto done;
  if (cache_dir == Py_False) {
    opts.flags |= KILN_COMPILE_NO_CACHE;
  } else if (cache_dir != Py_None) {
    if (PyBool_Check(cache_dir)) {
      PyErr_SetString(PyExc_TypeError, "cache_dir is a folder, None (the usual cache) or False "
                                       "(no cache), not True");
      goto done;
    }
    PyObject *dir = kpy_path(cache_dir, "cache_dir");
    if (!dir || PyList_Append(keep_alive, dir) < 0) {
      Py_XDECREF(dir);
      goto done;
    }
    Py_DECREF(dir);
    if (!(opts.cache_dir = kpy_cstring(dir, "cache_dir"))) goto done;
  }
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_module_from_source_memo(src, &opts, &m, memoizable ? &memo : NULL);
  Py_END_ALLOW_THREADS
  if (kpy_flush_warnings(st) < 0) goto done;
  if (keep && m && kpy_keep(m, src) < 0) goto done;
  if (s) {
    if (s == KILN_ERROR_COMPILE) kpy_report_compile(st, NULL, 0);
    PyObject *command = kpy_command_line(m ? kiln_module_arch(m) : opts.arch, o, opts.n_options);
    kpy_raise_compile(st, s, src, m ? kiln_module_log(m) : NULL, command);
    Py_XDECREF(command);
    goto done;
  }
  if (memoizable) {
    kpy_memo_keep(st, source, hash, extras, memo);
    memo = NULL;
  }
  self = kpy_sourcemodule_wrap(st, tp, m, 0);
  m = NULL;
done:
  kiln_module_free(m);
  kiln_compile_memo_free(memo);
  PyMem_Free(o);
  PyMem_Free(inc);
  PyMem_Free(nm);
  PyMem_Free(hn);
  PyMem_Free(hs);
  Py_DECREF(keep_alive);
  Py_XDECREF(extras);
  Py_XDECREF(defaults);
  return self;
}

/* A subclass with an __init__ of its own (neon's, which picks a cache folder and passes it on
 * to SourceModule.__init__) is compiled by that call, as PyCUDA's SourceModule is made in its
 * __init__: until then it holds no code, and its calls say so. Every other call compiles
 * here, and __init__ then has nothing left to do. */
static int kpy_sourcemodule_tp_init(PyObject *op, PyObject *args, PyObject *kwargs);

static PyObject *kpy_sourcemodule_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  if (tp->tp_init != kpy_sourcemodule_tp_init) return tp->tp_alloc(tp, 0);
  return kpy_sourcemodule_make(tp, args, kwargs);
}

static int kpy_sourcemodule_tp_init(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_module *self = (kpy_module *)op;
  if (self->module) return 0; /* compiled by tp_new, from these arguments */
  kpy_module *made = (kpy_module *)kpy_sourcemodule_make(Py_TYPE(op), args, kwargs);
  if (!made) return -1;
  self->module = made->module; /* taken over: the module holds one reference */
  made->module = NULL;
  Py_DECREF(made);
  return 0;
}

/* The code of a Module, or NULL with an error: a SourceModule subclass whose __init__ has not
 * called SourceModule.__init__ has none. */
static kiln_module *kpy_module_code(PyObject *op) {
  kiln_module *m = ((kpy_module *)op)->module;
  if (!m)
    PyErr_Format(PyExc_RuntimeError,
                 "this %.100s holds no code: its __init__ must call SourceModule.__init__(self, "
                 "source, ...), which compiles it",
                 Py_TYPE(op)->tp_name);
  return m;
}

static int kpy_module_traverse(PyObject *op, visitproc visit, void *arg) {
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(((kpy_module *)op)->functions);
  Py_VISIT(((kpy_module *)op)->dict);
  return 0;
}

static int kpy_module_clear(PyObject *op) {
  Py_CLEAR(((kpy_module *)op)->functions);
  Py_CLEAR(((kpy_module *)op)->dict);
  return 0;
}

static void kpy_module_dealloc(PyObject *op) {
  kpy_module *self = (kpy_module *)op;
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  kpy_module_clear(op);
  kiln_module_free(self->module);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_module_function_named(PyObject *op, PyObject *name) {
  kpy_module *self = (kpy_module *)op;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return NULL;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "get_function() takes a str, not %.100s", Py_TYPE(name)->tp_name);
    return NULL;
  }
  if (!self->functions && !(self->functions = PyDict_New())) return NULL;
  PyObject *cached = PyDict_GetItemWithError(self->functions, name);
  if (cached) return Py_NewRef(cached);
  if (PyErr_Occurred()) return NULL;
  const char *cname = kpy_cstring(name, "the kernel's name"); /* never in the table: it had none */
  if (!cname) return NULL;
  kiln_function *f = NULL;
  if (!kpy_module_code(op)) return NULL;
  kiln_status s = kiln_module_get_function(self->module, cname, &f);
  if (s) return kpy_raise(st, s);
  /* One Function per kernel, whichever of its names found it. */
  PyObject *entry = PyUnicode_FromString(kiln_function_name(f));
  if (!entry) return NULL;
  PyObject *fn = PyDict_GetItemWithError(self->functions, entry);
  if (fn) Py_INCREF(fn);
  else if (!PyErr_Occurred()) fn = kpy_function_new(st, op, f);
  if (fn && (PyDict_SetItem(self->functions, entry, fn) < 0 ||
             PyDict_SetItem(self->functions, name, fn) < 0))
    Py_CLEAR(fn);
  Py_DECREF(entry);
  return fn;
}

/* get_global(name) -> (address, bytes) of a __constant__ or __device__ variable on the current
 * device, for memcpy_htod and the like. */
static PyObject *kpy_module_global_named(PyObject *op, PyObject *name) {
  kpy_module *self = (kpy_module *)op;
  if (!PyUnicode_Check(name)) {
    PyErr_Format(PyExc_TypeError, "get_global() takes a str, not %.100s", Py_TYPE(name)->tp_name);
    return NULL;
  }
  const char *cname = kpy_cstring(name, "the variable's name");
  if (!cname) return NULL;
  kiln_deviceptr ptr = 0;
  size_t size = 0;
  if (!kpy_module_code(op)) return NULL;
  kiln_status s = kiln_module_get_global(self->module, cname, &ptr, &size);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return Py_BuildValue("(Kn)", (unsigned long long)ptr, (Py_ssize_t)size);
}

/* get_texref and get_surfref: what PyCUDA bound with them is gone from CUDA. */
static PyObject *kpy_module_references_removed(const char *call, PyObject *name) {
  PyErr_Format(PyExc_NotImplementedError,
               "%s(%R): texture and surface references were removed in CUDA 12, which kiln "
               "needs; create a texture or surface object (cuTexObjectCreate, "
               "cuSurfObjectCreate) and pass it to the kernel as a cudaTextureObject_t or "
               "cudaSurfaceObject_t argument",
               call, name);
  return NULL;
}

static PyObject *kpy_module_get_texref(PyObject *op, PyObject *name) {
  (void)op;
  return kpy_module_references_removed("get_texref", name);
}

static PyObject *kpy_module_get_surfref(PyObject *op, PyObject *name) {
  (void)op;
  return kpy_module_references_removed("get_surfref", name);
}

/* The names of the module's __constant__ and __device__ variables (from its PTX). */
static PyObject *kpy_module_get_globals(PyObject *op, void *closure) {
  (void)closure;
  kiln_module *m = kpy_module_code(op);
  if (!m) return NULL;
  int n = kiln_module_global_count(m);
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *name = PyUnicode_FromString(kiln_module_global_name(m, i));
    if (!name) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, name);
  }
  return t;
}

static PyObject *kpy_module_get_ptx(PyObject *op, void *closure) {
  (void)closure;
  size_t n = 0;
  kiln_module *m = kpy_module_code(op);
  if (!m) return NULL;
  const char *ptx = kiln_module_ptx(m, &n);
  return PyUnicode_DecodeUTF8(ptx, (Py_ssize_t)n, "replace");
}

static PyObject *kpy_module_get_cubin(PyObject *op, void *closure) {
  (void)closure;
  size_t n = 0;
  kiln_module *m = kpy_module_code(op);
  if (!m) return NULL;
  const void *cubin = kiln_module_cubin(m, &n);
  if (!cubin) Py_RETURN_NONE;
  return PyBytes_FromStringAndSize(cubin, (Py_ssize_t)n);
}

static PyObject *kpy_module_get_log(PyObject *op, void *closure) {
  (void)closure;
  kiln_module *m = kpy_module_code(op);
  if (!m) return NULL;
  const char *log = kiln_module_log(m);
  return PyUnicode_DecodeUTF8(log, (Py_ssize_t)strlen(log), "replace");
}

static PyObject *kpy_module_get_arch(PyObject *op, void *closure) {
  (void)closure;
  kiln_module *m = kpy_module_code(op);
  return m ? PyUnicode_FromString(kiln_module_arch(m)) : NULL;
}

static PyObject *kpy_module_get_kernels(PyObject *op, void *closure) {
  (void)closure;
  kiln_module *m = kpy_module_code(op);
  if (!m) return NULL;
  int n = kiln_module_function_count(m);
  PyObject *t = PyTuple_New(n);
  for (int i = 0; t && i < n; i++) {
    PyObject *name = PyUnicode_FromString(kiln_module_function_name(m, i));
    if (!name) {
      Py_CLEAR(t);
      break;
    }
    PyTuple_SET_ITEM(t, i, name);
  }
  return t;
}

static PyObject *kpy_module_repr(PyObject *op) {
  kiln_module *m = ((kpy_module *)op)->module;
  if (!m) return PyUnicode_FromFormat("<%s holding no code yet>", Py_TYPE(op)->tp_name);
  const char *arch = kiln_module_arch(m);
  return PyUnicode_FromFormat("<%s for %s with %d kernel%s>", Py_TYPE(op)->tp_name,
                              arch[0] ? arch : "any arch", kiln_module_function_count(m),
                              kiln_module_function_count(m) == 1 ? "" : "s");
}

/* The one argument, name, of get_function and get_global: by position or by keyword, as
 * PyCUDA's take it. Borrowed from the call's arguments. */
static PyObject *kpy_name_argument(PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames,
                                   const char *what) {
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  if (nargs + nkw == 1 &&
      (nargs == 1 || PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "name") == 0))
    return args[0];
  PyErr_Format(PyExc_TypeError, "%s() takes one argument, name", what);
  return NULL;
}

static PyObject *kpy_module_get_function(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                         PyObject *kwnames) {
  PyObject *name = kpy_name_argument(args, nargs, kwnames, "get_function");
  return name ? kpy_module_function_named(op, name) : NULL;
}

static PyObject *kpy_module_get_global(PyObject *op, PyObject *const *args, Py_ssize_t nargs,
                                       PyObject *kwnames) {
  PyObject *name = kpy_name_argument(args, nargs, kwnames, "get_global");
  return name ? kpy_module_global_named(op, name) : NULL;
}

static PyMethodDef kpy_module_methods[] = {
    {"get_function", (PyCFunction)(void (*)(void))kpy_module_get_function,
     METH_FASTCALL | METH_KEYWORDS,
     "get_function($self, name)\n--\n\nThe kernel called name, declared extern \"C\" or not."},
    {"get_global", (PyCFunction)(void (*)(void))kpy_module_get_global,
     METH_FASTCALL | METH_KEYWORDS,
     "get_global($self, name)\n--\n\n(address, bytes) of the __constant__ or __device__ "
     "variable name on the current device, for memcpy_htod and memcpy_dtoh."},
    {"get_texref", kpy_module_get_texref, METH_O,
     "get_texref($self, name, /)\n--\n\nRaises NotImplementedError: CUDA 12 removed texture "
     "references."},
    {"get_surfref", kpy_module_get_surfref, METH_O,
     "get_surfref($self, name, /)\n--\n\nRaises NotImplementedError: CUDA 12 removed surface "
     "references."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_module_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict, NULL, NULL},
    {"ptx", kpy_module_get_ptx, NULL, "The PTX NVRTC produced.", NULL},
    {"cubin", kpy_module_get_cubin, NULL, "The CUBIN NVRTC produced, or None.", NULL},
    {"log", kpy_module_get_log, NULL, "NVRTC's log (warnings); '' when empty.", NULL},
    {"arch", kpy_module_get_arch, NULL, "The arch compiled for, e.g. 'sm_90'.", NULL},
    {"kernels", kpy_module_get_kernels, NULL, "The PTX entry names of the kernels.", NULL},
    {"globals", kpy_module_get_globals, NULL,
     "The PTX names of the module's __constant__ and __device__ variables.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyMemberDef kpy_module_members[] = {
    {"__dictoffset__", KPY_T_PYSSIZET, offsetof(kpy_module, dict), KPY_READONLY, NULL},
    {NULL, 0, 0, 0, NULL},
};

static PyType_Slot kpy_module_slots[] = {
    {Py_tp_members, kpy_module_members},
    {Py_tp_dealloc, kpy_module_dealloc},
    {Py_tp_traverse, kpy_module_traverse},
    {Py_tp_clear, kpy_module_clear},
    {Py_tp_repr, kpy_module_repr},
    {Py_tp_methods, kpy_module_methods},
    {Py_tp_getset, kpy_module_getset},
    {Py_tp_doc, (void *)"Compiled code and its kernels: a SourceModule, or prebuilt code from "
                        "kiln.module_from_file / kiln.module_from_buffer."},
    {0, NULL},
};

static PyType_Spec kpy_module_spec = {"kiln.Module", sizeof(kpy_module), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                          Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE |
                                          Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                      kpy_module_slots};

/* PyCUDA's SourceModule keeps the driver's module it loaded as .module, and programs reach
 * get_global and get_function through it (mod.module.get_global(...)): kiln's is the module
 * itself. */
static PyObject *kpy_sourcemodule_get_module(PyObject *op, void *closure) {
  (void)closure;
  return Py_NewRef(op);
}

static PyGetSetDef kpy_sourcemodule_getset[] = {
    {"module", kpy_sourcemodule_get_module, NULL,
     "The module itself, where PyCUDA keeps the driver's module it loaded.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_sourcemodule_slots[] = {
    {Py_tp_new, kpy_sourcemodule_new},
    {Py_tp_getset, kpy_sourcemodule_getset},
    {Py_tp_init, kpy_sourcemodule_tp_init},
    {Py_tp_doc,
     (void *)"SourceModule(source, nvcc='nvcc', options=None, keep=False, "
             "no_extern_c=False, arch=None, code=None, cache_dir=None, "
             "include_dirs=None, *, name_expressions=None, headers=None)\n--\n\nCUDA C++ "
             "compiled with NVRTC, or found in the kernel cache."},
    {0, NULL},
};

/* A base type: kiln.compiler.DynamicSourceModule is one. */
static PyType_Spec kpy_sourcemodule_spec = {
    "kiln.SourceModule", 0, 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE |
        Py_TPFLAGS_BASETYPE, /* GC and the rest come from Module */
    kpy_sourcemodule_slots};

/* One (jit_option, value) pair, a 2-tuple, as options[i]: -1 with TypeError otherwise. */
static int kpy_jit_option_pair(PyObject *pair, Py_ssize_t i, const char *what,
                               kiln_jit_option *out) {
  PyObject *key = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
  int overflow = 0;
  long option = PyLong_Check(key) ? PyLong_AsLongAndOverflow(key, &overflow) : -1;
  if (option == -1 && PyErr_Occurred()) return -1;
  if (!PyLong_Check(key) || overflow || option < INT_MIN || option > INT_MAX) {
    PyErr_Format(PyExc_TypeError, "%s option %zd names %R; a kiln.driver.jit_option is expected",
                 what, i, key);
    return -1;
  }
  long long v = PyLong_Check(value) ? PyLong_AsLongLongAndOverflow(value, &overflow) : -1;
  if (v == -1 && PyErr_Occurred()) return -1;
  if (!PyLong_Check(value) || overflow) {
    PyErr_Format(PyExc_TypeError, "%s option %zd (%R) has the value %R; an int is expected", what,
                 i, key, value);
    return -1;
  }
  out->option = (int)option;
  out->value = v;
  return 0;
}

int kpy_jit_options(PyObject *seq, const char *what, kiln_jit_option **out, int *n_out) {
  *out = NULL;
  *n_out = 0;
  if (!seq || seq == Py_None) return 0;
  /* A tuple of its own: a pair of the program's own type runs its code as it is read, which
   * may change a list given. */
  PyObject *items = PySequence_Tuple(seq);
  if (!items) {
    if (PyErr_ExceptionMatches(PyExc_TypeError)) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "%s options must be a list of (jit_option, value) pairs, "
                   "not %.100s",
                   what, Py_TYPE(seq)->tp_name);
    }
    return -1;
  }
  Py_ssize_t n = PyTuple_GET_SIZE(items);
  if (n > 64) {
    PyErr_Format(PyExc_ValueError, "%s options are at most 64, not %zd", what, n);
    Py_DECREF(items);
    return -1;
  }
  kiln_jit_option *options = PyMem_Calloc(n ? (size_t)n : 1, sizeof *options);
  if (!options) {
    Py_DECREF(items);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *item = Py_NewRef(PyTuple_GET_ITEM(items, i));
    PyObject *pair = PyUnicode_Check(item) || PyBytes_Check(item) ? NULL : PySequence_Tuple(item);
    if (!pair || PyTuple_GET_SIZE(pair) != 2) {
      Py_XDECREF(pair);
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError, "%s option %zd must be a (jit_option, value) pair, not %.100s",
                   what, i, Py_TYPE(item)->tp_name);
      Py_DECREF(item);
      goto fail;
    }
    Py_DECREF(item);
    int read = kpy_jit_option_pair(pair, i, what, &options[i]);
    Py_DECREF(pair);
    if (read < 0) goto fail;
  }
  Py_DECREF(items);
  *out = options;
  *n_out = (int)n;
  return 0;
fail:
  Py_DECREF(items);
  PyMem_Free(options);
  return -1;
}

/* The loader's logs for message_handler, as PyCUDA sizes them. */
#define KPY_JIT_LOG_BYTES 32768

static PyObject *kpy_module_from_buffer(PyObject *module, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_module(module);
  static char *kwlist[] = {(char *)"buffer", (char *)"options", (char *)"message_handler", NULL};
  PyObject *data, *py_options = NULL, *handler = Py_None;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O|OO:module_from_buffer", kwlist, &data,
                                   &py_options, &handler))
    return NULL;
  if (handler != Py_None && !PyCallable_Check(handler)) {
    PyErr_Format(PyExc_TypeError,
                 "module_from_buffer()'s message_handler must be callable or None, not %.100s",
                 Py_TYPE(handler)->tp_name);
    return NULL;
  }
  kiln_jit_option *options = NULL;
  int n_options = 0;
  if (kpy_jit_options(py_options, "module_from_buffer()'s", &options, &n_options) < 0) return NULL;
  /* Options or a handler load now with the loader's logs, as PyCUDA does; else the code loads
   * at its first launch, and PTX needs no device until then. */
  int now = n_options || handler != Py_None;
  char *logs = now ? PyMem_Calloc(2, KPY_JIT_LOG_BYTES) : NULL;
  if (now && !logs) {
    PyMem_Free(options);
    return PyErr_NoMemory();
  }
  Py_buffer view;
  if (PyUnicode_Check(data)) { /* PTX as text */
    const char *text = kpy_cstring(data, "the PTX");
    if (!text ||
        PyBuffer_FillInfo(&view, data, (void *)text, (Py_ssize_t)strlen(text), 1, PyBUF_SIMPLE) < 0)
      goto fail;
  } else if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0) {
    PyErr_Format(PyExc_TypeError,
                 "module_from_buffer() takes bytes (a CUBIN, a fatbin or "
                 "PTX) or str (PTX), not %.100s",
                 Py_TYPE(data)->tp_name);
    goto fail;
  }
  kiln_module *m = NULL;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    if (now)
      s = kiln_module_from_image_jit(view.buf, (size_t)view.len, options, n_options, logs,
                                     KPY_JIT_LOG_BYTES, logs + KPY_JIT_LOG_BYTES, KPY_JIT_LOG_BYTES,
                                     &m);
    else s = kiln_module_from_image(view.buf, (size_t)view.len, &m);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&view);
  PyMem_Free(options);
  options = NULL;
  if (handler != Py_None) {
    /* The failure is made an exception before the handler runs: kiln calls it makes would
     * replace kiln's last error. A handler that raises is the exception instead. */
    kpy_raised failure;
    if (s) {
      kpy_raise(st, s);
      kpy_raised_set_aside(&failure);
    }
    PyObject *r = PyObject_CallFunction(handler, "Oss", s ? Py_False : Py_True, logs,
                                        logs + KPY_JIT_LOG_BYTES);
    PyMem_Free(logs);
    if (!r) {
      kiln_module_free(m);
      if (s) {
        kpy_raised raised;
        kpy_raised_set_aside(&raised);
        kpy_raised_put_back(&failure);
        PyErr_Clear();
        kpy_raised_put_back(&raised);
      }
      return NULL;
    }
    Py_DECREF(r);
    if (s) {
      kpy_raised_put_back(&failure);
      return NULL;
    }
    return kpy_module_adopt(st, m);
  }
  PyMem_Free(logs);
  if (s) return kpy_raise(st, s);
  return kpy_module_adopt(st, m);
fail:
  PyMem_Free(options);
  PyMem_Free(logs);
  return NULL;
}

PyObject *kpy_module_adopt(kpy_state *st, kiln_module *m) {
  kpy_module *self = (kpy_module *)st->ref.Module_type->tp_alloc(st->ref.Module_type, 0);
  if (!self) {
    kiln_module_free(m);
    return NULL;
  }
  self->module = m;
  return (PyObject *)self;
}

static PyObject *kpy_set_device_debug(PyObject *module, PyObject *flag) {
  (void)module;
  int on = PyObject_IsTrue(flag);
  if (on < 0) return NULL;
  kiln_compile_set_device_debug(on);
  Py_RETURN_NONE;
}

static PyObject *kpy_set_compile_hook(PyObject *module, PyObject *args) {
  kpy_state *st = kpy_state_of_module(module);
  PyObject *hook, *logger = Py_None;
  if (!PyArg_ParseTuple(args, "O|O:_set_compile_hook", &hook, &logger)) return NULL;
  if (hook != Py_None && !PyCallable_Check(hook)) {
    PyErr_Format(PyExc_TypeError, "the compile hook must be callable or None, not %.100s",
                 Py_TYPE(hook)->tp_name);
    return NULL;
  }
  PyObject *cache = NULL;
  if (logger != Py_None && hook != Py_None) {
    if (kpy_get_optional_attr(logger, st->str.log_cache, &cache) < 0) return NULL;
    if (cache && !PyDict_CheckExact(cache)) Py_CLEAR(cache); /* none to read: the hook asks */
  }
  Py_XSETREF(st->ref.compile_hook, hook == Py_None ? NULL : Py_NewRef(hook));
  Py_XSETREF(st->ref.compile_log_cache, cache);
  Py_RETURN_NONE;
}

static PyObject *kpy_set_default_options(PyObject *module, PyObject *list) {
  kpy_state *st = kpy_state_of_module(module);
  if (list != Py_None && !PyList_Check(list)) {
    PyErr_Format(PyExc_TypeError, "DEFAULT_NVCC_FLAGS must be a list of option strings, not %.100s",
                 Py_TYPE(list)->tp_name);
    return NULL;
  }
  Py_XSETREF(st->ref.default_options, list == Py_None ? NULL : Py_NewRef(list));
  Py_RETURN_NONE;
}

static PyObject *kpy_nvrtc_info(PyObject *module, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_module(module);
  kiln_nvrtc_info info;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_nvrtc_get_info(&info);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  PyObject *archs = PyList_New(info.n_archs);
  for (int i = 0; archs && i < info.n_archs; i++) {
    PyObject *a = PyUnicode_FromFormat("sm_%d", info.archs[i]);
    if (!a) {
      Py_CLEAR(archs);
      break;
    }
    PyList_SET_ITEM(archs, i, a);
  }
  if (!archs) return NULL;
  return Py_BuildValue("{s(ii)sO&sO&sO&sN}", "version", info.major, info.minor, "path",
                       PyUnicode_DecodeFSDefault, info.path, "include_dir",
                       PyUnicode_DecodeFSDefault, info.include_dir, "cccl_dir",
                       PyUnicode_DecodeFSDefault, info.cccl_dir, "archs", archs);
}

static PyObject *kpy_default_arch(PyObject *module, PyObject *unused) {
  (void)unused;
  kpy_state *st = kpy_state_of_module(module);
  char arch[32];
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_compile_default_arch(arch, sizeof arch);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  return PyUnicode_FromString(arch);
}

static PyMethodDef kpy_sourcemodule_functions[] = {
    {"nvrtc_info", kpy_nvrtc_info, METH_NOARGS,
     "nvrtc_info()\n--\n\n"
     "The NVRTC kiln compiles with: version (major, minor), path, include_dir (the toolkit's "
     "headers), cccl_dir, archs (['sm_75', ...]). Raises kiln.Error when NVRTC cannot be "
     "loaded, saying where kiln looked."},
    {"default_arch", kpy_default_arch, METH_NOARGS,
     "default_arch()\n--\n\n"
     "The arch a SourceModule that names none compiles for: $KILN_ARCH, else the current "
     "device's (clamped to what NVRTC supports), else with no GPU the oldest NVRTC supports."},
    {"module_from_buffer", (PyCFunction)(void (*)(void))kpy_module_from_buffer,
     METH_VARARGS | METH_KEYWORDS,
     "module_from_buffer(buffer, options=None, message_handler=None)\n--\n\n"
     "A Module from a CUBIN, a fatbin or PTX (bytes or any buffer, or str PTX). options, a "
     "list of (kiln.driver.jit_option, int) pairs, go to the driver's loader; with options or "
     "a message_handler the code loads now, on the current device, and "
     "message_handler(success, info_log, error_log) is called with the loader's logs before "
     "a failed load raises. Without either it loads at its first launch."},
    {"_set_default_options", kpy_set_default_options, METH_O,
     "_set_default_options(list, /)\n--\n\n"
     "The list a SourceModule given no options compiles with (None: none); "
     "kiln.compiler.DEFAULT_NVCC_FLAGS sets it."},
    {"_set_device_debug", kpy_set_device_debug, METH_O,
     "_set_device_debug(on, /)\n--\n\nEvery compile from now on with -G (device debugging) "
     "where its options do not give it; kiln.driver.set_debugging sets it."},
    {"_set_compile_hook", kpy_set_compile_hook, METH_VARARGS,
     "_set_compile_hook(hook, logger=None, /)\n--\n\n"
     "hook(origin, module) is called after every SourceModule (origin 1: the process's table, "
     "2: the disk cache, 3: NVRTC; module None when it failed to compile); None removes it. "
     "With logger (a logging.Logger), a hit skips the hook while the logger's level cache "
     "says it does not record DEBUG. kiln's logging sets it."},
    {"last_compile_report", kpy_last_compile_report, METH_NOARGS,
     "last_compile_report($module, /)\n--\n\n"
     "What this thread's last SourceModule did: origin ('memory', 'disk', 'nvrtc'), stale (a "
     "header had changed), pch ('none', 'made', 'used'), seconds, nvrtc_seconds, evictions, "
     "key, helper (where NVRTC ran: 'none' in this process, 'own' in a compile helper of its "
     "own, 'lasting' in the cache folder's lasting compile helper)."},
    {NULL, NULL, 0, NULL},
};

int kpy_sourcemodule_init(PyObject *module, kpy_state *st) {
  st->ref.Module_type = kpy_add_type(module, &kpy_module_spec, NULL);
  if (!st->ref.Module_type) return -1;
  st->ref.SourceModule_type = kpy_add_type(module, &kpy_sourcemodule_spec, st->ref.Module_type);
  if (!st->ref.SourceModule_type) return -1;
  st->ref.SourceModule_type->tp_vectorcall = kpy_sourcemodule_call; /* not inherited */
  return PyModule_AddFunctions(module, kpy_sourcemodule_functions);
}
