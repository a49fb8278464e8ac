"""Handle: device choice, define formatting, and build errors that tell the whole story."""
import copy
import gc
import subprocess
import sys
import weakref

import convsolve
import pyopencl as cl
import pytest
from convsolve import BuildError, DeviceError, ValidationError
from convsolve.device import handle as handle_module
from convsolve.device.handle import (
    default_order,
    describe,
    format_defines,
    is_gpu,
    is_simulator,
    list_devices,
)
from convsolve.testing import fake_device

_TYPE = cl.device_type
#: What Oclgrind 21.10 reports: every type bit at once.
OCLGRIND_TYPE = _TYPE.DEFAULT | _TYPE.CPU | _TYPE.GPU | _TYPE.ACCELERATOR


def _fake(kind, **fields):
    """A (platform, device) pair as list_devices() gives; the ranking reads names and type."""
    device = fake_device(kind, **fields)
    return (device.platform, device)


OCLGRIND = _fake("oclgrind", type=OCLGRIND_TYPE)
POCL = _fake("avx512", name="pthread-skylake")
OTHER_CPU = _fake("avx512", platform="Intel(R) OpenCL", name="Intel(R) Xeon(R)")
GPU = _fake("gpu", type=_TYPE.GPU | _TYPE.DEFAULT)   # NVIDIA CUDA: NVIDIA H200


def test_device_by_index_and_substring(handle):
    """CONVSOLVE_DEVICE accepts an index or a case-insensitive substring."""
    platform, device = list_devices()[0]
    assert convsolve.Handle("0").device == device
    assert convsolve.Handle(describe(platform, device).upper()[-6:]).device == device


def test_unknown_device_is_a_clear_error(monkeypatch):
    """A device spec matching nothing names the value and lists the devices."""
    monkeypatch.setenv("CONVSOLVE_DEVICE", "no-such-device")
    with pytest.raises(ValidationError, match="invalid device='no-such-device'"):
        convsolve.Handle()
    with pytest.raises(ValidationError, match="devices are visible"):
        convsolve.Handle("99")


def test_defines_are_sorted_and_checked():
    """Defines become sorted -D options; only ints, floats and identifiers are accepted."""
    assert format_defines({"B": 2, "A": 0.5, "C": "float"}) == ["-DA=0.5f", "-DB=2", "-DC=float"]
    for bad in ({"A": "1; x"}, {"A": True}, {"1A": 1}, {"A": None}):
        with pytest.raises(ValidationError):
            format_defines(bad)


def test_build_failure_reports_file_options_and_log(handle, tmp_path):
    """A failed build raises BuildError with the file, the options and the compiler's log."""
    path = tmp_path / "bad.cl"
    path.write_text("__kernel void k(__global float *a) { a[0] = nope; }\n")
    with pytest.raises(BuildError) as info:
        handle.build(path, "k", {"X": 1})
    assert str(path) in str(info.value) and "-DX=1" in str(info.value)
    assert "nope" in info.value.log
    good = tmp_path / "good.cl"
    good.write_text("__kernel void k(__global float *a) { a[0] = 1; }\n")
    with pytest.raises(BuildError, match="no kernel 'missing'"):
        handle.build(good, "missing")


def test_a_gpu_is_a_device_of_the_gpu_type_alone():
    """A device counts as a GPU only when GPU is its one kind (DEFAULT aside): Oclgrind, which
    sets every type bit, is a simulator and no GPU."""
    assert is_gpu(GPU[1]) and not is_simulator(*GPU)
    assert not is_gpu(OCLGRIND[1]) and is_simulator(*OCLGRIND)
    assert not is_gpu(POCL[1]) and not is_simulator(*POCL)
    assert is_simulator(*_fake("oclgrind", type=_TYPE.CPU))   # by its name


def test_default_order_skips_simulators_and_puts_gpus_then_pocl_first():
    """The default ranking: GPUs, then PoCL, then other devices; simulators never (Oclgrind
    listed first, as its ICD often is, used to win the 'GPU first' rule)."""
    assert default_order([OCLGRIND, OTHER_CPU, POCL]) == [POCL, OTHER_CPU]
    assert default_order([OCLGRIND, POCL, GPU]) == [GPU, POCL]
    assert default_order([OCLGRIND]) == []


def test_simulator_only_when_named(monkeypatch):
    """choose_device passes over Oclgrind by default, takes it when named, and with nothing
    else visible says how to name it."""
    monkeypatch.setattr(handle_module, "probe", lambda device: None)
    monkeypatch.setattr(handle_module, "list_devices", lambda: [OCLGRIND, POCL])
    assert handle_module.choose_device() is POCL[1]
    assert handle_module.choose_device("oclgrind") is OCLGRIND[1]
    assert handle_module.choose_device("0") is OCLGRIND[1]
    monkeypatch.setenv("CONVSOLVE_DEVICE", "Oclgrind")
    assert handle_module.choose_device() is OCLGRIND[1]
    monkeypatch.delenv("CONVSOLVE_DEVICE")
    monkeypatch.setattr(handle_module, "list_devices", lambda: [OCLGRIND])
    with pytest.raises(DeviceError, match="only simulators are visible.*CONVSOLVE_DEVICE=Oclgrind"):
        handle_module.choose_device()


def test_installed_oclgrind_is_not_the_default_device():
    """With Oclgrind installed (the test extra brings it), Handle() still picks a real device
    and Handle('Oclgrind') the simulator."""
    if not any(is_simulator(*pair) for pair in list_devices()):
        pytest.skip("no simulator (Oclgrind) is visible")
    default = convsolve.Handle().device
    assert not is_simulator(default.platform, default)
    assert "Oclgrind" in convsolve.Handle("Oclgrind").name


def test_release_drops_what_the_handle_keeps_and_it_builds_again(handle):
    """Handle.release() lets go of its invokers and scratch buffer; the next call builds anew."""
    solver = convsolve.registry().solvers["direct.NaiveFwd"]
    problem = convsolve.Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3))
    invoker, scratch = handle.invoker(solver, problem), handle.scratch(256)
    assert handle.invoker(solver, problem) is invoker and handle.scratch(64) is scratch
    handle.release()
    assert handle.invoker(solver, problem) is not invoker
    assert handle.scratch(64) is not scratch


def test_every_live_handle_is_released_at_exit():
    """At interpreter exit every Handle still alive is released, before modules are torn down
    (NVIDIA's OpenCL crashed at exit when kept kernels and buffers met it later)."""
    code = ("import convsolve\n"
            "from convsolve.device import handle as module\n"
            "release = module.Handle.release\n"
            "def noisy(self):\n"
            "    print('released', self.name, flush=True); release(self)\n"
            "module.Handle.release = noisy\n"
            "kept = [convsolve.Handle(), convsolve.Handle()]\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("released ") == 2, done.stdout


def test_a_handle_nobody_holds_drops_what_it_keeps_before_the_cycle_is_cleared(handle):
    """A dropped handle is a reference cycle (its invokers close over it); its finalizer lets
    go of the invokers and programs before the collector clears the cycle in no set order (the
    NVIDIA crash), while a shallow copy, which shares them with its original, leaves them."""
    cleared = []

    class Kept(dict):
        def clear(self):
            cleared.append(len(self))
            super().clear()
    solver = convsolve.registry().solvers["direct.NaiveFwd"]
    problem = convsolve.Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3))
    dropped = convsolve.Handle(handle.device)
    dropped._invokers = Kept()
    dropped.invoker(solver, problem)
    alive = weakref.ref(dropped)
    del dropped
    gc.collect()
    assert alive() is None and cleared == [1]
    handle.invoker(solver, problem)
    copy.copy(handle)
    gc.collect()
    assert handle._invokers
