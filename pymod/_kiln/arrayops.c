/* Arithmetic and comparisons of DeviceArray. `x * y` finds the kernel for (operation, kind of
 * x, kind of y) in a table of the module state; the first time, kiln._ops makes the plan (a
 * generated kernel with NumPy's promotion, the result's dtype) and the table keeps it. The
 * common case (arrays of one shape laid out in C order, or an array and a scalar) is then
 * launched from here through the kernel's own launcher, with the result allocated from the
 * pool; broadcasting, strided views, overlapping operands and the rest go to kiln._ops.binary
 * and kiln._ops.unary. */
#include "arrayops.h"

#include "arrayobj.h"
#include "errors.h"
#include "ewise.h"
#include "hooks.h"

#include <string.h>

/* The operations, by code; their names are kiln._ops's. */
enum {
  KPY_OP_ADD,
  KPY_OP_SUB,
  KPY_OP_MUL,
  KPY_OP_TRUEDIV,
  KPY_OP_FLOORDIV,
  KPY_OP_MOD,
  KPY_OP_POW,
  KPY_OP_AND,
  KPY_OP_OR,
  KPY_OP_XOR,
  KPY_OP_LSHIFT,
  KPY_OP_RSHIFT,
  KPY_OP_LT,
  KPY_OP_LE,
  KPY_OP_EQ,
  KPY_OP_NE,
  KPY_OP_GT,
  KPY_OP_GE,
  KPY_OP_NEG,
  KPY_OP_POS,
  KPY_OP_ABS,
  KPY_OP_INVERT,
  KPY_OP_COUNT
};

static const char *const kpy_op_names[KPY_OP_COUNT] = {
    "add",      "subtract",    "multiply",   "true_divide", "floor_divide", "remainder",
    "power",    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift",   "right_shift",
    "less",     "less_equal",  "equal",      "not_equal",   "greater",      "greater_equal",
    "negative", "positive",    "absolute",   "invert",
};

/* What promotion sees of an operand, as a number for the table's key: an array's dtype
 * (1 + its type number), a NumPy scalar's (0x400 + its type number), or a Python scalar's
 * type. 0: not an operand kiln computes with. */
enum { KPY_KIND_PYBOOL = 0x201, KPY_KIND_PYINT, KPY_KIND_PYFLOAT, KPY_KIND_PYCOMPLEX };

static int kpy_type_num(PyArray_Descr *d) {
  int t = d->type_num;
  /* The same types under two numbers on LP64: one plan for both. */
  if (t == NPY_LONGLONG && PyDataType_ELSIZE(d) == 8) return NPY_LONG;
  if (t == NPY_ULONGLONG && PyDataType_ELSIZE(d) == 8) return NPY_ULONG;
  return t;
}

static int kpy_kind(kpy_state *st, PyObject *v) {
  if (PyObject_TypeCheck(v, st->ref.DeviceArray_type))
    return 1 + kpy_type_num(((kpy_array *)v)->dtype);
  if (PyBool_Check(v)) return KPY_KIND_PYBOOL;
  if (PyLong_CheckExact(v)) return KPY_KIND_PYINT;
  if (PyFloat_CheckExact(v)) return KPY_KIND_PYFLOAT;
  if (PyComplex_CheckExact(v)) return KPY_KIND_PYCOMPLEX;
  if (PyArray_IsScalar(v, Generic)) {
    PyArray_Descr *d = PyArray_DescrFromScalar(v);
    int k = d ? 0x400 + kpy_type_num(d) : 0;
    Py_XDECREF(d);
    if (!d) PyErr_Clear();
    return k;
  }
  return 0;
}

static PyObject *kpy_richcompare(PyObject *x, PyObject *y, int cmp);

/* The state of whichever operand is a DeviceArray (or a subclass's instance): the one whose
 * type has these slots, which is how Python came to call them. */
static kpy_state *kpy_ops_state(PyObject *x, PyObject *y) {
  int x_is = PyType_GetSlot(Py_TYPE(x), Py_tp_richcompare) == (void *)kpy_richcompare;
  return kpy_state_of_type(Py_TYPE(x_is || !y ? x : y));
}

/* The plan for key, or NULL with no exception when there is none yet. Borrowed. */
static PyObject *kpy_plan_find(kpy_state *st, unsigned long long key) {
  if (!st->ref.op_plans) return NULL;
  PyObject *k = PyLong_FromUnsignedLongLong(key);
  if (!k) return NULL;
  PyObject *plan = PyDict_GetItemWithError(st->ref.op_plans, k);
  Py_DECREF(k);
  return plan;
}

/* Makes the plan for key with kiln._ops.<maker>(*args) and keeps it. Borrowed; NULL with an
 * exception set. */
static PyObject *kpy_plan_make(kpy_state *st, unsigned long long key, const char *maker,
                               PyObject *args) {
  if (!args) return NULL;
  if (!st->ref.op_plans && !(st->ref.op_plans = PyDict_New())) return NULL;
  PyObject *ops = kpy_ops_module(st), *fn = ops ? PyObject_GetAttrString(ops, maker) : NULL;
  PyObject *made = fn ? PyObject_Call(fn, args, NULL) : NULL;
  Py_XDECREF(fn);
  if (made && (!PyTuple_Check(made) || PyTuple_GET_SIZE(made) < 2 ||
               !PyObject_TypeCheck(PyTuple_GET_ITEM(made, 0), st->ref.ElementwiseBase_type) ||
               !PyArray_DescrCheck(PyTuple_GET_ITEM(made, 1)))) {
    PyErr_Format(PyExc_RuntimeError, "kiln._ops.%s gave %R, not (kernel, dtype, ...)", maker, made);
    Py_CLEAR(made);
  }
  PyObject *k = made ? PyLong_FromUnsignedLongLong(key) : NULL;
  int stored = k && PyDict_SetItem(st->ref.op_plans, k, made) == 0;
  Py_XDECREF(k);
  Py_XDECREF(made); /* the table holds it */
  return stored ? made : NULL;
}

/* Arrays the kernels' flat index walks in order: C-contiguous ones. */
static int kpy_plain(PyObject *v) { return kpy_array_is_c_contiguous(v); }

/* Whether a result like a is kiln's own pool array: not for a subclass's instance or an array
 * with an allocator, whose results PyCUDA makes with a._new_like_me (kiln._ops._result). */
static int kpy_makes_own_results(kpy_state *st, kpy_array *a) {
  return Py_IS_TYPE(a, st->ref.DeviceArray_type) && !a->allocator;
}

static int kpy_same_shape(kpy_array *a, kpy_array *b) {
  return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof a->shape[0] * a->ndim) == 0;
}

/* kiln._ops.binary(name, x, y, out=x when in place). */
static PyObject *kpy_binary_general(kpy_state *st, int op, PyObject *x, PyObject *y, int inplace) {
  PyObject *ops = kpy_ops_module(st);
  if (!ops) return NULL;
  return inplace ? PyObject_CallMethod(ops, "binary", "sOOO", kpy_op_names[op], x, y, x)
                 : PyObject_CallMethod(ops, "binary", "sOO", kpy_op_names[op], x, y);
}

/* 1 when the Python int v fits an integer dtype (kind 'i' or 'u', or bool as 0 and 1). */
static int kpy_int_fits(PyObject *v, PyArray_Descr *d) {
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  if (x == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return 0;
  }
  int bits = (int)PyDataType_ELSIZE(d) * 8;
  if (d->kind == 'u') {
    if (overflow < 0 || (!overflow && x < 0)) return 0;
    if (bits == 64) {
      unsigned long long u = PyLong_AsUnsignedLongLong(v);
      if (u == (unsigned long long)-1 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
      }
      return 1;
    }
    return !overflow && (unsigned long long)x <= (1ull << bits) - 1;
  }
  if (overflow) return 0;
  if (bits == 64) return 1;
  long long hi = (1ll << (bits - 1)) - 1;
  return x >= -hi - 1 && x <= hi;
}

/* 1 when v is a negative integer (a Python int or a NumPy signed integer). */
static int kpy_negative_int(PyObject *v) {
  if (!PyLong_Check(v) && !PyArray_IsScalar(v, SignedInteger)) return 0;
  PyObject *i = PyNumber_Index(v);
  if (!i) {
    PyErr_Clear();
    return 0;
  }
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(i, &overflow);
  Py_DECREF(i);
  if (x == -1 && PyErr_Occurred()) PyErr_Clear();
  return overflow < 0 || (!overflow && x < 0);
}

static PyObject *kpy_binary_planned(kpy_state *st, int op, PyObject *x, PyObject *y, int inplace,
                                    int kx, int ky, PyObject *plan);

static PyObject *kpy_binary(int op, PyObject *x, PyObject *y, int inplace) {
  kpy_state *st = kpy_ops_state(x, y);
  if (!st) return NULL;
  int kx = kpy_kind(st, x), ky = kpy_kind(st, y);
  if (!kx || !ky) {
    PyObject *other = kx ? y : x;
    /* A 0-d host array of numbers is its scalar, as NumPy, CuPy and PyCUDA take it: a
     * reduction's .get() subtracted from an array. (Its scalar is a NumPy scalar, so this
     * recurses once; an object array's item could be anything, and is not unwrapped.) */
    if (PyArray_Check(other) && PyArray_NDIM((PyArrayObject *)other) == 0 &&
        PyArray_ISNUMBER((PyArrayObject *)other)) {
      PyObject *scalar = PyArray_Return((PyArrayObject *)Py_NewRef(other));
      if (!scalar) return NULL;
      PyObject *r = kx ? kpy_binary(op, x, scalar, inplace) : kpy_binary(op, scalar, y, inplace);
      Py_DECREF(scalar);
      return r;
    }
    /* A host array refuses here, naming the fix; anything else is Python's to refuse. */
    if (PyArray_Check(other) && PyArray_NDIM((PyArrayObject *)other) > 0) {
      PyErr_SetString(PyExc_TypeError, "a numpy array lives in host memory; copy it to the "
                                       "device first (gpuarray.to_gpu) to combine it with a "
                                       "device array");
      return NULL;
    }
    Py_RETURN_NOTIMPLEMENTED;
  }
  unsigned long long key = (unsigned long long)op | (unsigned long long)kx << 8 |
                           (unsigned long long)ky << 20 | (unsigned long long)inplace << 40;
  PyObject *plan = kpy_plan_find(st, key);
  if (!plan) {
    if (PyErr_Occurred()) return NULL;
    PyObject *args = Py_BuildValue("(sOOO)", kpy_op_names[op], x, y, inplace ? Py_True : Py_False);
    plan = kpy_plan_make(st, key, "binary_plan", args);
    Py_XDECREF(args);
    if (!plan) return NULL;
  }
  Py_INCREF(plan); /* owned across the Python code below (a scalar's converter, __index__) */
  PyObject *r = kpy_binary_planned(st, op, x, y, inplace, kx, ky, plan);
  Py_DECREF(plan);
  return r;
}

/* The rest of kpy_binary, given the operation's plan (owned by the caller). */
static PyObject *kpy_binary_planned(kpy_state *st, int op, PyObject *x, PyObject *y, int inplace,
                                    int kx, int ky, PyObject *plan) {
  kpy_ewise *kernel = (kpy_ewise *)PyTuple_GET_ITEM(plan, 0);
  PyArray_Descr *out_dtype = (PyArray_Descr *)PyTuple_GET_ITEM(plan, 1);
  PyObject *converter = PyTuple_GET_SIZE(plan) > 2 ? PyTuple_GET_ITEM(plan, 2) : Py_None;
  PyObject *fits = PyTuple_GET_SIZE(plan) > 3 ? PyTuple_GET_ITEM(plan, 3) : Py_None;

  /* The fast path: one shape in C order, or an array and a scalar. In place into a
   * subclass's instance is kiln._ops's, which calls the subclass's own _axpbyz and kin as
   * PyCUDA's operators do; the plan, shared with kiln's own arrays, cannot tell. */
  int ax = kx < 0x200, ay = ky < 0x200;
  kpy_array *shape_of = (kpy_array *)(ax ? x : y);
  if ((ax && !kpy_plain(x)) || (ay && !kpy_plain(y)) ||
      (ax && ay && !kpy_same_shape((kpy_array *)x, (kpy_array *)y)) ||
      (inplace && (!ax || !Py_IS_TYPE(x, st->ref.DeviceArray_type))) ||
      (!inplace && !kpy_makes_own_results(st, shape_of)))
    return kpy_binary_general(st, op, x, y, inplace);
  /* A negative integer power, NumPy's error, is kiln._ops's to raise. */
  if (op == KPY_OP_POW && !ay && kpy_negative_int(y))
    return kpy_binary_general(st, op, x, y, inplace);
  /* A Python int the operation's integer dtype cannot hold: NumPy's answer is kiln._ops's. */
  if (fits != Py_None && PyArray_DescrCheck(fits) &&
      ((ky == KPY_KIND_PYINT && !kpy_int_fits(y, (PyArray_Descr *)fits)) ||
       (kx == KPY_KIND_PYINT && !kpy_int_fits(x, (PyArray_Descr *)fits))))
    return kpy_binary_general(st, op, x, y, inplace);
  PyObject *sx = Py_NewRef(x), *sy = Py_NewRef(y);
  if (converter != Py_None) {
    PyObject **scalar = ax ? &sy : &sx;
    Py_SETREF(*scalar, PyObject_CallOneArg(converter, *scalar));
    if (!*scalar) {
      Py_XDECREF(sx);
      Py_XDECREF(sy);
      return NULL;
    }
  }
  PyObject *out = inplace ? Py_NewRef(x)
                          : (PyObject *)kpy_array_new(st, out_dtype, shape_of->ndim,
                                                      shape_of->shape, NULL, NULL);
  int r = -1;
  if (out) {
    PyObject *objs[3] = {out, sx, sy};
    r = kpy_ewise_launch(kernel, objs, NULL);
  }
  Py_DECREF(sx);
  Py_DECREF(sy);
  if (r > 0) return out;
  Py_XDECREF(out);
  if (r < 0) return NULL;
  return kpy_binary_general(st, op, x, y, inplace);
}

static PyObject *kpy_unary(int op, PyObject *x) {
  kpy_state *st = kpy_ops_state(x, NULL);
  if (!st) return NULL;
  int kx = kpy_kind(st, x);
  unsigned long long key = (unsigned long long)op | (unsigned long long)kx << 8 | 1ull << 41;
  PyObject *plan = kpy_plan_find(st, key);
  if (!plan) {
    if (PyErr_Occurred()) return NULL;
    PyObject *args = Py_BuildValue("(sO)", kpy_op_names[op], x);
    plan = kpy_plan_make(st, key, "unary_plan", args);
    Py_XDECREF(args);
    if (!plan) return NULL;
  }
  if (kpy_plain(x) && kpy_makes_own_results(st, (kpy_array *)x)) {
    kpy_array *a = (kpy_array *)x;
    Py_INCREF(plan);
    PyObject *out = (PyObject *)kpy_array_new(st, (PyArray_Descr *)PyTuple_GET_ITEM(plan, 1),
                                              a->ndim, a->shape, NULL, NULL);
    int r = -1;
    if (out) {
      PyObject *objs[2] = {out, x};
      r = kpy_ewise_launch((kpy_ewise *)PyTuple_GET_ITEM(plan, 0), objs, NULL);
    }
    Py_DECREF(plan);
    if (r > 0) return out;
    Py_XDECREF(out);
    if (r < 0) return NULL;
  }
  PyObject *ops = kpy_ops_module(st);
  return ops ? PyObject_CallMethod(ops, "unary", "sO", kpy_op_names[op], x) : NULL;
}

#define KPY_BINARY_SLOTS(name, op)                                                             \
  static PyObject *kpy_nb_##name(PyObject *x, PyObject *y) { return kpy_binary(op, x, y, 0); } \
  static PyObject *kpy_nb_inplace_##name(PyObject *x, PyObject *y) {                           \
    return kpy_binary(op, x, y, 1);                                                            \
  }

KPY_BINARY_SLOTS(add, KPY_OP_ADD)
KPY_BINARY_SLOTS(subtract, KPY_OP_SUB)
KPY_BINARY_SLOTS(multiply, KPY_OP_MUL)
KPY_BINARY_SLOTS(true_divide, KPY_OP_TRUEDIV)
KPY_BINARY_SLOTS(floor_divide, KPY_OP_FLOORDIV)
KPY_BINARY_SLOTS(remainder, KPY_OP_MOD)
KPY_BINARY_SLOTS(and, KPY_OP_AND)
KPY_BINARY_SLOTS(or, KPY_OP_OR)
KPY_BINARY_SLOTS(xor, KPY_OP_XOR)
KPY_BINARY_SLOTS(lshift, KPY_OP_LSHIFT)
KPY_BINARY_SLOTS(rshift, KPY_OP_RSHIFT)

static PyObject *kpy_nb_power(PyObject *x, PyObject *y, PyObject *mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED; /* pow(x, y, m) has no array form */
  return kpy_binary(KPY_OP_POW, x, y, 0);
}

static PyObject *kpy_nb_inplace_power(PyObject *x, PyObject *y, PyObject *mod) {
  if (mod != Py_None) Py_RETURN_NOTIMPLEMENTED;
  return kpy_binary(KPY_OP_POW, x, y, 1);
}

static PyObject *kpy_nb_negative(PyObject *x) { return kpy_unary(KPY_OP_NEG, x); }
static PyObject *kpy_nb_positive(PyObject *x) { return kpy_unary(KPY_OP_POS, x); }
static PyObject *kpy_nb_absolute(PyObject *x) { return kpy_unary(KPY_OP_ABS, x); }
static PyObject *kpy_nb_invert(PyObject *x) { return kpy_unary(KPY_OP_INVERT, x); }

static PyObject *kpy_richcompare(PyObject *x, PyObject *y, int cmp) {
  static const int ops[] = {KPY_OP_LT, KPY_OP_LE, KPY_OP_EQ, KPY_OP_NE, KPY_OP_GT, KPY_OP_GE};
  return kpy_binary(ops[cmp], x, y, 0);
}

/* ---- Methods that run kernels: each is kiln._ops.method_<name>(self, ...) ------------------ */

static PyObject *kpy_forward(PyObject *self, const char *name, PyObject *const *args,
                             Py_ssize_t nargs, PyObject *kwnames) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(self));
  PyObject *ops = st ? kpy_ops_module(st) : NULL;
  PyObject *fn = ops ? PyObject_GetAttrString(ops, name) : NULL;
  if (!fn) return NULL;
  Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
  PyObject *small[12], **stack = small;
  if (1 + nargs + nkw > (Py_ssize_t)(sizeof small / sizeof small[0]) &&
      !(stack = PyMem_Malloc(sizeof *stack * (size_t)(1 + nargs + nkw)))) {
    Py_DECREF(fn);
    return PyErr_NoMemory();
  }
  stack[0] = self;
  memcpy(stack + 1, args, sizeof *stack * (size_t)(nargs + nkw));
  PyObject *r = PyObject_Vectorcall(fn, stack, (size_t)(1 + nargs), kwnames);
  if (stack != small) PyMem_Free(stack);
  Py_DECREF(fn);
  return r;
}

#define KPY_FORWARD(name)                                                                 \
  static PyObject *kpy_method_##name(PyObject *self, PyObject *const *args, Py_ssize_t n, \
                                     PyObject *kwnames) {                                 \
    return kpy_forward(self, "method_" #name, args, n, kwnames);                          \
  }

KPY_FORWARD(fill)
KPY_FORWARD(astype)
KPY_FORWARD(conj)
KPY_FORWARD(mul_add)
KPY_FORWARD(reverse)
KPY_FORWARD(sum)
KPY_FORWARD(max)
KPY_FORWARD(min)
KPY_FORWARD(any)
KPY_FORWARD(all)
KPY_FORWARD(_axpbyz)
KPY_FORWARD(_axpbz)
KPY_FORWARD(_elwise_multiply)
KPY_FORWARD(_div)
KPY_FORWARD(_rdiv_scalar)
KPY_FORWARD(_pow)

#define KPY_METHOD(name, doc) \
  {#name, (PyCFunction)(void (*)(void))kpy_method_##name, METH_FASTCALL | METH_KEYWORDS, doc}

PyMethodDef kpy_arrayops_methods[KPY_ARRAYOPS_METHODS] = {
    KPY_METHOD(
        fill,
        "fill($self, value, stream=None)\n--\n\nEvery element set to value; returns the array."),
    KPY_METHOD(astype,
               "astype($self, dtype, stream=None)\n--\n\nA new array of the values as dtype."),
    KPY_METHOD(
        conj,
        "conj($self, stream=None, out=None)\n--\n\nThe complex conjugate (the array itself when it "
        "is real and no out is given)."),
    {"conjugate", (PyCFunction)(void (*)(void))kpy_method_conj, METH_FASTCALL | METH_KEYWORDS,
     "conjugate($self, stream=None, out=None)\n--\n\nThe same as conj()."},
    KPY_METHOD(mul_add,
               "mul_add($self, selffac, other, otherfac, add_timer=None, stream=None, out=None)"
               "\n--\n\nselffac * self + otherfac * other in one kernel (into out when given)."),
    KPY_METHOD(
        reverse,
        "reverse($self, stream=None)\n--\n\nA new 1-d array of the elements in reverse order."),
    KPY_METHOD(sum, "sum($self, dtype=None, stream=None)\n--\n\nThe sum as a 0-d array."),
    KPY_METHOD(max, "max($self, stream=None)\n--\n\nThe largest element as a 0-d array."),
    KPY_METHOD(min, "min($self, stream=None)\n--\n\nThe smallest element as a 0-d array."),
    KPY_METHOD(any, "any($self, stream=None, allocator=None)\n--\n\nWhether any element is "
                    "nonzero, as a 0-d array."),
    KPY_METHOD(all, "all($self, stream=None, allocator=None)\n--\n\nWhether every element is "
                    "nonzero, as a 0-d array."),
    /* PyCUDA's GPUArray computes its operators through these, and programs extending it call
     * them: each writes into out, converting to its dtype, and returns it. */
    KPY_METHOD(_axpbyz, "_axpbyz($self, selffac, other, otherfac, out, add_timer=None, "
                        "stream=None)\n--\n\nout = selffac * self + otherfac * other."),
    KPY_METHOD(_axpbz, "_axpbz($self, selffac, other, out, stream=None)\n--\n\nout = selffac * "
                       "self + other, other a scalar."),
    KPY_METHOD(_elwise_multiply,
               "_elwise_multiply($self, other, out, stream=None)\n--\n\nout = self * other."),
    KPY_METHOD(_div, "_div($self, other, out, stream=None)\n--\n\nout = self / other."),
    KPY_METHOD(_rdiv_scalar, "_rdiv_scalar($self, other, out, stream=None)\n--\n\nout = other / "
                             "self, other a scalar."),
    KPY_METHOD(_pow, "_pow($self, other, new)\n--\n\nself ** other, into a new array when new "
                     "is true, else into self."),
    {NULL, NULL, 0, NULL},
};

PyType_Slot kpy_arrayops_slots[KPY_ARRAYOPS_SLOTS] = {
    {Py_nb_add, kpy_nb_add},
    {Py_nb_subtract, kpy_nb_subtract},
    {Py_nb_multiply, kpy_nb_multiply},
    {Py_nb_true_divide, kpy_nb_true_divide},
    {Py_nb_floor_divide, kpy_nb_floor_divide},
    {Py_nb_remainder, kpy_nb_remainder},
    {Py_nb_power, kpy_nb_power},
    {Py_nb_and, kpy_nb_and},
    {Py_nb_or, kpy_nb_or},
    {Py_nb_xor, kpy_nb_xor},
    {Py_nb_lshift, kpy_nb_lshift},
    {Py_nb_rshift, kpy_nb_rshift},
    {Py_nb_inplace_add, kpy_nb_inplace_add},
    {Py_nb_inplace_subtract, kpy_nb_inplace_subtract},
    {Py_nb_inplace_multiply, kpy_nb_inplace_multiply},
    {Py_nb_inplace_true_divide, kpy_nb_inplace_true_divide},
    {Py_nb_inplace_floor_divide, kpy_nb_inplace_floor_divide},
    {Py_nb_inplace_remainder, kpy_nb_inplace_remainder},
    {Py_nb_inplace_power, kpy_nb_inplace_power},
    {Py_nb_inplace_and, kpy_nb_inplace_and},
    {Py_nb_inplace_or, kpy_nb_inplace_or},
    {Py_nb_inplace_xor, kpy_nb_inplace_xor},
    {Py_nb_inplace_lshift, kpy_nb_inplace_lshift},
    {Py_nb_inplace_rshift, kpy_nb_inplace_rshift},
    {Py_nb_negative, kpy_nb_negative},
    {Py_nb_positive, kpy_nb_positive},
    {Py_nb_absolute, kpy_nb_absolute},
    {Py_nb_invert, kpy_nb_invert},
    {Py_tp_richcompare, kpy_richcompare},
    {0, NULL},
};
