"""The kernel cache: hits across handles, keys, corrupt entries, failed writes, the off switch,
the platforms it serves."""
import errno
import os
import time

import convsolve
import pyopencl as cl
import pytest
from convsolve.device import handle as handle_module
from convsolve.device.kernel_cache import KernelCache, cache_key

CACHES_BINARIES = handle_module.caches_binaries
SOURCE_DIR_KERNEL = "__kernel void k(__global float *a) { a[get_global_id(0)] = VALUE; }\n"


@pytest.fixture(autouse=True)
def every_platform_caches(monkeypatch):
    """The cache on the test device too, PoCL included (which handles use it on by default:
    convsolve.device.handle.caches_binaries)."""
    monkeypatch.setattr(handle_module, "caches_binaries", lambda platform: True)


@pytest.fixture
def kernel_file(tmp_path):
    path = tmp_path / "src" / "k.cl"
    path.parent.mkdir()
    path.write_text('#include "convsolve.h"\n' + SOURCE_DIR_KERNEL)
    return path


def _entries(directory):
    return sorted(directory.rglob("*.bin"))


def test_build_stores_and_a_new_handle_loads(tmp_path, kernel_file, monkeypatch, handle):
    """A build writes one entry per option set; a fresh handle reuses it and computes the same."""
    monkeypatch.setenv("CONVSOLVE_CACHE_DIR", str(tmp_path / "cache"))
    first = convsolve.Handle(handle.device)
    first.build(kernel_file, "k", {"VALUE": 2})
    first.build(kernel_file, "k", {"VALUE": 2})
    assert len(_entries(tmp_path / "cache")) == 1
    first.build(kernel_file, "k", {"VALUE": 3.5})
    assert len(_entries(tmp_path / "cache")) == 2
    second = convsolve.Handle(handle.device)
    kernel = second.build(kernel_file, "k", {"VALUE": 3.5})
    buffer = cl.Buffer(second.context, cl.mem_flags.READ_WRITE, 4)
    kernel(second.queue, (1,), None, buffer)
    out = bytearray(4)
    cl.enqueue_copy(second.queue, out, buffer)
    assert bytes(out) == b"\x00\x00\x60\x40"  # 3.5f


def test_key_covers_source_headers_options_and_device():
    """Changing any input of the build changes the key."""
    base = cache_key("src", {"h.h": "x"}, ["-DA=1"], {"device": "d"})
    assert len({base, cache_key("src2", {"h.h": "x"}, ["-DA=1"], {"device": "d"}),
                cache_key("src", {"h.h": "y"}, ["-DA=1"], {"device": "d"}),
                cache_key("src", {"h.h": "x"}, ["-DA=2"], {"device": "d"}),
                cache_key("src", {"h.h": "x"}, ["-DA=1"], {"device": "e"})}) == 5


def test_corrupt_entry_is_deleted_and_rebuilt(tmp_path, kernel_file, monkeypatch, handle, caplog):
    """A damaged entry is reported, deleted and replaced by a fresh build."""
    monkeypatch.setenv("CONVSOLVE_CACHE_DIR", str(tmp_path / "cache"))
    convsolve.Handle(handle.device).build(kernel_file, "k", {"VALUE": 1})
    (entry,) = _entries(tmp_path / "cache")
    entry.write_bytes(entry.read_bytes()[:-10] + b"garbage!!!")
    convsolve.Handle(handle.device).build(kernel_file, "k", {"VALUE": 1})
    assert "corrupt entry" in caplog.text
    assert KernelCache(tmp_path / "cache" / "kernels-v1").load(entry.stem) is not None


def test_disable_cache_writes_nothing(tmp_path, kernel_file, monkeypatch, handle):
    """CONVSOLVE_DISABLE_CACHE=1 builds without touching the cache directory."""
    monkeypatch.setenv("CONVSOLVE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("CONVSOLVE_DISABLE_CACHE", "1")
    convsolve.Handle(handle.device).build(kernel_file, "k", {"VALUE": 1})
    assert not (tmp_path / "cache").exists()


def test_a_failed_write_leaves_no_temporary_file(tmp_path, monkeypatch, caplog):
    """A write that fails (here the rename, as on a full disk) warns, keeps no half-written
    temporary file and leaves the old entry loadable."""
    cache = KernelCache(tmp_path)
    cache.store("aa01", b"old binary")

    def full(*args):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "replace", full)
    cache.store("aa01", b"new binary")
    monkeypatch.undo()
    assert "cannot write" in caplog.text
    assert [p.name for p in (tmp_path / "aa").iterdir()] == ["aa01.bin"]
    assert cache.load("aa01") == b"old binary"


def test_stale_temporary_files_of_killed_writers_are_removed(tmp_path):
    """A writer killed between writing and renaming leaves a temporary file; the next write in
    that directory removes it once it is an hour old, and leaves young ones (a live writer's)."""
    cache = KernelCache(tmp_path)
    cache.store("aa01", b"x")
    old, young = tmp_path / "aa" / ".tmp-killed", tmp_path / "aa" / ".tmp-writing"
    old.write_bytes(b"half")
    young.write_bytes(b"half")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    cache.store("aa02", b"y")
    assert not old.exists() and young.exists()
    assert cache.load("aa01") == b"x" and cache.load("aa02") == b"y"


def test_corrupt_entry_that_cannot_be_deleted_is_not_reported_deleted(tmp_path, monkeypatch,
                                                                     caplog):
    """A corrupt entry in a cache the user cannot write is a miss, and the warning says it could
    not be deleted (simulated: unlink raises PermissionError, as in a root-owned cache)."""
    cache = KernelCache(tmp_path)
    cache.store("aa01", b"binary")
    entry = tmp_path / "aa" / "aa01.bin"
    entry.write_bytes(entry.read_bytes()[:-3] + b"bad")

    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied")
    monkeypatch.setattr(os, "unlink", refuse)
    assert cache.load("aa01") is None
    monkeypatch.undo()
    assert "corrupt entry" in caplog.text and "cannot delete" in caplog.text
    assert "deleted;" not in caplog.text and entry.exists()


def test_pocl_keeps_its_own_cache(tmp_path, kernel_file, monkeypatch, handle):
    """On PoCL, whose own cache serves a second process, a handle writes no binaries (fetching
    one compiles every kernel of the program); other platforms' handles do."""
    monkeypatch.setattr(handle_module, "caches_binaries", CACHES_BINARIES)
    monkeypatch.setenv("CONVSOLVE_CACHE_DIR", str(tmp_path / "cache"))
    platform = type("Platform", (), {"name": "Portable Computing Language"})
    assert not CACHES_BINARIES(platform)
    platform.name = "NVIDIA CUDA"
    assert CACHES_BINARIES(platform)
    convsolve.Handle(handle.device).build(kernel_file, "k", {"VALUE": 4})
    assert bool(_entries(tmp_path)) == CACHES_BINARIES(handle.device.platform)
