"""`python -m kiln COMMAND`: demo, doctor, compile, cache. None of them needs a GPU except demo.

    python -m kiln demo
    python -m kiln doctor [--gpu]
    python -m kiln compile kernel.cu [more.cu ...] --arch sm_80,sm_90 [-D NAME=VALUE] [-I DIR]
                                     [--option=-lineinfo] [-o kernel.cubin]
    python -m kiln cache info | list | prune [--max-bytes N] | clear
"""
import argparse
import sys
import time


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024


def _bytes(text):
    """'512M', '1G', '100000' -> bytes, for --max-bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    text = text.strip()
    scale = units.get(text[-1:].lower(), 1)
    digits = text[:-1] if scale != 1 else text
    if not digits.isdigit() or int(digits) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte count such as 500M or 1G")
    return int(digits) * scale


def compile_command(args):
    import kiln

    options = [f"-D{d}" for d in args.define] + list(args.option)
    archs = [a.strip() for a in args.arch.split(",") if a.strip()] if args.arch else [None]
    if args.output and (len(archs) != 1 or len(args.file) != 1):
        print("kiln: -o writes one file, so it takes one source and one --arch; without -o, "
              "compile fills the cache for every source and arch", file=sys.stderr)
        return 2
    sources = []
    for path in args.file:
        with open(path, encoding="utf-8") as f:
            sources.append(f.read())
    jobs = [(src, {"arch": arch}) for src in sources for arch in archs]
    names = [path for path in args.file for _ in archs]
    # Many sources compile at once, one thread each (NVRTC runs without the GIL), with a bar.
    modules = kiln.compile_many(jobs, options=options, include_dirs=args.include_dir,
                                name_expressions=args.name_expression or None,
                                progress=len(jobs) > 1, return_exceptions=True)
    failed = 0
    for name, module in zip(names, modules):
        if isinstance(module, kiln.CompileError):
            print(f"{name}: {module}" if len(args.file) > 1 else module, file=sys.stderr)
            failed += 1
            continue
        if isinstance(module, BaseException):
            raise module
        kernels = ", ".join(module.get_function(k).declaration
                            for k in module.kernels) or "no kernels"
        where = f"{name}: " if len(args.file) > 1 else ""
        if args.output:
            text = args.output.endswith(".ptx")
            data = module.ptx.encode() if text else module.cubin
            with open(args.output, "wb") as f:
                f.write(data)
            print(f"{module.arch}: {kernels}; wrote {'PTX' if text else 'CUBIN'} to "
                  f"{args.output}")
        else:
            print(f"{where}{module.arch}: {kernels}")
    if failed:
        return 1
    info = kiln.cache_info()
    if not args.output:
        where = info["dir"] if info["writable"] else f"nowhere ({info['reason']})"
        print(f"cached in {where}")
    return 0


def cache_command(args):
    import kiln

    if args.action == "info":
        info = kiln.cache_info()
        print(f"folder     {info['dir'] or '-'}")
        if info["reason"]:
            print(f"note       {info['reason']}")
        if info["layers"]:
            print(f"read-only  {info['layers']}")
        print(f"entries    {info['entries']}")
        print(f"size       {_size(info['bytes'] + info['pch_bytes'])} of "
              f"{_size(info['max_bytes'])}")
        print(f"pch        {info['pch_files']} precompiled headers, {_size(info['pch_bytes'])} "
              f"(kept by running processes)")
        print(f"hits       {info['hits']}")
        print(f"misses     {info['misses']}")
        print(f"evictions  {info['evictions']}")
    elif args.action == "list":
        for e in kiln.cache_list():
            used = time.strftime("%Y-%m-%d %H:%M", time.localtime(e["last_used"]))
            what = e["problem"] and f"damaged: {e['problem']}" or f"{e['arch']}  {e['kernels']}"
            layer = "" if e["layer"] == 0 else f"  (read-only {e['layer']})"
            print(f"{e['key'][:16]}  {_size(e['bytes']):>9}  {used}  {what}{layer}")
    elif args.action == "prune":
        print(f"removed {kiln.cache_prune(args.max_bytes)} entries")
    elif args.action == "clear":
        print(f"removed {kiln.cache_clear()} entries")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m kiln")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("demo", help="compile and run the seed's multiply_them")
    doctor = sub.add_parser("doctor", help="check the driver, GPUs, NVRTC, headers, cache")
    doctor.add_argument("--gpu", action="store_true", help="a missing GPU is a failure")

    comp = sub.add_parser("compile", help="compile .cu files into the kernel cache, or to -o")
    comp.add_argument("file", nargs="+", help="the CUDA C++ sources (compiled at once)")
    comp.add_argument("--arch", help="comma-separated archs, e.g. sm_80,sm_90 (default: the "
                      "GPU's, else $KILN_ARCH, else the oldest NVRTC supports)")
    comp.add_argument("-D", dest="define", action="append", default=[], metavar="NAME[=VALUE]")
    comp.add_argument("-I", dest="include_dir", action="append", default=[], metavar="DIR")
    comp.add_argument("--option", action="append", default=[], metavar="=OPT",
                      help="an NVRTC option, written --option=-lineinfo")
    comp.add_argument("--name-expression", action="append", metavar="EXPR",
                      help="a template instance to compile, e.g. 'axpy<float>'")
    comp.add_argument("-o", dest="output", help="write the code here instead (.ptx: PTX, "
                      "anything else: CUBIN)")

    cache = sub.add_parser("cache", help="the kernel cache: info, list, prune, clear")
    actions = cache.add_subparsers(dest="action", required=True)
    actions.add_parser("info", help="folder, entries, size, hits and misses")
    actions.add_parser("list", help="every entry, least recently used first")
    prune = actions.add_parser("prune", help="remove least recently used entries")
    prune.add_argument("--max-bytes", type=_bytes, help="the size to prune to (500M, 1G; "
                       "default $KILN_CACHE_MAX_BYTES or 1G)")
    actions.add_parser("clear", help="remove every entry")

    args = parser.parse_args(argv)
    if args.command == "demo":
        from . import demo
        return demo.main()
    if args.command == "doctor":
        from . import doctor
        return doctor.main(["--gpu"] if args.gpu else [])
    if args.command == "compile":
        return compile_command(args)
    if args.command == "cache":
        return cache_command(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
