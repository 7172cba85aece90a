"""Compiling many sources at once. NVRTC runs without the GIL, so threads compile at once;
compile_many hands a list to as many threads as the machine has cores. One compile at a time
runs NVRTC in the process, the others in compile helpers, since NVRTC does much of its work one
compile at a time within a process (docs/cache.md, "Compiling many sources at once")."""
import os
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed

from ._kiln import SourceModule


def _bar(total, desc):
    """The registry's tqdm when installed, else one plain line per source, on stderr."""
    try:
        from tqdm import tqdm
    except ImportError:
        tqdm = None
    if tqdm is not None:
        bar = tqdm(total=total, desc=desc, unit="source", file=sys.stderr)
        return lambda done, label: bar.update(1), bar.close
    width = len(str(total))

    def line(done, label):
        print(f"{desc} [{done:{width}}/{total}] {label}", file=sys.stderr, flush=True)

    return line, lambda: None


def compile_many(sources, *, workers=None, progress=False, return_exceptions=False,
                 **options):
    """Compiles every source of `sources` at once and returns their modules in order.

    sources: an iterable of source strings, or of (source, {keyword: value}) pairs whose
    keywords (arch, options, include_dirs, name_expressions, ...) add to `options`, which
    every source gets. workers: threads (default: the cores). progress: True for a bar on
    stderr (tqdm when installed, else plain lines), or a callable progress(done, total).
    A source that fails raises its CompileError after the others finished, unless
    return_exceptions, which puts the exception in its place in the list instead.
    """
    items = []
    for item in sources:
        if isinstance(item, str):
            items.append((item, options))
        elif (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)
              and isinstance(item[1], dict)):
            items.append((item[0], {**options, **item[1]}))
        else:
            raise TypeError("compile_many takes source strings or (source, {keyword: value}) "
                            f"pairs, not {type(item).__name__}")
    if workers is None:  # the cores this process may run on, as a container's CPU set says
        workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (
            os.cpu_count() or 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"workers must be a positive int, not {workers!r}")
    total = len(items)
    report, close = (None, lambda: None)
    if progress is True:
        report, close = _bar(total, "kiln compile")
    elif callable(progress):
        def report(done, label):
            progress(done, total)
    elif progress not in (False, None):
        raise TypeError("progress is True, False or a callable progress(done, total)")

    results = [None] * total
    done = 0

    def one(i):
        src, kw = items[i]
        try:
            return i, SourceModule(src, **kw)
        except Exception as e:  # kept, and raised (or returned) in source order below
            return i, e

    try:
        with ThreadPoolExecutor(max_workers=min(workers, max(total, 1))) as pool:
            futures = [pool.submit(one, i) for i in range(total)]
            for future in as_completed(futures):  # in the order they finish
                i, result = future.result()
                results[i] = result
                done += 1
                if report:
                    kernels = ", ".join(result.get_function(k).declaration
                                        for k in result.kernels) if not isinstance(
                        result, BaseException) else f"failed: {type(result).__name__}"
                    report(done, kernels)
    finally:
        close()
    if not return_exceptions:
        for r in results:
            if isinstance(r, BaseException):
                raise r
    return results
