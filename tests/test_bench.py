"""The benchmarks, as far as a machine without a GPU can take them: every script imports and
parses its options, every C part builds, bench/cache.py runs whole (CPU-only), the programs of
children.py get as far as the device with kiln and through every step with stand-ins of the
four systems, and the reports are made again from the recorded results. What a GPU measures,
and the in-process ways of launch.py and compare.py, are left to `make bench` on the GPU
machine."""
import contextlib
import importlib
import importlib.util
import io
import json
import os
import pathlib
import re
import subprocess
import sys
import sysconfig
import types

import pytest

from helpers import HAVE_GPU

ROOT = pathlib.Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
SCRIPTS = ["launch", "cache", "compare", "memory", "transfer", "arrays", "kernel_shapes",
           "interactive", "graphs", "cpu", "first_load"]
MODULES = ["common", "kernels", "children", "peers", *SCRIPTS]


@pytest.fixture(scope="module")
def bench():
    """bench/ on sys.path, as when a script runs; its modules, by name."""
    sys.path.insert(0, str(BENCH))
    try:
        yield {name: importlib.import_module(name) for name in MODULES}
    finally:
        sys.path.remove(str(BENCH))


def env_with_pymod(**extra):
    path = os.environ.get("PYTHONPATH")
    pymod = str(ROOT / "pymod")
    return {**os.environ, "PYTHONPATH": f"{pymod}:{path}" if path else pymod, **extra}


def run(args, timeout=300, **extra):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env_with_pymod(**extra), timeout=timeout)


def printed(f, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        f(*args)
    return out.getvalue()


def newest_results(suffix):
    """The newest recorded results of one script: suffix "" is compare.py's."""
    others = ("-launch", "-cache", "-memory", "-transfer", "-staging-sweep", "-graphs",
              "-staging-threshold", "-interactive", "-arrays", "-kernel-shapes",
              "-first-load",
              "-transfer-small-put", "-transfer-ring", "-transfer-pin64k",
              "-transfer-ring-wait", "-transfer-pieces")  # code taken back or changed
    paths = sorted(p for p in RESULTS.glob("*.json")
                   if p.stem.endswith(suffix) and (suffix or not p.stem.endswith(others)))
    assert paths, f"no results{suffix} in {RESULTS}"
    return json.loads(paths[-1].read_text())


# ---- importing and options ---------------------------------------------------------------------

def test_every_bench_module_imports(bench):
    for name in SCRIPTS:
        assert callable(bench[name].main), name
    assert callable(bench["peers"].build) and callable(bench["children"].main)


@pytest.mark.parametrize("script, options", [
    ("launch", ["--quick", "--out"]),
    ("cache", ["--quick", "--out"]),
    ("compare", ["--quick", "--out"]),
    ("memory", ["--quick", "--out"]),
    ("transfer", ["--quick", "--out", "--sweep"]),
    ("arrays", ["--quick", "--out"]),
    ("kernel_shapes", ["--quick", "--out"]),
    ("interactive", ["--quick", "--out", "--arch"]),
    ("first_load", ["--repeats", "--out"]),
    ("graphs", ["--quick", "--out"]),
    ("cpu", ["--quick", "--callgrind", "--json"]),
])
def test_every_script_parses_its_options(script, options):
    done = run([BENCH / f"{script}.py", "--help"], timeout=60)
    assert done.returncode == 0, done.stderr
    for option in options:
        assert option in done.stdout, f"{script}.py --help does not name {option}"


def test_children_and_peers_say_how_to_run_them():
    done = run([BENCH / "children.py", "compare", "nothing"], timeout=60)
    assert done.returncode != 0 and "usage: children.py compare {kiln," in done.stderr
    done = run([BENCH / "peers.py"], timeout=60)
    assert done.returncode != 0 and "python3 bench/peers.py fetch" in done.stderr


def test_peers_without_vendor_says_to_fetch(bench, tmp_path, monkeypatch):
    monkeypatch.setattr(bench["peers"], "VENDOR", tmp_path)
    with pytest.raises(SystemExit, match=r"no pycuda-\*\.tar\.gz in .*; run `python3 "
                       r"bench/peers.py fetch`"):
        bench["peers"].build()


# ---- the C parts -------------------------------------------------------------------------------

def test_every_c_part_builds(bench, tmp_path):
    """gcc, the toolkit's headers and the driver's link stub: what the GPU machine builds first.
    compile.c links build/libkiln.a, which make test builds before pytest runs."""
    common = bench["common"]
    baseline = common.build_c_parts(tmp_path)
    programs = [baseline] + [common.build_driver_program(name, tmp_path)
                             for name in ("compare", "transfer", "memory", "graphs")]
    programs.append(common.build_compile(tmp_path))
    floor = tmp_path / ("kiln_floor" + sysconfig.get_config_var("EXT_SUFFIX"))
    for path in programs + [floor]:
        assert path.exists() and path.read_bytes()[:4] == b"\x7fELF", path
    # The compile program needs no GPU: it fills a cache folder through the engine's writer.
    source = tmp_path / "source.cu"
    source.write_text(bench["kernels"].CACHE_SOURCE)
    filled = common.run_compile(programs[-1], "fill", source, 3,
                                {**os.environ, "KILN_CACHE_DIR": str(tmp_path / "cache")})
    assert filled["bytes"] > 0 and filled["fill_s"] >= 0


# ---- what runs without a GPU ---------------------------------------------------------------------

def test_cache_bench_runs_whole(tmp_path):
    """bench/cache.py --quick measures everything but the launches without a GPU; its scratch
    caches go under tmp_path here (its smoke results under build/bench/results/)."""
    done = run([BENCH / "cache.py", "--quick", "--out", tmp_path], timeout=600,
               XDG_CACHE_HOME=str(tmp_path / "xdg"))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for line in ("cold compile, ms", "in-process hit, µs per call", "disk hit in a new process",
                 "10,000 entries in the folder", "cold compile, kiln / bare NVRTC"):
        assert line in done.stdout, line
    (written,) = tmp_path.glob("*-cache.json")
    result = json.loads(written.read_text())
    assert result["disk_hit_ms"]["kiln"]["median"] > 0
    assert set(result["lookup_ms"]) == {"10", "100", "1000", "10000"}
    if not HAVE_GPU:
        assert result["skipped"]["kiln-launch"].startswith("no GPU")


def test_cpu_bench_runs_whole(tmp_path):
    """bench/cpu.py needs no GPU: it builds its driver that does no work and the floor against
    it, and times both launching every args<n>, and kiln's prepared_call."""
    out = tmp_path / "cpu.json"
    done = run([BENCH / "cpu.py", "--quick", "--json", out])
    assert done.returncode == 0, done.stderr
    result = json.loads(out.read_text())
    assert result["unit"] == "ns per call"
    names = [f"{way} {n}" for n in (1, 4, 16, 64)
             for way in ("floor", "floor keywords", "kiln", "floor written", "kiln written")]
    for name in names + ["kiln prepared_call 4"]:
        assert result["figures"][name] > 0, name
    assert "kiln - floor" in done.stdout and "prepared_call, 4 arguments" in done.stdout
    assert "written out: f(a0, ..., block=, grid=)" in done.stdout


def test_compare_kiln_child_runs_to_the_device(tmp_path):
    """children.py's kiln disk hit and first call: done where there is a GPU; without one,
    everything before the first device use runs, and the error says there is no device."""
    env = {"KILN_CACHE_DIR": str(tmp_path / "cache")}
    for mode in ("disk", "first"):
        args = [BENCH / "children.py", "compare", "kiln", mode, "", tmp_path / "pycuda",
                ROOT / "pymod"]
        done = run(args, timeout=120, **env)  # fills the cache
        if not HAVE_GPU:
            assert done.returncode != 0
            assert re.search(r"^kiln\.\w*Error: ", done.stderr, re.M), done.stderr
            continue
        assert done.returncode == 0, done.stderr
        done = run(args, timeout=120, **env)
        out = json.loads(done.stdout.strip().splitlines()[-1])
        assert out["hit"] is True and out["ms"] > 0, out


def test_arrays_first_operator_child_runs_to_the_device(tmp_path):
    """children.py's first x * y: measured where there is a GPU (the second process finds the
    kernel on disk); without one, it stops at the first device use, saying so."""
    env = {"KILN_CACHE_DIR": str(tmp_path / "cache")}
    args = [BENCH / "children.py", "arrays", "first_operator"]
    done = run(args, timeout=120, **env)
    if not HAVE_GPU:
        assert done.returncode != 0
        assert re.search(r"^kiln\.\w*Error: ", done.stderr, re.M), done.stderr
        return
    assert done.returncode == 0, done.stderr
    out = json.loads(run(args, timeout=120, **env).stdout.strip().splitlines()[-1])
    assert out["ms"] > 0, out


def test_arrays_report_from_a_results_file(bench):
    result = {"figures": {"elementwise_us": {"1000": {"kiln": {"median": 4.0},
                                                      "torch": {"median": 8.0}}}},
              "gpu": "G", "date": "D"}
    table = bench["arrays"].markdown(result)
    assert "| z = x*y into z, n = 10^3, µs | 4 | 8 (2.00×) |" in table
    result["figures"]["elementwise_us"]["1000"]["floor"] = {"median": 2.0}
    table = bench["arrays"].markdown(result)
    assert "| 2 (kiln 2.00×) |" in table


def test_graphs_report_from_a_results_file(bench):
    result = {"figures": {"sequence_us": {"kiln_graph": {"median": 0.5},
                                          "c_graph": {"median": 0.4},
                                          "torch_graph": {"median": 1.0}},
                          "update_us": {"kiln_update": {"median": 0.4}},
                          "launch_kinds_us": {"plain": {"median": 2.0},
                                              "cooperative": {"median": 2.1}}},
              "gpu": "G", "date": "D"}
    table = bench["graphs"].markdown(result)
    assert ("| 100 calls replayed as a graph, µs per kernel | 0.5 | 0.4 (0.80×) | — | "
            "1 (2.00×) |") in table
    assert "| one kernel's arguments replaced, µs | 0.4 | — | — | — |" in table
    assert "| cooperative | 2.1 | 1.05× |" in table
    assert "| cluster | — | — |" in table


@pytest.mark.parametrize("mode", ["disk", "first"])
@pytest.mark.parametrize("system", ["kiln", "cupy", "cuda_core", "pycuda_call"])
def test_compare_child_runs_every_step_on_stand_ins(system, mode, tmp_path):
    """Every step of every system's program (import, context, compile, launch, read back,
    check) against the stand-ins of tests/bench_fakes/, which check their arguments as the
    real systems need them: a call that would fail on the GPU machine fails here."""
    fakes = pathlib.Path(__file__).resolve().parent / "bench_fakes"
    done = subprocess.run([sys.executable, BENCH / "children.py", "compare", system, mode,
                           fakes, tmp_path / "pycuda", fakes], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(fakes)}, timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["ms"] > 0 and out["hit"] is (True if system == "kiln" else None), out


def test_compare_c_disk_hit_runs_every_step_on_the_fake_driver(bench, tmp_path):
    """compare.c's disk hit in a new process, on bench/fakecuda (a driver that launches
    nothing): every driver call from the context to the copy back succeeds, and the check after
    the clock finds that args4 wrote nothing, so a run that computed nothing gives no figure."""
    program = bench["common"].build_driver_program("compare", tmp_path)
    fake = bench["cpu"].build(tmp_path / "fake")
    cubin = tmp_path / "args4.cubin"
    cubin.write_bytes(b"any image: the fake loads anything")
    env = {**os.environ, "LD_LIBRARY_PATH": str(fake)}  # before the real driver, if any

    def compare(*args):
        return subprocess.run([program, *args], capture_output=True, text=True, timeout=60,
                              env=env)
    done = compare("disk", cubin)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    assert done.stderr.strip() == "compare: args4 wrote 0, not 6"
    done = compare("disk", tmp_path / "missing.cubin")
    assert done.returncode == 1 and "missing.cubin" in done.stderr
    done = compare("disk")
    assert done.returncode == 2 and "| disk CUBIN |" in done.stderr


@pytest.mark.parametrize("count", [1, 4, 16, 64])
def test_written_out_loop_calls_with_its_arguments_one_by_one(bench, count):
    """common.written_out: the call in the loop's text names every argument and keyword, and
    each call gets them all, in order; up to CPython's limit of about 30 arguments on the stack
    the call is one CALL with no tuple unpacked and no dict built (the form a user's launch
    with its arguments written out compiles to)."""
    import dis
    common = bench["common"]
    names = [f"a{i}" for i in range(count)]
    source = common.written_out_source(count, ("block", "grid"))
    assert f"        call({', '.join(names)}, block=block, grid=grid)\n" in source
    assert "*" not in source
    calls, syncs = [], []
    args = tuple(range(100, 100 + count))
    loop = common.written_out(lambda *a, **k: calls.append((a, k)), args,
                              {"block": (32, 1, 1), "grid": (1, 1)}, lambda: syncs.append(1))
    loop(3)
    assert calls == [(args, {"block": (32, 1, 1), "grid": (1, 1)})] * 3 and syncs == [1]
    plain = common.written_out(lambda *a, **k: calls.append((a, k)), args)
    calls.clear()
    plain(2)
    assert calls == [(args, {})] * 2
    assert common.written_out_source(count, sync=False).count("sync") == 0
    if count <= 16:
        ops = {i.opname for i in dis.get_instructions(loop)}
        assert not ops & {"CALL_FUNCTION_EX", "BUILD_MAP", "DICT_MERGE", "BUILD_LIST"}, ops


@pytest.fixture
def stand_ins(bench, monkeypatch):
    """compare.py with kiln and the floor replaced by the stand-ins of tests/bench_fakes/, and a
    PyCUDA made of its stand-ins."""
    compare = bench["compare"]
    fakes = pathlib.Path(__file__).resolve().parent / "bench_fakes"
    monkeypatch.setattr(sys, "path", [*sys.path, str(fakes)])  # fakedevice, after the real ones
    # The real CuPy and cuda.core, where installed, stay out of this process's ways: they would
    # run beside the stand-in kiln, and cuda's namespace package would take in the stand-ins'
    # folder for the rest of the session (a later real import of CuPy then fails).
    for name in ("cupy", "cuda", "cuda.core"):
        monkeypatch.setitem(sys.modules, name, None)
    fake_kiln = load_stand_in("fake_kiln", fakes / "kiln" / "__init__.py")
    monkeypatch.setitem(sys.modules, "kiln_floor",
                        load_stand_in("fake_kiln_floor", fakes / "kiln_floor.py"))
    drv = load_stand_in("fake_pycuda_driver", fakes / "pycuda" / "driver.py")
    compiler = load_stand_in("fake_pycuda_compiler", fakes / "pycuda" / "compiler.py")
    monkeypatch.setattr(compare, "kiln", fake_kiln)
    pycuda = types.SimpleNamespace(
        reason=None, drv=drv,
        module=lambda source: compiler.SourceModule(source, no_extern_c=True, cache_dir="unused"))
    return compare, fake_kiln, pycuda


@pytest.mark.parametrize("count", [1, 4, 16, 64])
def test_compare_launch_ways_on_stand_ins(stand_ins, count):
    """compare.py's launch ways, both forms of the call, at every argument count: each is set up,
    checked for the sum its kernel writes and timed on the stand-ins; then split into the two
    launch figures by form."""
    compare, fake_kiln, pycuda = stand_ins
    problems = {}
    module = fake_kiln.SourceModule(compare.SOURCE)
    ways = compare.launch_ways(count, module, compare.SOURCE.encode(), pycuda, problems)
    both = ("floor", "kiln", "pycuda_call", "pycuda_prepared")
    expected = {*both, "floor_keywords", *(k + compare.WRITTEN for k in both)}
    assert expected <= set(ways.loops), problems
    assert not expected & set(problems)
    measured = ways.measure(20, 2)
    assert expected <= set(measured) and all(len(measured[k]) == 2 for k in expected)
    split = compare.by_form(measured, problems)
    unpacked, written = split["launch_us"][0], split["launch_written_us"][0]
    assert {*both, "floor_keywords"} <= set(unpacked) and set(both) <= set(written)
    assert written["kiln"] is measured["kiln_written"]
    assert not any(k.endswith(compare.WRITTEN) for k in unpacked)


def test_compare_written_out_ways_are_checked(stand_ins, monkeypatch):
    """A written-out loop that passes the wrong arguments is caught before it is timed, and its
    system is left out of the row with the reason."""
    compare, fake_kiln, pycuda = stand_ins
    common = sys.modules["common"]

    def off_by_one(call, args, keywords=None, sync=None):
        return common.written_out(call, (*args[:-1], args[-1] + 1), keywords, sync)

    monkeypatch.setattr(compare, "written_out", off_by_one)
    problems = {}
    ways = compare.launch_ways(4, fake_kiln.SourceModule(compare.SOURCE),
                               compare.SOURCE.encode(), pycuda, problems)
    assert "kiln_written" not in ways.loops and "floor_written" not in ways.loops
    assert problems["kiln_written"] == "AssertionError: kiln, written out wrote 7, not 6"
    assert problems["floor_written"] == ("AssertionError: the floor, written out wrote 7, "
                                         "not 6")
    assert {"kiln", "floor", "floor_keywords"} <= set(ways.loops)


def load_stand_in(name, path):
    """A stand-in of tests/bench_fakes/ under a name of its own, beside the real module."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_compare_pycuda_surface_ways_on_stand_ins(stand_ins):
    """compare.py's prepared_call and constant-memory ways, every step (set-up, the check of
    what each wrote, the timed loops), on the stand-ins of kiln and PyCUDA; then the targets
    worked out from figures."""
    compare, fake_kiln, pycuda = stand_ins
    problems = {}
    module = fake_kiln.SourceModule(compare.SOURCE)
    measured = compare.prepared_ways(module, pycuda, problems).measure(20, 2)
    ways = {"kiln_call", "kiln", "pycuda_prepared"}
    assert problems == {} and set(measured) == ways | {w + compare.WRITTEN for w in ways}
    assert all(len(t) == 2 and min(t) > 0 for t in measured.values())
    measured = compare.global_ways(pycuda, problems).measure(20, 2)
    assert problems == {} and set(measured) == {"kiln", "pycuda_call"}
    # A peer that cannot run says why, and the row goes on without it.
    broken = types.SimpleNamespace(reason="PyCUDA is not built")
    measured = compare.global_ways(broken, problems).measure(20, 2)
    assert set(measured) == {"kiln"} and problems == {"pycuda_call": "RuntimeError: PyCUDA is "
                                                                      "not built"}
    figures = {"launch_written_us": {str(n): {"kiln": [1.0 + n], "floor": [1.0], "c": [9.0]}
                                     for n in (1, 4, 16, 64)},
               "launch_us": {str(n): {"kiln": [2.0], "floor_keywords": [n], "floor": [9.0]}
                             for n in (1, 4, 16, 64)},
               "prepared_us": {"kiln": [3.0, 3.2], "kiln_call": [3.0], "pycuda_prepared": [5.0],
                               "kiln_written": [2.2], "kiln_call_written": [2.0]},
               "global_us": {"kiln": [2.5], "c": [2.0]},
               "cold_compile_ms": {"kiln": [10.0, 10.4, 30.0], "c": [10.0], "cuda_core": [11.0]},
               "cold_compile_c_ms": {"kiln": [9.9], "c": [9.0]}}
    assert list(compare.targets({"figures": figures}).values()) == [
        2.0, 5.0, 17.0, 65.0, 2.0, 0.5, 0.125, pytest.approx(2 / 64),
        pytest.approx(3.1 / 3.0), pytest.approx(1.1), pytest.approx(3.1 / 5.0),
        pytest.approx(0.5), pytest.approx(1.04), pytest.approx(1.1), pytest.approx(10.4 / 11.0)]
    assert list(compare.targets({"figures": figures}))[0] == (
        "launch x the floor, written out, at 1 argument (at most 1.05)")
    ratios = compare.floor_ratios({"figures": figures})
    assert "| 1 | 0.22 | 2.00 | 2.00 |" in ratios and "| 64 | 0.22 | 0.03 | 65.00 |" in ratios
    assert set(compare.targets({"figures": {}}).values()) == {None}
    short = printed(compare.short_table, {**newest_results(""), "targets": compare.targets(
        {"figures": figures})})
    assert "prepared_call over kiln's own call, 4 arguments (at most 1.05)" in short


def test_compare_disk_hit_row_keeps_c_new_process_and_reload_apart(bench):
    """C's disk hit is a new process; the module reloaded in a warm process has a row of its
    own. A results file from before that has its C disk hit read as the reload it was."""
    compare = bench["compare"]
    old = {"figures": {"disk_hit_ms": {"c": [0.05], "kiln": [1.4]}}, "problems": {}}
    read = compare.as_measured(old)
    assert read["figures"]["reload_hit_ms"] == {"c": [0.05]}
    assert read["figures"]["disk_hit_ms"] == {"kiln": [1.4]}
    assert read["problems"]["c:disk_hit_ms"].startswith("not measured in this run")
    assert old["figures"]["disk_hit_ms"] == {"c": [0.05], "kiln": [1.4]}  # left as it was
    current = {"figures": {"disk_hit_ms": {"c": [0.125], "kiln": [1.5]},
                           "reload_hit_ms": {"c": [0.05]}}, "problems": {}}
    assert compare.as_measured(current) is current
    table = compare.markdown(current)
    assert "| disk hit, new process, ms | 0.125 | — | 1.5 (12.00×) |" in table
    assert "| module reload in a warm process, ms | 0.05 | — [" in table
    assert "raw C only: the module loaded again from its file" in table
    assert "| disk hit, new process, ms | — [" in compare.markdown(old)


def test_cold_compile_systems_take_turns(bench):
    """compare.py's cold row: each repeat gives every system a text none has compiled, a
    different system goes first each time, and one that fails is left out with the reason."""
    common, compare = bench["common"], bench["compare"]
    assert [common.turns("abc", r) for r in range(4)] == [
        list("abc"), list("bca"), list("cab"), list("abc")]
    assert common.turns([], 3) == []
    calls = []

    def way(name):
        return lambda src: calls.append((name, src))

    def broken(src):
        raise ValueError("no device")

    problems = {}
    times = compare.measure_cold({"c": way("c"), "kiln": way("kiln"), "cupy": broken,
                                  "cuda_core": way("cuda_core")}, 3, problems)
    assert set(times) == {"c", "kiln", "cuda_core"}
    assert all(len(t) == 3 and min(t) >= 0 for t in times.values())
    assert problems == {"cupy:cold_compile_ms": "ValueError while timed: no device"}
    sources = [src for _, src in calls]
    assert len(set(sources)) == 3  # one text per repeat, the same for every system
    assert all(src.startswith(compare.SOURCE) for src in sources)
    firsts = [calls[0][0], calls[3][0], calls[6][0]]
    assert firsts == ["c", "kiln", "cuda_core"]  # cupy's turn went to the next in line


def test_bare_nvrtc_builds_kiln_cubin_with_kiln_options(bench, tmp_path, monkeypatch):
    """The bare side of the cold row is only a fair floor when it gives NVRTC exactly what kiln
    gives it: with kiln_options it builds kiln's very CUBIN and PTX, with -lineinfo left out it
    does not, and KILN_LINEINFO=0 takes -lineinfo out of both."""
    import kiln
    common, kernels = bench["common"], bench["kernels"]
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    library = kiln.nvrtc_where()["library"]
    src = kernels.COMPARE_SOURCE + "\n// bare beside kiln\n"
    module = kiln.SourceModule(src)
    options = common.kiln_options(module.arch)
    assert options[0] == f"-arch={module.arch}" and "-lineinfo" in options
    ptx, cubin = common.BareNvrtc(library, options).compile(src)
    assert cubin == module.cubin and ptx.decode() == module.ptx
    without = [o for o in options if o != "-lineinfo"]
    assert common.BareNvrtc(library, without).compile(src)[1] != module.cubin
    monkeypatch.setenv("KILN_LINEINFO", "0")
    assert common.kiln_options(module.arch) == without
    plain = kiln.SourceModule(src)
    assert plain.cubin != module.cubin
    assert common.BareNvrtc(library, without).compile(src)[1] == plain.cubin
    with pytest.raises(RuntimeError, match=r"nvrtcCompileProgram failed: "
                                           r"NVRTC_ERROR_COMPILATION: .*expected a declaration"):
        common.BareNvrtc(library, options).compile("not cuda at all")


@pytest.mark.gpu
def test_bare_nvrtc_loads_the_cubin_it_built(bench, tmp_path, monkeypatch):
    """The bare side ends where kiln's way does: the kernel loaded on device 0, whose limit it
    reads as kiln does."""
    import kiln
    common, kernels = bench["common"], bench["kernels"]
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    src = kernels.COMPARE_SOURCE + "\n// bare load\n"
    f = kiln.SourceModule(src).get_function("args4")
    bare = common.BareNvrtc(kiln.nvrtc_where()["library"],
                            common.kiln_options(kiln.SourceModule(src).arch))
    _, cubin = bare.compile(src)
    assert bare.load(cubin, "args4") == f.max_threads_per_block > 0
    with pytest.raises(RuntimeError, match="cuLibraryGetKernel failed"):
        bare.load(cubin, "no_such_kernel")


# ---- the reports, made again from the recorded results -------------------------------------------

def test_launch_report(bench):
    launch = bench["launch"]
    result = newest_results("-launch")
    medians = {k: v["median"] for k, v in {**result["launch_us"],
                                           **result["round_trip_us"]}.items()}
    assert set(result["ratios"]) <= set(launch.ratios(medians))
    table = printed(launch.print_table, result)
    assert "launch overhead, µs per launch" in table and "ratios (lower is better)" in table
    for label in ("kiln launch / floor", "kiln round trip / C, buffers kept"):
        assert label in table


def test_cache_report(bench):
    cache = bench["cache"]
    result = newest_results("-cache")
    assert set(result["figures"]) <= set(cache.figures(result))
    table = printed(cache.print_table, result)
    for line in ("cold compile, ms", "lookup at scale", "figures (lower is better)"):
        assert line in table


def test_memory_report(bench):
    memory = bench["memory"]
    result = newest_results("-memory")
    figures = memory.figures(result["alloc_free_us"], result["copy_512mib_gbs"])
    assert set(result["figures"]) <= set(figures)
    table = printed(memory.print_table, result)
    assert "alloc + free of 4 KiB" in table and "512 MiB to_device + get" in table


def test_transfer_report(bench):
    transfer = bench["transfer"]
    result = newest_results("-transfer")
    figures = transfer.figures({int(n): row for n, row in result["gbs_median"].items()})
    assert set(result["figures"]) <= set(figures)
    table = printed(transfer.print_table, result)
    assert "GB/s, median" in table and "kiln_in" in table


def test_compare_report_and_the_performance_page(bench):
    """The table, the comparison with the peers and the page's section come out of the
    recorded figures; the page names the results file its section was written from."""
    compare = bench["compare"]
    page = (ROOT / "docs" / "performance.md").read_text()
    section = re.search(re.escape(compare.PAGE_BEGIN) + ".*?" + re.escape(compare.PAGE_END),
                        page, re.S)
    assert section, "docs/performance.md has no compare section"
    named = re.search(r"results in `bench/results/([^`]+\.json)`", section.group(0))
    result = json.loads((RESULTS / named.group(1)).read_text())
    table = compare.markdown(result)
    for _, _, label, unit, _ in compare.ROWS:
        assert f"| {label}, {unit} |" in table
    block = compare.performance_block(result, table)
    assert block.startswith(compare.PAGE_BEGIN) and block.endswith(compare.PAGE_END)
    assert set(result["kiln_vs_peers"]) <= set(compare.kiln_vs_peers(result))
    short = printed(compare.short_table, result)
    assert "kiln over each peer (below 1: kiln is faster)" in short
