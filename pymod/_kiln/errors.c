/* kiln's exceptions, and the one place an engine status becomes a Python exception. */
#include "errors.h"

#include <string.h>

#include "launches.h"

/* base: one class, a tuple of them, or NULL for Exception. */
static PyObject *kpy_new_exception(PyObject *module, const char *name, PyObject *base,
                                   const char *doc) {
  char qualified[64];
  PyOS_snprintf(qualified, sizeof qualified, "kiln.%s", name);
  PyObject *e = PyErr_NewExceptionWithDoc(qualified, doc, base, NULL);
  if (!e) return NULL;
  if (PyModule_AddObjectRef(module, name, e) < 0) {
    Py_DECREF(e);
    return NULL;
  }
  return e;
}

/* ---- Warnings: the engine's, queued on the thread that made them ------------------------- */

#define KPY_PENDING_MAX 8

static _Thread_local struct {
  int n;
  char text[KPY_PENDING_MAX][1024];
} kpy_pending;

/* Runs inside engine calls, often without the GIL: only queues. */
static void kpy_on_warning(const char *message, void *ctx) {
  (void)ctx;
  if (kpy_pending.n < KPY_PENDING_MAX)
    PyOS_snprintf(kpy_pending.text[kpy_pending.n++], sizeof kpy_pending.text[0], "%s", message);
}

int kpy_flush_warnings(kpy_state *st) {
  int n = kpy_pending.n;
  kpy_pending.n = 0;
  for (int i = 0; i < n; i++)
    if (PyErr_WarnEx(st->ref.CacheWarning, kpy_pending.text[i], 1) < 0) return -1;
  return 0;
}

int kpy_errors_init(PyObject *module, kpy_state *st) {
  kiln_set_warning_handler(kpy_on_warning, NULL);
  if (!(st->ref.CacheWarning = kpy_new_exception(
            module, "CacheWarning", PyExc_UserWarning,
            "The kernel cache met a problem it worked around: a damaged entry it replaced, a "
            "folder it cannot write or will not trust.")))
    return -1;
  if (!(st->ref.Error = kpy_new_exception(module, "Error", NULL, "Base of every kiln error.")) ||
      !(st->ref.CompileError = kpy_new_exception(
            module, "CompileError", st->ref.Error,
            "NVRTC could not compile the source; .log holds NVRTC's log (.stderr too, as "
            "PyCUDA names it; .msg the message, .stdout '', .command_line "
            "None).")) ||
      !(st->ref.CudaError = kpy_new_exception(
            module, "CudaError", st->ref.Error,
            "A CUDA driver call failed; .code is the CUresult, .name its name. After a fault "
            "in a kernel, .kernel names it and .launch is the (file, line) that launched it, "
            "when only one launch can have faulted; else both are None.")) ||
      !(st->ref.LaunchError = kpy_new_exception(
            module, "LaunchError", st->ref.CudaError,
            "A kernel launch failed, or a kernel ran out of resources or time.")) ||
      !(st->ref.LogicError = kpy_new_exception(
            module, "LogicError", st->ref.CudaError,
            "The driver refused a call as wrong in itself: an invalid value, handle or context "
            "(PyCUDA's LogicError).")))
    return -1;
  /* Also Python's RuntimeError, which PyCUDA's make_default_context raises where there is no
   * device, and which programs catch to carry on without a GPU. */
  PyObject *bases = PyTuple_Pack(2, st->ref.CudaError, PyExc_RuntimeError);
  if (!bases) return -1;
  st->ref.NoDeviceError =
      kpy_new_exception(module, "NoDeviceError", bases,
                        "No CUDA driver or no CUDA device: compiling works, launching does not. "
                        "Also a RuntimeError, as PyCUDA's make_default_context raises there.");
  Py_DECREF(bases);
  if (!st->ref.NoDeviceError) return -1;
  /* Also Python's MemoryError, as PyCUDA's is: `except MemoryError` catches device memory. */
  bases = PyTuple_Pack(2, st->ref.CudaError, PyExc_MemoryError);
  if (!bases) return -1;
  st->ref.OutOfMemoryError =
      kpy_new_exception(module, "OutOfMemoryError", bases,
                        "The device ran out of memory; also a MemoryError, as PyCUDA's is.");
  Py_DECREF(bases);
  if (!st->ref.OutOfMemoryError) return -1;
  /* A LogicError, as PyCUDA's (its driver reports the missing symbol), and an AttributeError,
   * as an attribute a module lacks is: `except drv.LogicError`, getattr and hasattr all work. */
  if (!(bases = PyTuple_Pack(2, st->ref.LogicError, PyExc_AttributeError))) return -1;
  st->ref.NotFoundError = kpy_new_exception(
      module, "NotFoundError", bases,
      "A module has no kernel or variable of that name; also an AttributeError, and a "
      "LogicError as PyCUDA's is.");
  Py_DECREF(bases);
  if (!st->ref.NotFoundError) return -1;
  /* A launch refused for its configuration, by kiln before the driver saw it or by the driver:
   * a ValueError, as every argument kiln checks, and what the driver's refusal is under PyCUDA
   * (LogicError, or LaunchError for a block the kernel's registers cannot hold), so that a
   * program's `except` of either still catches it. */
  if (!(bases = PyTuple_Pack(3, st->ref.LogicError, st->ref.LaunchError, PyExc_ValueError)))
    return -1;
  st->ref.LaunchConfigError = kpy_new_exception(
      module, "LaunchConfigError", bases,
      "A launch's block, grid, shared memory or cluster refused, by kiln before the driver "
      "saw it or by the driver; .code and .name are the driver's CUresult for it. Also a "
      "ValueError, a LogicError and a LaunchError, as PyCUDA programs catch the driver's "
      "refusal as either.");
  Py_DECREF(bases);
  if (!st->ref.LaunchConfigError) return -1;
  /* A call the driver refused as wrong in itself, said in kiln's words: a ValueError, as kiln's
   * own checks are, and the LogicError PyCUDA raises for the driver's refusal. */
  if (!(bases = PyTuple_Pack(2, st->ref.LogicError, PyExc_ValueError))) return -1;
  st->ref.UsageError = kpy_new_exception(
      module, "UsageError", bases,
      "A call the driver refused as wrong in itself (times between events made without "
      "timing; graphs of different shapes updated), said in a sentence; .code and .name are "
      "its CUresult. Also a ValueError, and a LogicError as PyCUDA's is.");
  Py_DECREF(bases);
  return st->ref.UsageError ? 0 : -1;
}

/* A kernel that could not run, wherever it is reported: the launch, or the next call that
 * waited for it. */
static int kpy_is_launch_error(int code) {
  return code == 701 /* CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES */ ||
         code == 702 /* CUDA_ERROR_LAUNCH_TIMEOUT */ ||
         code == 703 /* CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING */ ||
         code == 719 /* CUDA_ERROR_LAUNCH_FAILED */;
}

/* The CUresults of a kernel that faulted while it ran: reported by whichever call next waited
 * for the GPU, not by the launch. */
static int kpy_is_fault(int code) {
  return code == 700                      /* CUDA_ERROR_ILLEGAL_ADDRESS */
         || code == 710                   /* CUDA_ERROR_ASSERT */
         || (code >= 714 && code <= 719); /* stack, instruction, alignment, address space, PC,
                                             launch failed (a trap) */
}

/* The CUresults of a launch refused for its block, grid, shared memory or cluster. */
static int kpy_is_config_refusal(int code) {
  return code == 1      /* CUDA_ERROR_INVALID_VALUE */
         || code == 720 /* CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE */
         || code == 912 /* CUDA_ERROR_INVALID_CLUSTER_SIZE */;
}

/* PyCUDA's rule: a CUresult is a logic error (the program asked for something wrong in itself:
 * an invalid value or handle, an unsupported limit, peer access enabled twice) unless it is
 * one of the few it calls runtime errors, a launch's, memory's or an unknown one. A program's
 * `except drv.LogicError` around such a call then catches what it caught under PyCUDA. A
 * kernel's fault stays a CudaError naming the kernel: it is not the call's fault. */
static int kpy_is_logic_error(int code) {
  switch (code) {
  case 0:
  case 2:   /* CUDA_ERROR_OUT_OF_MEMORY */
  case 100: /* CUDA_ERROR_NO_DEVICE */
  case 209: /* CUDA_ERROR_NO_BINARY_FOR_GPU */
  case 214: /* CUDA_ERROR_ECC_UNCORRECTABLE */
  case 301: /* CUDA_ERROR_FILE_NOT_FOUND */
  case 600: /* CUDA_ERROR_NOT_READY */
  case 999: /* CUDA_ERROR_UNKNOWN */ return 0;
  default: return !kpy_is_launch_error(code) && !kpy_is_fault(code);
  }
}

/* For a fault: the message followed by the kernels that may have faulted, and the values of
 * .kernel (the kernel's name when only one launch can have faulted, else None) and .launch
 * ((file, line) of that launch, or None). Returns a new message, or NULL with an exception. */
static PyObject *kpy_fault_message(const char *message, PyObject **kernel, PyObject **launch) {
  *kernel = Py_NewRef(Py_None);
  *launch = Py_NewRef(Py_None);
  PyObject *launches = kpy_launches_unsettled();
  if (!launches) return NULL;
  Py_ssize_t n = PyList_GET_SIZE(launches);
  PyObject *text = NULL;
  if (n == 0) {
    text = PyUnicode_FromString(message);
  } else if (n == 1 && kpy_launches_complete()) {
    PyObject *name, *file, *line;
    if (PyArg_ParseTuple(PyList_GET_ITEM(launches, 0), "OOO", &name, &file, &line)) {
      Py_SETREF(*kernel, Py_NewRef(name));
      if (file != Py_None) Py_SETREF(*launch, PyTuple_Pack(2, file, line));
      text = file != Py_None ? PyUnicode_FromFormat("%s\nkernel %U faulted; it was launched at "
                                                    "%U:%S",
                                                    message, name, file, line)
                             : PyUnicode_FromFormat("%s\nkernel %U faulted", message, name);
    }
  } else {
    /* Several launches had not been waited for: any of them may be the one. */
    PyObject *parts = PyList_New(0);
    PyObject *head = PyUnicode_FromFormat(
        "%s\nthe kernel that faulted is one of these launches, not yet waited for when it "
        "happened (newest first%s; CUDA_LAUNCH_BLOCKING=1 or `python -m kiln sanitize` names "
        "the one):",
        message, kpy_launches_complete() ? "" : ", older ones forgotten");
    if (parts && head && PyList_Append(parts, head) == 0) {
      for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *name, *file, *line, *item;
        if (!PyArg_ParseTuple(PyList_GET_ITEM(launches, i), "OOO", &name, &file, &line)) break;
        item = file != Py_None ? PyUnicode_FromFormat("  %U, launched at %U:%S", name, file, line)
                               : PyUnicode_FromFormat("  %U", name);
        int rc = item ? PyList_Append(parts, item) : -1;
        Py_XDECREF(item);
        if (rc < 0) break;
      }
      PyObject *sep = PyErr_Occurred() ? NULL : PyUnicode_FromString("\n");
      if (sep) text = PyUnicode_Join(sep, parts);
      Py_XDECREF(sep);
    }
    Py_XDECREF(head);
    Py_XDECREF(parts);
  }
  Py_DECREF(launches);
  if (!text || !*launch) {
    Py_CLEAR(text);
    Py_CLEAR(*kernel);
    Py_CLEAR(*launch);
  }
  return text;
}

/* Raises `type(message)` with .code and .name set (None when no CUresult is behind it), and
 * .kernel and .launch: for a fault, the kernel that faulted and where it was launched when that
 * can be known (the message lists the launches that may have faulted), else None. */
static void kpy_raise_cuda_code(PyObject *type, const char *message, int code) {
  const char *name = kiln_cuda_result_name(code);
  PyObject *kernel = NULL, *launch = NULL, *text;
  if (kpy_is_fault(code)) {
    text = kpy_fault_message(message, &kernel, &launch);
  } else {
    text = PyUnicode_FromString(message);
    kernel = Py_NewRef(Py_None);
    launch = Py_NewRef(Py_None);
  }
  if (!text) return;
  PyObject *exc = PyObject_CallOneArg(type, text);
  Py_DECREF(text);
  if (!exc) {
    Py_XDECREF(kernel);
    Py_XDECREF(launch);
    return;
  }
  PyObject *py_code = code ? PyLong_FromLong(code) : Py_NewRef(Py_None);
  PyObject *py_name = name ? PyUnicode_FromString(name) : Py_NewRef(Py_None);
  if (py_code && py_name && PyObject_SetAttrString(exc, "code", py_code) == 0 &&
      PyObject_SetAttrString(exc, "name", py_name) == 0 &&
      PyObject_SetAttrString(exc, "kernel", kernel) == 0 &&
      PyObject_SetAttrString(exc, "launch", launch) == 0)
    PyErr_SetObject(type, exc);
  Py_XDECREF(py_code);
  Py_XDECREF(py_name);
  Py_XDECREF(kernel);
  Py_XDECREF(launch);
  Py_DECREF(exc);
}

static void kpy_raise_cuda(PyObject *type, const char *message) {
  kpy_raise_cuda_code(type, message, kiln_last_cuda_result());
}

/* Raises CompileError: NVRTC's log as .log (NULL: none, .log is ""), and a message that shows
 * the source lines the log points at, built by kiln._compile_error because it is string work on
 * a path that is already slow. Without the source or the log, the message is the engine's. */
static void kpy_raise_compile_error(kpy_state *st, const char *msg, const char *src,
                                    const char *log, PyObject *command_line) {
  PyObject *message = NULL;
  if (src && log) {
    PyObject *helper = PyImport_ImportModule("kiln._compile_error");
    if (helper) {
      message = PyObject_CallMethod(helper, "message", "ss", log, src);
      Py_DECREF(helper);
    }
    if (!message) PyErr_Clear();
  }
  if (!message) {
    message = log && log[0] ? PyUnicode_FromFormat("%s\n%s", msg, log) : PyUnicode_FromString(msg);
    if (!message) return;
  }
  PyObject *exc = PyObject_CallOneArg(st->ref.CompileError, message);
  if (!exc) {
    Py_DECREF(message);
    return;
  }
  if (!log) log = "";
  /* PyCUDA's names too: its .stderr is where nvcc's diagnostics go, NVRTC's log here; NVRTC
   * runs in the process, so nothing is on standard output, and the command line is a list
   * naming NVRTC and what it was given (programs print " ".join(e.command_line)). */
  PyObject *py_log = PyUnicode_DecodeUTF8(log, (Py_ssize_t)strlen(log), "replace");
  PyObject *empty = PyUnicode_FromString("");
  PyObject *command = command_line ? Py_NewRef(command_line) : Py_BuildValue("[s]", "nvrtc");
  if (py_log && empty && command && PyObject_SetAttrString(exc, "log", py_log) == 0 &&
      PyObject_SetAttrString(exc, "stderr", py_log) == 0 &&
      PyObject_SetAttrString(exc, "stdout", empty) == 0 &&
      PyObject_SetAttrString(exc, "command_line", command) == 0 &&
      PyObject_SetAttrString(exc, "msg", message) == 0)
    PyErr_SetObject(st->ref.CompileError, exc);
  Py_XDECREF(py_log);
  Py_XDECREF(empty);
  Py_XDECREF(command);
  Py_DECREF(message);
  Py_DECREF(exc);
}

/* The engine's sentence for the last failure, or the status's own when there is none. */
static const char *kpy_message(kiln_status s) {
  const char *msg = kiln_last_error();
  return msg[0] ? msg : kiln_status_string(s);
}

PyObject *kpy_raise(kpy_state *st, kiln_status s) {
  const char *msg = kpy_message(s);
  switch (s) {
  case KILN_ERROR_COMPILE: kpy_raise_compile_error(st, msg, NULL, NULL, NULL); break;
  case KILN_ERROR_NO_DRIVER:
  case KILN_ERROR_NO_DEVICE: kpy_raise_cuda(st->ref.NoDeviceError, msg); break;
  case KILN_ERROR_OUT_OF_MEMORY: kpy_raise_cuda(st->ref.OutOfMemoryError, msg); break;
  case KILN_ERROR_LAUNCH:
    /* the driver's refusal of a launch's configuration is PyCUDA's LogicError as well */
    kpy_raise_cuda(kpy_is_config_refusal(kiln_last_cuda_result()) ? st->ref.LaunchConfigError
                                                                  : st->ref.LaunchError,
                   msg);
    break;
  case KILN_ERROR_CUDA: {
    int code = kiln_last_cuda_result();
    PyObject *type = kpy_is_logic_error(code)    ? st->ref.LogicError
                     : kpy_is_launch_error(code) ? st->ref.LaunchError
                                                 : st->ref.CudaError;
    kpy_raise_cuda(type, msg);
    break;
  }
  case KILN_ERROR_INVALID: {
    int code = kiln_last_cuda_result();
    if (kiln_last_error_is_launch_refusal()) kpy_raise_cuda(st->ref.LaunchConfigError, msg);
    else if (code && kpy_is_logic_error(code)) kpy_raise_cuda(st->ref.UsageError, msg);
    else PyErr_SetString(PyExc_ValueError, msg);
    break;
  }
  case KILN_ERROR_AMBIGUOUS: PyErr_SetString(PyExc_ValueError, msg); break;
  case KILN_ERROR_NOT_FOUND: kpy_raise_cuda(st->ref.NotFoundError, msg); break;
  case KILN_ERROR_NO_MEMORY: PyErr_SetString(PyExc_MemoryError, msg); break;
  case KILN_ERROR_INTERRUPTED: PyErr_SetString(PyExc_KeyboardInterrupt, msg); break;
  default: PyErr_SetString(st->ref.Error, msg); break;
  }
  return NULL;
}

PyObject *kpy_raise_compile(kpy_state *st, kiln_status s, const char *src, const char *log,
                            PyObject *command_line) {
  if (s != KILN_ERROR_COMPILE) return kpy_raise(st, s);
  kpy_raise_compile_error(st, kpy_message(s), src, log, command_line);
  return NULL;
}

PyObject *kpy_raise_logic(kpy_state *st, kiln_status s, int code) {
  kpy_raise_cuda_code(st->ref.LogicError, kpy_message(s), code);
  return NULL;
}

PyObject *kpy_raise_logic_message(kpy_state *st, const char *message, int code) {
  kpy_raise_cuda_code(st->ref.LogicError, message, code);
  return NULL;
}
