/* kiln.Device: PyCUDA's spelling (methods, not properties) over kiln_device_get_info, its
 * attributes, and its context (make_context, a Context of context.c made through the type in
 * the module state); kiln.synchronize; init and the versions. */
#include "device.h"

#include "errors.h"
#include "launches.h"
#include "wait.h"

#include <ctype.h>

/* Device(ordinal=0), or Device("0000:3b:00.0") by PCI bus id as PyCUDA allows. */
/* Device(ordinal=0) or Device(pci_bus_id)'s device, checked to exist, into *ordinal. */
static int kpy_device_ordinal(kpy_state *st, PyObject *args, PyObject *kwargs, int *ordinal) {
  PyObject *which = NULL;
  static char *kwlist[] = {(char *)"ordinal", NULL}; /* char * before Python 3.13 */
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:Device", kwlist, &which)) return -1;
  *ordinal = 0;
  kiln_status s = KILN_OK;
  if (which && PyUnicode_Check(which)) {
    const char *id = kpy_cstring(which, "the PCI bus id");
    if (!id) return -1;
    s = kiln_device_from_pci_bus_id(id, ordinal);
  } else if (which) {
    long v = PyLong_Check(which) ? PyLong_AsLong(which) : -1;
    if (!PyLong_Check(which) || (v == -1 && PyErr_Occurred()) || v < INT_MIN || v > INT_MAX) {
      PyErr_Clear();
      PyErr_Format(PyExc_TypeError,
                   "Device() takes an ordinal (int) or a PCI bus id (str), not %.100s",
                   Py_TYPE(which)->tp_name);
      return -1;
    }
    *ordinal = (int)v;
  }
  kiln_device_info info;
  if (!s) s = kiln_device_get_info(*ordinal, &info); /* says which devices exist */
  if (s) {
    kpy_raise(st, s);
    return -1;
  }
  return 0;
}

static PyObject *kpy_device_new(PyTypeObject *tp, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(tp);
  if (!st) return NULL;
  int ordinal = 0;
  /* A subclass with an __init__ of its own takes arguments of its own: its device is the one
   * its __init__ gives Device.__init__ (device 0 until then). */
  int own_init = tp != st->ref.Device_type && tp->tp_init != st->ref.Device_type->tp_init;
  if (!own_init && kpy_device_ordinal(st, args, kwargs, &ordinal) < 0) return NULL;
  kpy_device *self = (kpy_device *)tp->tp_alloc(tp, 0);
  if (self) self->ordinal = ordinal;
  return (PyObject *)self;
}

PyObject *kpy_device_of(kpy_state *st, int ordinal) {
  PyTypeObject *tp = st->ref.Device_type;
  kpy_device *self = (kpy_device *)tp->tp_alloc(tp, 0);
  if (self) self->ordinal = ordinal;
  return (PyObject *)self;
}

/* Device.__init__(self, ordinal=0): for a subclass, whose __init__ may call it as one of
 * PyCUDA's Device does, the device it names; a plain Device was made by tp_new. */
static int kpy_device_tp_init(PyObject *op, PyObject *args, PyObject *kwargs) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!st) return -1;
  if (Py_IS_TYPE(op, st->ref.Device_type)) return 0;
  return kpy_device_ordinal(st, args, kwargs, &((kpy_device *)op)->ordinal);
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

/* An int attribute number (a device_attribute member is one). */
static int kpy_attribute_number(PyObject *attr, const char *what, int *out) {
  if (!PyIndex_Check(attr) || PyBool_Check(attr)) {
    PyErr_Format(PyExc_TypeError, "%s must be an int (a %s member), not %.100s", what, what,
                 Py_TYPE(attr)->tp_name);
    return -1;
  }
  long v = PyLong_AsLong(attr);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_Format(PyExc_ValueError, "%s %ld is out of range", what, v);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* kiln.driver's enumeration called name (device_attribute, compute_mode). */
static PyObject *kpy_driver_enum(const char *name) {
  PyObject *driver = PyImport_ImportModule("kiln.driver");
  if (!driver) return NULL;
  PyObject *e = PyObject_GetAttrString(driver, name);
  Py_DECREF(driver);
  return e;
}

static PyObject *kpy_device_attribute_enum(void) { return kpy_driver_enum("device_attribute"); }

/* cuda.h's CU_DEVICE_ATTRIBUTE_COMPUTE_MODE (kiln.driver's device_attribute.COMPUTE_MODE,
 * which a test checks against cuda.h). */
#define KPY_ATTRIBUTE_COMPUTE_MODE 20

/* Attribute a's value v: an int, or for COMPUTE_MODE a compute_mode member, as PyCUDA gives
 * it (get_attributes() then prints COMPUTE_MODE: DEFAULT). */
static PyObject *kpy_attribute_value(int a, int v) {
  if (a != KPY_ATTRIBUTE_COMPUTE_MODE) return PyLong_FromLong(v);
  PyObject *e = kpy_driver_enum("compute_mode");
  PyObject *value = e ? PyObject_CallFunction(e, "i", v) : NULL;
  Py_XDECREF(e);
  return value;
}

static PyObject *kpy_device_get_attribute(PyObject *op, PyObject *attr) {
  int a, v = 0;
  if (kpy_attribute_number(attr, "device_attribute", &a) < 0) return NULL;
  kiln_status s = kiln_device_get_attribute(((kpy_device *)op)->ordinal, a, &v);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return kpy_attribute_value(a, v);
}

/* {device_attribute member: value} for every attribute this driver knows. */
static PyObject *kpy_device_get_attributes(PyObject *op, PyObject *unused) {
  (void)unused;
  PyObject *e = kpy_device_attribute_enum(), *members = e ? PySequence_List(e) : NULL;
  Py_XDECREF(e);
  PyObject *out = members ? PyDict_New() : NULL;
  for (Py_ssize_t i = 0; out && i < PyList_GET_SIZE(members); i++) {
    PyObject *member = PyList_GET_ITEM(members, i);
    int a, v = 0;
    if (kpy_attribute_number(member, "device_attribute", &a) < 0) {
      Py_CLEAR(out);
      break;
    }
    kiln_status s = kiln_device_get_attribute(((kpy_device *)op)->ordinal, a, &v);
    if (s == KILN_ERROR_INVALID) continue; /* newer than this driver */
    PyObject *value = s ? kpy_raise(kpy_state_of_type(Py_TYPE(op)), s) : kpy_attribute_value(a, v);
    if (!value || PyDict_SetItem(out, member, value) < 0) Py_CLEAR(out);
    Py_XDECREF(value);
  }
  Py_XDECREF(members);
  return out;
}

/* dev.max_threads_per_block: every device_attribute, in lower case or its own upper case
 * (dev.MULTIPROCESSOR_COUNT), as PyCUDA reads them. */
static PyObject *kpy_device_getattro(PyObject *op, PyObject *name) {
  PyObject *found = PyObject_GenericGetAttr(op, name);
  if (found || !PyErr_ExceptionMatches(PyExc_AttributeError) || !PyUnicode_Check(name))
    return found;
  const char *text = PyUnicode_AsUTF8(name); /* a NUL finds no attribute: upper() keeps it */
  if (!text || !isalpha((unsigned char)text[0])) return NULL;
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *missing = PyErr_GetRaisedException();
#else
  PyObject *t, *v, *tb;
  PyErr_Fetch(&t, &v, &tb);
#endif
  PyObject *e = kpy_device_attribute_enum(), *upper = NULL, *member = NULL;
  if (e) upper = PyObject_CallMethod(name, "upper", NULL);
  if (upper) member = PyObject_GetAttr(e, upper);
  Py_XDECREF(e);
  Py_XDECREF(upper);
  if (!member) { /* not an attribute: the first error stands */
    PyErr_Clear();
#if PY_VERSION_HEX >= 0x030C0000
    PyErr_SetRaisedException(missing);
#else
    PyErr_Restore(t, v, tb);
#endif
    return NULL;
  }
#if PY_VERSION_HEX >= 0x030C0000
  Py_XDECREF(missing);
#else
  Py_XDECREF(t);
  Py_XDECREF(v);
  Py_XDECREF(tb);
#endif
  PyObject *value = kpy_device_get_attribute(op, member);
  Py_DECREF(member);
  return value;
}

static PyObject *kpy_device_pci_bus_id(PyObject *op, PyObject *unused) {
  (void)unused;
  char id[64];
  kiln_status s = kiln_device_pci_bus_id(((kpy_device *)op)->ordinal, id, sizeof id);
  if (s) return kpy_raise(kpy_state_of_type(Py_TYPE(op)), s);
  return PyUnicode_FromString(id);
}

static PyObject *kpy_device_can_access_peer(PyObject *op, PyObject *dev) {
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  if (!PyObject_TypeCheck(dev, st->ref.Device_type)) {
    PyErr_Format(PyExc_TypeError, "can_access_peer() takes a kiln.Device, not %.100s",
                 Py_TYPE(dev)->tp_name);
    return NULL;
  }
  int can = 0;
  kiln_status s =
      kiln_device_can_access_peer(((kpy_device *)op)->ordinal, ((kpy_device *)dev)->ordinal, &can);
  if (s) return kpy_raise(st, s);
  return PyBool_FromLong(can);
}

/* The device's primary context as a kiln.Context, pushed (make_context) or not
 * (retain_primary_context). kiln makes no context of its own: the flags PyCUDA passes to a
 * new context are the primary context's business, so they are accepted and not applied. */
static PyObject *kpy_device_context(PyObject *op, PyObject *args, PyObject *kwargs, int push) {
  static char *with_flags[] = {(char *)"flags", NULL};
  static char *without[] = {NULL};
  unsigned flags = 0;
  if (push ? !PyArg_ParseTupleAndKeywords(args, kwargs, "|I:make_context", with_flags, &flags)
           : !PyArg_ParseTupleAndKeywords(args, kwargs, ":retain_primary_context", without))
    return NULL;
  kpy_state *st = kpy_state_of_type(Py_TYPE(op));
  PyObject *ctx = PyObject_CallOneArg((PyObject *)st->ref.Context_type, op);
  if (!ctx || !push) return ctx;
  /* Through Context.push, which notes that this thread pushed (context.c's get_current). */
  PyObject *done = PyObject_CallMethodNoArgs(ctx, st->str.push);
  if (!done) {
    Py_DECREF(ctx);
    return NULL;
  }
  Py_DECREF(done);
  return ctx;
}

static PyObject *kpy_device_make_context(PyObject *op, PyObject *args, PyObject *kwargs) {
  return kpy_device_context(op, args, kwargs, 1);
}

static PyObject *kpy_device_retain_primary_context(PyObject *op, PyObject *args, PyObject *kwargs) {
  return kpy_device_context(op, args, kwargs, 0);
}

static PyObject *kpy_device_richcompare(PyObject *a, PyObject *b, int op) {
  if (!PyObject_TypeCheck(b, Py_TYPE(a)) || (op != Py_EQ && op != Py_NE)) Py_RETURN_NOTIMPLEMENTED;
  int same = ((kpy_device *)a)->ordinal == ((kpy_device *)b)->ordinal;
  return PyBool_FromLong(op == Py_EQ ? same : !same);
}

static Py_hash_t kpy_device_hash(PyObject *op) { return ((kpy_device *)op)->ordinal + 1; }

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
    {"name", kpy_device_name, METH_NOARGS, "name($self, /)\n--\n\nThe device's name."},
    {"compute_capability", kpy_device_compute_capability, METH_NOARGS,
     "compute_capability($self, /)\n--\n\n(major, minor)."},
    {"total_memory", kpy_device_total_memory, METH_NOARGS,
     "total_memory($self, /)\n--\n\nDevice memory in bytes."},
    {"make_current", kpy_device_make_current, METH_NOARGS,
     "make_current($self, /)\n--\n\nMakes this the device kiln uses on this thread."},
    {"get_attribute", kpy_device_get_attribute, METH_O,
     "get_attribute($self, attr, /)\n--\n\nA device_attribute's value "
     "(kiln.driver.device_attribute)."},
    {"get_attributes", kpy_device_get_attributes, METH_NOARGS,
     "get_attributes($self, /)\n--\n\n{device_attribute: value} for every attribute the "
     "driver knows."},
    {"can_access_peer", kpy_device_can_access_peer, METH_O,
     "can_access_peer($self, dev, /)\n--\n\nWhether this device's kernels can be given access "
     "to dev's memory (Context.enable_peer_access); False for the device itself."},
    {"pci_bus_id", kpy_device_pci_bus_id, METH_NOARGS,
     "pci_bus_id($self, /)\n--\n\nThe PCI bus id, '0000:3b:00.0'."},
    {"make_context", (PyCFunction)(void (*)(void))kpy_device_make_context,
     METH_VARARGS | METH_KEYWORDS,
     "make_context($self, flags=0)\n--\n\nThe device's primary context, made current on this "
     "thread (pushed) as PyCUDA's new context would be; pop() returns to the device before. "
     "kiln makes no context of its own, so flags are not applied."},
    {"retain_primary_context", (PyCFunction)(void (*)(void))kpy_device_retain_primary_context,
     METH_VARARGS | METH_KEYWORDS,
     "retain_primary_context($self, /)\n--\n\nThe device's primary context as a Context, not "
     "made current (push() does that)."},
    {"__enter__", kpy_device_enter, METH_NOARGS,
     "__enter__($self, /)\n--\n\nMakes it current until the with-block ends."},
    {"__exit__", kpy_device_exit, METH_VARARGS,
     "__exit__($self, *exc_info)\n--\n\nRestores the device current before."},
    {"count", kpy_device_count, METH_NOARGS | METH_CLASS,
     "count($type, /)\n--\n\nThe number of CUDA devices (0 with a driver and no GPU); "
     "NoDeviceError with no driver."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef kpy_device_getset[] = {
    {"ordinal", kpy_device_get_ordinal, NULL, "The device's number.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot kpy_device_slots[] = {
    {Py_tp_new, kpy_device_new},
    {Py_tp_init, kpy_device_tp_init},
    {Py_tp_dealloc, kpy_device_dealloc},
    {Py_tp_getattro, kpy_device_getattro},
    {Py_tp_richcompare, kpy_device_richcompare},
    {Py_tp_hash, kpy_device_hash},
    {Py_tp_repr, kpy_device_repr},
    {Py_tp_methods, kpy_device_methods},
    {Py_tp_getset, kpy_device_getset},
    {Py_tp_doc, (void *)"Device(ordinal=0)\n--\n\nA CUDA device; Device('0000:3b:00.0') by PCI bus "
                        "id. Every device_attribute reads as a lower-case attribute too "
                        "(dev.max_threads_per_block)."},
    {0, NULL},
};

/* A base type: libraries over PyCUDA derive their device from it (reikna's). */
static PyType_Spec kpy_device_spec = {
    "kiln.Device", sizeof(kpy_device), 0,
    Py_TPFLAGS_DEFAULT | Py_TPFLAGS_IMMUTABLETYPE | Py_TPFLAGS_BASETYPE, kpy_device_slots};

static PyObject *kpy_synchronize(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"timeout", NULL};
  PyObject *timeout_obj = Py_None;
  double timeout;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|O:synchronize", kwlist, &timeout_obj) ||
      kpy_wait_timeout(timeout_obj, &timeout) < 0 ||
      kpy_wait_device(kpy_state_of_module(module), timeout) < 0)
    return NULL;
  kpy_launches_settle_all();
  Py_RETURN_NONE;
}

/* At the program's end (kiln/__init__.py registers it): PyCUDA's context is destroyed then,
 * which waits for the kernels still queued and so prints what their printf wrote, in programs
 * that launch and exit without waiting. kiln's primary contexts outlive the program, so the
 * wait is made here, for every device kiln set up, when kiln queued any work. A failure (a
 * fault never waited for) is not raised, as PyCUDA's clean-up does not raise it. */
static PyObject *kpy_wait_at_exit(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  if (kiln_work_count()) {
    Py_BEGIN_ALLOW_THREADS(void)
      kiln_synchronize_all();
    Py_END_ALLOW_THREADS
  }
  Py_RETURN_NONE;
}

static PyObject *kpy_init(PyObject *module, PyObject *args, PyObject *kwargs) {
  static char *kwlist[] = {(char *)"flags", NULL};
  unsigned flags = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kwargs, "|I:init", kwlist, &flags)) return NULL;
  if (flags != 0) {
    PyErr_Format(PyExc_ValueError, "init() takes flags=0, the only value cuInit knows, not %u",
                 flags);
    return NULL;
  }
  kiln_status s = kiln_driver_init();
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  Py_RETURN_NONE;
}

static PyObject *kpy_get_driver_version(PyObject *module, PyObject *unused) {
  (void)unused;
  int v = 0;
  kiln_status s = kiln_driver_version(&v);
  if (s) return kpy_raise(kpy_state_of_module(module), s);
  return PyLong_FromLong(v);
}

static PyObject *kpy_get_version(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  int v = kiln_driver_header_version();
  return Py_BuildValue("(iii)", v / 1000, v % 1000 / 10, 0);
}

static PyObject *kpy_current_device(PyObject *module, PyObject *unused) {
  (void)module, (void)unused;
  return PyLong_FromLong(kiln_device_current());
}

static PyMethodDef kpy_device_functions[] = {
    {"current_device", kpy_current_device, METH_NOARGS,
     "current_device($module, /)\n--\n\nThe ordinal of this thread's current device "
     "(kiln.Device(i).make_current() or `with kiln.Device(i):` change it); needs no driver."},
    {"synchronize", (PyCFunction)(void (*)(void))kpy_synchronize, METH_VARARGS | METH_KEYWORDS,
     "synchronize($module, /, timeout=None)\n--\n\nWaits for all work on the current device; "
     "raises the error of any that failed. Ctrl-C ends the wait (KeyboardInterrupt) and so does "
     "the timeout in seconds (TimeoutError); the work goes on on the GPU."},
    {"_wait_at_exit", kpy_wait_at_exit, METH_NOARGS,
     "_wait_at_exit($module, /)\n--\n\nWaits for the work kiln queued on every device it set "
     "up, raising nothing: what the program's end calls."},
    {"init", (PyCFunction)(void (*)(void))kpy_init, METH_VARARGS | METH_KEYWORDS,
     "init($module, flags=0)\n--\n\nOpens the driver and runs cuInit now (kiln does it at the "
     "first GPU use); NoDeviceError says why it cannot."},
    {"get_driver_version", kpy_get_driver_version, METH_NOARGS,
     "get_driver_version($module, /)\n--\n\nThe driver's CUDA version as an int: 13000 is "
     "CUDA 13.0."},
    {"get_version", kpy_get_version, METH_NOARGS,
     "get_version($module, /)\n--\n\n(major, minor, 0): the CUDA version kiln was built "
     "against."},
    {NULL, NULL, 0, NULL},
};

int kpy_device_init(PyObject *module, kpy_state *st) {
  st->ref.Device_type = kpy_add_type(module, &kpy_device_spec, NULL);
  if (!st->ref.Device_type) return -1;
  return PyModule_AddFunctions(module, kpy_device_functions);
}
