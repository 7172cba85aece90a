#!/usr/bin/env python3
"""The layering check: which C files of kiln may lean on which.

    python3 tools/layers.py [ROOT]

For each of engine/src and pymod/_kiln, x.c and x.h are one node, and x leans on y when x.c or
x.h has `#include "y.h"`. A header with no .c of its own that declares the functions of
several .c files (an aggregate such as pymod/_kiln/kpy.h) leans on each of them: including it is
leaning on all it declares. (A header whose functions all live in one file is that file's
header and joins its node.) The graph of each folder must have no cycle: a cycle is named,
node by node. Besides, a file of pymod/ includes no engine header but kiln.h (the module knows
the engine only through its public header), and no file of engine/ includes Python.h or a NumPy
header (the engine knows nothing of Python).

Exits 1 with a line per problem, 0 with a line per folder when there is none.
"""
import re
import sys
from pathlib import Path

FOLDERS = ("engine/src", "pymod/_kiln")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
# A prototype at the start of a line: `type name(...);`, not static, not a typedef.
PROTOTYPE = re.compile(r"^(?!static\b|typedef\b|extern\s+\"|return\b)[A-Za-z_][\w \t*]*?\b"
                       r"([A-Za-z_]\w*)\s*\([^;{]*\)[^;{]*;", re.M)
# A definition at the start of a line: `type name(...) {`, not static.
DEFINITION = re.compile(r"^(?!static\b|typedef\b)[A-Za-z_][\w \t*]*?\b([A-Za-z_]\w*)\s*"
                        r"\([^;{]*\)\s*\{", re.M)


def includes(path):
    """[(kind, name)] of the #include lines of path; kind is '"' or '<'."""
    return INCLUDE.findall(path.read_text(errors="replace"))


def graph(folder):
    """{node: {node it leans on: why}} for the .c and .h files of folder."""
    files = sorted(p for p in folder.iterdir() if p.suffix in (".c", ".h"))
    stems = {p.stem for p in files}
    sources = {p.stem for p in files if p.suffix == ".c"}
    defined = {}  # function -> the stem of the .c that defines it
    for p in files:
        if p.suffix == ".c":
            for name in DEFINITION.findall(p.read_text(errors="replace")):
                defined.setdefault(name, p.stem)
    # A header without its .c: the .c files that define what it declares.
    owners = {}
    for p in files:
        if p.suffix == ".h" and p.stem not in sources:
            declared = PROTOTYPE.findall(p.read_text(errors="replace"))
            owners[p.stem] = sorted({defined[n] for n in declared if n in defined})
    node_of = {stem: stem for stem in stems}
    for header, defs in owners.items():
        if len(defs) == 1:
            node_of[header] = defs[0]  # that file's header under another name
    edges = {node_of[s]: {} for s in stems}
    for p in files:
        x = node_of[p.stem]
        for kind, name in includes(p):
            y = Path(name).stem
            if kind == '"' and Path(name).suffix == ".h" and (folder / name).is_file():
                y = node_of[y]
                if y != x:
                    edges[x].setdefault(y, f"{p.name} includes {name}")
    for header, defs in owners.items():
        x = node_of[header]
        for y in defs:
            if len(defs) > 1 and y != x:
                edges[x].setdefault(y, f"{header}.h declares functions of {y}.c")
    return edges


def cycles(edges):
    """([a, b, ..., a], group) for each group of nodes that lean on one another (a strongly
    connected component of more than one node): the group and one cycle through it; [] when
    the graph is acyclic."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []

    def connect(x):  # Tarjan's algorithm
        index[x] = low[x] = len(index)
        stack.append(x)
        on_stack.add(x)
        for y in sorted(edges.get(x, ())):
            if y not in index:
                connect(y)
                low[x] = min(low[x], low[y])
            elif y in on_stack:
                low[x] = min(low[x], index[y])
        if low[x] == index[x]:
            group = []
            while True:
                y = stack.pop()
                on_stack.discard(y)
                group.append(y)
                if y == x:
                    break
            if len(group) > 1:
                groups.append(set(group))

    for x in sorted(edges):
        if x not in index:
            connect(x)
    return [(cycle_in(edges, group), group) for group in sorted(groups, key=min)]


def cycle_in(edges, group):
    """A shortest cycle through the first node of group, within group."""
    start = min(group)
    paths, seen = [[start]], {start}
    while paths:
        path = paths.pop(0)
        for y in sorted(edges[path[-1]]):
            if y == start:
                return path + [start]
            if y in group and y not in seen:
                seen.add(y)
                paths.append(path + [y])
    raise AssertionError("a strongly connected group without a cycle")


def describe(edges, path):
    return ", ".join(edges[a][b] for a, b in zip(path, path[1:]))


def check(root):
    """The problems of the tree at root, one sentence each."""
    root = Path(root)
    problems = []
    for name in FOLDERS:
        folder = root / name
        if not folder.is_dir():
            continue
        edges = graph(folder)
        for found, group in cycles(edges):
            also = ""
            if len(group) > len(found) - 1:
                also = f"; {len(group)} nodes lean on one another: {', '.join(sorted(group))}"
            problems.append(f"{name}: include cycle {' -> '.join(found)} "
                            f"({describe(edges, found)}){also}")
    engine_headers = {p.name for d in ("engine/src", "engine/include")
                      if (root / d).is_dir() for p in (root / d).glob("*.h")}
    pymod = root / "pymod"
    for p in sorted(pymod.rglob("*.[ch]")) if pymod.is_dir() else []:
        own = {q.name for q in p.parent.glob("*.h")}
        for _, name in includes(p):
            if name in engine_headers and name != "kiln.h" and name not in own:
                problems.append(f"{p.relative_to(root)} includes the engine's {name}; pymod/ "
                                "knows the engine only through kiln.h")
    engine = root / "engine"
    for p in sorted(engine.rglob("*.[ch]")) if engine.is_dir() else []:
        for _, name in includes(p):
            if name == "Python.h" or name.startswith("numpy/"):
                problems.append(f"{p.relative_to(root)} includes {name}; the engine knows "
                                "nothing of Python")
    return problems


def main(argv):
    root = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parent.parent
    problems = check(root)
    for problem in problems:
        print(f"layers: {problem}")
    if problems:
        return 1
    print(f"layers: {', '.join(f for f in FOLDERS if (root / f).is_dir())}: no include cycle, "
          "pymod/ sees the engine through kiln.h alone, the engine includes nothing of Python")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
