"""Handle: device choice, define formatting, and build errors that tell the whole story."""
import convsolve
import pytest
from convsolve import BuildError, ValidationError
from convsolve.handle import describe, format_defines, list_devices


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
