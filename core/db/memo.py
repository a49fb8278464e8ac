"""The process's memo of user-db reads: each answer kept until its SQLite file may have changed.

A read (``SqliteDb._read``) is answered from the memo while the file's stamp, taken before the
answer was read, is the same; else the db is read and the answer kept under the new stamp (a
file's whole memo goes when its stamp changes).  This process's own writes and set-asides drop
the file's memo too.  Where no stamp can be taken (no read-only connection opens: a corrupt
file, a read-only directory without the db's -shm) the read goes to the db, as does a read that
fails, so that each failing call still warns.

The stamp is ``PRAGMA data_version`` on one read-only connection the memo keeps per file (SQLite
changes it whenever another connection, in any process, commits), with the file's device, inode,
size and mtime (``os.stat``: a set-aside, a deleted file or one rewritten in place).  Measured on
an "Intel(R) Xeon(R) Processor" (lscpu; family 6 model 167, AVX-512, 2 cores, Linux 6.18, ext4):
1.8 us for data_version alone, 4.0 us for a whole ``stamp``; a repeated ``FindDb().records`` hit
then costs about 16 us instead of 260 to 370 us.  Not chosen: ``os.stat`` alone (3 us) misses two same-size commits in one mtime tick (filesystems
without fine-grained timestamps), and a WAL-index header read with ``os.pread`` (3.8 us) must
open and close the -shm file, which drops every POSIX lock this process's SQLite connections
hold on it (seen: another process then deleted a live WAL).

The kept connection is ``mode=ro``: it never writes, checkpoints or deletes a file, and holds no
read transaction between stamps (data_version's statement runs to its end), so checkpoints pass
it; no flock is taken, so set-asides never wait for it, and a file set aside is left to it
(closed when the inode at the path changes).  It keeps the WAL from being deleted, so writers
checkpoint after each commit (store.py) for the immutable readers of read-only directories.  At
most MAX_KEPT files are kept open (the oldest closed first); a forked child abandons the
parent's connections unclosed (SQLite's rule: never use one across a fork).
"""
import itertools
import os
import sqlite3
import threading
from pathlib import Path

#: Files with a kept connection (each holds 3 descriptors); past it the oldest is closed.
MAX_KEPT = 8
#: Answers kept per file; past it the file's memo starts again (a bound, not a tuned figure).
MAX_ANSWERS = 4096

_kept = {}        # path -> (connection, the file's (device, inode) when it opened, its number)
_memo = {}        # path -> (stamp, {key: answer})
_inherited = []   # a forked child's copies of the parent's connections: never used nor closed
_lock = threading.Lock()
_opened = itertools.count()


def _identity(stat):
    return stat.st_dev, stat.st_ino


def _keep(path, stat):
    """A read-only connection on the file at ``path`` (``stat`` taken before it opened); it never
    waits for a lock (busy: no stamp, and the read itself waits as store.py says)."""
    conn = sqlite3.connect(f"{Path(path).absolute().as_uri()}?mode=ro", uri=True, timeout=0,
                           check_same_thread=False, isolation_level=None)
    _kept[path] = conn, _identity(stat), next(_opened)
    while len(_kept) > MAX_KEPT:
        _drop(next(iter(_kept)))
    return _kept[path]


def _drop(path):
    """Close the kept connection of ``path`` and forget its memo (under _lock)."""
    kept = _kept.pop(path, None)
    _memo.pop(path, None)
    if kept is not None:
        kept[0].close()


def stamp(path):
    """What changes whenever a transaction commits to the db at ``path`` or the file is
    replaced; ("absent",) where there is none; None where it cannot be taken now."""
    with _lock:
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            _drop(path)
            return ("absent",)
        except OSError:
            return None
        try:
            kept = _kept.get(path)
            if kept is None or kept[1] != _identity(stat):
                _drop(path)
                kept = _keep(path, stat)
            version = kept[0].execute("PRAGMA data_version").fetchall()[0][0]
        except sqlite3.Error:
            _drop(path)
            return None
        return kept[2], version, *kept[1], stat.st_size, stat.st_mtime_ns


def read(path, key, compute):
    """``compute()``'s answer for ``key`` on the db at ``path``: from the memo while the file's
    stamp is unchanged, else computed (and kept, when it returns)."""
    now = stamp(path)
    if now is None:
        return compute()
    entry = _memo.get(path)
    if entry is not None and entry[0] == now and key in entry[1]:
        return entry[1][key]
    answer = compute()
    with _lock:
        entry = _memo.get(path)
        if entry is None or entry[0] != now or len(entry[1]) >= MAX_ANSWERS:
            entry = _memo[path] = (now, {})
        entry[1][key] = answer
    return answer


def forget(path):
    """Drop the memo of the db at ``path`` (this process wrote the file or set it aside)."""
    with _lock:
        _memo.pop(path, None)


def _abandon():
    """In a forked child: set the parent's connections aside unused and unclosed."""
    _inherited.extend(kept[0] for kept in _kept.values())
    _kept.clear()
    _memo.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_abandon)
