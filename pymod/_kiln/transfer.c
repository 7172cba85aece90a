/* In, Out and InOut: a numpy array and which way its data goes around a launch. The array
 * is checked at the call, where the message can name the parameter. */
#include "transfer.h"

/* Which way a transfer of type tp goes: in for an In, out for an Out, both for an InOut or a
 * program's class with both among its bases, as PyCUDA's In brings pre_call and Out
 * post_call. */
static kiln_transfer_dir kpy_transfer_dir(kpy_state *st, PyTypeObject *tp) {
  if (tp == st->ref.In_type) return KILN_IN;
  if (tp == st->ref.Out_type) return KILN_OUT;
  if (tp == st->ref.InOut_type) return KILN_INOUT;
  return (kiln_transfer_dir)((PyType_IsSubtype(tp, st->ref.In_type) ? KILN_IN : 0) |
                             (PyType_IsSubtype(tp, st->ref.Out_type) ? KILN_OUT : 0));
}

/* The array a transfer going dir holds for obj: obj itself, a numpy array, or for an In a
 * NumPy scalar's value in a 0-d array of its own (PyCUDA's In copies any buffer with nbytes:
 * programs pass In(np.int32(n)); what goes out cannot be written back into a scalar). A new
 * reference, or NULL with TypeError. */
static PyObject *kpy_transfer_array(PyTypeObject *tp, kiln_transfer_dir dir, PyObject *obj) {
  if (PyArray_Check(obj)) return Py_NewRef(obj);
  if (dir == KILN_IN && PyArray_IsScalar(obj, Generic)) return PyArray_FromScalar(obj, NULL);
  PyErr_Format(PyExc_TypeError, "%s() takes a numpy array, not %.100s%s", tp->tp_name,
               Py_TYPE(obj)->tp_name,
               PyArray_IsScalar(obj, Generic)
                   ? " (a NumPy scalar cannot be written back: pass a one-element array)"
                   : "");
  return NULL;
}

static int kpy_transfer_tp_init(PyObject *op, PyObject *args, PyObject *kwargs);

/* In(array), Out(array), InOut(array). A program's subclass with an __init__ of its own may
 * take other arguments: its __init__ gives the array, by In.__init__(self, array) (PyCUDA's
 * ArgumentHandler.__init__) or by setting self.array. Hooks of its own (pre_call, post_call)
 * would not be called: refused, as kiln.driver.ArgumentHandler refuses them. */
static PyObject *kpy_transfer_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  kiln_transfer_dir dir = kpy_transfer_dir(st, tp);
  PyObject *array = NULL;
  if (tp != st->ref.In_type && tp != st->ref.Out_type && tp != st->ref.InOut_type) {
    static const char *hooks[] = {"pre_call", "post_call"};
    for (int i = 0; i < 2; i++) {
      PyObject *hook = PyObject_GetAttrString((PyObject *)tp, hooks[i]);
      if (!hook) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return NULL;
        PyErr_Clear();
        continue;
      }
      Py_DECREF(hook);
      PyErr_Format(PyExc_TypeError,
                   "%s has a %s of its own, which kiln does not call: kiln copies In, Out and "
                   "InOut arrays itself; do the work before or after the launch",
                   tp->tp_name, hooks[i]);
      return NULL;
    }
  }
  if (tp->tp_init == kpy_transfer_tp_init) {
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
      PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", tp->tp_name);
      return NULL;
    }
    PyObject *given;
    if (!PyArg_UnpackTuple(args, tp->tp_name, 1, 1, &given) ||
        !(array = kpy_transfer_array(tp, dir, given)))
      return NULL;
  }
  kpy_transfer *self = (kpy_transfer *)tp->tp_alloc(tp, 0);
  if (!self) {
    Py_XDECREF(array);
    return NULL;
  }
  self->array = array; /* NULL until a subclass's __init__ gives it */
  self->dir = dir;
  return (PyObject *)self;
}

/* __init__(array): nothing left to do after In(array) itself; a subclass's __init__ calling
 * it gives its array. */
static int kpy_transfer_tp_init(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_transfer *self = (kpy_transfer *)op;
  PyObject *given;
  if (!kwargs && PyTuple_GET_SIZE(args) == 1 && PyTuple_GET_ITEM(args, 0) == self->array)
    return 0; /* In(array): made by tp_new */
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_Format(PyExc_TypeError, "%s.__init__() takes no keyword arguments", Py_TYPE(op)->tp_name);
    return -1;
  }
  if (!PyArg_UnpackTuple(args, "__init__", 1, 1, &given)) return -1;
  PyObject *array = kpy_transfer_array(Py_TYPE(op), self->dir, given);
  if (!array) return -1;
  Py_XSETREF(self->array, array);
  return 0;
}

static int kpy_transfer_traverse(PyObject *op, visitproc visit, void *arg) {
  kpy_transfer *self = (kpy_transfer *)op;
  Py_VISIT(Py_TYPE(op));
  Py_VISIT(self->array);
  return 0;
}

static int kpy_transfer_clear(PyObject *op) {
  Py_CLEAR(((kpy_transfer *)op)->array);
  return 0;
}

static void kpy_transfer_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  PyObject_GC_UnTrack(op);
  kpy_transfer_clear(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static PyObject *kpy_transfer_repr(PyObject *op) {
  kpy_transfer *self = (kpy_transfer *)op;
  if (!self->array) return PyUnicode_FromFormat("<%s, no array yet>", Py_TYPE(op)->tp_name);
  return PyUnicode_FromFormat("<%s of %zd bytes>", Py_TYPE(op)->tp_name,
                              (Py_ssize_t)PyArray_NBYTES((PyArrayObject *)self->array));
}

static PyObject *kpy_transfer_get_array(PyObject *op, void *closure) {
  (void)closure;
  PyObject *array = ((kpy_transfer *)op)->array;
  if (!array) {
    PyErr_Format(PyExc_AttributeError, "this %s has no array yet: its __init__ gives it",
                 Py_TYPE(op)->tp_name);
    return NULL;
  }
  return Py_NewRef(array);
}

/* self.array = a, as a PyCUDA subclass's __init__ may set it. */
static int kpy_transfer_set_array(PyObject *op, PyObject *value, void *closure) {
  (void)closure;
  if (!value) {
    PyErr_SetString(PyExc_AttributeError, "cannot delete the array");
    return -1;
  }
  kpy_transfer *self = (kpy_transfer *)op;
  PyObject *array = kpy_transfer_array(Py_TYPE(op), self->dir, value);
  if (!array) return -1;
  Py_XSETREF(self->array, array);
  return 0;
}

static PyGetSetDef kpy_transfer_getset[] = {
    {"array", kpy_transfer_get_array, kpy_transfer_set_array, "The wrapped numpy array.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* The base of In and Out, which holds the layout: they add no fields of their own, so that
 * InOut can have both as bases, as PyCUDA documents it (a program's isinstance(arg, In) holds
 * for an InOut). It makes no objects itself. */
static PyType_Slot kpy_transfer_slots[] = {
    {Py_tp_init, kpy_transfer_tp_init},
    {Py_tp_dealloc, kpy_transfer_dealloc},
    {Py_tp_traverse, kpy_transfer_traverse},
    {Py_tp_clear, kpy_transfer_clear},
    {Py_tp_repr, kpy_transfer_repr},
    {Py_tp_getset, kpy_transfer_getset},
    {0, NULL},
};
static PyType_Spec kpy_transfer_spec = {"kiln._kiln._Transfer", sizeof(kpy_transfer), 0,
                                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC |
                                            Py_TPFLAGS_BASETYPE | Py_TPFLAGS_IMMUTABLETYPE |
                                            Py_TPFLAGS_DISALLOW_INSTANTIATION,
                                        kpy_transfer_slots};

#define KPY_TRANSFER_TYPE(var, name, doc)                                                          \
  static PyType_Slot var##_slots[] = {                                                             \
      {Py_tp_new, kpy_transfer_new},                                                               \
      {Py_tp_traverse, kpy_transfer_traverse},                                                     \
      {Py_tp_clear, kpy_transfer_clear},                                                           \
      {Py_tp_doc, (void *)doc},                                                                    \
      {0, NULL},                                                                                   \
  };                                                                                               \
  static PyType_Spec var##_spec = {"kiln." name, sizeof(kpy_transfer), 0,                          \
                                   Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_BASETYPE | \
                                       Py_TPFLAGS_IMMUTABLETYPE,                                   \
                                   var##_slots};

KPY_TRANSFER_TYPE(kpy_in, "In",
                  "In(array)\n--\n\nThe array's data is copied to the device before the launch.")
KPY_TRANSFER_TYPE(kpy_out, "Out",
                  "Out(array)\n--\n\nThe device's data is copied into the array after the launch.")
KPY_TRANSFER_TYPE(kpy_inout, "InOut",
                  "InOut(array)\n--\n\nCopied to the device before the launch and back after it "
                  "(an In and an Out).")

int kpy_transfer_init(PyObject *module, kpy_state *st) {
  PyTypeObject *base = kpy_add_type(module, &kpy_transfer_spec, NULL);
  if (!base) return -1;
  st->ref.In_type = kpy_add_type(module, &kpy_in_spec, base);
  st->ref.Out_type = kpy_add_type(module, &kpy_out_spec, base);
  Py_DECREF(base); /* the module and In and Out hold it */
  if (!st->ref.In_type || !st->ref.Out_type) return -1;
  PyObject *bases = PyTuple_Pack(2, st->ref.In_type, st->ref.Out_type);
  if (!bases) return -1;
  st->ref.InOut_type = kpy_add_type_bases(module, &kpy_inout_spec, bases);
  Py_DECREF(bases);
  return st->ref.InOut_type ? 0 : -1;
}
