/* kiln.Module (compiled code, kernels by name), kiln.SourceModule (the Module that compiles its
 * source) and kiln.module_from_buffer (prebuilt code). */
#ifndef KPY_SOURCEMODULE_H
#define KPY_SOURCEMODULE_H

#include "state.h"

typedef struct kpy_module {
  PyObject_HEAD
  kiln_module *module; /* owned reference (modules are shared through the engine's table) */
  PyObject *functions; /* dict: name -> Function, so get_function gives one object per name;
                          made by the first get_function */
  PyObject *dict;      /* attributes a program sets, as on PyCUDA's modules, or NULL */
} kpy_module;

int kpy_sourcemodule_init(PyObject *module, kpy_state *st);
/* Empties and frees the memo of SourceModule's arguments (st->memo). */
void kpy_sourcemodule_free(kpy_state *st);

/* A kiln.Module over m, which it takes: freed with it, or at once when the object cannot be
 * made (NULL with the exception set). */
PyObject *kpy_module_adopt(kpy_state *st, kiln_module *m);

/* JIT options given as PyCUDA takes them, a list of (jit_option, int) pairs (None: none), into
 * *out (PyMem_Malloc'd; PyMem_Free it): -1 with an exception naming what's
 * ("module_from_buffer()'s") option i otherwise. */
int kpy_jit_options(PyObject *seq, const char *what, kiln_jit_option **out, int *n_out);

#endif
