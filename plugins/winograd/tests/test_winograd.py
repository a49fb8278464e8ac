"""convsolve-winograd: the solvers against the reference in every direction, chunks, workspace,
configs, numerics and the tile-local non-finite behaviour."""
import random
from types import SimpleNamespace

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Problem, testing
from convsolve.testing import check_solver, device_buffers, fake_handle, random_tensors, read_output
from convsolve_winograd import F2x3, F4x3, F6x3, configs, convsolve_solvers, plan
from convsolve_winograd.solver import WinogradSolver

SOLVERS = [F2x3(), F4x3(), F6x3()]
IDS = [s.name for s in SOLVERS]


# {{{ the tile-local non-finite semantics (README.md, "Non-finite values")

def may_be_nonfinite(problem, m, expected, weights):
    """Output elements a Winograd solver may leave non-finite where the reference leaves
    ``expected``: the whole m x m output tile (aligned to the output's origin; backward-weights:
    the whole 3 x 3 filter) of each non-finite element of the reference, in the same image and
    channel; and for backward-data the whole input channel of a non-finite weight (the reference
    multiplies a weight by real dy only, the rotated-filter correlation by dy's zero padding
    too).  The rule needs only the tile size, so the core could check it for any solver that
    declares one (README.md, "Non-finite values")."""
    bad = ~np.isfinite(expected)
    if problem.direction is Direction.BACKWARD_WEIGHTS:
        return np.broadcast_to(bad.any(axis=(2, 3), keepdims=True), bad.shape)
    if problem.direction is Direction.BACKWARD_DATA:
        bad_w = ~np.isfinite(weights).all(axis=(2, 3))                      # (K, C/G)
        cg, kg = problem.c // problem.groups, problem.k // problem.groups
        for k, c in zip(*np.nonzero(bad_w)):
            bad[:, (k // kg) * cg + c] = True
    n, c, h, w = bad.shape
    th, tw = -(-h // m), -(-w // m)
    grid = np.zeros((n, c, th * m, tw * m), bool)
    grid[:, :, :h, :w] = bad
    tiles = grid.reshape(n, c, th, m, tw, m).any(axis=(3, 5), keepdims=True)
    return np.broadcast_to(tiles, (n, c, th, m, tw, m)).reshape(n, c, th * m, tw * m)[
        :, :, :h, :w]


#: Where the tile-local tests plant non-finite values, per direction: (tensor, flat index,
#: value), the kinds check_solver plants (an inf weight or input, a NaN input) at the tensors'
#: first and last elements, which meet the zero padding.
PLANTED = {
    Direction.FORWARD: (("w", 0, np.inf), ("x", -1, np.nan)),
    Direction.BACKWARD_DATA: (("w", 0, -np.inf), ("y", 0, np.nan)),
    Direction.BACKWARD_WEIGHTS: (("x", 0, np.inf), ("y", -1, np.nan)),
}


def run(handle, solver, problem, host):
    """The solver's output (default config) on the tensors ``host``, and the reference's."""
    invoker = solver.build_invoker(problem, handle, solver.default_config(problem, handle))
    buffers = device_buffers(handle, host)
    cl.wait_for_events(invoker(convsolve.Buffers(**buffers),
                               handle.scratch(solver.workspace(problem, handle))))
    with np.errstate(invalid="ignore"):
        return read_output(handle, problem, buffers), convsolve.reference.compute(problem, **host)


def assert_tile_local(problem, m, out, expected, weights):
    """Non-finite wherever the reference is, and nowhere outside may_be_nonfinite."""
    ours, theirs = ~np.isfinite(out), ~np.isfinite(expected)
    assert (theirs <= ours).all(), f"{problem.key()}: finite where the reference is not"
    assert (ours <= may_be_nonfinite(problem, m, expected, weights)).all(), (
        f"{problem.key()}: non-finite outside the tiles of the reference's non-finite outputs")

# }}}


def _sweep(directions=tuple(Direction)):
    """Odd, non-square and tile-unaligned sizes, pads 0-3 (asymmetric, and larger than the
    filter: negative correlation pads), groups, batch 1 and 3, channels not multiples of any
    vector width, an image wider than a 16-lane run."""
    shapes = [((1, 3, 5, 7), (2, 3, 3, 3), 0, 1), ((3, 5, 11, 9), (7, 5, 3, 3), 1, 1),
              ((2, 6, 13, 19), (9, 2, 3, 3), ((2, 0), (1, 3)), 3),
              ((1, 4, 7, 6), (5, 4, 3, 3), ((3, 2), (0, 3)), 1),
              ((2, 9, 6, 37), (6, 9, 3, 3), 2, 1), ((1, 8, 9, 9), (16, 2, 3, 3), 1, 4),
              ((2, 4, 7, 8), (8, 1, 3, 3), 1, 4)]                  # one input channel a group
    return [Problem.conv2d(x, w, padding=pad, groups=g, direction=d)
            for d in directions for x, w, pad, g in shapes]


@pytest.mark.parametrize("solver", SOLVERS, ids=IDS)
def test_conformance_on_the_standard_set(handle, solver):
    """check_solver (nonfinite = "spread") on the standard set and the sweep, with the default
    config and random ones from the space."""
    assert check_solver(solver, handle, testing.standard_problems() + _sweep(), configs=1) >= 20


@pytest.mark.parametrize("solver", SOLVERS, ids=IDS)
def test_tile_local_semantics_on_the_sweep(handle, solver):
    """With an inf and a NaN planted (PLANTED), every problem of the standard set and the sweep
    that the solver accepts is non-finite where the reference is, and only within the tiles of
    those (README.md, "Non-finite values")."""
    problems = [p for p in testing.standard_problems() + _sweep() if solver.is_applicable(p)]
    for problem in problems:
        host = random_tensors(problem)
        for name, index, value in PLANTED[problem.direction]:
            host[name].flat[index] = value
        assert_tile_local(problem, solver.m, *run(handle, solver, problem, host), host["w"])
    assert len(problems) >= 20


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_chunks_of_tile_rows(handle, monkeypatch, direction):
    """With a budget of two tile rows, a batch runs in chunks of 2, 2, ... rows (the last one
    shorter, chunks crossing images), correctly and within its exact workspace."""
    problem = Problem.conv2d((3, 5, 10, 10), (6, 5, 3, 3), padding=((1, 0), (2, 1)),
                             direction=direction)
    geo = plan.geometry(problem, 4)
    monkeypatch.setattr(plan, "CHUNK_BYTES", 2 * geo.tile_bytes * geo.tiles_w + 1)
    geo = plan.geometry(problem, 4)
    assert geo.chunk_rows == 2 and len(geo.chunks()) == 5           # 9 tile rows: 2,2,2,2,1
    assert check_solver(F4x3(), handle, [problem], configs=1, isolate=False,
                        sanitize=False) == 1


def test_workspace_is_exact_and_bounded():
    """Transformed rows of one chunk (pitch = its tiles rounded up to 32, plus 16), then the
    transformed filter (or weight-gradient sum); a large batch stays within the chunk budget
    (a CPU's)."""
    handle = fake_handle("avx2")
    problem = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    geo = plan.geometry(problem, 4)
    assert (geo.tiles_h, geo.tiles_w, geo.tile_bytes) == (14, 14, 36 * 128 * 4)
    fit = plan.CHUNK_BYTES // (36 * 128 * 4 * 14)          # tile rows a chunk may hold
    rows = -(-112 // -(-112 // fit))                          # 112 tile rows in even chunks
    pitch = -(-rows * 14 // 32) * 32 + 16
    u_plane = 64 * 64 + 16                                    # U: 64 rows (4 panels of 16)
    assert F4x3().workspace(problem, handle) == (36 * 128 * pitch + 35 * u_plane + 64 * 64) * 4
    huge = Problem.conv2d((4096, 64, 56, 56), (64, 64, 3, 3), padding=1)
    geo = plan.geometry(huge, 4)
    assert geo.chunk_rows * geo.tiles_w * geo.tile_bytes <= plan.CHUNK_BYTES
    slack = 36 * 128 * (32 + 16) * 4                          # row padding and skew
    assert F4x3().workspace(huge, handle) <= plan.CHUNK_BYTES + geo.fixed_floats * 4 + slack
    # backward-weights, 2 groups: S (4 rows of 32 per position), tile-major x (32 tiles of
    # 2 x 32 + 16), then dy's transformed rows (pitch 48), the last ending at tile 32
    wrw = Problem.conv2d((2, 6, 8, 8), (4, 3, 3, 3), padding=1, groups=2, direction="wrw")
    assert F2x3().workspace(wrw, handle) == (15 * (4 * 32 + 16) + 4 * 32 + 16 * 32 * 80
                                     + (16 * 4 - 1) * 48 + 32) * 4


def test_gpu_chunks_take_the_gpu_budget():
    """On a GPU a chunk may hold GPU_CHUNK_BYTES (at most half the largest allocation): ResNet-50's
    3x3 128->128 28x28 layer at batch 32 is one chunk there (7 on a CPU), and the workspace
    follows the device."""
    problem = Problem.conv2d((32, 128, 28, 28), (128, 128, 3, 3), padding=1)
    gpu, cpu, small = fake_handle("gpu"), fake_handle("avx2"), fake_handle(
        "gpu", max_mem_alloc_size=64 << 20)
    assert plan.chunk_bytes(gpu) == plan.GPU_CHUNK_BYTES and plan.chunk_bytes(small) == 32 << 20
    assert plan.chunk_bytes(cpu) == plan.CHUNK_BYTES
    whole, chunked = (plan.geometry(problem, 4, plan.chunk_bytes(h)) for h in (gpu, cpu))
    assert len(whole.chunks()) == 1 and len(chunked.chunks()) == 7
    assert F4x3().workspace(problem, gpu) == whole.workspace() > F4x3().workspace(problem, cpu)


def test_applicability():
    """3x3, stride 1, dilation 1, float32, any padding and groups; depthwise declined."""
    base = {"x_shape": (1, 4, 8, 8), "w_shape": (4, 4, 3, 3), "padding": 1}
    for solver in SOLVERS:
        assert solver.is_applicable(Problem.conv2d(**base))
        assert solver.is_applicable(Problem.conv2d(**{**base, "padding": ((0, 3), (2, 0))}))
        assert solver.is_applicable(Problem.conv2d((1, 4, 8, 8), (6, 2, 3, 3), groups=2))
        assert not solver.is_applicable(Problem.conv2d(**base, stride=2))
        assert not solver.is_applicable(Problem.conv2d(**base, dilation=2))
        assert not solver.is_applicable(Problem.conv2d((1, 4, 8, 8), (4, 4, 5, 5)))
        assert not solver.is_applicable(Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 1)))
        assert not solver.is_applicable(Problem.conv2d((1, 4, 8, 8), (4, 1, 3, 3), groups=4))
        assert not solver.is_applicable(Problem.conv2d((0, 4, 8, 8), (4, 4, 3, 3)))
        assert 0 < solver.get_wti(Problem.conv2d(**base)) <= 1


@pytest.mark.parametrize("key", ["cpu/vector16", "cpu", "gpu"])
def test_device_defaults_lie_in_the_space(handle, monkeypatch, key):
    """Each device class's default config is in the space of each direction and passes the
    solver's own check; AVX-512 gets 16-wide vectors and AVX2 8-wide ones, untuned."""
    from convsolve import tuning
    keys = ("some device", f"{key.split('/')[0]}/arch", key, key.split("/")[0], "*")
    monkeypatch.setattr(tuning, "device_keys", lambda device: keys)
    space = convsolve.ConfigSpace(configs.CONFIG_SPACES[key.split("/")[0]],
                                  configs.CONFIG_CONSTRAINTS)
    for direction in Direction:
        problem = Problem.conv2d((2, 32, 56, 56), (32, 32, 3, 3), padding=1,
                                 direction=direction)
        config = F4x3().default_config(problem, handle)
        assert space.refusal(config) is None, (direction, config)
        assert config["VW"] == {"cpu/vector16": 16, "cpu": 8, "gpu": 1}[key]
    small = Problem.conv2d((2, 32, 7, 7), (32, 32, 3, 3), padding=1)
    assert F4x3().default_config(small, handle)["TT"] <= 4       # 2 tiles per tile row


@pytest.mark.parametrize("kind, largest", [("gpu", 32), ("cpu", 8)])
def test_work_groups_stay_within_the_device(kind, largest):
    """On a device that takes smaller work-groups than its class's default asks (a GPU of 32, a
    CPU of 8), the default and every config of the space stay within it, and check_config
    accepts the default."""
    gpu = kind == "gpu"
    device = SimpleNamespace(name="Small device", version="OpenCL 3.0", vendor="Acme",
                             type=cl.device_type.GPU if gpu else cl.device_type.CPU,
                             native_vector_width_float=1 if gpu else 8,
                             max_work_group_size=largest, local_mem_size=32 << 10,
                             max_mem_alloc_size=1 << 30)
    handle = SimpleNamespace(device=device, is_gpu=gpu)
    problem = Problem.conv2d((2, 32, 28, 28), (32, 32, 3, 3), padding=1)
    for solver in SOLVERS:
        config, space = solver.default_config(problem, handle), solver.config_space(problem, handle)
        assert space.refusal(config) is None and not solver.check_config(problem, handle, config)
        assert max(c["WG"] for c in space) <= largest


def test_avx512_defaults_equal_the_kernels_defaults():
    """DEFAULT_CONFIGS['cpu/vector16'] is what the .cl files compile to on their own (their #ifndef
    defaults), WG aside (a launch parameter)."""
    import re
    from pathlib import Path
    kernels = Path(plan.KERNELS)
    text = (kernels / "winograd_common.cl").read_text()   # every tunable's default is there
    found = dict(re.findall(r"#ifndef (\w+)\n#define \1 (\d+)", text))
    for name, value in configs.DEFAULT_CONFIGS["cpu/vector16"].items():
        if name != "WG":
            assert int(found[name]) == value, name


def test_config_space_is_modest_and_consistent(handle):
    """Tens to hundreds of configs, each within the register, lane and panel limits."""
    problem = Problem.conv2d((1, 4, 8, 8), (4, 4, 3, 3))
    configs = list(F2x3().config_space(problem, handle))
    assert 20 <= len(configs) <= 600, len(configs)
    for config in configs:
        tn = config["VW"] * config["NV"]
        assert plan.TILE_ALIGN % tn == 0 and tn % config["TT"] == 0
        assert config["TM"] * config["NV"] <= 24 and plan.U_PANEL % config["TM"] == 0


@pytest.mark.parametrize("solver", SOLVERS, ids=IDS)
def test_error_within_tolerance_on_large_and_positive_inputs(handle, solver):
    """The declared tolerance holds for inputs of large magnitude (1e4) and for all-positive
    inputs (ReLU activations), in every direction, on a layer 64 channels deep."""
    rng = np.random.default_rng(1)
    for direction in Direction:
        problem = Problem.conv2d((2, 64, 14, 14), (64, 64, 3, 3), padding=1,
                                 direction=direction)
        invoker = solver.build_invoker(problem, handle, solver.default_config(problem, handle))
        scratch = handle.scratch(solver.workspace(problem, handle))
        for scale, low in ((1e4, -1.0), (1.0, 0.0)):
            host = {name: (scale * rng.uniform(low, 1.0, getattr(problem, name).shape))
                    .astype(np.float32) for name in "xwy"}
            buffers = device_buffers(handle, host)
            cl.wait_for_events(invoker(convsolve.Buffers(**buffers), scratch))
            error = testing.relative_error(read_output(handle, problem, buffers),
                                           convsolve.reference.compute(problem, **host))
            assert error < solver.tolerance, (direction, scale, low, error)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_tile_local_semantics_hold_at_the_edges(handle, direction):
    """A NaN in each corner of the input (and in the rows past the last window that a partial
    tile reads, with padding 3: read as zero) stays within the tiles of the reference's
    non-finite outputs; the other image stays finite."""
    problem = Problem.conv2d((2, 3, 13, 11), (4, 3, 3, 3), padding=((1, 3), (0, 3)),
                             direction=direction)
    host = random_tensors(problem)
    src = "y" if direction is Direction.BACKWARD_DATA else "x"
    for i, j in ((0, 0), (0, -1), (-1, 0), (-1, -1)):
        host[src][1, 2, i, j] = np.nan
    for solver in SOLVERS:
        out, expected = run(handle, solver, problem, host)
        assert_tile_local(problem, solver.m, out, expected, host["w"])
        if direction is not Direction.BACKWARD_WEIGHTS:
            assert np.isfinite(out[0]).all()


def test_plugin_lists_its_solvers_and_declares_its_semantics():
    """The entry point yields the three solvers, tile-local, deterministic, with tolerances
    growing with the tile."""
    solvers = convsolve_solvers()
    assert [s.name for s in solvers] == ["winograd.F2x3", "winograd.F4x3", "winograd.F6x3"]
    assert all(s.nonfinite == "spread" and s.deterministic for s in solvers)
    assert solvers[0].tolerance <= solvers[1].tolerance <= solvers[2].tolerance


def test_sampled_configs_give_the_same_numbers(handle):
    """Configs drawn from the space compute what the default does, within the tolerance (F2x3:
    its kernels build fastest)."""
    solver = F2x3()
    for direction in Direction:
        problem = Problem.conv2d((2, 5, 10, 21), (7, 5, 3, 3), padding=1, direction=direction)
        host = random_tensors(problem)
        expected = convsolve.reference.compute(problem, **host)
        scratch = handle.scratch(solver.workspace(problem, handle))
        for config in solver.config_space(problem, handle).sample(2, random.Random(3)):
            buffers = device_buffers(handle, host)
            invoker = solver.build_invoker(problem, handle, config)
            cl.wait_for_events(invoker(convsolve.Buffers(**buffers), scratch))
            error = testing.relative_error(read_output(handle, problem, buffers), expected)
            assert error < solver.tolerance, (direction, config)


def test_find_verifies_every_winograd_solver_on_a_resnet_layer(handle, monkeypatch):
    """Find benchmarks the three Winograd solvers on a real-sized 3x3 layer (the other families
    off) and ranks each of them, verified against the reference: none fails or is skipped.
    Which family wins is a measurement, not a test: tools/find_vs_gemm.py."""
    for family in ("DIRECT", "FFT", "GEMM", "IMPLICIT_GEMM"):
        monkeypatch.setenv(f"CONVSOLVE_DEBUG_CONV_{family}", "0")
    problem = Problem.conv2d((4, 64, 28, 28), (64, 64, 3, 3), padding=1)
    buffers = device_buffers(handle, random_tensors(problem))
    ranked = convsolve.find(handle, problem, **buffers, mode="NORMAL", verify=True)
    assert sorted(s.solver for s in ranked) == IDS
    assert all(s.source == "benchmark" and s.time_ms > 0 for s in ranked)
    assert WinogradSolver.family == "winograd"
