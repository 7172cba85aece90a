/* kiln.compiler.DynamicModule's link: relocatable device code, PTX and libraries linked into
 * one CUBIN (kiln_link). */
#ifndef KPY_LINKING_H
#define KPY_LINKING_H

#include "state.h"

int kpy_link_init(PyObject *module, kpy_state *st);

#endif
