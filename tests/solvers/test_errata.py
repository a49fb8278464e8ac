"""Errata files: parsing, every malformed case named by file, entry and field, each constraint's
matching, the exclusion in Registry.candidates, find, immediate mode, CONVSOLVE_ERRATA and the
shipped file."""
import json
import os
import re
from pathlib import Path

import convsolve
import pytest
from convsolve import Direction, Epilogue, Problem, SolverError, ValidationError, find, run
from convsolve.engine.run import resolve_solver
from convsolve.errors import ErrataError
from convsolve.solvers import errata
from convsolve.solvers.registry import registry
from convsolve.testing import device_buffers, random_tensors

PROBLEM = Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 3))
ROOT = Path(__file__).resolve().parents[2]


def entry(**fields):
    """One erratum's fields, the required ones filled in."""
    return {"solver": "direct.NaiveFwd", "reason": "wrong results", **fields}


def write(tmp_path, entries, name="errata.json"):
    path = tmp_path / name
    path.write_text(entries if isinstance(entries, str) else json.dumps(entries))
    return path


def matches(problem=PROBLEM, name="direct.NaiveFwd", device=None, **fields):
    """Whether an entry of ``fields`` excludes the solver ``name`` for ``problem`` on ``device``."""
    (erratum,) = errata.parse("e.json", json.dumps([entry(**fields)]))
    return erratum.matches(name, problem, device)


# {{{ parsing

def test_a_good_file_parses_every_field():
    """Every field, in each accepted form, becomes what matching compares."""
    (full, short) = errata.parse("e.json", json.dumps([
        entry(direction="backward-data", device="NVIDIA*", kernel=[3, 1], stride=2,
              dilation=[1, 2], groups="depthwise", c={"min": 4, "max": 64}, k={"min": 8},
              key="-n1-"),
        entry(solver="gemm.*", direction="wrw", kernel=5, c=16, k={"max": 32}, groups=2)]))
    assert full.where == "e.json#0" and full.fields["reason"] == "wrong results"
    assert full.fields["direction"] is Direction.BACKWARD_DATA
    assert (full.fields["kernel"], full.fields["stride"], full.fields["dilation"]) == (
        (3, 1), (2, 2), (1, 2))
    assert full.fields["device"] == "nvidia*" and full.fields["key"].pattern == "-n1-"
    assert full.fields["c"] == (4, 64) and full.fields["k"] == (8, float("inf"))
    assert short.where == "e.json#1" and short.fields["direction"] is Direction.BACKWARD_WEIGHTS
    assert (short.fields["kernel"], short.fields["c"], short.fields["k"]) == ((5, 5), (16, 16),
                                                                             (1, 32))
    assert errata.parse("e.json", "[]") == ()


@pytest.mark.parametrize("spelling, direction", [
    ("forward", Direction.FORWARD), ("fwd", Direction.FORWARD), ("FORWARD", Direction.FORWARD),
    ("backward_data", Direction.BACKWARD_DATA), ("bwd", Direction.BACKWARD_DATA),
    ("Backward-Weights", Direction.BACKWARD_WEIGHTS)])
def test_direction_takes_direction_parse_spellings(spelling, direction):
    (erratum,) = errata.parse("e.json", json.dumps([entry(direction=spelling)]))
    assert erratum.fields["direction"] is direction


BAD_ENTRIES = [
    ({"reason": "r"}, "solver", None),
    ({"solver": "direct.*"}, "reason", None),
    (entry(reason=""), "reason", ""),
    (entry(reason=7), "reason", 7),
    (entry(devcie="x"), "field", "devcie"),
    (entry(batch=1), "field", "batch"),
    (entry(direction="sideways"), "direction", "sideways"),
    (entry(direction=1), "direction", 1),
    (entry(solver=3), "solver", 3),
    (entry(solver=["direct.*"]), "solver", ["direct.*"]),
    (entry(solver=""), "solver", ""),
    (entry(device=None), "device", None),
    (entry(device={"name": "x"}), "device", {"name": "x"}),
    (entry(kernel=[3]), "kernel", [3]),
    (entry(kernel=[0, 3]), "kernel", [0, 3]),
    (entry(kernel="3x3"), "kernel", "3x3"),
    (entry(kernel=True), "kernel", True),
    (entry(stride=0), "stride", 0),
    (entry(stride=1.0), "stride", 1.0),
    (entry(dilation=[1, 2, 3]), "dilation", [1, 2, 3]),
    (entry(groups="grouped"), "groups", "grouped"),
    (entry(groups=0), "groups", 0),
    (entry(c={"min": 8, "max": 4}), "c", {"min": 8, "max": 4}),
    (entry(c={"low": 1}), "c", {"low": 1}),
    (entry(c={}), "c", {}),
    (entry(c={"min": 0}), "c", {"min": 0}),
    (entry(k={"max": 1.5}), "k", {"max": 1.5}),
    (entry(k=[1, 64]), "k", [1, 64]),
    (entry(key="("), "key", "("),
    (entry(key=5), "key", 5),
]


@pytest.mark.parametrize("bad, field, value", BAD_ENTRIES)
def test_a_malformed_entry_names_file_entry_field_and_value(tmp_path, bad, field, value):
    """The second entry is the bad one: the error names it (index 1), the field and the value;
    the good first entry does not make the file half-load."""
    path = write(tmp_path, [entry(), bad])
    with pytest.raises(ErrataError) as caught:
        errata.load(str(path), "CONVSOLVE_ERRATA")
    message = str(caught.value)
    assert message.startswith(f"errata file {path}, entry 1: invalid {field}={value!r}: ")
    assert (caught.value.path, caught.value.entry, caught.value.field) == (str(path), 1, field)
    assert isinstance(caught.value, ValidationError)


def test_an_unknown_field_suggests_the_one_meant():
    with pytest.raises(ErrataError, match=r"did you mean 'device'\?"):
        errata.parse("e.json", json.dumps([entry(devcie="x")]))
    with pytest.raises(ErrataError, match=r"the fields are \['solver', 'reason', 'direction'"):
        errata.parse("e.json", json.dumps([entry(batch=1)]))


@pytest.mark.parametrize("text, where", [
    ('{"errata": []}', "top level='object'"),
    ('"direct.*"', "top level='str'"),
    ("[1]", "entry 0: invalid entry=1"),
    ('[{"solver": "a.*", "reason": "r"}, "b.*"]', "entry 1: invalid entry='b.*'"),
    ('[\n  {"solver": "a.*",\n   "reason": "r",}\n]', "invalid JSON at line 3 column 18="),
    ("", "invalid JSON at line 1 column 1=''"),
    ("[\n", "invalid JSON at line 2 column 1=''"),
])
def test_a_malformed_file_names_it_and_where(tmp_path, text, where):
    """Not a list, an entry that is not an object, invalid JSON (with its line and column)."""
    path = write(tmp_path, text)
    with pytest.raises(ErrataError) as caught:
        errata.load(str(path), "CONVSOLVE_ERRATA")
    assert str(caught.value).startswith(f"errata file {path}") and where in str(caught.value)


def test_a_file_is_parsed_again_only_when_it_changes(tmp_path):
    path = write(tmp_path, [entry()])
    first = errata.load(str(path), "x")
    assert errata.load(str(path), "x") is first
    path.write_text(json.dumps([entry(), entry(solver="gemm.*")]))
    os.utime(path, ns=(1, 1))
    assert len(errata.load(str(path), "x")) == 2

# }}}


# {{{ matching

def test_the_solver_glob_is_fnmatch_and_case_sensitive():
    assert matches(name="direct.NaiveFwd", solver="direct.Naive*") is True
    assert matches(name="direct.NaiveBwdData", solver="direct.*Fwd") is False
    assert matches(name="direct.naivefwd", solver="direct.NaiveFwd") is False
    assert matches(name="winograd.F4x3", solver="winograd.F[46]x3") is True
    assert matches(name="winograd.F2x3", solver="winograd.F[46]x3") is False


def test_the_device_glob_is_case_insensitive_and_an_unknown_device_never_matches():
    def on(name, glob):
        (erratum,) = errata.parse("e.json", json.dumps([entry(device=glob)]))
        return erratum.matches("direct.NaiveFwd", PROBLEM, name)
    assert on("NVIDIA H200", "*h200*") is True
    assert on("  NVIDIA H200 ", "nvidia h200") is True
    assert on("NVIDIA H100", "*h200*") is False
    assert on(None, "*") is False
    assert matches(device=None) is True and matches(device="any device") is True


GROUPED = Problem.conv2d((1, 4, 8, 8), (8, 2, 3, 3), groups=2)
DEPTHWISE = Problem.conv2d((1, 4, 8, 8), (8, 1, 3, 3), groups=4)


@pytest.mark.parametrize("fields, hit, miss", [
    ({"direction": "backward-data"}, PROBLEM.with_direction("bwd"), PROBLEM),
    ({"direction": "forward"}, PROBLEM, PROBLEM.with_direction("wrw")),
    ({"kernel": 3}, PROBLEM, Problem.conv2d((1, 4, 8, 8), (4, 4, 1, 1))),
    ({"kernel": [1, 3]}, Problem.conv2d((1, 4, 8, 8), (4, 4, 1, 3)), PROBLEM),
    ({"stride": 2}, Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 3), stride=2), PROBLEM),
    ({"stride": [2, 1]}, Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 3), stride=(2, 1)),
     Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 3), stride=(1, 2))),
    ({"dilation": 2}, Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 3), dilation=2), PROBLEM),
    ({"groups": 2}, GROUPED, PROBLEM),
    ({"groups": 1}, PROBLEM, GROUPED),
    ({"groups": "depthwise"}, DEPTHWISE, GROUPED),
    ({"c": {"min": 4, "max": 8}}, PROBLEM, Problem.conv2d((1, 16, 8, 8), (4, 16, 3, 3))),
    ({"c": {"max": 3}}, Problem.conv2d((1, 3, 8, 8), (4, 3, 3, 3)), PROBLEM),
    ({"c": 4}, PROBLEM, Problem.conv2d((1, 5, 8, 8), (4, 5, 3, 3))),
    ({"k": {"min": 8}}, GROUPED, PROBLEM),
    ({"key": "-n1-"}, PROBLEM, Problem.conv2d((2, 4, 8, 8), (4, 4, 3, 3))),
    ({"key": "^wrw-.*-g1-"}, PROBLEM.with_direction("wrw"), GROUPED.with_direction("wrw")),
])
def test_each_constraint_matches_where_it_holds_only(fields, hit, miss):
    assert matches(hit, **fields) is True
    assert matches(miss, **fields) is False


def test_every_field_of_an_entry_must_hold():
    fields = {"direction": "forward", "kernel": 3, "c": {"min": 4}}
    assert matches(PROBLEM, **fields) is True
    assert matches(PROBLEM.with_direction("bwd"), **fields) is False
    assert matches(Problem.conv2d((1, 2, 8, 8), (4, 2, 3, 3)), **fields) is False

# }}}


# {{{ where errata apply

@pytest.fixture
def user_errata(tmp_path, monkeypatch):
    """Write ``entries`` to a file and name it in CONVSOLVE_ERRATA; returns its path."""
    def use(entries):
        path = write(tmp_path, entries, f"user-{len(list(tmp_path.iterdir()))}.json")
        monkeypatch.setenv("CONVSOLVE_ERRATA", str(path))
        return path
    return use


def test_candidates_moves_an_excluded_solver_to_skipped_naming_file_and_entry(user_errata):
    path = user_errata([entry(solver="direct.NaiveBwd*", reason="wrong"),
                        entry(reason="NaN on this device", device="*h200*")])
    bwd = PROBLEM.with_direction("bwd")
    applicable, skipped = registry().candidates(bwd)
    assert applicable == [] and skipped["direct.NaiveBwdData"] == (
        f"excluded by erratum {path}#0: wrong")
    assert skipped["direct.NaiveFwd"] == "does not serve BACKWARD_DATA"   # not the erratum's
    applicable, skipped = registry().candidates(PROBLEM)   # the device entry: no device given
    assert [s.name for s in applicable] == ["direct.NaiveFwd"]
    applicable, skipped = registry().candidates(PROBLEM, device="NVIDIA H200")
    assert applicable == [] and skipped["direct.NaiveFwd"] == (
        f"excluded by erratum {path}#1: NaN on this device")
    assert registry().candidates(PROBLEM, device="AMD EPYC 9V74")[0] != []


def test_kept_candidates_follow_an_edited_file_and_are_the_callers_own(tmp_path, monkeypatch):
    """Registry.candidates keeps its answer per problem, yet an edit of the errata file in use
    (same path, new content) reaches the next call, and what a caller does to the lists it got
    does not change what the next caller gets."""
    path = write(tmp_path, [])
    monkeypatch.setenv("CONVSOLVE_ERRATA", str(path))
    applicable, skipped = registry().candidates(PROBLEM)
    assert [s.name for s in applicable] == ["direct.NaiveFwd"]
    applicable.clear()
    skipped["direct.NaiveFwd"] = "a caller's note"
    assert [s.name for s in registry().candidates(PROBLEM)[0]] == ["direct.NaiveFwd"]
    assert "direct.NaiveFwd" not in registry().candidates(PROBLEM)[1]
    path.write_text(json.dumps([entry(reason="edited in")]))
    os.utime(path, ns=(1, 1))   # a new stamp even within the file system's clock tick
    applicable, skipped = registry().candidates(PROBLEM)
    assert applicable == [] and skipped["direct.NaiveFwd"].endswith("#0: edited in")


def test_a_solver_that_is_not_applicable_says_so_not_the_erratum(user_errata, monkeypatch):
    import cs_wrong
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_wrong")
    monkeypatch.setattr(cs_wrong.Lazy, "is_applicable", cs_wrong.hookimpl(lambda self, problem: False))
    user_errata([entry(solver="*")])
    skipped = registry().candidates(PROBLEM)[1]
    assert skipped["wrong.Lazy"] == "not applicable"
    assert skipped["direct.NaiveFwd"].startswith("excluded by erratum")


def test_find_and_immediate_mode_exclude_on_the_handle_s_device(handle, user_errata,
                                                                 monkeypatch):
    """find and get_solutions pass the handle's device name: an entry for it (and only it)
    excludes the solver there."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "fake.Hungry,fake.BadBuild,fake.RunFails")
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    names = {s.solver for s in convsolve.get_solutions(handle, PROBLEM)}
    assert names == {"direct.NaiveFwd", "fake.Good"}
    user_errata([entry(device=handle.device.name.strip().swapcase())])
    assert [s.solver for s in convsolve.get_solutions(handle, PROBLEM)] == ["fake.Good"]
    assert [s.solver for s in find(handle, PROBLEM, **buffers, mode="FAST")] == ["fake.Good"]
    user_errata([entry(device=handle.device.name + " not this one")])
    assert {s.solver for s in convsolve.get_solutions(handle, PROBLEM)} == names


def test_run_refuses_a_solver_an_erratum_excludes_on_its_device(handle, user_errata):
    """A named solver resolves with the handle's device, bare or with an epilogue, and a run
    kept in the handle notices CONVSOLVE_ERRATA set since; applicable_solvers honours the
    handle's device."""
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    run(handle, PROBLEM, "direct.NaiveFwd", **buffers)   # resolved and kept in the handle
    handle.queue.finish()
    path = user_errata([entry(device=handle.device.name.strip().upper())])
    refusal = f"cannot run {PROBLEM.key()}: excluded by erratum {path}#0: wrong results"
    with pytest.raises(SolverError, match=re.escape(refusal)):
        run(handle, PROBLEM, "direct.NaiveFwd", **buffers)
    with pytest.raises(SolverError, match=re.escape(f"excluded by erratum {path}#0")):
        resolve_solver(handle, PROBLEM.with_epilogue(Epilogue(bias=True)), "direct.NaiveFwd")
    assert convsolve.applicable_solvers(PROBLEM) == ["direct.NaiveFwd"]   # no device: the entry has one
    assert convsolve.applicable_solvers(PROBLEM, handle) == []


def test_a_missing_user_file_names_the_variable_and_the_path(tmp_path, monkeypatch):
    missing = tmp_path / "nowhere.json"
    monkeypatch.setenv("CONVSOLVE_ERRATA", str(missing))
    with pytest.raises(ValidationError) as caught:
        registry().candidates(PROBLEM)
    assert str(caught.value).startswith(f"invalid CONVSOLVE_ERRATA={str(missing)!r}: cannot "
                                        "read the errata file: No such file or directory")


def test_a_malformed_user_file_is_an_error_not_an_empty_erratum(user_errata, handle):
    """find and immediate mode raise it instead of going on without the file."""
    buffers = device_buffers(handle, random_tensors(PROBLEM))
    path = user_errata([entry(), entry(stride=-1)])
    for call in (lambda: convsolve.get_solutions(handle, PROBLEM),
                 lambda: find(handle, PROBLEM, **buffers, mode="FAST")):
        with pytest.raises(ErrataError, match=re.escape(
                f"errata file {path}, entry 1: invalid stride=-1")):
            call()


def test_the_shipped_file_loads_and_ships_in_the_wheel():
    """The package's errata.json parses (every entry valid), applies with no variable set, and
    the distribution's package data includes it."""
    assert errata.SHIPPED.is_file()
    shipped = errata.load(str(errata.SHIPPED), "the shipped errata file")
    assert errata.active() == shipped
    assert all(e.fields["reason"] for e in shipped)
    pyproject = (ROOT / "pyproject.toml").read_text()
    package_data = pyproject[pyproject.index("[tool.setuptools.package-data]"):]
    assert re.search(r'^"convsolve\.solvers" = \[[^]]*"errata\.json"', package_data,
                     re.MULTILINE)

# }}}
