"""`python -m kiln doctor`: what kiln finds on this machine, and for each problem the next step.

Checks the driver and GPUs, NVRTC (path, version, archs), the toolkit headers, the arch kiln
will compile for, the cache folder (health and permissions) and staging, then compiles two
small kernels. Needs no GPU: a machine without one can compile, and says so. The exit status is
1 when something is broken (NVRTC missing, a compile failing, an unusable cache folder; with
--gpu, no GPU), else 0.
"""
import os
import stat
import sys

OK, NOTE, WARN, FAIL = "ok", "note", "warn", "FAIL"


class Report:
    def __init__(self, out):
        self.out = out
        self.items = []

    def add(self, level, what, detail, fix=None):
        self.items.append((level, what, detail, fix))
        print(f"[{level:>4}] {what}: {detail}", file=self.out)
        if fix:
            print(f"       next step: {fix}", file=self.out)

    @property
    def broken(self):
        return any(level == FAIL for level, *_ in self.items)


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def check_driver(r, kiln, need_gpu):
    try:
        version = kiln._kiln.get_driver_version()
        count = kiln.Device.count()
    except kiln.Error as e:
        level = FAIL if need_gpu else WARN
        r.add(level, "driver", f"none usable: {e}",
              "kernels compile here but cannot launch; install the NVIDIA driver (libcuda.so.1) "
              "or set KILN_CUDA_PATH to it, on a machine with a GPU")
        return []
    r.add(OK, "driver", f"CUDA {version // 1000}.{version % 1000 // 10} (libcuda), "
          f"kiln built against CUDA headers {kiln._kiln.get_version()[0]}.{kiln._kiln.get_version()[1]}")
    if count == 0:
        r.add(FAIL if need_gpu else WARN, "GPUs", "the driver sees none",
              "check nvidia-smi, and CUDA_VISIBLE_DEVICES (now "
              f"{os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')!r})")
        return []
    caps = []
    for i in range(count):
        d = kiln.Device(i)
        major, minor = d.compute_capability()
        caps.append(major * 10 + minor)
        r.add(OK, f"GPU {i}", f"{d.name()}, sm_{major}{minor}, {_size(d.total_memory())}, "
              f"PCI {d.pci_bus_id()}")
    return caps


def check_nvrtc(r, kiln):
    try:
        info = kiln._kiln.nvrtc_info()
    except kiln.Error as e:
        r.add(FAIL, "NVRTC", str(e),
              "install the CUDA toolkit's NVRTC (or pip install nvidia-cuda-nvrtc-cu12) and "
              "set KILN_NVRTC_PATH to libnvrtc.so if it is not under /usr/local/cuda")
        return None
    major, minor = info["version"]
    r.add(OK, "NVRTC", f"{major}.{minor} at {info['path'] or '(path unknown)'}; archs "
          f"{', '.join(info['archs'])}")
    if (major, minor) < (12, 8):
        r.add(NOTE, "precompiled headers", f"NVRTC {major}.{minor} has none (12.8 added them): "
              "a kernel that includes CUB recompiles in full after each edit",
              "use NVRTC 12.8 or newer for fast recompiles")
    return info


def check_headers(r, info):
    inc = info["include_dir"]
    if not inc:
        r.add(WARN, "toolkit headers", "not found beside NVRTC nor under $CUDA_HOME, "
              "$CUDA_PATH, /usr/local/cuda: <cuda_fp16.h>, <cuda_bf16.h> and CUB cannot be "
              "included", "install the CUDA toolkit's headers (cuda-cudart-dev) or set CUDA_HOME")
        return
    missing = [h for h in ("cuda_fp16.h", "cuda_bf16.h") if not os.path.exists(
        os.path.join(inc, h))]
    cccl = info["cccl_dir"] or inc
    has_cub = os.path.exists(os.path.join(cccl, "cub", "cub.cuh"))
    detail = f"{inc}" + (f" and {info['cccl_dir']}" if info["cccl_dir"] else "")
    if missing:
        r.add(WARN, "toolkit headers", f"{detail} lacks {', '.join(missing)}",
              "reinstall the CUDA toolkit's headers")
    else:
        r.add(OK, "toolkit headers", detail + ("; CUB/CCCL found" if has_cub else ""))
    if not has_cub:
        r.add(NOTE, "CUB", f"not found under {cccl}: #include <cub/...> will fail",
              "install the toolkit's CCCL headers, or pass include_dirs= to SourceModule")


def check_arch(r, kiln, caps, info):
    try:
        arch = kiln._kiln.default_arch()
    except (kiln.Error, ValueError) as e:
        r.add(FAIL, "arch", str(e), "set KILN_ARCH to one of NVRTC's archs, or pass arch=")
        return
    why = ("from KILN_ARCH" if os.environ.get("KILN_ARCH") else
           "the current GPU's" if caps else "no GPU: the oldest NVRTC supports, whose PTX "
           "newer GPUs run")
    r.add(OK, "arch", f"{arch} ({why})")
    if caps and info:
        newest = max(int(a[3:].rstrip("af")) for a in info["archs"])
        if max(caps) > newest:
            r.add(WARN, "arch", f"a GPU is sm_{max(caps)}, newer than NVRTC's newest "
                  f"(sm_{newest}): its code is compiled for sm_{newest}",
                  "install a newer NVRTC for native code on that GPU")


def _folder_problem(path):
    try:
        st = os.stat(path)
    except OSError as e:
        return f"cannot be read ({e.strerror})"
    if st.st_uid != os.getuid():
        return f"belongs to uid {st.st_uid}, not you ({os.getuid()})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def check_cache(r, kiln):
    info = kiln.cache_info()
    where = info["dir"] or "-"
    if not info["enabled"]:
        off = os.environ.get("KILN_CACHE", "").lower() in ("0", "off", "no")
        r.add(NOTE if off else FAIL, "cache", f"off: {info['reason']}",
              None if off else "make the folder yours and private (chmod 700) or set "
              "KILN_CACHE_DIR to a folder of your own")
        return
    if not info["writable"]:
        r.add(WARN, "cache", f"{where} is read-only: {info['reason']}",
              f"chmod u+w {where}, or set KILN_CACHE_DIR to a folder you can write")
    else:
        problem = _folder_problem(where)
        if problem:
            r.add(FAIL, "cache", f"{where} {problem}", f"chmod 700 {where}")
        else:
            used = info["bytes"] + info["pch_bytes"]
            r.add(OK, "cache", f"{where}: {info['entries']} entries, {_size(used)} of "
                  f"{_size(info['max_bytes'])} (precompiled headers: {info['pch_files']} "
                  f"files, {_size(info['pch_bytes'])}); {info['hits']} hits, "
                  f"{info['misses']} misses, {info['evictions']} evictions recorded")
    if info["layers"]:
        r.add(OK, "cache layers", f"read-only: {info['layers']}")
    damaged = [e for e in kiln.cache_list() if e["problem"]]
    if damaged:
        r.add(WARN, "cache entries", f"{len(damaged)} damaged (first: {damaged[0]['path']}: "
              f"{damaged[0]['problem']}); kiln recompiles them", "python -m kiln cache prune "
              "or cache clear")


def check_staging(r, kiln):
    s = kiln.staging_info()
    r.add(OK, "staging", f"pageable copies of {_size(s['min_bytes'])} or more go through "
          f"pinned buffers of {_size(s['chunk_bytes'])} with {s['threads']} threads; "
          f"{s['copies']} copies staged so far")


def check_compile(r, kiln, info):
    tries = [("a kernel", 'extern "C" __global__ void doctor_k(float *x) { x[0] = 1.0f; }\n')]
    if info and info["include_dir"]:
        tries.append(("<cuda_fp16.h>", '#include <cuda_fp16.h>\n__global__ void doctor_h('
                      "__half *x) { x[0] = __float2half(1.0f); }\n"))
    for what, src in tries:
        try:
            m = kiln.SourceModule(src, cache_dir=False)
        except kiln.CompileError as e:
            r.add(FAIL, f"compile {what}", str(e).splitlines()[0],
                  "see the log above; a broken toolkit install is the usual cause")
        except (kiln.Error, ValueError) as e:
            r.add(FAIL, f"compile {what}", str(e))
        else:
            names = [m.get_function(k).declaration for k in m.kernels]
            r.add(OK, f"compile {what}", f"{m.arch}: {', '.join(names)}")


def main(argv=None, out=None):
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kiln doctor",
                                      description="check kiln's set-up on this machine")
    parser.add_argument("--gpu", action="store_true", help="a missing GPU is a failure")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    import kiln

    r = Report(out)
    print(f"kiln {kiln.__version__}, Python {sys.version.split()[0]}, {sys.platform}", file=out)
    caps = check_driver(r, kiln, args.gpu)
    info = check_nvrtc(r, kiln)
    if info:
        check_headers(r, info)
        check_arch(r, kiln, caps, info)
    check_cache(r, kiln)
    check_staging(r, kiln)
    if info:
        check_compile(r, kiln, info)
    if r.broken:
        print("something is broken: see the FAIL lines and their next steps", file=out)
        return 1
    print("kiln can compile here" + (" and launch" if caps else "; launching needs a GPU"),
          file=out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
