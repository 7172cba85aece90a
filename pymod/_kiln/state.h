/* The ground floor of kiln._kiln: the Python, NumPy and kiln headers, the module state (types,
 * exceptions, interned names) and the helpers every file shares. It includes no other file of
 * the extension; every other file includes it, directly or through the headers it uses. */
#ifndef KPY_STATE_H
#define KPY_STATE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define NPY_NO_DEPRECATED_API NPY_1_7_API_VERSION
#define PY_ARRAY_UNIQUE_SYMBOL kiln_ARRAY_API
#ifndef KPY_IMPORT_ARRAY /* defined by the one file that imports NumPy's C API */
#define NO_IMPORT_ARRAY
#endif
#include <numpy/arrayobject.h>

#include "kiln.h"

/* Members a type exposes as attributes (structmember.h's names before Python 3.12). */
#ifdef Py_T_PYSSIZET
#define KPY_T_PYSSIZET Py_T_PYSSIZET
#define KPY_READONLY Py_READONLY
#else
#include <structmember.h>
#define KPY_T_PYSSIZET T_PYSSIZET
#define KPY_READONLY READONLY
#endif

/* A printf-like helper: the compiler checks its callers' formats and arguments. */
#define KPY_PRINTF(format_index, first_arg) __attribute__((format(printf, format_index, first_arg)))

/* Interned names: keywords the kernel call compares by address, and the attributes and keys
 * the protocols read. One line each: the field of kpy_state.str, then its text. */
#define KPY_STRINGS(X)                                \
  X(block, "block")                                   \
  X(grid, "grid")                                     \
  X(shared, "shared")                                 \
  X(stream, "stream")                                 \
  X(time_kernel, "time_kernel")                       \
  X(cuda_array_interface, "__cuda_array_interface__") \
  X(cuda_stream_protocol, "__cuda_stream__")          \
  X(handle, "handle")                                 \
  X(cuda_stream, "cuda_stream")                       \
  X(ptr, "ptr")                                       \
  X(source, "source")                                 \
  X(gpudata, "gpudata")                               \
  X(dlpack, "__dlpack__")                             \
  X(dlpack_device, "__dlpack_device__")               \
  X(array_interface, "__array_interface__")           \
  X(array_protocol, "__array__")                      \
  X(data, "data")                                     \
  X(shape, "shape")                                   \
  X(typestr, "typestr")                               \
  X(strides, "strides")                               \
  X(call_general, "_call_general")                    \
  X(out, "out")                                       \
  X(cooperative, "cooperative")                       \
  X(cluster, "cluster")                               \
  X(programmatic, "programmatic")                     \
  X(log_cache, "_cache")                              \
  X(push, "push")                                     \
  X(shared_size, "shared_size") /* PyCUDA's prepared calls */

/* Events kept for ordering one stream after another (kpy_stream_order), one per device up to
 * this ordinal; a device past it makes one per use. */
#define KPY_ORDER_DEVICES 64

/* (device, stream) pairs whose reduction scratch buffer is kept. */
#define KPY_SCRATCH_SLOTS 32

typedef struct kpy_state {
  /* Strong references to the types and exceptions. traverse and clear walk this struct by its
   * size, so every member must be a PyObject * or a PyTypeObject *; a new one needs no other
   * change. */
  struct kpy_refs {
    PyTypeObject *Module_type, *SourceModule_type;
    PyTypeObject *Function_type;
    PyTypeObject *In_type, *Out_type, *InOut_type;
    PyTypeObject *DeviceAllocation_type;
    PyTypeObject *Device_type;
    PyTypeObject *Stream_type, *Event_type;
    PyTypeObject *DeviceArray_type;
    PyObject *Error, *CompileError, *CudaError, *LaunchError, *OutOfMemoryError, *NoDeviceError;
    PyObject *NotFoundError;
    PyObject *LaunchConfigError;
    PyObject *UsageError;
    PyObject *CacheWarning;
    PyTypeObject *ElementwiseBase_type, *ReductionBase_type;
    PyObject *ops_module; /* kiln._ops, once arithmetic or the array object has needed it */
    PyObject *op_plans;   /* arrayops.c's table: an int key -> (kernel, dtype, converter) */
    /* PyCUDA's surface: the context, a LogicError beside LaunchError, registered host memory. */
    PyObject *LogicError;
    PyTypeObject *Context_type;
    PyTypeObject *RegisteredHostMemory_type, *PagelockedHostAllocation_type;
    /* The array object's: its flags' type. */
    PyTypeObject *ArrayFlags_type;
    /* kiln._log's: called after every SourceModule compile or lookup; NULL when none. */
    PyObject *compile_hook;
    /* ... and the level cache (the "_cache" dict) of the logger it feeds, which says when a
     * hit need not call it; NULL when none was given. */
    PyObject *compile_log_cache;
    /* graph.c's. */
    PyTypeObject *Graph_type;
    /* kiln.compiler.DEFAULT_NVCC_FLAGS, the list a SourceModule given no options compiles
     * with (read at each call, so appending to it counts); NULL until kiln.compiler sets it. */
    PyObject *default_options;
    /* managed.c's. */
    PyTypeObject *ManagedAllocation_type;
    /* ipc.c's. */
    PyTypeObject *IPCMemoryHandle_type;
    /* cuarray.c's. */
    PyTypeObject *Array_type;
  } ref;
  /* Interned strings: never in a reference cycle, so cleared but not visited. */
  struct kpy_strings {
#define KPY__STRING_FIELD(field, text) PyObject *field;
    KPY_STRINGS(KPY__STRING_FIELD)
#undef KPY__STRING_FIELD
  } str;
  /* stream.c's, made on first use in each device's context, destroyed with the module. */
  kiln_event order_event[KPY_ORDER_DEVICES];
  /* wait.c's: the event a device-wide wait records on the legacy stream and polls; and the
   * work count (kiln_work_count) up to which the legacy stream was last seen done, plus one
   * (0: not seen). */
  kiln_event device_wait_event[KPY_ORDER_DEVICES];
  unsigned long long device_done_work[KPY_ORDER_DEVICES];
  /* function.c's: calls that queue a kernel with the GIL released (with In/Out), under way.
   * Their work is counted before it is queued, so while one is, no stream is known done. */
  int queuing;
  /* reduce.c's: each device's multiprocessors (0 until read), and the zeroed scratch buffer of
   * each (device, stream, thread) that reduced, the thread only for the per-thread default
   * stream (2), whose name means another stream on every thread. */
  int sm_count[KPY_ORDER_DEVICES];
  struct kpy_scratch {
    int device;
    kiln_stream stream;
    unsigned long thread;
    kiln_deviceptr ptr;
  } scratch[KPY_SCRATCH_SLOTS];
  int n_scratch;
  /* stream.c's: the kiln.Streams alive, by handle (borrowed: each removes itself). */
  struct kpy_own_stream {
    kiln_stream handle;
    PyObject *stream;
  } *streams;
  int n_streams, cap_streams;
  /* stream.c's: the streams of collected kiln.Streams, kept rather than destroyed (a stale
   * handle of one is refused, never given to the driver dangling), and handed to the next
   * kiln.Stream of their device, flags and priority, oldest first; destroyed with the
   * module. */
  struct kpy_parked_stream {
    kiln_stream handle;
    int device, priority;
    unsigned flags;
  } *parked;
  int n_parked, cap_parked;
  /* stream.c's: the last handle of another library's stream found readable (0 for none). */
  uintptr_t foreign_checked;
  /* graph.c's: the kiln.Graph capturing now, or NULL (borrowed: it clears this when its capture
   * ends or it dies), and what a kernel call hands each launch to, so the graph keeps the
   * function and arguments alive and can replace them. Through a pointer, because graph.c
   * leans on function.c. */
  PyObject *capture;
  /* graph.c's: while a kiln capture is open, a list of what was let go meanwhile and is released
   * when the capture ends (NULL while none is open). Freeing pool memory, or waiting for a graph's
   * replays, queues work on another stream (the legacy default stream, for most memory), and
   * the capture of a blocking stream fails when that stream is touched. memory.c and graph.c
   * hand their objects' contents over to an heir kept here. */
  PyObject *deferred;
  /* memory.c's: how many copies are between reading a device address and their end, the GIL
   * let go meanwhile (kpy_copies_begin), and what was let go during them, released when the
   * last ends (NULL until then): freed memory is another allocation's, or unmapped, and a copy
   * from another thread would read or write it. */
  int copies;
  PyObject *after_copies;
  /* pin.c's: the large host buffers seen copied, page-locked from their second copy; the bound
   * and KILN_PIN_REUSED read on first use (pin_ready), and the callback of the weak references
   * to their owners. */
  struct kpy_pin **pins;
  int n_pins, pin_ready, pin_enabled;
  size_t pinned_bytes, pin_bound;
  PyObject *pin_callback;
  /* hostmem.c's: the page-locked buffer of small copies to the host (made once
   * KPY_SMALL_GET_AFTER copies have gone the driver's way, on small_get_device), the event
   * recorded after its last copy, whether a thread is using it or a Ctrl-C left a copy into it
   * queued, and the small copies made before it. */
  void *small_get;
  kiln_event small_get_done;
  int small_get_device, small_get_busy, small_get_pending, small_get_before;
  /* hostmem.c's: the ring of page-locked slots of small blocking copies to the device (made
   * once KPY_SMALL_GET_AFTER such copies have gone the driver's way, on small_put_device; -1
   * when it could not be made), the event recorded after each slot's last copy, the slot the
   * next copy takes, the copies made before the ring, and kiln_work_count() right after the
   * ring's last copy was queued. */
  void *small_put;
  kiln_event *small_put_done;
  int small_put_device, small_put_next, small_put_before;
  unsigned long long small_put_work;
  /* mirror.c's: the host slots of reduction results (made after KPY_MIRROR_AFTER reductions,
   * NULL until then or when they could not be made), and the reductions counted before. */
  struct kpy_mirrors *mirrors;
  int mirror_before;
  /* sourcemodule.c's: the memo of SourceModule's arguments, made on first use. */
  struct kpy_memo *memo;
  int (*capture_note)(PyObject *graph, PyObject *function, PyObject *const *args, int n,
                      kiln_stream stream);
} kpy_state;

/* The module's definition (_kiln.c): how a subclass of a kiln type finds kiln's state. */
extern PyModuleDef kpy_module_def;

kpy_state *kpy_state_of_module(PyObject *module);
/* The state of the module that made tp, or of the kiln type a Python subclass tp derives from.
 * NULL with TypeError when there is none. */
kpy_state *kpy_state_of_type(PyTypeObject *tp);

/* Fills st->str; -1 with an exception set on failure. */
int kpy_state_intern(kpy_state *st);
/* The module's m_traverse and m_clear over st->ref and st->str. */
int kpy_state_traverse(kpy_state *st, visitproc visit, void *arg);
void kpy_state_clear(kpy_state *st);

/* Makes a heap type from spec (with base, or NULL), bound to module, and adds it to the
 * module. A new reference, or NULL with an exception set. */
PyTypeObject *kpy_add_type(PyObject *module, PyType_Spec *spec, PyTypeObject *base);
/* The same with several bases: a tuple of types (a type or NULL as kpy_add_type takes). */
PyTypeObject *kpy_add_type_bases(PyObject *module, PyType_Spec *spec, PyObject *bases);

/* 1 and *out set when obj has the attribute, 0 when it has not, -1 on another error
 * (PyObject_GetOptionalAttr from Python 3.13, for older Pythons too). */
int kpy_get_optional_attr(PyObject *obj, PyObject *name, PyObject **out);

/* self.name(*args, **kwargs) from a vectorcall's own arguments (the keyword values after args):
 * how a C fast path hands a call it does not take to the Python method that takes every call. */
/* The exception being raised, set aside while code that may raise and clear runs (in a dealloc,
 * say), then put back as it was; whatever that code raised meanwhile is cleared. */
typedef struct kpy_raised {
#if PY_VERSION_HEX >= 0x030C0000
  PyObject *exc;
#else
  PyObject *type, *value, *tb;
#endif
} kpy_raised;
void kpy_raised_set_aside(kpy_raised *r);
void kpy_raised_put_back(kpy_raised *r);

/* The UTF-8 of str as a C string, which lives as long as str; NULL with ValueError naming
 * `what` when it holds a NUL, since C would read the NUL as its end and drop the rest. */
const char *kpy_cstring(PyObject *str, const char *what);

/* The n bytes of an opaque handle given as bytes, a bytearray or another contiguous buffer of
 * exactly n bytes, into out: -1 with TypeError for another type, ValueError for another length,
 * each naming what the handle is ("an IPC memory handle") and where one comes from
 * ("mem_get_ipc_handle()"). */
int kpy_handle_bytes(PyObject *obj, unsigned char *out, size_t n, const char *what,
                     const char *from);

PyObject *kpy_call_method(PyObject *self, PyObject *name, PyObject *const *args, Py_ssize_t nargs,
                          PyObject *kwnames);

#endif
