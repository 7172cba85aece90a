/* kiln's exceptions and warnings, and the one place an engine status becomes a Python
 * exception. */
#ifndef KPY_ERRORS_H
#define KPY_ERRORS_H

#include "state.h"

/* Makes kiln.Error and its subclasses and kiln.CacheWarning; routes the engine's warnings. */
int kpy_errors_init(PyObject *module, kpy_state *st);

/* Raises the exception that fits a failed engine call, with the engine's sentence (CudaError
 * and its subclasses carry .code and .name). Returns NULL. */
PyObject *kpy_raise(kpy_state *st, kiln_status s);

/* Raises LogicError with the engine's sentence for s and code as .code: a refusal kiln made
 * itself where PyCUDA's driver gives that CUresult, which PyCUDA programs catch as one. */
PyObject *kpy_raise_logic(kpy_state *st, kiln_status s, int code);
/* The same with a message of the caller's: a refusal of kiln's own that PyCUDA's driver call
 * would have made (code is the CUresult it would have given). */
PyObject *kpy_raise_logic_message(kpy_state *st, const char *message, int code);

/* The same for a compile: KILN_ERROR_COMPILE becomes CompileError with NVRTC's log (NULL when
 * there is none) as .log and, in the message, the lines of src the log points at; its
 * .command_line is command_line (a list; NULL: ["nvrtc"]). */
PyObject *kpy_raise_compile(kpy_state *st, kiln_status s, const char *src, const char *log,
                            PyObject *command_line);

/* The engine's warnings wait in a per-thread queue until the call that caused them returns;
 * this issues them as kiln.CacheWarning. -1 when a warning filter made one an error. */
int kpy_flush_warnings(kpy_state *st);

#endif
