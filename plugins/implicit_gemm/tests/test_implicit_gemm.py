"""convsolve-implicit-gemm: the three solvers against the reference with both kernels, the config
space and its defaults, the phases of backward data, the split rule and the workspace."""
import re
from importlib import resources

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Buffers, Direction, Problem
from convsolve.testing import (
    check_problem,
    check_solver,
    claimed_problems,
    device_buffers,
    fake_device,
    fake_handle,
    random_tensors,
    read_output,
    standard_problems,
)
from convsolve_implicit_gemm import configs, plan

SOLVERS = {Direction.FORWARD: "implicit_gemm.Fwd", Direction.BACKWARD_DATA: "implicit_gemm.BwdData",
           Direction.BACKWARD_WEIGHTS: "implicit_gemm.Wrw"}
KERNELS = resources.files("convsolve_implicit_gemm") / "kernels"

#: (x, w, stride, padding, dilation, groups): what tiled implicit GEMMs get wrong.
SWEEP = [
    ((2, 5, 11, 13), (7, 5, 3, 3), 2, ((1, 0), (2, 1)), 1, 1),      # stride 2, odd sizes, asym.
    ((1, 4, 12, 10), (6, 2, 3, 2), (2, 3), 1, (2, 3), 2),           # strides, dilation, groups
    ((3, 3, 9, 17), (70, 3, 5, 1), (3, 1), ((2, 0), (0, 0)), (2, 1), 1),  # M past a 64 tile
    ((2, 20, 9, 9), (33, 20, 1, 1), 1, 0, 1, 1),                    # 1x1, reduction not k-steps
    ((2, 6, 8, 8), (6, 1, 3, 3), 1, 1, 1, 6),                       # depthwise
    ((1, 3, 20, 19), (5, 3, 3, 3), 1, 1, 1, 1),                     # rows end in a short tile
    ((1, 2, 9, 9), (3, 2, 2, 2), 2, 0, 2, 1),                       # gcd(stride, dilation) > 1
    # 3-D and 1-D: the depth digit (strided, dilated, padded on one side), groups, M past a tile
    ((2, 3, 5, 6, 7), (4, 3, 3, 2, 3), (2, 1, 2), ((1, 0), (0, 1), (2, 1)), (1, 2, 1), 1),
    ((1, 4, 4, 5, 6), (6, 2, 2, 3, 3), (3, 1, 1), 1, (2, 1, 1), 2),
    ((1, 3, 3, 4, 5), (70, 3, 3, 1, 1), 1, ((1, 2), (0, 0), (0, 0)), 1, 1),
    ((2, 4, 9), (6, 2, 4), 3, ((2, 1),), 2, 2),
    ((1, 3, 40), (5, 3, 5), 1, 2, 1, 1),                             # rows of several tiles
]
#: Images of 2 rows, 3 taps and reductions of several chunks, whose row tiles the CPU kernel's
#: defaults stage (loop 2): the row past a channel's last (r = 2 of channel c; of depth z in
#: 3-D) has the offset of the next one's first (r = 0), but not its bounds.
SHARED_ROW_OFFSETS = [
    ((1, 32, 2, 6), (3, 32, 3, 3), 1, 1, 1, 1),
    ((1, 16, 3, 2, 6), (2, 16, 3, 3, 1), 1, ((0, 0), (1, 1), (0, 0)), 1, 1),
]
#: Channels-last and mixed layouts of SWEEP's problems, every rank: each tensor's strides, the
#: digit order a channels-last B gives j (forward, backward data) or p (backward weights), the
#: direction igemm_local.cl loads B in and the CPU kernel's loops for a channels-last B.  Two layout
#: choices, each a build per config and direction: every tensor channels-last (a layout name),
#: and x alone (B channels-last with A and C channels-first for forward and backward weights; B
#: channels-first, C channels-last for backward data); the conformance checks add x and y
#: channels-last with channels-first w (claimed_problems).
LAYOUT_SWEEP = [
    (SWEEP[0], "NHWC"), (SWEEP[1], {"x": "NHWC"}), (SWEEP[2], "NHWC"), (SWEEP[3], {"x": "NHWC"}),
    (SWEEP[4], "NHWC"), (SWEEP[6], {"x": "NHWC"}), (SWEEP[7], "NDHWC"), (SWEEP[8], {"x": "NDHWC"}),
    (SWEEP[10], {"x": "NWC"}), (SWEEP[11], "NWC"),
]
#: Configs of both kernels that tests build besides the defaults: a GPU block with one buffer, one
#: whose work-group (128) exceeds its 32 columns, an AVX2-wide CPU tile with small chunks
#: (stride 2 stages rows of two float16), and a GPU block of 256 rows with 16 x 4 tiles whose 64
#: work-items load 8 columns of B each, 4 apart (most of its rows past M here).
OTHER_CONFIGS = [
    {"LOCAL": 1, "BM": 32, "BN": 128, "BK": 8, "TM": 4, "TN": 8, "VW": 4, "DOUBLE_BUF": 0},
    {"LOCAL": 1, "BM": 64, "BN": 32, "BK": 16, "TM": 4, "TN": 4, "VW": 2, "DOUBLE_BUF": 1},
    {"LOCAL": 0, "VW": 8, "VK": 1, "TP": 12, "MR": 16, "JB": 32},
    {"LOCAL": 1, "BM": 256, "BN": 32, "BK": 16, "TM": 16, "TN": 4, "VW": 4, "DOUBLE_BUF": 1},
]
#: The configs that also run LAYOUT_SWEEP, one per kernel: the GPU kernel's quickest to generate
#: code for on PoCL (1.2-2 s a build, the others' 2-4 s), on its all-channels-last problems only
#: (they take every layout-dependent path of the kernel: B along j and along p; the mixed ones
#: differ in strides alone, which both kernels take from implicit_gemm_common.cl), and the CPU
#: kernel's of small chunks (a chunk of 32 ends inside a run of channels) on all of them.
LAYOUT_CONFIGS = [OTHER_CONFIGS[1], OTHER_CONFIGS[2]]


def sweep(direction, config):
    """SWEEP's problems of ``direction``, and LAYOUT_SWEEP's that ``config`` runs."""
    layouts = [] if config not in LAYOUT_CONFIGS else [
        (shape, layout) for shape, layout in LAYOUT_SWEEP
        if not config["LOCAL"] or isinstance(layout, str)]
    return [Problem.convolution(*shape, direction=direction) for shape in SWEEP] + [
        Problem.convolution(*shape, direction=direction, layout=layout)
        for shape, layout in layouts]


def solver(direction):
    return convsolve.registry().get(SOLVERS[direction])


def run(handle, problem, config):
    """The solver's output for ``problem`` built with ``config`` (random inputs, seed 1)."""
    s = solver(problem.direction)
    host = random_tensors(problem, 1)
    buffers = device_buffers(handle, host)
    size = s.workspace(problem, handle)
    scratch = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, size) if size else None
    invoker = s.build_invoker(problem, handle, configs.complete(config))
    cl.wait_for_events(invoker(Buffers(**buffers), scratch))
    return read_output(handle, problem, buffers)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_conformance_on_the_standard_set(handle, direction):
    """Each solver passes check_solver with its default config (the CPU kernel on PoCL), on the
    standard 2-D set and the 1-D and 3-D problems it claims."""
    s = solver(direction)
    assert check_solver(s, handle, configs=0) == len(
        standard_problems([direction]) + claimed_problems(s, [direction]))


@pytest.mark.parametrize("config", OTHER_CONFIGS,
                         ids=["local-1buf", "local-2buf", "vector8", "local-256x32"])
@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_sweep_with_both_kernels(handle, monkeypatch, direction, config):
    """The GPU kernel (local memory, on PoCL) and a CPU config other than the default pass
    check_solver's checks (check_problem) on odd strides, dilations, groups, asymmetric padding
    and tile edges, and two of them (LAYOUT_CONFIGS) on channels-last and mixed layouts of every
    rank.  These configs skip check_solver's epilogue cases (the store is one code in
    every config of a kernel, and each case is a build of seconds): the default config's
    conformance runs them, test_igemm_epilogue.py both kernels, Oclgrind's GPU profile the GPU
    kernel (tests/testing/test_sanitized.py)."""
    if handle.is_gpu and not config["LOCAL"]:
        pytest.skip("the CPU kernel's config, which a GPU's check_config refuses")
    monkeypatch.setattr(configs, "default", lambda problem, device: configs.complete(config))
    s = solver(direction)
    for problem in sweep(direction, config):
        assert s.is_applicable(problem), problem.key()
        assert check_problem(s, handle, problem) == []


@pytest.mark.parametrize("direction", [Direction.FORWARD, Direction.BACKWARD_DATA],
                         ids=lambda d: d.value)
def test_rows_that_share_an_offset_keep_their_own_bounds(handle, direction):
    """SHARED_ROW_OFFSETS with the default config: a staged run of k is one row of B, so a row
    outside the image is not read as the next channel's first row (it was: every output wrong
    on the 2-D one)."""
    for shape in SHARED_ROW_OFFSETS:
        problem = Problem.convolution(*shape, direction=direction)
        assert check_problem(solver(direction), handle, problem) == [], problem.key()


def test_a_nonfinite_weight_in_backward_data_takes_the_exact_path(handle):
    """Backward data of a strided problem with an inf weight: NaN and inf land where the
    reference has them with both kernels (zeros standing for dy's border would give 0 * inf)."""
    problem = Problem.conv2d((1, 3, 9, 8), (4, 3, 3, 3), stride=2, padding=1, direction="bwd")
    host = random_tensors(problem, 2)
    host["w"].flat[5] = np.inf
    expected = convsolve.reference.compute(problem, **host)
    for config in (OTHER_CONFIGS[0], configs.default(problem, handle.device)):
        buffers = device_buffers(handle, host)
        s = solver(problem.direction)
        invoker = s.build_invoker(problem, handle, configs.complete(config))
        cl.wait_for_events(invoker(Buffers(**buffers), None))
        result = read_output(handle, problem, buffers)
        assert np.array_equal(np.isnan(result), np.isnan(expected))
        assert np.array_equal(np.isinf(result), np.isinf(expected))


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_split_backward_weights_is_exact_and_repeatable(handle, monkeypatch, layout):
    """A reduction split 7 ways (uneven parts) fills exactly its workspace and gives
    bit-identical dw on every run, the partial dw in dw's layout."""
    monkeypatch.setattr(plan, "MIN_SPLIT_DEPTH", 40)
    problem = Problem.conv2d((3, 4, 11, 9), (5, 4, 3, 3), padding=1, direction="wrw",
                             layout=layout)
    assert plan.splits(problem, handle.device) == 7 and plan.depth(problem) % 7
    assert solver(problem.direction).workspace(problem, handle) == 7 * problem.w.nbytes
    assert check_solver(solver(problem.direction), handle, [problem], configs=0) == 1
    first = run(handle, problem, LAYOUT_CONFIGS[0])
    assert np.array_equal(first, run(handle, problem, LAYOUT_CONFIGS[0]))


def split_forward_anywhere(monkeypatch, least):
    """Forward split as a GPU splits a small output, on any device: up to 64 parts of at least
    ``least`` (the grid never too large, the tiles wanted never reached)."""
    monkeypatch.setattr(plan, "MAX_FORWARD_SPLITS", {"*": 64})
    monkeypatch.setattr(plan, "FORWARD_SPLIT_WAVES", 1 << 20)
    monkeypatch.setattr(plan, "FORWARD_TILES_PER_UNIT", 1 << 20)
    monkeypatch.setattr(plan, "FORWARD_SPLIT_DEPTH", (least, least))


@pytest.mark.parametrize("config", LAYOUT_CONFIGS, ids=["local", "vector"])
def test_split_forward_is_exact_and_repeatable(handle, monkeypatch, config):
    """Forward split as a GPU splits a small output's reduction (forced here on any device): a
    grouped, strided, asymmetrically padded problem whose reduction of 5 * 3 * 3 = 45 splits 7
    ways (six of 7, one of 3), with either kernel, channels-first and channels-last: it passes
    check_problem, its workspace is exactly its partial y, and runs repeat bit for bit."""
    if handle.is_gpu and not config["LOCAL"]:
        pytest.skip("the CPU kernel's config, which a GPU's check_config refuses")
    split_forward_anywhere(monkeypatch, least=6)
    monkeypatch.setattr(configs, "default", lambda problem, device: configs.complete(config))
    s = solver(Direction.FORWARD)
    for layout in ("NCHW", "NHWC"):
        problem = Problem.conv2d((2, 10, 9, 11), (8, 5, 3, 3), stride=(2, 1),
                                 padding=((1, 0), (2, 1)), groups=2, layout=layout)
        assert plan.splits(problem, handle.device) == 7
        assert s.workspace(problem, handle) == 7 * problem.y.nbytes
        assert check_problem(s, handle, problem) == []
        assert np.array_equal(run(handle, problem, config), run(handle, problem, config))


def test_window_offsets_of_a_channels_last_tensor_fit_an_int():
    """A channels-last B multiplies the window's offsets by its channels: a problem whose
    channels-first offsets fit an int and whose channels-last ones may not is declined in that
    layout only."""
    shape = ((1, 64, 2000, 8000), (64, 64, 3, 3))
    for direction in Direction:
        s = solver(direction)
        assert s.is_applicable(Problem.conv2d(*shape, padding=1, direction=direction))
        assert not s.is_applicable(Problem.conv2d(*shape, padding=1, direction=direction,
                                                  layout="NHWC"))


def test_workspace():
    """Backward data needs none, forward none but on a GPU with a small output (one partial y
    per split); backward weights one partial dw per split, as many as the device class allows: a
    dw of one tile splits 64 ways on a CPU, 512 on a GPU."""
    big = Problem.conv2d((32, 64, 56, 56), (64, 64, 3, 3), padding=1)
    for kind in ("avx2", "gpu"):
        handle = fake_handle(kind)
        for direction in (Direction.FORWARD, Direction.BACKWARD_DATA):
            assert solver(direction).workspace(big.with_direction(direction), handle) == 0
        wrw = big.with_direction("wrw")   # dw is 1 x 9 tiles of 64 x 64: 57 splits, 512 tiles
        assert plan.splits(wrw, handle.device) == 57
        assert solver(Direction.BACKWARD_WEIGHTS).workspace(wrw, handle) == 57 * 64 * 64 * 9 * 4
        deep = Problem.conv2d((8, 512, 7, 7), (2048, 512, 1, 1), direction="wrw")
        assert plan.splits(deep, handle.device) == 1
        assert solver(Direction.BACKWARD_WEIGHTS).workspace(deep, handle) == 0
    small = Problem.conv2d((32, 32, 112, 112), (16, 32, 1, 1), direction="wrw")   # one tile
    assert [plan.splits(small, fake_handle(kind).device) for kind in ("avx2", "gpu")] == [64, 512]
    assert plan.splits(small) == 64   # the WTI's, which sees no device
    assert solver(Direction.BACKWARD_WEIGHTS).workspace(small, fake_handle("gpu")) == (
        512 * small.w.nbytes)
    # y of 8 tiles, 4608 deep: 4 tiles for each of the GPU's 132 units
    late = Problem.conv2d((1, 512, 7, 7), (512, 512, 3, 3), padding=1)
    assert [plan.splits(late, fake_handle(kind).device) for kind in ("avx2", "gpu")] == [1, 66]
    assert solver(Direction.FORWARD).workspace(late, fake_handle("gpu")) == 66 * late.y.nbytes
    assert solver(Direction.FORWARD).workspace(late, fake_handle("avx2")) == 0
    assert plan.splits(late) == 1   # the WTI's
    # grids of 392 tiles (3 waves): none; 224 tiles 512 deep: none (splits of 512 or more);
    # 200 tiles 2048 deep: 3 (528 tiles wanted); 100 tiles 1024 deep: 6
    gpu = fake_handle("gpu").device
    assert [plan.splits(Problem.conv2d((b, c, hw, hw), (k, c, 1, 1)), gpu)
            for b, c, hw, k in ((32, 1024, 14, 256), (8, 512, 7, 2048), (32, 2048, 7, 512),
                                (8, 1024, 14, 256))] == [1, 1, 3, 6]
    empty = Problem.conv2d((0, 512, 7, 7), (512, 512, 3, 3), padding=1)   # a zero batch
    assert solver(Direction.FORWARD).workspace(empty, fake_handle("gpu")) == 0


@pytest.mark.parametrize("stride, dilation, pad, filt, size",
                         [(2, 1, 1, 3, 9), (3, 2, 2, 5, 11), (2, 2, 0, 3, 7), (1, 3, 4, 3, 6)])
def test_phases_cover_every_tap_once(stride, dilation, pad, filt, size):
    """Each dx position of each phase receives exactly the taps whose dy position is a whole
    number, as the brute force finds them."""
    covered = 0
    for a in range(stride):
        extent, taps = plan.phase(a, stride, dilation, pad, filt, size)
        rows = range(a, size, stride)
        assert extent == len(rows)
        for h in rows:
            brute = [r for r in range(filt) if (h + pad - r * dilation) % stride == 0]
            assert len(brute) == taps
            covered += len(brute)
    assert covered == sum(1 for h in range(size) for r in range(filt)
                          if (h + pad - r * dilation) % stride == 0)


def test_config_space_and_device_defaults():
    """The space is modest and each kernel's tunables are pinned in the other's configs; an
    AVX-512 CPU gets 16-wide vectors, an AVX2 CPU 8-wide ones, an NVIDIA GPU the local kernel
    with the block GPU_BLOCKS gives each direction: 16 x 8 tiles for deep reductions over many
    blocks, smaller blocks where the grid would be thin or the rows half empty."""
    space = configs.space()
    all_configs = list(space)
    assert 100 <= len(all_configs) <= 700
    assert all(c["LOCAL"] or c["VK"] * c["TP"] <= 24 for c in all_configs)
    assert all(not c["LOCAL"] or c["TM"] * c["TN"] <= 128 for c in all_configs)
    layer = Problem.conv2d((8, 256, 28, 28), (256, 256, 3, 3), padding=1)
    avx512 = configs.default(layer, fake_device("avx512"))
    avx2 = configs.default(layer, fake_device("avx2"))
    assert (avx512["LOCAL"], avx512["VW"], avx2["VW"]) == (0, 16, 8)
    assert avx512 in space and avx2 in space
    h200 = fake_device("gpu")

    def block(shape, wshape, device=h200, **kwargs):
        config = configs.default(Problem.conv2d(shape, wshape, **kwargs), device)
        assert config in space and config["LOCAL"] == 1
        return config["BM"], config["BN"], config["TM"], config["TN"], config["BK"]
    vgg = ((32, 256, 56, 56), (256, 256, 3, 3))
    assert block(*vgg, padding=1) == (256, 128, 16, 8, 8)
    # as deep, but a grid of 200 tiles of 64 x 64: split 3 ways, 1,536 deep each (too shallow
    # for 256 x 128), whose 300 blocks of 128 x 64 fill the GPU
    assert block((32, 512, 7, 7), (512, 512, 3, 3), padding=1) == (128, 64, 8, 4, 16)
    # too few blocks for any, even split (backward data does not split): the last
    assert block((32, 512, 7, 7), (512, 512, 3, 3), padding=1, direction="bwd") == (
        64, 128, 8, 8, 16)
    # as many blocks, a reduction of 64: no 16 x 8 tiles
    assert block((32, 64, 56, 56), (256, 64, 1, 1)) == (128, 64, 8, 4, 16)
    # backward weights of 64 rows: 128-row blocks would be half empty
    assert block((32, 256, 56, 56), (64, 256, 1, 1), direction="wrw") == (64, 64, 8, 8, 16)
    assert block(*vgg, padding=1, direction="bwd") == (64, 128, 4, 8, 8)
    # a GPU of 128-item work-groups: the first block of 128 items
    narrow = fake_device("gpu", name="narrow", max_work_group_size=128)
    assert block(*vgg, device=narrow, padding=1) == (128, 32, 8, 4, 16)
    thin = fake_device("gpu", name="tiny", local_mem_size=8 << 10, max_work_group_size=128)
    assert configs.default(layer, thin) == configs.complete(configs.SMALLEST_LOCAL)
    assert configs.refusals(layer, configs.default(Problem.conv2d(*vgg, padding=1), h200), thin)
    other = fake_device("gpu", name="Other GPU", vendor="Other Corp", max_compute_units=16)
    assert block(*vgg, device=other, padding=1) == (64, 64, 4, 4, 16)


def test_kernel_defaults_equal_the_default_configs():
    """Each .cl file's #ifndef tunables equal a default config: the GPU kernel the "gpu"
    class's, the CPU kernel the "cpu/vector16" class's before the register tile is fitted."""
    for name, table, keys in (("igemm_local.cl", "gpu", plan.LOCAL_TUNABLES),
                              ("igemm_vector.cl", "cpu/vector16", plan.VECTOR_TUNABLES)):
        source = (KERNELS / name).read_text()
        found = dict(re.findall(r"#ifndef (\w+)\n#define \1 (\d+)", source))
        assert {k: int(found[k]) for k in keys} == {
            k: configs.DEFAULT_CONFIGS[table][k] for k in keys}


def test_wti_follows_tile_efficiency():
    """WTI is in (0, 1], highest for dense layers that fill the tiles, low for depthwise."""
    dense = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    depthwise = Problem.conv2d((8, 64, 56, 56), (64, 1, 3, 3), padding=1, groups=64)
    for direction in Direction:
        s = solver(direction)
        high, low = s.get_wti(dense.with_direction(direction)), s.get_wti(
            depthwise.with_direction(direction))
        assert 0 < low < high / 10 < high <= 1


def test_channels_last_wti_sits_between_channels_first_and_the_composite():
    """Forward and backward data with a channels-last B rank at 0.9 of the channels-first WTI
    (their border tiles' general loop), above the 0.8 of the composite that served them before
    (the core's TRANSPOSED_WTI); backward weights, as fast as channels-first, unchanged."""
    layer = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    for direction in Direction:
        s = solver(direction)
        first = s.get_wti(layer.with_direction(direction))
        ratio = s.get_wti(Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1,
                                         direction=direction, layout="NHWC")) / first
        assert ratio == pytest.approx(
            1.0 if direction is Direction.BACKWARD_WEIGHTS else plan.WTI_CHANNELS_LAST)
        assert ratio > 0.8


def test_find_benchmarks_it_in_the_default_mode(handle, monkeypatch):
    """Dynamic and applicable to a 3x3 layer: the default find mode benchmarks implicit_gemm.Fwd
    beside the gemm family, ranks it by its time and reports its workspace (none on a CPU; a
    GPU splits this small output)."""
    for family in ("WINOGRAD", "DIRECT", "FFT"):
        monkeypatch.setenv(f"CONVSOLVE_DEBUG_CONV_{family}", "0")
    problem = Problem.conv2d((1, 32, 28, 28), (32, 32, 3, 3), padding=1)
    found = convsolve.find(handle, problem, **device_buffers(handle, random_tensors(problem, 0)))
    ours = [s for s in found if s.solver == "implicit_gemm.Fwd"]
    assert ours and ours[0].source == "benchmark"
    assert ours[0].workspace == plan.workspace(problem, handle.device)
    assert [s.time_ms for s in found] == sorted(s.time_ms for s in found)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_both_kernels_give_the_same_bits(handle, direction, layout):
    """The GPU kernel and two CPU configs sum the same products in the same order: their
    outputs are bit-identical (a strided, padded problem, rows of 30 pixels: the CPU configs'
    full tiles of 8 and 12 at the border and inside, each of its loops), channels-first or
    channels-last."""
    problem = Problem.conv2d((2, 6, 9, 30), (7, 6, 3, 3), stride=(2, 1), padding=1,
                             direction=direction, layout=layout)
    first = run(handle, problem, LAYOUT_CONFIGS[0])
    for config in (LAYOUT_CONFIGS[1], configs.default(problem, handle.device)):
        assert np.array_equal(run(handle, problem, config), first)
