"""`python -m kiln cache export FILE` and `import FILE`: a cache folder packed into one file, to
ship to a cluster's nodes and read there as a read-only layer (KILN_CACHE_PATH).

The file is a tar archive (gzip-compressed) of the folder's entries alone, under their own
names (`ab/cdef...`): no locks, statistics or temporary files. Import checks every entry before
it writes it: the name must be a key, and the bytes a whole entry (format, length, checksum, the
same check a cache hit makes) holding that key's code. An entry that fails is reported and left
out; the others are written, each to a temporary file renamed into place, so a reader of the
folder never sees half an entry.
"""
import io
import os
import re
import stat
import sys
import tarfile
import tempfile

from . import _kiln

_ENTRY_NAME = re.compile(r"^([0-9a-f]{2})/([0-9a-f]{62})$")
_MAX_ENTRY = 1 << 30  # the engine reads no larger entry either


def entry_problem(name, data):
    """None when data is a whole entry whose key is the one its name spells; else why not."""
    m = _ENTRY_NAME.match(name)
    if not m:
        return "its name is not a cache key (ab/ followed by 62 hex digits)"
    if len(data) < 88:
        return "it is shorter than an entry's header"
    if data[24:56].hex() != m.group(1) + m.group(2):
        return "it holds another key's code"
    try:
        _kiln._module_deserialize(data)
    except ValueError as e:
        return str(e).removeprefix("not a serialized kiln module: ")
    return None


def export_cache(path, folder=None):
    """Packs the entries of folder (default: the main cache folder) into the file path.
    Returns (entries written, [(name, problem)] left out)."""
    folder = folder or _kiln.cache_info()["dir"]
    if not folder or not os.path.isdir(folder):
        raise FileNotFoundError(f"no cache folder to export: {folder or 'the cache is off'}")
    written, skipped = 0, []
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for sub in sorted(os.listdir(folder)):
                subdir = os.path.join(folder, sub)
                if len(sub) != 2 or not os.path.isdir(subdir):
                    continue
                for leaf in sorted(os.listdir(subdir)):
                    name = f"{sub}/{leaf}"
                    if leaf.startswith("."):
                        continue  # an entry being written
                    with open(os.path.join(subdir, leaf), "rb") as f:
                        data = f.read(_MAX_ENTRY + 1)
                    why = entry_problem(name, data)
                    if why:
                        skipped.append((name, why))
                        continue
                    info = tarfile.TarInfo(name)
                    info.size = len(data)
                    info.mode = 0o600
                    tar.addfile(info, io.BytesIO(data))
                    written += 1
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return written, skipped


def import_cache(path, folder=None):
    """Unpacks the entries of the file path into folder (default: the main cache folder),
    checking each. Returns (folder, entries written, [(name, problem)] left out)."""
    folder = os.path.abspath(folder or _kiln.cache_info()["dir"] or "")
    if not folder or folder == os.path.abspath(""):
        raise FileNotFoundError("no folder to import into: the cache is off; give --into DIR")
    os.makedirs(folder, mode=0o700, exist_ok=True)
    written, skipped = 0, []
    with tarfile.open(path, "r:*") as tar:
        for member in tar:
            name = member.name
            if not member.isfile():
                skipped.append((name, "it is not a plain file"))
                continue
            if member.size > _MAX_ENTRY:
                skipped.append((name, "it is larger than any entry"))
                continue
            data = tar.extractfile(member).read()
            why = entry_problem(name, data)
            if why:
                skipped.append((name, why))
                continue
            sub, leaf = name.split("/")
            subdir = os.path.join(folder, sub)
            os.makedirs(subdir, mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=f".{leaf}.", suffix=".tmp", dir=subdir)
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                os.chmod(tmp, stat.S_IRUSR | stat.S_IWUSR)
                os.replace(tmp, os.path.join(subdir, leaf))
            except BaseException:
                if os.path.exists(tmp):
                    os.unlink(tmp)
                raise
            written += 1
    return folder, written, skipped


def command(args):
    """The `cache export` and `cache import` subcommands; returns the exit status."""
    try:
        if args.action == "export":
            written, skipped = export_cache(args.file, args.source)
            print(f"exported {written} entries to {args.file}")
        else:
            folder, written, skipped = import_cache(args.file, args.into)
            print(f"imported {written} entries into {folder}")
            print(f"read it on this node with KILN_CACHE_PATH={folder}")
    except (OSError, tarfile.TarError) as e:
        print(f"kiln: cache {args.action}: {e}", file=sys.stderr)
        return 1
    for name, why in skipped:
        print(f"left out {name}: {why}", file=sys.stderr)
    return 1 if skipped else 0


def add_parsers(actions):
    """Adds export and import to `python -m kiln cache`."""
    export = actions.add_parser("export", help="pack the cache's entries into one file")
    export.add_argument("file", help="the file to write (a .tar.gz)")
    export.add_argument("--from", dest="source", metavar="DIR",
                        help="the folder to pack (default: the cache folder)")
    imp = actions.add_parser("import", help="unpack a file made by export, checking each entry")
    imp.add_argument("file", help="the file export wrote")
    imp.add_argument("--into", metavar="DIR", help="the folder to fill, e.g. one to list in "
                     "KILN_CACHE_PATH on every node (default: the cache folder)")
