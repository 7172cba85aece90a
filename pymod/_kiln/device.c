/* kiln.Device: PyCUDA's spelling (methods, not properties) over kiln_device_get_info; and
 * kiln.synchronize. */
#include "device.h"

#include "errors.h"

typedef struct kpy_device {
  PyObject_HEAD
  int ordinal;
  int previous[8]; /* the devices current before each `with`, innermost last */
  int depth;
} kpy_device;

static PyObject *kpy_device_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  int ordinal = 0;
  static char *kwlist[] = {(char *)"ordinal", NULL}; /* char * before Python 3.13 */
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|i:Device", kwlist, &ordinal)) return NULL;
  kiln_device_info info;
  kiln_status s = kiln_device_get_info(ordinal, &info); /* says which devices exist */
  if (s) return kpy_raise(kpy_state_of_type(tp), s);
  kpy_device *self = (kpy_device *)tp->tp_alloc(tp, 0);
  if (self) self->ordinal = ordinal;
  return (PyObject *)self;
}

static void kpy_device_dealloc(PyObject *op) {
  PyTypeObject *tp = Py_TYPE(op);
  tp->tp_free(op);
  Py_DECREF(tp);
}

static int kpy_device_info(PyObject *op, kiln_device_info *info) {
  kiln_status s = kiln_device_get_info(((kpy_device *)op)->ordinal, info);
  if (s) kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return s ? -1 : 0;
}

static PyObject *kpy_device_name(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_device_info info;
  return kpy_device_info(op, &info) ? NULL : PyUnicode_FromString(info.name);
}

static PyObject *kpy_device_compute_capability(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_device_info info;
  return kpy_device_info(op, &info) ? NULL : Py_BuildValue("(ii)", info.major, info.minor);
}

static PyObject *kpy_device_total_memory(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_device_info info;
  return kpy_device_info(op, &info) ? NULL : PyLong_FromSize_t(info.total_memory);
}

static PyObject *kpy_device_make_current(PyObject *op, PyObject *unused) {
  (void)unused;
  kiln_status s = kiln_device_set_current(((kpy_device *)op)->ordinal);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  Py_RETURN_NONE;
}

/* `with kiln.Device(1):` makes it current on this thread and restores the one before. */
static PyObject *kpy_device_enter(PyObject *op, PyObject *unused) {
  (void)unused;
  kpy_device *self = (kpy_device *)op;
  if (self->depth == (int)(sizeof self->previous / sizeof self->previous[0])) {
    PyErr_SetString(PyExc_RuntimeError, "`with` nested too deeply on one Device object");
    return NULL;
  }
  int before = kiln_device_current();
  kiln_status s = kiln_device_set_current(self->ordinal);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  self->previous[self->depth++] = before;
  return Py_NewRef(op);
}

static PyObject *kpy_device_exit(PyObject *op, PyObject *args) {
  (void)args;
  kpy_device *self = (kpy_device *)op;
  if (self->depth > 0) kiln_device_set_current(self->previous[--self->depth]);
  Py_RETURN_FALSE;
}

static PyObject *kpy_device_count(PyObject *cls, PyObject *unused) {
  (void)unused;
  int n = 0;
  kiln_status s = kiln_device_count(&n);
  if (s) return kpy_raise(kpy_state_of_type((PyTypeObject *)cls), s);
  return PyLong_FromLong(n);
}

static PyObject *kpy_device_repr(PyObject *op) {
  return PyUnicode_FromFormat("<kiln.Device %d>", ((kpy_device *)op)->ordinal);
}

static PyObject *kpy_device_get_ordinal(PyObject *op, void *closure) {
  (void)closure;
  return PyLong_FromLong(((kpy_device *)op)->ordinal);
}

static PyMethodDef kpy_device_methods[] = {
    {"name", kpy_device_name, METH_NOARGS, "The device's name."},
    {"compute_capability", kpy_device_compute_capability, METH_NOARGS, "(major, minor)."},
    {"total_memory", kpy_device_total_memory, METH_NOARGS, "Device memory in bytes."},
    {"make_current", kpy_device_make_current, METH_NOARGS,
     "Makes this the device kiln uses on this thread."},
    {"__enter__", kpy_device_enter, METH_NOARGS, "Makes it current until the with-block ends."},
    {"__exit__", kpy_device_exit, METH_VARARGS, "Restores the device current before."},
    {"count", kpy_device_count, METH_NOARGS | METH_CLASS,
     "The number of CUDA devices (0 with a driver and no GPU); NoDeviceError with no driver."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_device_getset[] = {
    {"ordinal", kpy_device_get_ordinal, NULL, "The device's number.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_device_slots[] = {
    {Py_tp_new, kpy_device_new},
    {Py_tp_dealloc, kpy_device_dealloc},
    {Py_tp_repr, kpy_device_repr},
    {Py_tp_methods, kpy_device_methods},
    {Py_tp_getset, kpy_device_getset},
    {Py_tp_doc, (void *)"Device(ordinal=0): a CUDA device."},
    {0, NULL},
};

static PyType_Spec kpy_device_spec = {"kiln.Device", sizeof(kpy_device), 0,
                                      Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE,
                                      kpy_device_slots};

static PyObject *kpy_synchronize(PyObject *module, PyObject *unused) {
  (void)unused;
  kiln_status s;
  Py_BEGIN_ALLOW_THREADS
    s = kiln_synchronize();
  Py_END_ALLOW_THREADS
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  Py_RETURN_NONE;
}

static PyMethodDef kpy_device_functions[] = {
    {"synchronize", kpy_synchronize, METH_NOARGS,
     "Waits for all work on the current device; raises the error of any that failed."},
    {NULL, NULL, 0, NULL},
};

int kpy_device_init(PyObject *module, kpy_state *st) {
  st->ref.Device_type = kpy_add_type(module, &kpy_device_spec, NULL);
  if (!st->ref.Device_type) return -1;
  return PyModule_AddFunctions(module, kpy_device_functions);
}
