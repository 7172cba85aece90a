"""`python -m kiln COMMAND`: demo, doctor, compile, cache, sanitize; only demo and sanitize
need a GPU.

    python -m kiln demo
    python -m kiln doctor [--gpu]
    python -m kiln compile kernel.cu [more.cu ...] --arch sm_80,sm_90 [-D NAME=VALUE] [-I DIR]
                                     [--option=-lineinfo] [-o kernel.cubin]
    python -m kiln cache info | list | prune [--max-bytes N] | clear
    python -m kiln cache export FILE [--from DIR] | import FILE [--into DIR]
    python -m kiln sanitize [--tool memcheck] script.py [ARGS...]
"""
import argparse
import os
import stat
import sys
import time

# A source larger than this is no kernel; reading it would only fill memory.
MAX_SOURCE_BYTES = 64 << 20


class CommandError(Exception):
    """What the user asked for cannot be done; printed as one line, exit status 1."""


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


def read_source(path):
    """The text of the source file at path, or CommandError saying why there is none: opened
    without waiting (a FIFO or a device is refused, not read), at most MAX_SOURCE_BYTES, UTF-8."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise CommandError(f"cannot open {path}: {e.strerror}") from None
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise CommandError(f"{path} is a folder, not a CUDA source file")
        if not stat.S_ISREG(st.st_mode):
            raise CommandError(f"{path} is not a regular file, so it is not read")
        if st.st_size > MAX_SOURCE_BYTES:
            raise CommandError(f"{path} is {_size(st.st_size)}, larger than any source "
                               f"({_size(MAX_SOURCE_BYTES)} at most)")
        chunks, left = [], MAX_SOURCE_BYTES + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as e:
        raise CommandError(f"cannot read {path}: {e.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_SOURCE_BYTES:  # it grew while read
        raise CommandError(f"{path} is larger than any source ({_size(MAX_SOURCE_BYTES)} at most)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CommandError(f"{path} is not UTF-8 text (byte {e.start} is 0x{data[e.start]:02x})") \
            from None


def _check_archs(kiln, archs):
    """Every --arch NVRTC can compile for, checked before any compile starts, so that a bad one
    is one line and not a failure per source."""
    import re
    supported = kiln._kiln.nvrtc_info()["archs"]
    for arch in archs:
        if arch is None:  # the device's, or NVRTC's oldest: always one it supports
            continue
        m = re.fullmatch(r"(?:sm|compute)_(\d+)[af]?", arch)
        if not m or f"sm_{m.group(1)}" not in supported:
            raise CommandError(f"arch {arch!r} is not one NVRTC supports; it supports "
                               f"{', '.join(supported)}")


def compile_command(args):
    import kiln

    options = [f"-D{d}" for d in args.define] + list(args.option)
    archs = [a.strip() for a in args.arch.split(",") if a.strip()] if args.arch else [None]
    if not archs:
        raise CommandError(f"--arch {args.arch!r} names no arch; write e.g. --arch sm_80,sm_90")
    _check_archs(kiln, archs)
    if args.output and (len(archs) != 1 or len(args.file) != 1):
        print("kiln: -o writes one file, so it takes one source and one --arch; without -o, "
              "compile fills the cache for every source and arch", file=sys.stderr)
        return 2
    sources = [read_source(path) for path in args.file]
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
            try:
                with open(args.output, "wb") as f:
                    f.write(data)
            except OSError as e:
                raise CommandError(f"cannot write {args.output}: {e.strerror}") from None
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


def sanitize_command(args):
    from . import _sanitize

    return _sanitize.run(args.script, args.args, tool=args.tool,
                         extra=args.sanitizer_option, dry_run=args.print_command)


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
                      help="an NVRTC option, e.g. --option=-lineinfo or --option -lineinfo")
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
    from . import _cachefile
    _cachefile.add_parsers(actions)

    san = sub.add_parser("sanitize", help="run a Python script under compute-sanitizer with "
                         "kiln's settings")
    san.add_argument("--tool", default="memcheck",
                     choices=["memcheck", "racecheck", "initcheck", "synccheck"])
    san.add_argument("--sanitizer-option", action="append", default=[], metavar="=OPT",
                     help="one more compute-sanitizer option, written --sanitizer-option="
                     "--leak-check=full")
    san.add_argument("--print-command", action="store_true",
                     help="print the command and its environment instead of running it")
    san.add_argument("script", help="the Python script")
    san.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")

    args = parser.parse_args(_join_option_values(sys.argv[1:] if argv is None else argv))
    if args.command == "demo":
        from . import demo
        return demo.main()
    if args.command == "doctor":
        from . import doctor
        return doctor.main(["--gpu"] if args.gpu else [])
    try:
        if args.command == "compile":
            return compile_command(args)
        if args.command == "cache" and args.action in ("export", "import"):
            return _cachefile.command(args)
        if args.command == "cache":
            return cache_command(args)
        if args.command == "sanitize":
            return sanitize_command(args)
    except CommandError as e:
        return _fail(e)
    except (OSError, ValueError, TypeError, OverflowError) as e:
        return _fail(e)
    except Exception as e:  # kiln.Error and its kinds: the engine's one-line message
        import kiln
        if isinstance(e, kiln.Error):
            return _fail(e)
        raise
    return 2


def _fail(e):
    # A compile error's message is the whole log, which the user needs; every other is one line.
    text = str(e) if type(e).__name__ == "CompileError" else " ".join(str(e).split())
    print(f"python -m kiln: error: {text}", file=sys.stderr)
    return 1


def _join_option_values(argv):
    """`--option -lineinfo` as `--option=-lineinfo`: argparse takes a value that starts with a
    dash for an option of its own, and NVRTC's options all start with one."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in ("--option", "--name-expression") and i + 1 < len(argv):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


if __name__ == "__main__":
    sys.exit(main())
