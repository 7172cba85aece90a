/* kiln.Graph: a stream's kernel calls, copies and memsets recorded once and replayed. */
#ifndef KPY_GRAPH_H
#define KPY_GRAPH_H

#include "state.h"

int kpy_graph_init(PyObject *module, kpy_state *st);

#endif
