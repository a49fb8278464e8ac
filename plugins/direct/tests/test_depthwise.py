"""direct.Depthwise: the contract, a sweep over multipliers, strides, dilations, asymmetric
padding (windows wholly in it too) and tiles that do not divide the image in all three
directions, staged and unstaged (in groups of one item and of several), the window in registers
(forward, backward-data's reversed pass), non-finite filters in every kernel, and its configs."""
import numpy as np
import pytest
from convsolve import Direction, Handle, Problem, registry
from convsolve.testing import check_solver, expected_output, random_tensors, relative_error, retyped
from convsolve_direct import configs, depthwise, plan
from direct_helpers import assert_matches_reference, equal_bits, run_config

# (x_shape, w_shape, stride, padding, dilation, groups): groups = C, K = C * multiplier
SHAPES = [
    ((2, 3, 17, 19), (3, 1, 3, 3), 1, 1, 1, 3),                   # multiplier 1, odd sizes
    ((1, 2, 13, 37), (6, 1, 3, 3), 2, 1, 1, 2),                   # multiplier 3, stride 2
    ((1, 4, 16, 21), (8, 1, 5, 3), 3, ((2, 0), (1, 2)), 1, 4),    # stride 3, asymmetric pads
    ((2, 2, 15, 14), (2, 1, 3, 3), 1, 3, (3, 2), 2),              # dilation 3 and 2
    ((1, 1, 9, 33), (2, 1, 3, 3), (1, 2), 1, 1, 1),               # C = 1, multiplier 2
    ((2, 3, 7, 12), (3, 1, 3, 3), 1, ((3, 0), (0, 4)), 1, 3),     # windows in the padding
    ((1, 3, 11, 10), (6, 1, 5, 5), 2, ((2, 1), (3, 2)), 1, 3),    # 5x5 (compiled in), M = 2
]
#: Small tiles (several per image, partial at the edges), narrow vectors, few taps per pass (so
#: several passes), the filter compiled in or not, the window staged (STAGE 1: the GPUs'
#: default), and the default besides (on CPUs unstaged).
WISHES = [{"TH": 2, "TWV": 1, "VW": 8, "TB": 4, "FIXED": 0},
          {"TH": 2, "TWV": 1, "VW": 8, "FIXED": 1}, {"TH": 2, "TWV": 1, "STAGE": 1}]


def staged(solver, problem, handle, stage):
    """The valid config with STAGE = ``stage`` (unstaged or in registers: the filter compiled in)
    closest to the default (the default's own tile where that kernel takes it); a skip where
    the device offers no such kernel."""
    space = solver.config_space(problem, handle)
    if stage not in space.params["STAGE"]:
        pytest.skip(f"STAGE {stage} is not in this device's space")
    default = solver.default_config(problem, handle)
    wanted = dict(default, STAGE=stage, FIXED=1 if stage != 1 else default["FIXED"])
    valid = [c for c in space if c["STAGE"] == stage and c["FIXED"] == wanted["FIXED"]
             and not solver.check_config(problem, handle, c)]
    return min(valid, key=lambda c: sum(c[k] != wanted[k] for k in c))


def test_check_solver(handle):
    """direct.Depthwise honours the contract on the standard problems it accepts."""
    assert check_solver(registry().get("direct.Depthwise"), handle, configs=0) > 0


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_sweep(handle, shape, direction):
    """Each direction agrees with the reference with each config chosen."""
    assert_matches_reference(handle, "direct.Depthwise",
                             Problem.conv2d(*shape, direction=direction), WISHES)


#: The unstaged kernels as GPUs run them (forward and backward-data: a tile of 2 rows x one
#: 4-wide vector a work-item), in groups of 8 items: each item takes several planes (PG), and the
#: range is rounded up past the last ones; backward-weights' 8 items share a partial tile.
GROUPED_UNSTAGED = {"STAGE": 0, "WG": 8, "TH": 2, "TWV": 1, "VW": 4}


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_unstaged_in_work_groups(handle, shape, direction):
    """dw_fwd_rows, dw_bwd_rows and dw_wrw_rows in work-groups of several items agree with the
    reference (strided backward-data where dw_bwd_rows can compile the filter in)."""
    problem = Problem.conv2d(*shape, direction=direction)
    solver = registry().get("direct.Depthwise")
    fixed = 1 in configs.fixed_choices(problem, configs.DEPTHWISE_SPECIALISED_FILTERS)
    if depthwise.phased_backward(problem) and not fixed:
        pytest.skip("dw_bwd_rows needs the filter compiled in")
    config = dict(solver.default_config(problem, handle), **GROUPED_UNSTAGED, FIXED=int(fixed))
    host = random_tensors(problem, 0)
    error = relative_error(run_config(handle, solver, problem, config, host),
                           expected_output(problem, host))
    assert error < 1e-5, f"{problem.key()} with {config}: relative error {error:.3g}"


#: dw_fwd_regs' tiles (TH rows x TWV floats) by direction: tall, and wide, tiles that do not divide
#: the images (several per image, partial at the edges; a build each per filter, stride and
#: dilation); backward-data's masked form the wide one only (PoCL takes 10-20 s to build the
#: tall one with dilation).
REGISTER_CASES = [("fwd", (8, 4)), ("fwd", (2, 8)), ("bwd", (2, 8))]


def gpu_typed(handle):
    """``handle`` where it is a GPU, else a handle on the default device typed as one (the GPU
    class's spaces and kernels then run on it)."""
    return handle if handle.is_gpu else retyped(Handle(), "GPU")


@pytest.mark.parametrize("direction, tile", REGISTER_CASES,
                         ids=[f"{d}-{t[0]}x{t[1]}" for d, t in REGISTER_CASES])
@pytest.mark.parametrize("shape", SHAPES, ids=[str(i) for i in range(len(SHAPES))])
def test_window_in_registers(handle, shape, direction, tile):
    """dw_fwd_regs (STAGE 2) in groups of 8 items agrees with the reference: forward with
    strides 1-3, dilation, asymmetric padding and windows wholly in it, multipliers;
    backward-data as the reversed forward pass (stride 1, multiplier 1; its space refuses the
    rest); filters of no compiled-in size (5x3) are refused."""
    problem = Problem.conv2d(*shape, direction=direction)
    solver, gpu = registry().get("direct.Depthwise"), gpu_typed(handle)
    rows, columns = tile
    while columns > depthwise.columns(problem):   # no wholly idle column of outputs
        columns //= 2
    config = dict(solver.default_config(problem, gpu), STAGE=depthwise.STAGE_REGISTERS, VW=1,
                  FIXED=1, TH=rows, TWV=columns)
    refusal = solver.config_space(problem, gpu).refusal(config)
    if (problem.fil_h, problem.fil_w) == (5, 3) or (
            direction == "bwd" and not depthwise.reversed_forward(problem)):
        assert refusal is not None
        return
    assert refusal is None
    config["WG"] = 8   # below the GPU space's groups: several planes an item, ranges rounded up
    host = random_tensors(problem, 0)
    error = relative_error(run_config(gpu, solver, problem, config, host),
                           expected_output(problem, host))
    assert error < 1e-5, f"{problem.key()} with {config}: relative error {error:.3g}"


def test_window_in_registers_is_the_gpu_default_where_it_serves(handle):
    """The GPU class's default runs dw_fwd_regs in forward and in backward-data's reversed pass
    wherever the filter compiles in, and never in strided backward-data or backward-weights."""
    solver, gpu = registry().get("direct.Depthwise"), gpu_typed(handle)
    for shape in SHAPES:
        for direction in Direction:
            problem = Problem.conv2d(*shape, direction=direction)
            serves = direction is Direction.FORWARD or depthwise.reversed_forward(problem)
            compiled_in = 1 in configs.fixed_choices(problem,
                                                     configs.DEPTHWISE_SPECIALISED_FILTERS)
            stage = solver.default_config(problem, gpu)["STAGE"]
            assert (stage == depthwise.STAGE_REGISTERS) == (serves and compiled_in), \
                f"{problem.key()}: STAGE {stage}"


def test_window_in_registers_honours_the_contract(handle, monkeypatch):
    """check_solver (epilogues and non-finite inputs included) on dw_fwd_regs, made the GPU
    class's default, on the sweep's problems whose filter it compiles in: forward, and
    backward-data's reversed pass."""
    entry = {"VW": 1, "WG": 64, "TH": 4, "TWV": 2, "TB": 9, "FIXED": 1,
             "STAGE": depthwise.STAGE_REGISTERS}
    monkeypatch.setattr(configs, "depthwise_defaults",
                        lambda *_: {**configs.DEPTHWISE_DEFAULT_CONFIGS, "gpu": entry})
    solver, gpu = registry().get("direct.Depthwise"), gpu_typed(handle)
    forward = [Problem.conv2d(*shape) for shape in SHAPES if shape[1][2:] != (5, 3)]
    backward = [p for p in (Problem.conv2d(*shape, direction="bwd") for shape in SHAPES)
                if depthwise.reversed_forward(p)]
    problems = forward + backward
    assert all(solver.default_config(p, gpu)["STAGE"] == depthwise.STAGE_REGISTERS
               for p in problems)
    assert check_solver(solver, gpu, problems, configs=0) == len(problems)


def same_non_finite(handle, problem, stage, tensor, at, seed=1):
    """The reference's output for ``problem`` with an inf at ``at`` of host ``tensor``, after
    checking that direct.Depthwise's with STAGE ``stage`` is inf and NaN exactly where it is and
    close elsewhere."""
    solver = registry().get("direct.Depthwise")
    host = random_tensors(problem, seed)
    host[tensor][at] = np.inf
    with np.errstate(invalid="ignore"):
        expected = expected_output(problem, host)
    result = run_config(handle, solver, problem, staged(solver, problem, handle, stage), host)
    assert np.array_equal(np.isposinf(result), np.isposinf(expected))
    assert np.array_equal(np.isnan(result), np.isnan(expected))
    finite = np.isfinite(expected)
    assert np.allclose(result[finite], expected[finite], rtol=1e-5, atol=1e-5)
    return expected


@pytest.mark.parametrize("stride, multiplier, stage", [(2, 2, 1), (2, 2, 0), (1, 1, 0),
                                                       (1, 1, 1), (1, 1, 2)])
def test_non_finite_filters_in_backward_data(handle, stride, multiplier, stage):
    """A channel whose filter holds inf: dx is non-finite exactly where the reference's is
    (positions outside dy are dropped, not multiplied by 0), staged (the masked path), unstaged
    or in registers."""
    problem = Problem.conv2d((1, 2, 9, 10), (2 * multiplier, 1, 3, 3), stride=stride, padding=1,
                             groups=2, direction="bwd")
    device = gpu_typed(handle) if stage == depthwise.STAGE_REGISTERS else handle
    same_non_finite(device, problem, stage, "w", (1, 0, 0, 0))


@pytest.mark.parametrize("stage", [0, 1, 2])
def test_non_finite_filters_in_forward(handle, stage):
    """Forward multiplies the padding's zeros like the reference, in every kernel: a filter
    holding inf gives NaN (0 * inf) at the borders where its tap falls in the padding."""
    problem = Problem.conv2d((1, 2, 9, 20), (2, 1, 3, 3), padding=1, groups=2)
    device = gpu_typed(handle) if stage == depthwise.STAGE_REGISTERS else handle
    assert np.isnan(same_non_finite(device, problem, stage, "w", (1, 0, 0, 0))).any()


@pytest.mark.parametrize("stage", [0, 1])
def test_non_finite_gradient_in_backward_weights(handle, stage):
    """Backward-weights multiplies the padding's zeros like the reference, staged or not: an inf
    in dy's top right corner gives NaN (0 * inf) in the taps that reach the padding there, inf
    in the others; a row's lanes past its end add nothing."""
    problem = Problem.conv2d((2, 2, 7, 11), (2, 1, 3, 3), padding=1, groups=2, direction="wrw")
    expected = same_non_finite(handle, problem, stage, "y", (1, 1, 0, 10), seed=3)
    assert np.isnan(expected).any() and np.isinf(expected).any()


def test_backward_weights_deterministic(handle):
    """Backward-weights (two-stage reduction) gives bitwise-equal results run after run."""
    solver = registry().get("direct.Depthwise")
    problem = Problem.conv2d((3, 4, 20, 18), (8, 1, 3, 3), padding=1, groups=4, direction="wrw")
    host = random_tensors(problem, 2)
    config = solver.default_config(problem, handle)
    assert equal_bits(run_config(handle, solver, problem, config, host),
                      run_config(handle, solver, problem, config, host))


@pytest.mark.parametrize("stage, group", [(0, 1), (0, 8), (1, 8)],
                         ids=["unstaged", "unstaged-grouped", "staged"])
def test_backward_weights_tiles_across_images(handle, monkeypatch, stage, group):
    """Where the batch has more images than tiles are wanted, a backward-weights tile spans
    whole images: the result agrees with the reference, staged and unstaged, in groups of one
    item and of several, and is bitwise the same whether the batch is one chunk or chunks of
    two tiles (the last tile of each holding fewer images)."""
    solver = registry().get("direct.Depthwise")
    problem = Problem.conv2d((5, 3, 9, 10), (3, 1, 3, 3), padding=1, groups=3, direction="wrw")
    monkeypatch.setattr(plan, "TARGET_UNITS", 2 * 3 * depthwise.PARTIAL_UNITS)   # 2 tiles wanted:
    # 2 images a tile
    partials = solver._partials(problem)
    assert (partials.images, partials.tiles(problem.n), partials.chunk) == (2, 3, 5)
    config = dict(solver.default_config(problem, handle), STAGE=stage, WG=group, FIXED=1,
                  TH=2, TWV=1, VW=4, TB=4)
    host = random_tensors(problem, 1)
    whole = run_config(handle, solver, problem, config, host)
    assert relative_error(whole, expected_output(problem, host)) < 1e-5
    monkeypatch.setattr(plan, "BUDGET_BYTES", 2 * 4 * problem.w.size)   # chunks of 2 tiles
    assert solver._partials(problem).chunks(problem.n) == [(0, 4), (4, 1)]
    assert solver.workspace(problem) == 2 * 4 * problem.w.size
    assert equal_bits(run_config(handle, solver, problem, config, host), whole)


@pytest.mark.parametrize("w_shape, stride, padding, taps", [
    ((8, 1, 1, 1), 1, 0, (1, 4)),                      # 1x1, multiplier 4
    ((2, 1, 1, 3), 2, ((0, 1), (2, 0)), (3, 3)),       # 1x3, stride 2, asymmetric padding
    ((4, 1, 2, 2), 1, 1, (4, 8))],                     # 2x2, multiplier 2
    ids=["1x1", "1x3", "2x2"])
@pytest.mark.parametrize("stage", [0, 1])
def test_backward_weights_with_fewer_taps_than_a_block(handle, monkeypatch, w_shape, stride,
                                                        padding, taps, stage):
    """A filter of fewer taps than the config's TB builds with TB cut to the kernel's taps (a
    pass's R * S unstaged, a channel's M * R * S staged), so no accumulator repeats the last tap,
    and the result agrees with the reference."""
    solver = registry().get("direct.Depthwise")
    problem = Problem.conv2d((2, 2, 9, 13), w_shape, stride, padding, groups=2, direction="wrw")
    config = dict(solver.default_config(problem, handle), STAGE=stage, TB=16, TH=2, TWV=1)
    built, real_build = [], handle.build

    def build(file, kernel, defines=None):   # the TB of depthwise.cl's builds (not the fold's)
        if file.name == "depthwise.cl":
            built.append(defines["TB"])
        return real_build(file, kernel, defines)
    monkeypatch.setattr(handle, "build", build)
    host = random_tensors(problem, 4)
    error = relative_error(run_config(handle, solver, problem, config, host),
                           expected_output(problem, host))
    assert built == [taps[stage]] and depthwise.tap_block(problem, config) == taps[stage]
    assert error < 1e-5, f"{problem.key()} with {config}: relative error {error:.3g}"


def test_applicability_and_defaults(handle, fake_handle):
    """Only groups = C; the defaults fit each device class's space and local memory; a tile
    too large for local memory is refused by check_config where its window is staged."""
    solver = registry().get("direct.Depthwise")
    assert not solver.is_applicable(Problem.conv2d((1, 4, 8, 8), (4, 2, 3, 3), groups=2))
    problem = Problem.conv2d((8, 32, 112, 112), (32, 1, 3, 3), padding=1, groups=32)
    wrw = problem.with_direction(Direction.BACKWARD_WEIGHTS)
    narrow = Problem.conv2d((8, 960, 7, 7), (960, 1, 3, 3), padding=1, groups=960,
                            direction=Direction.BACKWARD_WEIGHTS)
    strided = Problem.conv2d((8, 96, 112, 112), (96, 1, 3, 3), stride=2, padding=1, groups=96)
    small = Problem.conv2d((8, 960, 7, 7), (960, 1, 3, 3), padding=1, groups=960)
    # (device, problem, VW, STAGE): CPUs read their inputs unstaged; GPUs hold the window in
    # registers where the filter compiles in (forward, backward-data's reversed pass), else stage
    # it for forward at stride 1 on wide images; other cases a tile a work-item (backward-weights:
    # a group)
    strided_bwd = strided.with_direction("bwd")   # dw_bwd_rows
    odd_wide = Problem.conv2d((8, 32, 112, 112), (32, 1, 3, 5), padding=1, groups=32)
    seven = Problem.conv2d((8, 96, 56, 56), (96, 1, 7, 7), padding=3, groups=96, direction="bwd")
    # a window row too wide for registers (dilation 7: 43 floats > REGISTER_ROW): unstaged
    dilated = Problem.conv2d((8, 32, 64, 64), (32, 1, 7, 7), padding=21, dilation=7, groups=32)
    for kind, case, width, stage in (
            ("avx512", problem, 16, 0), ("avx2", problem, 8, 0), ("gpu", problem, 1, 2),
            ("gpu", wrw, 4, 0), ("gpu", narrow, 4, 0), ("gpu", strided, 1, 2),
            ("gpu", strided_bwd, 4, 0), ("gpu", small, 1, 2), ("gpu", odd_wide, 4, 1),
            ("gpu", problem.with_direction("bwd"), 1, 2), ("gpu", seven, 1, 2),
            ("gpu", seven.with_direction("fwd"), 1, 2), ("gpu", dilated, 4, 0)):
        config = solver.default_config(case, fake_handle(kind))
        assert (config["VW"], config["STAGE"]) == (width, stage), (kind, case.key())
        assert solver.check_config(case, fake_handle(kind), config) == []
        assert solver.config_space(case, fake_handle(kind)).refusal(config) is None
    # the window in registers (STAGE 2): offered for GPUs' forward problems and reversed passes
    registers = depthwise.STAGE_REGISTERS
    assert registers in solver.config_space(problem, fake_handle("gpu")).params["STAGE"]
    assert registers in solver.config_space(problem.with_direction("bwd"),
                                            fake_handle("gpu")).params["STAGE"]   # reversed
    for kind, case in (("gpu", strided.with_direction("bwd")), ("gpu", wrw), ("avx512", problem)):
        assert registers not in solver.config_space(case, fake_handle(kind)).params["STAGE"]
    huge = dict(solver.default_config(problem, handle), TH=1024, TWV=256, STAGE=1)   # > 1 MiB
    assert solver.check_config(problem, handle, huge)
    assert not solver.check_config(problem, handle, dict(huge, STAGE=0))   # nothing staged
    # strided backward-data: dw_bwd_rows needs the filter compiled in; the widest vectors
    bwd = Problem.conv2d((8, 96, 112, 112), (96, 1, 3, 3), stride=2, padding=1, groups=96,
                         direction="bwd")
    space = solver.config_space(bwd, fake_handle("avx2"))
    assert space.refusal(dict(solver.default_config(bwd, fake_handle("avx2")), FIXED=0))
    assert solver.default_config(bwd, fake_handle("avx2"))["VW"] == 16
    five = Problem.conv2d((1, 4, 9, 9), (4, 1, 5, 5), stride=2, padding=1, groups=4,
                          direction="bwd")
    odd = Problem.conv2d((1, 4, 9, 9), (4, 1, 5, 3), stride=2, padding=1, groups=4,
                         direction="bwd")
    for kind in ("avx2", "gpu"):   # 5x5 compiles in for dw_bwd_rows; 5x3: the staged entry
        config = solver.default_config(five, fake_handle(kind))
        assert (config["FIXED"], config["STAGE"]) == (1, 0)
        assert solver.config_space(five, fake_handle(kind)).refusal(config) is None
        config = solver.default_config(odd, fake_handle(kind))
        assert config["STAGE"] == 1
        assert solver.config_space(odd, fake_handle(kind)).refusal(config) is None
    assert solver.default_config(odd, fake_handle("gpu"))["TH"] > 2
    # 5x5 with enough work: compiled in on CPUs, and by a GPU's default where dw_bwd_rows or
    # dw_fwd_regs needs it (forward, backward-data's reversed pass) and for backward-weights
    # (configs.DEPTHWISE_WRW_FIXED: every device class, whatever the work)
    layer = Problem.conv2d((32, 480, 14, 14), (480, 1, 5, 5), padding=2, groups=480)
    for direction, gpu_fixed in (("fwd", 1), ("bwd", 1), ("wrw", 1)):
        case = layer.with_direction(direction)
        assert solver.default_config(case, fake_handle("avx2"))["FIXED"] == 1
        assert solver.default_config(case, fake_handle("gpu"))["FIXED"] == gpu_fixed
        assert 1 in solver.config_space(case, fake_handle("gpu")).params["FIXED"]
    # backward weights compiles its filter in however little the work, on every device class; a
    # filter of no compiled-in size stays at run time; so does a little forward work but on GPUs
    # (dw_fwd_regs)
    tiny = Problem.conv2d((1, 8, 7, 7), (8, 1, 3, 3), padding=1, groups=8, direction="wrw")
    for kind, fixed, forward in (("avx512", 1, 0), ("avx2", 1, 0), ("gpu", 1, 1)):
        assert solver.default_config(tiny, fake_handle(kind))["FIXED"] == fixed, kind
        assert solver.default_config(tiny.with_direction("fwd"),
                                     fake_handle(kind))["FIXED"] == forward
    four = Problem.conv2d((1, 8, 7, 7), (8, 1, 4, 4), padding=1, groups=8, direction="wrw")
    assert solver.default_config(four, fake_handle("avx512"))["FIXED"] == 0
    assert solver.workspace(problem) == 0


def test_staged_window_leaves_room_for_both_sums(fake_handle):
    """On a device of 32 KiB of local memory the staged window and two work-groups' sums fit
    (Oclgrind counts dw_wrw_rows' sums against dw_wrw); 48 KiB keeps the whole LDS for the
    GPU space's largest sums (WG * TB = 2048)."""
    small, large = fake_handle("gpu", local_mem_size=32768), fake_handle("gpu")
    for wg, tb in ((64, 4), (64, 16), (128, 16), (256, 4)):
        config = {"WG": wg, "TB": tb}
        assert 4 * (depthwise.lds_floats(small, config) + 2 * wg * tb) <= 32768
        assert depthwise.lds_floats(small, config) % 64 == 0
    assert large.device.local_mem_size >= 49152
    assert depthwise.lds_floats(large, {"WG": 128, "TB": 16}) == depthwise.LDS


def test_staged_groups_fill_a_gpu(fake_handle):
    """Staged kernels merge a small image's planes into a work-group up to GROUP_OUTPUTS, but
    on a GPU only while GPU_GROUPS_PER_UNIT groups a compute unit remain (the H200 has 132)."""
    gpu, cpu = fake_handle("gpu"), fake_handle("avx2")
    # 8 x 160 planes of a 4 x 4 phase grid, 32 outputs a tile: 128 a group on the CPU, 2 here
    assert depthwise.staged_planes(cpu, 1280, 1, 32) == 128
    assert depthwise.staged_planes(gpu, 1280, 1, 32) == 1280 // (4 * 132) == 2
    assert depthwise.staged_planes(gpu, 160, 1, 36) == 1   # never none
    # a large image's tiles fill the GPU already: GROUP_OUTPUTS decides, as on the CPU
    assert depthwise.staged_planes(gpu, 6144, 2, 512) == depthwise.staged_planes(cpu, 6144, 2,
                                                                                  512) == 8
