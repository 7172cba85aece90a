"""inspect.signature of a kernel (kiln.Function.__signature__): its parameters positional, named
by position and annotated with the type its source declares, then the launch keywords."""
import inspect

_LAUNCH = [("block", inspect.Parameter.empty), ("grid", (1, 1)), ("shared", 0),
           ("stream", None), ("time_kernel", False)]


def _declared_types(declaration, count):
    """The parameter types of "name(float *, const S *)"; None when they cannot be split."""
    open_at = declaration.find("(")
    if open_at < 0 or not declaration.endswith(")"):
        return None
    inner = declaration[open_at + 1:-1]
    types, depth, start = [], 0, 0
    for i, ch in enumerate(inner):  # split at the commas outside <...> and (...)
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            types.append(inner[start:i].strip())
            start = i + 1
    if inner.strip():
        types.append(inner[start:].strip())
    return types if len(types) == count else None


def function_signature(f):
    classes = f.signature
    types = _declared_types(f.declaration, len(classes)) or list(classes)
    params = []
    for i, declared in enumerate(types):
        name = f"arg{i}"
        params.append(inspect.Parameter(name, inspect.Parameter.POSITIONAL_ONLY,
                                        annotation=declared))
    for name, default in _LAUNCH:
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default))
    return inspect.Signature(params)
