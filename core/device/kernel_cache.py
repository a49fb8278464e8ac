"""On-disk cache of built OpenCL program binaries, keyed by everything that can change the binary.

Layout: ``<cache dir>/kernels-v<FORMAT_VERSION>/<key[:2]>/<key>.bin``.  Each entry is a magic line,
the SHA-256 of the payload and the payload (the device's program binary).  Writers write a temporary
file in the same directory, flush it to disk and rename it over the entry, so readers never see
half an entry, concurrent writers cannot corrupt one and a killed writer leaves only a temporary
file (removed by a later write once an hour old).  An entry that fails its checksum is reported,
deleted (unless a writer has replaced it meanwhile) and rebuilt.  Any other cache error is logged
and the program is built from source anyway.
"""
import contextlib
import hashlib
import logging
import os
import re
import tempfile
import time
from pathlib import Path

import platformdirs

from .. import env

log = logging.getLogger("convsolve")

FORMAT_VERSION = 1
_MAGIC = b"convsolve-kernel-cache-1\n"
_TMP_PREFIX = ".tmp-"
_STALE_TMP_S = 3600.0   # a temporary file this old belongs to a writer that was killed
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
            with open(path, "rb") as entry:
                blob, seen = entry.read(), os.fstat(entry.fileno())
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("kernel cache: cannot read %s (%s); building from source", path, exc)
            return None
        header_end = len(_MAGIC) + 65
        payload = blob[header_end:]
        if (blob[:len(_MAGIC)] != _MAGIC or blob[header_end - 1:header_end] != b"\n"
                or blob[len(_MAGIC):header_end - 1].decode("ascii", "replace")
                != hashlib.sha256(payload).hexdigest()):
            self._discard_corrupt(path, seen)
            return None
        return payload

    def _discard_corrupt(self, path, seen):
        """Delete the corrupt entry read as ``seen`` (its stat), unless a writer has renamed a new
        entry over it since."""
        try:
            now = os.stat(path)
            if (now.st_ino, now.st_dev) == (seen.st_ino, seen.st_dev):
                os.unlink(path)
                log.warning("kernel cache: corrupt entry %s deleted; rebuilding", path)
                return
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.warning("kernel cache: corrupt entry %s ignored, cannot delete it (%s); "
                        "rebuilding", path, exc)
            return
        log.warning("kernel cache: corrupt entry %s ignored (replaced since); rebuilding", path)

    def store(self, key, binary):
        """Write ``binary`` for ``key`` atomically (temporary file, flushed to disk, then rename);
        temporary files an hour old, left by killed writers, are removed on the way."""
        path = self._path(key)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=_TMP_PREFIX)
            with os.fdopen(fd, "wb") as out:
                out.write(_MAGIC + hashlib.sha256(binary).hexdigest().encode() + b"\n" + binary)
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            tmp = None
            self._remove_stale_temporaries(path.parent)
        except OSError as exc:
            log.warning("kernel cache: cannot write %s (%s); continuing without", path, exc)
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)

    @staticmethod
    def _remove_stale_temporaries(directory):
        """Delete the temporary files in ``directory`` older than _STALE_TMP_S."""
        cutoff = time.time() - _STALE_TMP_S
        for item in directory.glob(f"{_TMP_PREFIX}*"):
            with contextlib.suppress(OSError):   # another writer may be removing it too
                if item.stat().st_mtime < cutoff:
                    item.unlink()

    def discard(self, key):
        """Delete the entry for ``key`` if present."""
        try:
            self._path(key).unlink()
        except OSError:
            pass
