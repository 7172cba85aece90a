"""What kiln does, told to the standard `logging` module under the logger named "kiln".

Every SourceModule (a user's kernel or one kiln generates) is one record: compiled by NVRTC
(INFO, with its time and whether a precompiled header was made or reused), found in the cache
on disk or in the process (DEBUG), recompiled because a header changed (INFO, a "reload"), and
cache entries evicted to keep the bound (INFO). Kernels are named as the source names them.

    import logging; logging.basicConfig(level=logging.DEBUG)   # or only for kiln:
    logging.getLogger("kiln").setLevel(logging.DEBUG)

From outside the program: KILN_LOG=info (or debug, warning; 1 means info) adds a handler that
writes kiln's records to stderr.
"""
import logging
import os
import sys

from . import _kiln

logger = logging.getLogger("kiln")

_LEVELS = {"1": logging.INFO, "on": logging.INFO, "yes": logging.INFO, "true": logging.INFO,
           "info": logging.INFO, "debug": logging.DEBUG, "warning": logging.WARNING,
           "error": logging.ERROR}


def _kernels(module):
    try:  # as the source declares them, never by mangled names alone
        names = [module.get_function(k).declaration for k in module.kernels]
    except Exception:  # a module that cannot list its kernels still gets its record
        return "?"
    return ", ".join(names) if names else "no kernels"


_MEMORY, _DISK, _NVRTC = 1, 2, 3


def _on_compile(origin, module):
    # A table hit is the hot case: one cheap level check, and the report only when recorded.
    if origin == _NVRTC or module is None:
        if not logger.isEnabledFor(logging.INFO):
            return
    elif not logger.isEnabledFor(logging.DEBUG):
        return
    report = _kiln.last_compile_report()
    origin = report["origin"]
    if module is None:  # NVRTC ran and refused the source: the CompileError tells the rest
        if logger.isEnabledFor(logging.INFO):
            logger.info("compile failed after %.3f s (key %s)", report["nvrtc_seconds"],
                        report["key"][:16], extra={"kiln": report})
        return
    if origin == "nvrtc" and logger.isEnabledFor(logging.INFO):
        pch = {"made": "; precompiled header made", "used": "; precompiled header reused"}
        where = {"own": " in a compile helper", "lasting": " in the lasting compile helper"}
        why = "recompiled (a header it includes changed)" if report["stale"] else "compiled"
        logger.info("%s %s for %s in %.3f s (NVRTC%s %.3f s%s; cache miss, key %s)", why,
                    _kernels(module), module.arch, report["seconds"],
                    where.get(report.get("helper"), ""), report["nvrtc_seconds"],
                    pch.get(report["pch"], ""), report["key"][:16], extra={"kiln": report})
    elif origin in ("disk", "memory") and logger.isEnabledFor(logging.DEBUG):
        where = "the cache on disk" if origin == "disk" else "this process's table"
        verb = "reloaded" if report["stale"] else "hit"
        logger.debug("%s %s for %s from %s in %.6f s (key %s)", verb, _kernels(module),
                     module.arch, where, report["seconds"], report["key"][:16],
                     extra={"kiln": report})
    if report["evictions"] and logger.isEnabledFor(logging.INFO):
        logger.info("evicted %d cache entries to keep the cache under its bound",
                    report["evictions"], extra={"kiln": report})


def enable_from_environment(environ=os.environ):
    """Adds a stderr handler at the level KILN_LOG names, once; returns the level or None."""
    text = environ.get("KILN_LOG", "").strip().lower()
    if not text or text in ("0", "off", "no", "false"):
        return None
    level = _LEVELS.get(text)
    if level is None:
        print(f"kiln: KILN_LOG={text!r} is not a level; use info, debug or warning",
              file=sys.stderr)
        return None
    if not any(getattr(h, "_kiln_env", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("kiln %(levelname)s: %(message)s"))
        handler._kiln_env = True
        logger.addHandler(handler)
    logger.setLevel(level)
    return level


# With the logger: a hit skips the hook while the logger's level cache says DEBUG is off.
_kiln._set_compile_hook(_on_compile, logger)
enable_from_environment()
