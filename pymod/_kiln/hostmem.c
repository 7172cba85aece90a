/* Host memory: page-locked numpy arrays, and the staging of pageable copies. */
#include "hostmem.h"

#include "errors.h"
#include "shape.h"

#include <string.h>

static void kpy_pagelocked_free(PyObject *capsule) {
  kiln_host_free(PyCapsule_GetPointer(capsule, "kiln.pagelocked"));
}

PyObject *kpy_pagelocked_array(kpy_state *st, PyArray_Descr *dtype, int ndim, const npy_intp *dims,
                               int fortran, int zero) {
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
    s = kiln_host_alloc((size_t)nbytes, &p);
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(st, s);
  if (zero) memset(p, 0, (size_t)nbytes);
  PyObject *owner = PyCapsule_New(p, "kiln.pagelocked", kpy_pagelocked_free);
  if (!owner) {
    kiln_host_free(p);
    return NULL;
  }
  Py_INCREF(dtype); /* NewFromDescr steals it */
  PyObject *arr = PyArray_NewFromDescr(&PyArray_Type, dtype, ndim, (npy_intp *)dims, NULL, p,
                                       (fortran ? NPY_ARRAY_FARRAY : NPY_ARRAY_CARRAY), NULL);
  if (!arr || PyArray_SetBaseObject((PyArrayObject *)arr, owner) < 0) { /* steals owner */
    Py_XDECREF(arr);
    if (!arr) Py_DECREF(owner);
    return NULL;
  }
  return arr;
}

static PyObject *kpy_pagelocked(PyObject *module, PyObject *args, PyObject *kwargs, int zero,
                                const char *fmt) {
  static char *kwlist[] = {(char *)"shape", (char *)"dtype", NULL};
  kpy_state *st = kpy_state_of_module(module);
  PyObject *shape_obj;
  PyArray_Descr *dtype = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, fmt, kwlist, &shape_obj, PyArray_DescrConverter,
                                   &dtype))
    return NULL;
  if (!dtype) dtype = PyArray_DescrFromType(NPY_DOUBLE);
  Py_ssize_t shape[KPY_MAX_DIMS];
  npy_intp dims[KPY_MAX_DIMS];
  int ndim = 0;
  PyObject *arr = NULL;
  if (kpy_shape_parse(shape_obj, &ndim, shape) == 0) {
    for (int i = 0; i < ndim; i++) dims[i] = shape[i];
    arr = kpy_pagelocked_array(st, dtype, ndim, dims, 0, zero);
  }
  Py_DECREF(dtype);
  return arr;
}

static PyObject *kpy_pagelocked_empty(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_pagelocked(module, args, kwargs, 0, "O|O&:pagelocked_empty");
}

static PyObject *kpy_pagelocked_zeros(PyObject *module, PyObject *args, PyObject *kwargs) {
  return kpy_pagelocked(module, args, kwargs, 1, "O|O&:pagelocked_zeros");
}

static PyObject *kpy_staging_info(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  kiln_staging_info i;
  kiln_staging_get_info(&i);
  return Py_BuildValue("{snsnsisKsK}", "min_bytes",
                       (Py_ssize_t)(i.min_bytes > PY_SSIZE_T_MAX ? PY_SSIZE_T_MAX : i.min_bytes),
                       "chunk_bytes", (Py_ssize_t)i.chunk_bytes, "threads", i.threads, "copies",
                       (unsigned long long)i.copies, "bytes", (unsigned long long)i.bytes);
}

static PyMethodDef kpy_hostmem_functions[] = {
    {"pagelocked_empty", (PyCFunction)(void (*)(void))kpy_pagelocked_empty,
     METH_VARARGS | METH_KEYWORDS,
     "pagelocked_empty(shape, dtype=float64): a numpy array in page-locked host memory."},
    {"pagelocked_zeros", (PyCFunction)(void (*)(void))kpy_pagelocked_zeros,
     METH_VARARGS | METH_KEYWORDS, "pagelocked_zeros(shape, dtype=float64): the same, zeroed."},
    {"staging_info", kpy_staging_info, METH_NOARGS,
     "How large pageable copies are staged: min_bytes, chunk_bytes, threads, and the copies "
     "and bytes staged so far."},
    {NULL, NULL, 0, NULL},
};

int kpy_hostmem_init(PyObject *module, kpy_state *st) {
  (void)st;
  return PyModule_AddFunctions(module, kpy_hostmem_functions);
}
