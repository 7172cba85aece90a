/* kiln_floor: the cheapest Python call that launches a kernel, the floor kiln's own launch is
 * measured against (bench/launch.py).
 *
 *   load(cubin: bytes, name: str)   loads the module in device 0's primary context, picks the
 *                                   kernel name and returns it as an int for select()
 *   select(kernel)                  picks a kernel load() returned
 *   launch(c, a, b, n)              cuLaunchKernel(grid 1, block 256) of that kernel with
 *                                   three device pointers and an int, all Python ints
 *   launch_ints(p, i1, ..., ik)     cuLaunchKernel(grid 1, block 32) of that kernel with one
 *                                   device pointer and k ints (k < 64): bench/compare.py's
 *                                   argument-count kernels
 *   launch_ints_kw(p, i1, ..., ik, block=(x, y, z), grid=(x, y))
 *                                   launch_ints with the shape given as kiln's call takes it,
 *                                   keywords after the unpacked arguments: the floor of that
 *                                   form of call, whose keywords CPython passes through a dict
 *                                   (bench/cpu.py)
 *   synchronize()                   cuCtxSynchronize
 *   read_float(p)                   cuMemcpyDtoH of the float at device address p, returned:
 *                                   the cheapest way a result reaches Python (bench/arrays.py)
 *   copy(dst, src, nbytes)          cuMemcpyDtoDAsync on the legacy stream: the GPU's own copy,
 *                                   the rate an elementwise kernel is measured against
 *
 * launch does nothing a real binding could skip: it unpacks four ints and launches. No
 * argument types are inferred, no shapes checked, no objects made. bench/launch.py builds it:
 *
 *   cc -shared -fPIC -O2 -Wall -Wextra -I<Python include> -I/usr/local/cuda/include floor.c \
 *      -L/usr/local/cuda/lib64/stubs -lcuda -o kiln_floor<EXT_SUFFIX>
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <cuda.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

static CUfunction floor_function;

static PyObject *floor_cuda_error(const char *call, CUresult rc) {
  const char *name = NULL;
  if (cuGetErrorName(rc, &name) != CUDA_SUCCESS) name = "an unknown CUresult";
  PyErr_Format(PyExc_RuntimeError, "%s failed: %s (%d)", call, name, (int)rc);
  return NULL;
}

static PyObject *floor_load(PyObject *self, PyObject *args) {
  (void)self;
  const char *image, *name;
  Py_ssize_t size;
  if (!PyArg_ParseTuple(args, "y#s:load", &image, &size, &name)) return NULL;

  CUresult rc;
  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  CUfunction function;
  if ((rc = cuInit(0))) return floor_cuda_error("cuInit", rc);
  if ((rc = cuDeviceGet(&dev, 0))) return floor_cuda_error("cuDeviceGet", rc);
  /* Retained for the life of the process: the floor never lets go of the context. */
  if ((rc = cuDevicePrimaryCtxRetain(&ctx, dev)))
    return floor_cuda_error("cuDevicePrimaryCtxRetain", rc);
  if ((rc = cuCtxSetCurrent(ctx))) return floor_cuda_error("cuCtxSetCurrent", rc);
  if ((rc = cuModuleLoadData(&module, image))) return floor_cuda_error("cuModuleLoadData", rc);
  if ((rc = cuModuleGetFunction(&function, module, name))) {
    cuModuleUnload(module);
    return floor_cuda_error("cuModuleGetFunction", rc);
  }
  /* Earlier modules stay loaded: select() may go back to their kernels. */
  floor_function = function;
  return PyLong_FromVoidPtr(function);
}

static PyObject *floor_select(PyObject *self, PyObject *arg) {
  (void)self;
  void *function = PyLong_AsVoidPtr(arg);
  if (!function && PyErr_Occurred()) return NULL;
  floor_function = function;
  Py_RETURN_NONE;
}

static PyObject *floor_launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 4) {
    PyErr_Format(PyExc_TypeError, "launch(c, a, b, n) takes 4 ints, not %zd", nargs);
    return NULL;
  }
  if (!floor_function) {
    PyErr_SetString(PyExc_RuntimeError, "launch() before load()");
    return NULL;
  }
  CUdeviceptr dest = PyLong_AsUnsignedLongLong(args[0]);
  if (dest == (CUdeviceptr)-1 && PyErr_Occurred()) return NULL;
  CUdeviceptr a = PyLong_AsUnsignedLongLong(args[1]);
  if (a == (CUdeviceptr)-1 && PyErr_Occurred()) return NULL;
  CUdeviceptr b = PyLong_AsUnsignedLongLong(args[2]);
  if (b == (CUdeviceptr)-1 && PyErr_Occurred()) return NULL;
  long n_long = PyLong_AsLong(args[3]);
  if (n_long == -1 && PyErr_Occurred()) return NULL;
  if (n_long < INT_MIN || n_long > INT_MAX) {
    PyErr_SetString(PyExc_OverflowError, "n does not fit in an int");
    return NULL;
  }
  int n = (int)n_long;

  void *params[] = {&dest, &a, &b, &n};
  CUresult rc = cuLaunchKernel(floor_function, 1, 1, 1, 256, 1, 1, 0, NULL, params, NULL);
  if (rc != CUDA_SUCCESS) return floor_cuda_error("cuLaunchKernel", rc);
  Py_RETURN_NONE;
}

/* The launch both entry points make: args are a device pointer and up to 63 ints. */
static inline PyObject *floor_launch_dest_ints(PyObject *const *args, Py_ssize_t nargs,
                                               const unsigned grid[3], const unsigned block[3],
                                               const char *name) {
  if (nargs < 1 || nargs > 64) {
    PyErr_Format(PyExc_TypeError, "%s(p, *ints) takes 1 to 64 ints, not %zd", name, nargs);
    return NULL;
  }
  if (!floor_function) {
    PyErr_Format(PyExc_RuntimeError, "%s() before load()", name);
    return NULL;
  }
  CUdeviceptr dest = PyLong_AsUnsignedLongLong(args[0]);
  if (dest == (CUdeviceptr)-1 && PyErr_Occurred()) return NULL;
  int ints[64];
  void *params[64] = {&dest};
  for (Py_ssize_t i = 1; i < nargs; i++) {
    long v = PyLong_AsLong(args[i]);
    if (v == -1 && PyErr_Occurred()) return NULL;
    if (v < INT_MIN || v > INT_MAX) {
      PyErr_SetString(PyExc_OverflowError, "an argument does not fit in an int");
      return NULL;
    }
    ints[i] = (int)v;
    params[i] = &ints[i];
  }
  CUresult rc = cuLaunchKernel(floor_function, grid[0], grid[1], grid[2], block[0], block[1],
                               block[2], 0, NULL, params, NULL);
  if (rc != CUDA_SUCCESS) return floor_cuda_error("cuLaunchKernel", rc);
  Py_RETURN_NONE;
}

static PyObject *floor_launch_ints(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  static const unsigned grid[3] = {1, 1, 1}, block[3] = {32, 1, 1};
  return floor_launch_dest_ints(args, nargs, grid, block, "launch_ints");
}

static PyObject *floor_block_name, *floor_grid_name; /* interned */

/* A tuple of 1 to 3 ints into dims, missing ones 1. */
static int floor_dims(PyObject *obj, unsigned dims[3]) {
  dims[0] = dims[1] = dims[2] = 1;
  Py_ssize_t n = PyTuple_Check(obj) ? PyTuple_GET_SIZE(obj) : 0;
  if (n < 1 || n > 3) {
    PyErr_SetString(PyExc_TypeError, "block and grid are tuples of 1 to 3 ints");
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    long v = PyLong_AsLong(PyTuple_GET_ITEM(obj, i));
    if (v == -1 && PyErr_Occurred()) return -1;
    dims[i] = (unsigned)v;
  }
  return 0;
}

static PyObject *floor_launch_ints_kw(PyObject *self, PyObject *const *args, Py_ssize_t nargs,
                                      PyObject *kwnames) {
  unsigned block[3] = {1, 1, 1}, grid[3] = {1, 1, 1};
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  for (Py_ssize_t i = 0; i < nkw; i++) {
    PyObject *key = PyTuple_GET_ITEM(kwnames, i);
    unsigned *dims = key == floor_block_name ? block : key == floor_grid_name ? grid : NULL;
    if (!dims) {
      PyErr_Format(PyExc_TypeError, "launch_ints_kw takes block= and grid=, not %R", key);
      return NULL;
    }
    if (floor_dims(args[nargs + i], dims) < 0) return NULL;
  }
  (void)self;
  return floor_launch_dest_ints(args, nargs, grid, block, "launch_ints_kw");
}

static PyObject *floor_synchronize(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  CUresult rc = cuCtxSynchronize();
  if (rc != CUDA_SUCCESS) return floor_cuda_error("cuCtxSynchronize", rc);
  Py_RETURN_NONE;
}

static PyObject *floor_read_float(PyObject *self, PyObject *arg) {
  (void)self;
  CUdeviceptr p = PyLong_AsUnsignedLongLong(arg);
  if (p == (CUdeviceptr)-1 && PyErr_Occurred()) return NULL;
  float value;
  CUresult rc = cuMemcpyDtoH(&value, p, sizeof value);
  if (rc != CUDA_SUCCESS) return floor_cuda_error("cuMemcpyDtoH", rc);
  return PyFloat_FromDouble(value);
}

/* The value a kernel wrote into mapped host memory at p, waited for by spinning on the flag it
 * writes after it (at p + 16), which is then cleared for the next launch. */
static PyObject *floor_wait_float(PyObject *self, PyObject *arg) {
  (void)self;
  unsigned long long p = PyLong_AsUnsignedLongLong(arg);
  if (p == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  unsigned *flag = (unsigned *)(uintptr_t)(p + 16);
  while (!__atomic_load_n(flag, __ATOMIC_ACQUIRE)) {}
  float value;
  memcpy(&value, (const void *)(uintptr_t)p, sizeof value);
  __atomic_store_n(flag, 0u, __ATOMIC_RELEASE);
  return PyFloat_FromDouble(value);
}

static PyObject *floor_copy(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  (void)self;
  if (nargs != 3) {
    PyErr_Format(PyExc_TypeError, "copy(dst, src, nbytes) takes 3 ints, not %zd", nargs);
    return NULL;
  }
  unsigned long long v[3];
  for (int i = 0; i < 3; i++) {
    v[i] = PyLong_AsUnsignedLongLong(args[i]);
    if (v[i] == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  }
  CUresult rc = cuMemcpyDtoDAsync((CUdeviceptr)v[0], (CUdeviceptr)v[1], (size_t)v[2], NULL);
  if (rc != CUDA_SUCCESS) return floor_cuda_error("cuMemcpyDtoDAsync", rc);
  Py_RETURN_NONE;
}

static PyMethodDef floor_methods[] = {
    {"load", floor_load, METH_VARARGS,
     "load(cubin, name): load the CUBIN in device 0's primary context and pick the kernel."},
    {"launch", (PyCFunction)(void (*)(void))floor_launch, METH_FASTCALL,
     "launch(c, a, b, n): cuLaunchKernel of the loaded kernel, grid 1, block 256."},
    {"launch_ints", (PyCFunction)(void (*)(void))floor_launch_ints, METH_FASTCALL,
     "launch_ints(p, *ints): cuLaunchKernel of the loaded kernel, grid 1, block 32."},
    {"launch_ints_kw", (PyCFunction)(void (*)(void))floor_launch_ints_kw,
     METH_FASTCALL | METH_KEYWORDS,
     "launch_ints_kw(p, *ints, block=, grid=): launch_ints with the shape as keywords."},
    {"synchronize", floor_synchronize, METH_NOARGS, "cuCtxSynchronize()."},
    {"select", floor_select, METH_O, "select(kernel): launch the kernel load() returned."},
    {"read_float", floor_read_float, METH_O, "read_float(p): cuMemcpyDtoH of one float."},
    {"wait_float", floor_wait_float, METH_O,
     "wait_float(p): the float a kernel wrote at host address p, once its flag at p + 16 is "
     "set; clears the flag."},
    {"copy", (PyCFunction)(void (*)(void))floor_copy, METH_FASTCALL,
     "copy(dst, src, nbytes): cuMemcpyDtoDAsync on the legacy stream."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef floor_module_def = {
    PyModuleDef_HEAD_INIT,
    "kiln_floor",
    "The cheapest Python call that launches a kernel; the floor for kiln's launch.",
    -1,
    floor_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

PyMODINIT_FUNC PyInit_kiln_floor(void);

PyMODINIT_FUNC PyInit_kiln_floor(void) {
  floor_block_name = PyUnicode_InternFromString("block");
  floor_grid_name = PyUnicode_InternFromString("grid");
  if (!floor_block_name || !floor_grid_name) return NULL;
  return PyModule_Create(&floor_module_def);
}
