#!/usr/bin/env python3
"""Graphs and the extended launches: kiln beside C, CuPy and PyTorch in one run.

    PYTHONPATH=pymod python3 bench/graphs.py [--quick] [--out DIR]     (make bench runs it)

Figures (medians of repeats; the ways take turns within each repeat, the one-by-one ways
apart from the replays):

  one by one     µs per kernel: a sequence of 100 calls of add(x, 1.0, n) (grid 2, block 32,
                 n = 64) on a stream, sequences back to back, one synchronize at the end
                 (PyTorch: x.add_(1.0))
  graph          µs per kernel: the same 100 calls recorded once and replayed, the replay
                 call included (kiln: `with stream.capture() as g`, g.launch(); CuPy:
                 Stream.begin_capture, Graph.launch; PyTorch: torch.cuda.graph, replay; C:
                 cuStreamBeginCapture, cuGraphLaunch)
  update         µs to replace one kernel's arguments before a replay (kiln: g.update(0, x, v,
                 n); C: cuGraphExecKernelNodeSetParams)
  launch kinds   µs per launch of the same kernel, plain, cooperative=True, cluster=(2, 1, 1)
                 and programmatic=True, and each over the plain launch

C is bench/c/graphs.c, the driver with nothing in front of it, in a process of its own. Every
way is checked (the values x holds) before it is timed. Targets (the launches-and-graphs
issue): graph replay from Python ≤ 1.0 µs per kernel, an update ≤ 1 µs, cooperative and
cluster launches ≤ 1.10× the plain launch.

Writes bench/results/<date>-<gpu>-graphs.json and the section of docs/performance.md between
its `graphs` markers (a --quick run writes under build/bench/ and leaves docs/ alone).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import kiln
from common import (BUILD, ROOT, Ways, build_driver_program, cpu_model, driver_version,
                    gpu_slug, package_version, save_results, source_commit, stamp, summarize,
                    update_performance_page)

FULL = {"sequences": 200, "launches": 20000, "updates": 20000, "repeats": 7}
QUICK = {"sequences": 20, "launches": 2000, "updates": 2000, "repeats": 3}
KERNELS = 100  # calls in the recorded sequence
N = 64         # elements: grid 2 x block 32

SOURCE = r"""
extern "C" __global__ void add(float *x, float v, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += v; }
"""

SYSTEMS = {"kiln": "kiln", "c": "C", "cupy": "CuPy", "torch": "PyTorch"}


def expect(values, want, what):
    got = np.asarray(values)
    if not (got == want).all():
        raise RuntimeError(f"{what}: x holds {got[:4]}..., not {want}")


# ---- one by one and replayed ---------------------------------------------------------------------

def sequence_ways(f, problems, kind):
    """Ways that run `count` sequences of KERNELS adds and wait; µs per sequence. kind is
    "calls" (one by one) or "graph" (replayed): the two are measured apart, the replays first,
    since CuPy's and PyTorch's one-by-one loops slowed every replay timed after them (on an
    H200 kiln's from 0.84 to 1.01 µs per kernel, PyTorch's from 0.94 to 1.14), whoever's replay
    it was."""
    ways = Ways(problems)
    n = np.int32(N)

    def kiln_calls():
        s = kiln.Stream()
        x = kiln.zeros(N, np.float32)

        def loop(count):
            for _ in range(count * KERNELS):
                f(x, 1.0, n, block=32, grid=2, stream=s)
            s.synchronize()
        loop(1)
        expect(x.get(), KERNELS, "kiln one by one")
        return loop

    def kiln_graph():
        s = kiln.Stream()
        x = kiln.zeros(N, np.float32)
        f(x, 0.0, n, block=32, grid=2, stream=s)
        with s.capture() as g:
            for _ in range(KERNELS):
                f(x, 1.0, n, block=32, grid=2, stream=s)
        launch, sync = g.launch, s.synchronize

        def loop(count):
            for _ in range(count):
                launch()
            sync()
        loop(1)
        expect(x.get(), KERNELS, "kiln graph")
        ways.buffers.append(g)
        return loop

    def cupy_setup():
        import cupy as cp
        kernel = cp.RawKernel(SOURCE, "add")
        stream = cp.cuda.Stream(non_blocking=True)
        x = cp.zeros(N, np.float32)
        cp.cuda.runtime.deviceSynchronize()  # the zeros, queued on another stream, are done
        args = (x, np.float32(1.0), n)
        return cp, kernel, stream, x, args

    def cupy_calls():
        cp, kernel, stream, x, args = cupy_setup()

        def loop(count):
            with stream:
                for _ in range(count * KERNELS):
                    kernel((2,), (32,), args)
            stream.synchronize()
        loop(1)
        expect(x.get(), KERNELS, "CuPy one by one")
        return loop

    def cupy_graph():
        cp, kernel, stream, x, args = cupy_setup()
        with stream:
            kernel((2,), (32,), (x, np.float32(0.0), n))
            stream.synchronize()
            stream.begin_capture()
            for _ in range(KERNELS):
                kernel((2,), (32,), args)
            graph = stream.end_capture()

        def loop(count):
            for _ in range(count):
                graph.launch(stream)
            stream.synchronize()
        loop(1)
        expect(x.get(), KERNELS, "CuPy graph")
        ways.buffers.append(graph)
        return loop

    def torch_calls():
        import torch
        stream = torch.cuda.Stream()
        x = torch.zeros(N, device="cuda")
        torch.cuda.synchronize()  # the zeros, queued on another stream, are done

        def loop(count):
            with torch.cuda.stream(stream):
                for _ in range(count * KERNELS):
                    x.add_(1.0)
            stream.synchronize()
        loop(1)
        expect(x.cpu().numpy(), KERNELS, "PyTorch one by one")
        return loop

    def torch_graph():
        import torch
        x = torch.zeros(N, device="cuda")
        torch.cuda.synchronize()
        side = torch.cuda.Stream()
        with torch.cuda.stream(side):
            x.add_(0.0)  # warm-up outside the capture, as torch.cuda.graph asks
        side.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            for _ in range(KERNELS):
                x.add_(1.0)
        replay, sync = graph.replay, torch.cuda.synchronize

        def loop(count):
            for _ in range(count):
                replay()
            sync()
        x.zero_()
        loop(1)
        expect(x.cpu().numpy(), KERNELS, "PyTorch graph")
        ways.buffers.append(graph)
        return loop

    setups = {"calls": [("kiln_calls", kiln_calls), ("cupy_calls", cupy_calls),
                        ("torch_calls", torch_calls)],
              "graph": [("kiln_graph", kiln_graph), ("cupy_graph", cupy_graph),
                        ("torch_graph", torch_graph)]}
    for name, setup in setups[kind]:
        ways.add(name, setup)
    return ways


def update_ways(f, problems):
    """g.update(0, x, v, n), v alternating: µs per update."""
    ways = Ways(problems)

    def kiln_update():
        s = kiln.Stream()
        x = kiln.zeros(N, np.float32)
        n = np.int32(N)
        f(x, 0.0, n, block=32, grid=2, stream=s)
        with s.capture() as g:
            for _ in range(KERNELS):
                f(x, 1.0, n, block=32, grid=2, stream=s)
        update = g.update
        g.update(0, x, 3.0, n)
        g.launch()
        s.synchronize()
        expect(x.get(), KERNELS + 2, "kiln graph after an update")

        def loop(count):
            for i in range(count // 2):
                update(0, x, 1.0, n)
                update(0, x, 3.0, n)
            if count % 2:
                update(0, x, 3.0, n)
        ways.buffers.append(g)
        return loop

    ways.add("kiln_update", kiln_update)
    return ways


def launch_kind_ways(f, problems):
    """One launch of add, count times, then a synchronize: µs per launch."""
    ways = Ways(problems)
    s = kiln.Stream()
    n = np.int32(N)

    def make(what, **options):
        def setup():
            x = kiln.zeros(N, np.float32)

            def loop(count):
                for _ in range(count):
                    f(x, 1.0, n, block=32, grid=2, stream=s, **options)
                s.synchronize()
            loop(3)
            expect(x.get(), 3, f"kiln {what} launch")
            return loop
        return setup

    ways.add("plain", make("plain"))
    ways.add("cooperative", make("cooperative", cooperative=True))
    ways.add("cluster", make("cluster", cluster=(2, 1, 1)))
    ways.add("programmatic", make("programmatic", programmatic=True))
    return ways


def c_figures(module, sizes, problems):
    """{"c_calls": [µs per kernel], "c_graph": [...], "c_set_params": [µs per update]}."""
    try:
        program = build_driver_program("graphs")
        cubin = BUILD / "graphs.cubin"
        cubin.write_bytes(module.cubin)
        done = subprocess.run([str(program), str(cubin), str(KERNELS), str(sizes["sequences"]),
                               str(sizes["repeats"]), str(sizes["updates"])],
                              capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"graphs exited {done.returncode}: {done.stderr.strip()}")
        out = json.loads(done.stdout)
    except (RuntimeError, OSError, ValueError, SystemExit) as e:
        for name in ("c_calls", "c_graph", "c_set_params"):
            problems[name] = f"{type(e).__name__}: {e}"
        return {}
    return {"c_calls": out["calls_us"], "c_graph": out["graph_us"],
            "c_set_params": out["set_params_us"]}


# ---- report ----------------------------------------------------------------------------------

def _median(result, figure, way):
    return result["figures"].get(figure, {}).get(way, {}).get("median")


ROWS = [  # label, figure, {system: way}
    ("100 calls one by one, µs per kernel", "sequence_us",
     {"kiln": "kiln_calls", "c": "c_calls", "cupy": "cupy_calls", "torch": "torch_calls"}),
    ("100 calls replayed as a graph, µs per kernel", "sequence_us",
     {"kiln": "kiln_graph", "c": "c_graph", "cupy": "cupy_graph", "torch": "torch_graph"}),
    ("one kernel's arguments replaced, µs", "update_us",
     {"kiln": "kiln_update", "c": "c_set_params"}),
]


def markdown(result):
    lines = ["| figure | " + " | ".join(SYSTEMS.values()) + " |",
             "| --- |" + " --- |" * len(SYSTEMS)]
    for label, figure, ways in ROWS:
        kiln_m = _median(result, figure, ways["kiln"])
        cells = []
        for system in SYSTEMS:
            m = _median(result, figure, ways[system]) if system in ways else None
            if m is None:
                cells.append("—")
            elif system == "kiln" or not kiln_m:
                cells.append(f"{m:.3g}")
            else:
                cells.append(f"{m:.3g} ({m / kiln_m:.2f}×)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| kiln launch | µs | over the plain launch |")
    lines.append("| --- | --- | --- |")
    plain = _median(result, "launch_kinds_us", "plain")
    for kind in ("plain", "cooperative", "cluster", "programmatic"):
        m = _median(result, "launch_kinds_us", kind)
        ratio = f"{m / plain:.2f}×" if m is not None and plain else "—"
        lines.append(f"| {kind} | {'—' if m is None else f'{m:.3g}'} | {ratio} |")
    return "\n".join(lines) + ("\n\n(×: beside a peer's figure, the peer's over kiln's in the "
                               "same row.)")


PAGE_BEGIN, PAGE_END = "<!-- graphs:begin -->", "<!-- graphs:end -->"


def performance_block(result, table):
    """The section of docs/performance.md between the graphs markers, markers included."""
    env = result["environment"]
    return (f"{PAGE_BEGIN}\n_Written by `bench/graphs.py` on {result['gpu']}, "
            f"{result['date']}, kiln {env['kiln_commit']}, CuPy {env['cupy']}, PyTorch "
            f"{env['torch']}; medians; results in "
            f"`bench/results/{result['date']}-{result['slug']}-graphs.json`._\n\n{table}\n"
            f"{PAGE_END}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; build/bench/ only")
    parser.add_argument("--out", type=Path, help="also copy the results here")
    args = parser.parse_args()
    if kiln.Device.count() == 0:
        sys.exit("graphs.py: needs a CUDA device")
    started = time.perf_counter()
    sizes = QUICK if args.quick else FULL
    problems = {}
    module = kiln.SourceModule(SOURCE)
    f = module.get_function("add")

    per_sequence = {}
    for kind in ("graph", "calls"):
        per_sequence.update(
            sequence_ways(f, problems, kind).measure(sizes["sequences"], sizes["repeats"]))
    sequence = {name: [t / KERNELS for t in times] for name, times in per_sequence.items()}
    c = c_figures(module, sizes, problems)
    sequence.update({k: c[k] for k in ("c_calls", "c_graph") if k in c})
    update = update_ways(f, problems).measure(sizes["updates"], sizes["repeats"])
    if "c_set_params" in c:
        update["c_set_params"] = c["c_set_params"]
    kinds = launch_kind_ways(f, problems).measure(sizes["launches"], sizes["repeats"])
    figures = {"sequence_us": summarize(sequence), "update_us": summarize(update),
               "launch_kinds_us": summarize(kinds)}

    gpu = kiln.Device(0).name()
    result = {
        **stamp(), "gpu": gpu, "slug": gpu_slug(gpu), "quick": args.quick,
        "environment": {"python": sys.version.split()[0], "numpy": np.__version__,
                        "driver": driver_version(), "kiln_commit": source_commit(),
                        "torch": package_version("torch", "torch"),
                        "cupy": package_version("cupy", "cupy"),
                        "cpu": cpu_model(), "cpus": len(os.sched_getaffinity(0))},
        "parameters": {**sizes, "kernels": KERNELS, "n": N}, "systems": SYSTEMS,
        "figures": figures, "problems": problems,
    }
    result["seconds"] = round(time.perf_counter() - started, 1)
    table = markdown(result)
    result["markdown"] = table
    save_results(result, "-graphs", smoke=args.quick, out=args.out)
    if not args.quick:
        update_performance_page(PAGE_BEGIN, PAGE_END, performance_block(result, table),
                                "## Graphs and extended launches\n\n")
        if args.out:
            shutil.copy(ROOT / "docs" / "performance.md", args.out / "performance.md")
    print(f"\n{gpu}, {result['date']}: medians\n{table}")
    for k, v in problems.items():
        print(f"problem: {k}: {v}")
    print(f"graphs.py: {result['seconds']} s")


if __name__ == "__main__":
    main()
