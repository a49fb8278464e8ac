"""convsolve.testing.check_solver: honest solvers pass, planted faults are caught and named."""
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import convsolve
import pytest
from convsolve import Direction, Problem
from convsolve.testing import (
    STANDARD_SHAPES,
    check_solver,
    claimed_problems,
    standard_problems,
)
from convsolve_direct import naive
from convsolve_direct.naive import NaiveFwd
from processes import running

FAKE_PLUGINS = Path(__file__).parents[1] / "fake_plugins"
FORWARD = standard_problems((Direction.FORWARD,))
STRIDED = next(p for p in FORWARD if p.conv.strides != (1, 1))


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


def test_claimed_problems_cover_every_rank_and_layout_claimed(faulty):
    """check_solver's problems of other ranks and layouts follow what a solver claims: none for
    a solver without spatial_dims and layouts; for the naive solvers 1-D and 3-D in every
    layout, channels-last 2-D, x and y channels-last beside channels-first weights, with
    groups, depthwise, stride, dilation and asymmetric padding in each rank."""
    assert claimed_problems(faulty["faulty.HonestWorkspace"]) == []
    problems = claimed_problems(NaiveFwd())
    assert {p.direction for p in problems} == {Direction.FORWARD}
    assert {(p.spatial_dims, p.layouts) for p in problems} == {
        (1, ("NCW",) * 3), (1, ("NWC",) * 3), (1, ("NWC", "NCW", "NWC")),
        (2, ("NHWC",) * 3), (2, ("NHWC", "NCHW", "NHWC")),
        (3, ("NCDHW",) * 3), (3, ("NDHWC",) * 3), (3, ("NDHWC", "NCDHW", "NDHWC"))}
    for rank in (1, 3):
        of_rank = [p for p in problems if p.spatial_dims == rank]
        assert any(p.groups == p.c == p.k > 1 for p in of_rank)                  # depthwise
        assert any(1 < p.groups < p.c for p in of_rank)                          # groups
        assert any(lo != hi for p in of_rank for lo, hi in p.conv.pads)          # asymmetric
        assert any(max(p.conv.strides) > 1 for p in of_rank)
        assert any(max(p.conv.dilations) > 1 for p in of_rank)


def test_a_solver_wrong_in_channels_last_fails(handle, monkeypatch):
    """check_solver checks every layout a solver claims: naive_nd.cl given channels-first
    strides for every tensor passes the channels-first problems and fails the channels-last
    ones, each named by its key."""
    true_args = naive.nd_args

    def channels_first_strides(problem):
        return true_args(Problem.convolution(problem.x.shape, problem.w.shape, problem.conv.strides,
                                      problem.conv.pads, problem.conv.dilations, problem.groups,
                                      problem.direction))
    monkeypatch.setattr(naive, "nd_args", channels_first_strides)
    problems = [p for p in claimed_problems(NaiveFwd()) if p.spatial_dims == 1]
    with pytest.raises(AssertionError) as info:
        check_solver(NaiveFwd(), handle, problems)
    failed = {p.key() for p in problems if p.key() in str(info.value)}
    assert failed == {p.key() for p in problems if "NWC" in p.layouts}


def test_honest_solver_passes(handle, faulty):
    """A correct solver that uses exactly its workspace passes on every forward problem."""
    assert check_solver(faulty["faulty.HonestWorkspace"], handle) == len(STANDARD_SHAPES)


@pytest.mark.parametrize("name, finding", [
    ("faulty.OutOfBounds", "wrote past its workspace (1024 bytes reported, byte 1535 written)"),
    ("faulty.UnusedWorkspace", "reports 1024 bytes of workspace but writes only 0"),
    ("faulty.WrongOnOddSizes", "output elements never written"),
    ("faulty.NonDeterministic", "claims to be deterministic but two runs differ"),
    ("faulty.SkipsPadding", "non-finite inputs: 0 NaN in the output where the reference has"),
    ("faulty.WrongResult", "wrong result, relative error"),
    ("faulty.ModifiesInput", "modified its input 'x'"),
    ("faulty.WritesPastInput", "wrote past its input 'x'"),
    ("faulty.RaisingApplicable",
     "is_applicable raised ValueError('planted: strides not understood')"),
    ("faulty.WtiOutOfRange", "get_wti() returned 1.5, not in (0, 1] or negative"),
    ("faulty.NegativeWorkspace", "workspace() returned -8, not bytes >= 0"),
    ("faulty.SpreadsEverywhere", "outputs non-finite out of the non-finite inputs' reach"),
])
def test_planted_faults_are_caught(handle, faulty, name, finding):
    """Each planted fault fails check_solver with a message that names it."""
    with pytest.raises(AssertionError) as info:
        check_solver(faulty[name], handle)
    assert finding in str(info.value) and name in str(info.value)
    if name == "faulty.WrongResult":   # finite and wrong: not blamed on NaN or unwritten outputs
        assert "never written" not in str(info.value) and "NaN" not in str(info.value)


@pytest.mark.parametrize("name, honest", [
    ("faulty.WrongResult", {"amount": 0.0}),
    ("faulty.ModifiesInput", {"amount": 0.0}),
    ("faulty.WritesPastInput", {"amount": 0.0, "past": False}),
    ("faulty.RaisingApplicable", {"raises": False}),
    ("faulty.WtiOutOfRange", {"wti": 0.5}),
    ("faulty.NegativeWorkspace", {"workspace_bytes": 0}),
    ("faulty.SpreadsEverywhere", {"span": None}),   # faulty.Spreads: an output plane each
])
def test_planted_faults_have_honest_controls(handle, faulty, name, honest):
    """The same fake with its fault taken out passes on every forward problem, so what fails
    above is the fault alone."""
    solver = copy.copy(faulty[name])
    for attribute, value in honest.items():
        setattr(solver, attribute, value)
    assert check_solver(solver, handle) == len(STANDARD_SHAPES)


def test_a_read_past_an_input_gives_nan_outputs(handle, monkeypatch):
    """A kernel reading up to a few KiB past its input (channels in fours, their weights zero)
    reads the NaN of the guard zone: its outputs there are NaN and check_solver names them;
    where its channels are a multiple of 4 it reads nothing past x and passes."""
    import cs_unsafe
    over = [Problem.conv2d((2, 3, 7, 5), (4, 3, 3, 3), padding=1),    # 1 plane: 140 bytes
            Problem.conv2d((1, 9, 13, 11), (2, 9, 3, 3))]            # 3 planes: 1716 bytes
    with pytest.raises(AssertionError) as info:
        check_solver(cs_unsafe.ReadsPastInput(), handle, over)
    found = [line for line in str(info.value).splitlines() if "wrong result" in line]
    assert [line.split(":")[0].strip() for line in found] == [p.key() for p in over]
    assert all("NaN outputs from finite inputs: a read past an input gives NaN" in line
               for line in found), found
    fine = Problem.conv2d((2, 8, 7, 5), (4, 8, 3, 3), padding=1)
    assert check_solver(cs_unsafe.ReadsPastInput(), handle, [fine]) == 1


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


@pytest.mark.parametrize("sanitize", [False, True], ids=["device", "oclgrind"])
@pytest.mark.parametrize("name, words", [
    ("Misspelt", "unknown hook 'is_aplicable' (did you mean 'is_applicable'?)"),
    ("WrongArgument", "Argument(s) {'prob'} are declared in the hookimpl"),
    ("MissingHook", "does not implement ['build_invoker']"),
])
def test_a_solver_discovery_refuses_fails_at_once_in_its_words(handle, name, words, sanitize):
    """check_solver runs discovery's checks first, on a device or on Oclgrind, and reports a
    refusal once, in its words."""
    import cs_contract  # tests/conftest.py puts the fake plugins on the path
    with pytest.raises(AssertionError) as info:
        check_solver(getattr(cs_contract, name)(), handle, sanitize=sanitize)
    assert "discovery refuses it" in str(info.value) and words in str(info.value)
    assert str(info.value).count(words) == 1


@pytest.mark.parametrize("sanitize", [False, True], ids=["device", "oclgrind"])
def test_a_plugin_without_an_api_declaration_fails(handle, monkeypatch, sanitize):
    """A solver whose plugin module does not declare CONVSOLVE_SOLVER_API is refused."""
    import cs_contract
    monkeypatch.delattr(cs_contract, "CONVSOLVE_SOLVER_API")
    with pytest.raises(AssertionError, match="does not declare CONVSOLVE_SOLVER_API"):
        check_solver(cs_contract.Valid(), handle, sanitize=sanitize)


def test_a_write_past_odd_outputs_is_caught(handle):
    """Two outputs per work-item with no check of the second: the guard zone catches the write
    one element past y on every odd-sized output and on none of the even ones."""
    import cs_unsafe
    with pytest.raises(AssertionError) as info:
        check_solver(cs_unsafe.PairsPastOddOutput(), handle)
    odd = [p.key() for p in FORWARD if p.y.size % 2]
    found = str(info.value).splitlines()[1:]
    assert odd and len(found) == len(odd)
    assert all(f"{key}: wrote past its output 'y'" in line for key, line in zip(odd, found))


# {{{ tunable solvers

def test_a_tunable_solver_is_checked_with_sampled_configs(handle):
    """A tunable solver runs with its default config on every problem and with the number of
    random valid ones asked for, dealt to the problems; each failure names the wrong config; a
    config check_config refuses is never built.  The default and the first sampled config get
    every check (three runs: the result, a second for determinism, one with non-finite
    inputs), the other sampled configs the reference's (one run)."""
    import cs_configs
    solver = cs_configs.Tiled()
    with pytest.raises(AssertionError) as info:
        check_solver(solver, handle, configs=2 * len(FORWARD))
    found = str(info.value).splitlines()[1:]
    assert found and all(' with config {"WG":16}: ' in line for line in found)
    assert solver.built.count({"WG": 64}) == len(FORWARD)        # the default, everywhere
    assert solver.built.count({"WG": 16}) == len(FORWARD)        # 2 drawn of 2 left: both
    assert {"WG": 8} not in solver.built
    assert solver.ran.count({"WG": 64}) == 3 * len(FORWARD)
    assert len(solver.ran) == 3 * len(FORWARD) + 3 + (2 * len(FORWARD) - 1)
    assert check_solver(cs_configs.Tiled(), handle, configs=0) == len(FORWARD)
    solver = cs_configs.Tiled()
    check_solver(solver, handle, [p for p in FORWARD if p.y.size % 16 == 0], configs=5)
    assert len(solver.built) == 5 + sum(p.y.size % 16 == 0 for p in FORWARD)   # 5 in all
    with pytest.raises(AssertionError, match="applicable to none of the problems checked"):
        check_solver(solver, handle, standard_problems((Direction.BACKWARD_DATA,)))


def test_checking_the_default_alone_draws_no_config(handle, monkeypatch):
    """configs=0 checks the default config only and never draws from the space: drawing
    enumerates it when its constraints refuse most random draws (implicit GEMM's: 2 million
    configs, 6 s a problem)."""
    import cs_configs

    def refuse(*args):
        raise AssertionError("sampled")
    monkeypatch.setattr(convsolve.ConfigSpace, "sample", refuse)
    solver = cs_configs.Tiled()
    assert check_solver(solver, handle, configs=0) == len(FORWARD)
    assert solver.built == [{"WG": 64}] * len(FORWARD)
    with pytest.raises(AssertionError, match="sampled"):
        check_solver(cs_configs.Tiled(), handle, configs=1)


def test_an_invalid_default_config_fails(handle):
    """A default config outside the solver's space is a failure on each problem, in calls'
    words."""
    import cs_configs
    with pytest.raises(AssertionError, match=r"default_config\(\) returned \{'WG': 48\}: WG=48 "
                       r"is not one of \[8, 16, 32, 64\]"):
        check_solver(cs_configs.BadDefault(), handle)

# }}}


# {{{ a crash is never silent

CRASHING_TEST = """
import cs_lies
from convsolve.testing import check_solver


def test_it(handle):
    check_solver(cs_lies.AbortsOnStride(), handle)
"""


def test_a_crash_in_process_names_the_solver_and_the_problem(tmp_path):
    """A solver that kills the test process (it aborts, as glibc does on a heap a kernel
    corrupted) ends pytest with the solver and the problem named on stderr by the watcher;
    with --convsolve-isolate the same test fails instead, naming them and the signal."""
    (tmp_path / "conftest.py").write_text('pytest_plugins = ["convsolve.testing"]\n')
    (tmp_path / "test_crash.py").write_text(CRASHING_TEST)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(FAKE_PLUGINS), os.environ.get("PYTHONPATH")]))}

    def pytest(*options):
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                               *options, str(tmp_path)], check=False, cwd=tmp_path, env=env,
                              capture_output=True, text=True)
    done = pytest()
    assert done.returncode == -6, done.stdout + done.stderr   # SIGABRT, as "exit 134" in a shell
    assert (f"the process died while check_solver ran 'lies.AbortsOnStride' on {STRIDED.key()}"
            in done.stderr), done.stderr
    done = pytest("--convsolve-isolate")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f"{STRIDED.key()}: the worker process died checking it (killed by SIGABRT)"
            in done.stdout), done.stdout


def test_a_crash_under_isolation_is_a_failure_naming_the_problem(handle):
    """With isolate=True a problem that kills the worker process is a failure naming solver,
    problem and signal (checked again alone first, since others ran before it in that process),
    and the problems after it are still checked."""
    import cs_lies
    problems = FORWARD[:6]
    with pytest.raises(AssertionError) as info:
        check_solver(cs_lies.AbortsOnStride(), handle, problems, isolate=True)
    assert str(info.value).splitlines() == ["lies.AbortsOnStride fails check_solver:"] + [
        f"  {p.key()}: the worker process died checking it (killed by SIGABRT)"
        for p in problems if p.conv.strides != (1, 1)]
    assert len(str(info.value).splitlines()) == 3


def test_a_crash_caused_earlier_is_named_as_such(handle):
    """A problem that kills the worker only after another problem ran in it, and passes alone,
    is reported with the problems that ran before it."""
    import cs_lies
    with pytest.raises(AssertionError) as info:
        check_solver(cs_lies.AbortsLater(), handle, FORWARD[:2], isolate=True)
    assert (f"{FORWARD[1].key()}: the worker process died checking it after "
            f"['lies.AbortsLater on {FORWARD[0].key()}'] (killed by SIGABRT); alone in a new one "
            "it did not" in str(info.value))


def test_a_kernel_that_never_finishes_fails_as_hung_in_process(handle, monkeypatch):
    """In process, a run that does not finish within testing.RUN_LIMIT_S fails as hung, naming
    the problem and the limit and saying the queue is unusable now; nothing after it runs."""
    import cs_deadly
    from convsolve import testing
    monkeypatch.setattr(testing, "RUN_LIMIT_S", 2)
    try:
        with pytest.raises(AssertionError) as info:
            check_solver(cs_deadly.NeverCompletes(), handle, FORWARD[:3])
    finally:
        cs_deadly.complete_pending()
    assert str(info.value).splitlines() == [
        "deadly.NeverCompletes fails check_solver:",
        (f"  {FORWARD[0].key()}: hung: its kernels did not finish within 2 s; they block this "
         "process's device queue, which is unusable now (check_solver(..., isolate=True) runs "
         "them in a worker process, killed when hung)")]


def test_a_kernel_that_never_finishes_fails_as_hung_under_isolation(handle, monkeypatch):
    """With isolate=True a worker silent for check_worker.REPLY_LIMIT_S (its kernel never
    finishes) is killed, and the problem fails as hung."""
    import cs_deadly
    from convsolve.testing import isolation as check_worker
    monkeypatch.setattr(check_worker, "REPLY_LIMIT_S", 8)
    with pytest.raises(AssertionError) as info:
        check_solver(cs_deadly.HangsRunning(), handle, FORWARD[:1], isolate=True)
    assert (f"  {FORWARD[0].key()}: the worker process died checking it (no reply within 8 s: "
            "hung, killed by SIGKILL" in str(info.value)), str(info.value)


def test_a_stride_lie_is_caught_in_isolation(handle, monkeypatch):
    """is_applicable accepting strides its kernel ignores: on a small problem the guard zone
    catches the overrun, on a large one the worker may die, or hang (the overrun can corrupt
    PoCL's own state so that the run's events never complete: seen on an AVX2 EPYC, where the
    caller then waited REPLY_LIMIT_S, 600 s, past pytest's 300 s timeout); either way solver and
    problem are named, and the unstrided problem passes."""
    import cs_lies
    from convsolve.testing import isolation as check_worker
    monkeypatch.setattr(check_worker, "REPLY_LIMIT_S", 60)   # each run here takes under 5 s
    small, large = (Problem.conv2d(*shape) for shape in [
        ((2, 3, 6, 6), (5, 3, 1, 1), 2), ((1, 8, 64, 64), (8, 8, 1, 1), 4)])
    fine = Problem.conv2d((1, 8, 8, 8), (8, 8, 1, 1))
    with pytest.raises(AssertionError) as info:
        check_solver(cs_lies.StrideLie(), handle, [small, fine, large], isolate=True)
    assert f"{small.key()}: wrote past its output 'y'" in str(info.value)
    assert f"  {large.key()}: " in str(info.value) and fine.key() not in str(info.value)

# }}}


@pytest.mark.parametrize("isolate", [False, True], ids=["in-process", "isolated"])
def test_an_epilogue_said_fused_but_not_applied_is_caught(handle, isolate):
    """A solver whose fused_stages claims stages its kernel never applies fails check_solver's
    epilogue cases, in process and in the isolation worker alike, naming problem, case and
    candidate; its bare convolution passes."""
    import cs_lies
    problem = Problem.conv2d((1, 3, 5, 4), (2, 3, 3, 3), padding=1)
    with pytest.raises(AssertionError) as info:
        check_solver(cs_lies.EpilogueLie(), handle, [problem], isolate=isolate)
    lines = str(info.value).splitlines()[1:]
    assert lines and all(line.startswith(f"  {problem.key()}-epi") for line in lines), lines
    assert any("(bias+relu, inf in w), lies.EpilogueLie fusing 3 stages:" in line
               for line in lines), lines
    assert not any("/unfused" in line for line in lines), lines


def test_epilogue_cases_cover_every_claimed_rank_and_layout():
    """check_solver's epilogue plan gives each direction of every other rank and output layout
    a solver claims one problem with SHAPE_CASES, besides 2-D NCHW's every case (on Oclgrind
    2-D NCHW's alone)."""
    from convsolve.testing import epilogue_cases
    problems = standard_problems() + claimed_problems(NaiveFwd())
    plan = epilogue_cases.plan(problems)
    def group(p):   # the epilogue reads y's layout alone
        return p.direction, p.is_2d_nchw or (p.spatial_dims, p.y.layout)
    groups = {group(p) for p in problems}
    planned = [p for p in problems if p.key() in plan]
    assert {group(p) for p in planned} == groups
    assert all(plan[p.key()] == epilogue_cases.SHAPE_CASES for p in planned if not p.is_2d_nchw)
    assert len(planned) == len(groups) + 3   # 2-D NCHW: two problems per direction
    sanitized = epilogue_cases.plan(problems, sanitize=True)   # Oclgrind: 2-D NCHW's only
    assert all(p.is_2d_nchw for p in problems if p.key() in sanitized) and sanitized


def test_an_epilogue_said_fused_but_not_applied_in_nwc_is_caught(handle):
    """A solver claiming to fuse an NWC problem's epilogue whose kernel leaves it out fails the
    epilogue case of that layout, named by its key; its NCW problem passes."""
    import cs_lies
    ncw = next(p for p in claimed_problems(NaiveFwd()) if p.spatial_dims == 1)
    nwc = Problem.convolution(ncw.x.shape, ncw.w.shape, ncw.conv.strides, ncw.conv.pads,
                              ncw.conv.dilations, ncw.groups, layout="NWC")
    with pytest.raises(AssertionError) as info:
        check_solver(cs_lies.ChannelsLastEpilogueLie(), handle, [ncw, nwc], configs=0)
    lines = str(info.value).splitlines()[1:]
    assert lines and all(line.startswith(f"  {nwc.key()}-epi") for line in lines), lines
    assert any("(all, beta=0, leaky a=0), lies.ChannelsLastEpilogueLie fusing 6" in line
               for line in lines), lines


#: A caller of check_solver(isolate=True) that prints its worker's pid and folder when the
#: worker announces its first run, then waits for the check (which ``argv[1]`` says may hang).
ORPHANING_CALLER = """
import json, sys
import cs_deadly, cs_fake
from convsolve import Handle, Problem
from convsolve.testing import check_solver, isolation

replies = isolation._Worker.replies
def announcing(self):
    for message in replies(self):
        if message[0] == "start":
            print(json.dumps([self.process.pid, str(self.folder)]), flush=True)
        yield message
isolation._Worker.replies = announcing
solver = cs_deadly.HangsRunning() if sys.argv[1] == "hung" else cs_fake.Good()
check_solver(solver, Handle(), [Problem.conv2d((1, 1, 3, 3), (1, 1, 1, 1))], isolate=True)
print("[]", flush=True)
input()
"""


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("state", ["hung", "idle"])
def test_a_worker_ends_with_its_sigkilled_caller(tmp_path, state):
    """A check worker whose caller is SIGKILLed (it runs no atexit) ends within a few seconds
    and removes its folder: in a kernel that never finishes, and idle between checks."""
    caller = subprocess.Popen([sys.executable, "-c", ORPHANING_CALLER, state],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pid = None
    try:
        pid, folder = json.loads(caller.stdout.readline())
        if state == "idle":
            assert json.loads(caller.stdout.readline()) == []   # the check passed
        time.sleep(1.0)   # the kernel runs, or the worker waits for the next request
        assert running(pid) and Path(folder).is_dir()
        caller.kill()
        caller.wait()
        deadline = time.monotonic() + 5
        while (running(pid) or Path(folder).exists()) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not running(pid), f"worker {pid} outlived its caller by 5 s"
        assert not Path(folder).exists(), f"worker left its folder {folder}"
    finally:
        caller.kill()
        if pid is not None and running(pid):
            os.kill(pid, signal.SIGKILL)


def test_an_epilogue_write_past_the_output_is_caught(handle):
    """check_solver's epilogue cases run on guarded buffers too: a fused epilogue kernel that
    writes one element past its output is named, case by case; its bare convolution passes."""
    import cs_unsafe
    problem = Problem.conv2d((1, 3, 5, 4), (2, 3, 3, 3), padding=1)
    with pytest.raises(AssertionError) as info:
        check_solver(cs_unsafe.EpilogueWritesPast(), handle, [problem])
    lines = str(info.value).splitlines()[1:]
    assert lines and all(line.startswith(f"  {problem.key()}-epi") for line in lines), lines
    past = [line for line in lines if "unsafe.EpilogueWritesPast fusing" in line
            and "wrote past its output 'y' (a tensor of 160 bytes; byte 160 written)" in line]
    assert len(past) == 5, lines   # every forward case (z being y among them)
