"""convsolve.testing.check_solver: honest solvers pass, planted faults are caught and named."""
import convsolve
import pytest
from convsolve.testing import STANDARD_SHAPES, check_solver, standard_problems


@pytest.fixture
def faulty(monkeypatch):
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_faulty")
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    return convsolve.registry().solvers


def test_standard_set_covers_every_direction_and_feature():
    """The standard set has every shape in every direction, with groups, stride and dilation."""
    problems = standard_problems()
    assert len(problems) == 3 * len(STANDARD_SHAPES)
    assert any(p.groups == p.c == p.k > 1 for p in problems)                # depthwise
    assert any(p.conv.pads[0][0] != p.conv.pads[0][1] for p in problems)   # asymmetric
    assert any(max(p.conv.dilations) > 1 for p in problems)
    assert any(max(p.conv.strides) > 1 for p in problems)


def test_honest_solver_passes(handle, faulty):
    """A correct solver that uses exactly its workspace passes on every forward problem."""
    assert check_solver(faulty["faulty.HonestWorkspace"], handle) == len(STANDARD_SHAPES)


@pytest.mark.parametrize("name, finding", [
    ("faulty.OutOfBounds", "wrote past its workspace (1024 bytes reported, byte 1535 written)"),
    ("faulty.UnusedWorkspace", "reports 1024 bytes of workspace but writes only 0"),
    ("faulty.WrongOnOddSizes", "output elements never written"),
    ("faulty.NonDeterministic", "claims to be deterministic but two runs differ"),
    ("faulty.SkipsPadding", "non-finite inputs: 0 NaN in the output where the reference has"),
])
def test_planted_faults_are_caught(handle, faulty, name, finding):
    """Each planted fault fails check_solver with a message that names it."""
    with pytest.raises(AssertionError) as info:
        check_solver(faulty[name], handle)
    assert finding in str(info.value) and name in str(info.value)


def test_a_write_past_the_output_is_caught(handle, monkeypatch):
    """A kernel writing one element past its output is caught by the guard zone after every
    tensor buffer, with the buffer and the byte named."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_unsafe")
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    problem = convsolve.Problem.conv2d((1, 2, 3, 3), (3, 2, 1, 1))   # y: 27 floats, 108 bytes
    with pytest.raises(AssertionError, match=r"wrote past its output 'y' \(a tensor of 108 "
                       r"bytes; byte 108 written\)"):
        check_solver(convsolve.registry().solvers["unsafe.WritesPastOutput"], handle, [problem])


def test_wrong_on_odd_sizes_passes_on_round_sizes(handle, faulty):
    """The odd-size fault is invisible on an output of whole work-groups (so the set needs odd sizes)."""
    problem = convsolve.Problem.conv2d((1, 2, 8, 8), (4, 2, 1, 1))   # 256 outputs
    assert check_solver(faulty["faulty.WrongOnOddSizes"], handle, [problem]) == 1


@pytest.mark.parametrize("name, words", [
    ("Misspelt", "unknown hook 'is_aplicable' (did you mean 'is_applicable'?)"),
    ("WrongArgument", "Argument(s) {'prob'} are declared in the hookimpl"),
    ("MissingHook", "does not implement ['build_invoker']"),
])
def test_a_solver_discovery_refuses_fails_at_once_in_its_words(handle, name, words):
    """check_solver runs discovery's checks first and reports a refusal once, in its words."""
    import cs_contract   # tests/conftest.py puts the fake plugins on the path
    with pytest.raises(AssertionError) as info:
        check_solver(getattr(cs_contract, name)(), handle)
    assert "discovery refuses it" in str(info.value) and words in str(info.value)
    assert str(info.value).count(words) == 1


def test_a_plugin_without_an_api_declaration_fails(handle, monkeypatch):
    """A solver whose plugin module does not declare CONVSOLVE_SOLVER_API is refused."""
    import cs_contract
    monkeypatch.delattr(cs_contract, "CONVSOLVE_SOLVER_API")
    with pytest.raises(AssertionError, match="does not declare CONVSOLVE_SOLVER_API"):
        check_solver(cs_contract.Valid(), handle)
