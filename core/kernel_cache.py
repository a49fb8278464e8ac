"""On-disk cache of built OpenCL program binaries, keyed by everything that can change the binary.

Layout: ``<cache dir>/kernels-v<FORMAT_VERSION>/<key[:2]>/<key>.bin``.  Each entry is a magic line,
the SHA-256 of the payload and the payload (the device's program binary).  Writers write a temporary
file in the same directory and rename it over the entry, so readers never see half an entry and
concurrent writers cannot corrupt one; an entry that fails its checksum is reported, deleted and
rebuilt.  Any other cache error is logged and the program is built from source anyway.
"""
import hashlib
import logging
import os
import re
import tempfile
from pathlib import Path

import platformdirs

from . import env

log = logging.getLogger("convsolve")

FORMAT_VERSION = 1
_MAGIC = b"convsolve-kernel-cache-1\n"
_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def cache_dir():
    """The directory in use (the variable, else platformdirs'), or None when caching is off."""
    if env.flag(env.DISABLE_CACHE):
        return None
    base = env.CACHE_DIR.raw() or platformdirs.user_cache_dir("convsolve")
    return Path(base) / f"kernels-v{FORMAT_VERSION}"


def included_sources(source, include_dirs, seen=None):
    """{name: text} of every file ``source`` includes with #include "...", recursively."""
    seen = {} if seen is None else seen
    for name in _INCLUDE_RE.findall(source):
        if name in seen:
            continue
        for directory in include_dirs:
            path = Path(directory) / name
            if path.is_file():
                seen[name] = path.read_text()
                included_sources(seen[name], include_dirs, seen)
                break
    return seen


def cache_key(source, headers, options, device_identity):
    """Hex digest over the format version, source, included headers, options and device identity."""
    digest = hashlib.sha256(f"format {FORMAT_VERSION}\n".encode())
    for part in (source, *(f"{n}\n{t}" for n, t in sorted(headers.items())),
                 " ".join(options), repr(sorted(device_identity.items()))):
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


class KernelCache:
    """Binary store under one directory; every method logs and carries on rather than raise."""

    def __init__(self, directory):
        self.directory = Path(directory)

    def _path(self, key):
        return self.directory / key[:2] / f"{key}.bin"

    def load(self, key):
        """The cached binary for ``key``, or None on a miss or a corrupt entry (then deleted)."""
        path = self._path(key)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("kernel cache: cannot read %s (%s); building from source", path, exc)
            return None
        header_end = len(_MAGIC) + 65
        payload = blob[header_end:]
        if (blob[:len(_MAGIC)] != _MAGIC
                or blob[len(_MAGIC):header_end - 1].decode("ascii", "replace")
                != hashlib.sha256(payload).hexdigest()):
            log.warning("kernel cache: corrupt entry %s deleted; rebuilding", path)
            self.discard(key)
            return None
        return payload

    def store(self, key, binary):
        """Write ``binary`` for ``key`` atomically (temporary file, then rename)."""
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + hashlib.sha256(binary).hexdigest().encode() + b"\n" + binary)
            os.replace(tmp, path)
        except OSError as exc:
            log.warning("kernel cache: cannot write %s (%s); continuing without", path, exc)

    def discard(self, key):
        """Delete the entry for ``key`` if present."""
        try:
            self._path(key).unlink()
        except OSError:
            pass
