/* In, Out and InOut: a numpy array and which way its data goes around a launch. The array
 * is checked at the call, where the message can name the parameter. */
#include "transfer.h"

static PyObject *kpy_transfer_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  PyObject *array;
  if (!st) return NULL;
  if (kwargs && PyDict_GET_SIZE(kwargs)) {
    PyErr_Format(PyExc_TypeError, "%s() takes no keyword arguments", tp->tp_name);
    return NULL;
  }
  if (!PyArg_UnpackTuple(args, tp->tp_name, 1, 1, &array)) return NULL;
  /* InOut first: it is an In and an Out too, as PyCUDA's; a program's subclass goes its
   * base's way. */
  kiln_transfer_dir dir = PyType_IsSubtype(tp, st->ref.InOut_type) ? KILN_INOUT
                          : PyType_IsSubtype(tp, st->ref.In_type)  ? KILN_IN
                                                                   : KILN_OUT;
  int in = dir == KILN_IN;
  if (in && PyArray_IsScalar(array, Generic)) {
    /* In(np.int32(n)), as PyCUDA takes it (it copies any buffer with nbytes): its value, in a
     * 0-d array of its own. Out and InOut cannot write a NumPy scalar back. */
    array = PyArray_FromScalar(array, NULL);
    if (!array) return NULL;
  } else if (!PyArray_Check(array)) {
    PyErr_Format(PyExc_TypeError, "%s() takes a numpy array, not %.100s%s", tp->tp_name,
                 Py_TYPE(array)->tp_name,
                 PyArray_IsScalar(array, Generic)
                     ? " (a NumPy scalar cannot be written back: pass a one-element array)"
                     : "");
    return NULL;
  } else {
    Py_INCREF(array);
  }
  kpy_transfer *self = (kpy_transfer *)tp->tp_alloc(tp, 0);
  if (!self) {
    Py_DECREF(array);
    return NULL;
  }
  self->array = array;
  self->dir = dir;
  return (PyObject *)self;
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
  PyArrayObject *a = (PyArrayObject *)self->array;
  return PyUnicode_FromFormat("<%s of %zd bytes>", Py_TYPE(op)->tp_name,
                              (Py_ssize_t)PyArray_NBYTES(a));
}

static PyObject *kpy_transfer_get_array(PyObject *op, void *closure) {
  (void)closure;
  return Py_NewRef(((kpy_transfer *)op)->array);
}

static PyGetSetDef kpy_transfer_getset[] = {
    {"array", kpy_transfer_get_array, NULL, "The wrapped numpy array.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

/* The base of In and Out, which holds the layout: they add no fields of their own, so that
 * InOut can have both as bases, as PyCUDA documents it (a program's isinstance(arg, In) holds
 * for an InOut). It makes no objects itself. */
static PyType_Slot kpy_transfer_slots[] = {
    {Py_tp_dealloc, kpy_transfer_dealloc}, {Py_tp_traverse, kpy_transfer_traverse},
    {Py_tp_clear, kpy_transfer_clear},     {Py_tp_repr, kpy_transfer_repr},
    {Py_tp_getset, kpy_transfer_getset},   {0, NULL},
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
