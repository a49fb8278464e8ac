"""convsolve-gemm: the solvers against the reference in each direction, chunking, switches, find."""
import re

import convsolve
import convsolve_gemm
import pytest
from convsolve import Direction, Handle, Problem
from convsolve.testing import check_solver, device_buffers, fake_handle, random_tensors, retyped
from convsolve_gemm import configs, conv_layout, gemm, plan

SOLVERS = ("gemm.Gemm1x1", "gemm.Im2ColGemm", "gemm.GemmWrwSplitK")


@pytest.mark.parametrize("name", SOLVERS)
def test_conformance_on_the_standard_set(handle, name):
    """Each solver passes check_solver (correct, honest workspace, deterministic) where it
    applies, with its default config and one sampled config: a GEMM config costs PoCL seconds
    to compile per transposition, and the suite must stay within 10 minutes with cold caches
    (the tuner's own output check covers every config it times)."""
    assert check_solver(convsolve.registry().get(name), handle, configs=1) > 0


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_chunked_batches(handle, monkeypatch, direction):
    """With a workspace budget of two images, batches run in chunks of 2, 2 and 1, correctly,
    the epilogue cases included (each chunk stores its images' epilogue; dW summed over chunks
    takes alpha for every part and beta once); one sampled config, as on the standard set."""
    problem = Problem.conv2d((5, 6, 9, 7), (4, 3, 3, 2), stride=(2, 1), padding=((1, 0), (0, 1)),
                             dilation=(1, 2), groups=2, direction=direction)
    strided = Problem.conv2d((5, 6, 9, 7), (4, 6, 1, 1), stride=2, direction=direction)
    cases = [("gemm.Im2ColGemm", problem, False), ("gemm.Gemm1x1", strided, False)]
    if direction is Direction.BACKWARD_WEIGHTS:
        cases.append(("gemm.GemmWrwSplitK", problem, True))
    for name, p, side_by_side in cases:
        budget = 2 * plan.bytes_per_image(p, side_by_side) + 1
        monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", budget)
        assert plan.layout(p, side_by_side).chunk == 2
        assert check_solver(convsolve.registry().get(name), handle, [p], configs=1) == 1


@pytest.mark.parametrize("rank", [1, 2, 3])
@pytest.mark.parametrize("stride", [1, 2])
def test_unfolds_in_vectors_and_at_the_borders(handle, stride, rank):
    """Rows long enough for the vector runs of im2col (8 columns) and col2im (16) on CPUs at
    stride 1 or 2, in every direction and spatial rank (im2col.cl in 2-D, unfold_nd.cl else):
    runs that start left of the image or leave a tail, rows of more than one run (64 columns on
    CPUs: conv_layout.IM2COL_TW and COL2IM_TW), and rows whose last vector would read
    the right padding's column (im2col: x's next row; col2im: the next row of columns) if its
    bounds were off by one; default config."""
    solver = convsolve.registry().get("gemm.Im2ColGemm")
    rows = ((64 * stride + 9, (2, 1), 2),   # dilated, both borders, two runs a row on CPUs
            (37, (1, 2), 1),          # taps at odd offsets
            (18 - stride, (0, 1), 1),  # im2col's right edge
            (18 - stride, (2, 0), 1))  # col2im's right edge
    outer = rank - 1   # dims before the rows: 5 long, one-sided padding, dilation 1
    problems = [Problem.convolution((2, 3, *[5] * outer, width), (4, 3, *[3] * rank),
                                    stride=stride, padding=[(1, 0)] * outer + [padding],
                                    dilation=(1,) * outer + (dilation,), direction=direction)
                for width, padding, dilation in rows for direction in Direction]
    assert check_solver(solver, handle, problems, configs=0) == len(problems)


#: 1x1 problems whose images' pixels are no multiple of a vector or tile, as (x, K, groups):
#: 7x7, 5x3 and 9x11 images (vectors crossing one image boundary), 1x3 and 2x2 (narrower than a
#: vector: several), groups, and a 14x14 one.
SIDE_BY_SIDE_SHAPES = [((3, 8, 7, 7), 12, 1), ((5, 6, 5, 3), 9, 3), ((4, 4, 1, 3), 8, 2),
                       ((3, 5, 2, 2), 7, 1), ((2, 16, 14, 14), 70, 1), ((3, 20, 9, 11), 36, 2)]


def side_by_side_problems():
    """SIDE_BY_SIDE_SHAPES' problems, forward and backward-data each."""
    return [Problem.conv2d(x, (k, x[1] // g, 1, 1), groups=g, direction=direction)
            for x, k, g in SIDE_BY_SIDE_SHAPES for direction in ("fwd", "bwd")]


def test_gpu_products_lay_images_side_by_side(handle, monkeypatch):
    """On a GPU's local-memory configs Gemm1x1's plain forward and backward-data products take
    the images side by side as columns (one product per group) wherever that product fills the
    device (here every one: configs.FILL 0): right where an image's pixels are no multiple of
    the vector width or the tile (SIDE_BY_SIDE_SHAPES), with groups and row edges, the epilogue
    cases of check_solver included; on a CPU the GPU configs run natively on the device typed as a GPU.
    Backward-weights and strided problems keep their products."""
    monkeypatch.setattr(configs, "FILL", 0)
    gpu = handle if handle.is_gpu else retyped(Handle(), "GPU")
    solver = convsolve.registry().get("gemm.Gemm1x1")
    problems = side_by_side_problems()
    local = solver.default_config(problems[0], gpu)
    assert local["USE_LOCAL"] and all(plan.merges_images(p, False, local, gpu) for p in problems)
    assert check_solver(solver, gpu, problems, configs=1) == len(problems)
    wrw = problems[0].with_direction("wrw")
    strided = Problem.conv2d((3, 8, 7, 7), (12, 8, 1, 1), stride=2)
    assert not plan.merges_images(wrw, False, local, gpu)
    assert not plan.merges_images(strided, solver.uses_columns(strided), local, gpu)
    many = Problem.conv2d((2, 8, 7, 7), (8, 1, 1, 1), groups=8)   # a launch a group: 8 > 2
    assert not plan.merges_images(many, False, local, gpu)
    # the merged product: 12 x (3 * 49), one group
    assert plan.main_product(problems[0], False, merged=True) == (12, 147, 1)


def test_cpu_products_lay_images_side_by_side(handle, monkeypatch):
    """On a CPU's register tiles (MR > 1: op(B) packed) Gemm1x1's plain forward products take
    the images side by side where a product per image leaves CPU_IMAGE_WASTE of its tiles'
    columns empty; packed vectors that cross one image boundary or several (SIDE_BY_SIDE_SHAPES)
    are right, with groups, row edges and check_solver's epilogue cases, in backward-data too
    when CPU_MERGED_DIRECTIONS takes it."""
    cpu = handle if handle.is_cpu else retyped(Handle(), "CPU")
    solver = convsolve.registry().get("gemm.Gemm1x1")
    problems = side_by_side_problems()
    config = solver.default_config(problems[0], cpu)
    assert not config["USE_LOCAL"] and config["MR"] > 1
    assert [plan.merges_images(p, False, config, cpu) for p in problems[:2]] == [True, False]
    wide = Problem.conv2d((2, 16, 16, 16), (8, 16, 1, 1))   # 256 pixels: whole tiles
    assert not plan.merges_images(wide, False, config, cpu)
    assert not plan.merges_images(problems[0], False, dict(config, MR=1), cpu)   # no pack
    many = Problem.conv2d((2, 8, 7, 7), (8, 1, 1, 1), groups=8)   # a launch a group: 8 > 2
    assert not plan.merges_images(many, False, config, cpu)
    monkeypatch.setattr(plan, "CPU_MERGED_DIRECTIONS", (Direction.FORWARD,
                                                        Direction.BACKWARD_DATA))
    assert all(plan.merges_images(p, False, solver.default_config(p, cpu), cpu)
               for p in problems)
    assert check_solver(solver, cpu, problems, configs=1) == len(problems)


def test_cpu_column_products_lay_images_side_by_side(handle):
    """On a CPU's register tiles Im2ColGemm's forward products over the stacked column matrices
    take the images side by side where per image CPU_IMAGE_WASTE of the tiles' columns would be
    empty: right with stride, dilation, asymmetric padding, groups and check_solver's epilogue
    cases; backward-data keeps a product per image."""
    cpu = handle if handle.is_cpu else retyped(Handle(), "CPU")
    solver = convsolve.registry().get("gemm.Im2ColGemm")
    problems = [Problem.conv2d((3, 6, 9, 11), (8, 6, 3, 3), stride=2, padding=((1, 0), (2, 1))),
                Problem.conv2d((4, 8, 7, 5), (6, 4, 3, 2), dilation=(2, 1), groups=2),
                Problem.conv2d((5, 3, 6, 6), (4, 3, 1, 1), stride=(2, 1))]
    assert all(plan.merges_images(p, True, solver.default_config(p, cpu), cpu) for p in problems)
    bwd = problems[0].with_direction("bwd")
    assert not plan.merges_images(bwd, True, solver.default_config(bwd, cpu), cpu)
    assert check_solver(solver, cpu, problems, configs=1) == len(problems)


def test_cpu_column_products_in_chunks(handle, monkeypatch):
    """Side by side over column matrices when a chunk holds fewer images than the batch: each
    chunk's product covers its own images."""
    cpu = handle if handle.is_cpu else retyped(Handle(), "CPU")
    solver = convsolve.registry().get("gemm.Im2ColGemm")
    problem = Problem.conv2d((5, 6, 9, 11), (8, 6, 3, 3), stride=2, padding=((1, 0), (2, 1)))
    monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", 2 * plan.bytes_per_image(problem))
    assert plan.layout(problem).chunk == 2   # chunks of 2, 2 and 1 images
    assert plan.merges_images(problem, True, solver.default_config(problem, cpu), cpu)
    assert check_solver(solver, cpu, [problem], configs=0) == 1


@pytest.mark.parametrize("x, k, direction, merged", [
    ((32, 1024, 14, 14), 256, "fwd", True),    # 4 x 98 tiles of 64: 392 work-groups
    ((32, 256, 14, 14), 1024, "bwd", True),    # the same product
    ((32, 2048, 7, 7), 512, "fwd", False),     # 8 x 25 tiles: 200 < 2 x 132
    ((32, 960, 7, 7), 160, "fwd", False),      # 3 x 25 tiles: 75
    ((32, 64, 56, 56), 256, "wrw", False)])    # backward-weights: never
def test_side_by_side_where_the_product_fills_the_gpu(x, k, direction, merged):
    """The default of a 1x1 problem on a 132-unit GPU lays the images side by side, in the
    smallest (64 x 64) tile, where that product makes two work-groups a compute unit; otherwise
    it keeps per image and the tile the per-image products call for.  A config of 128-column
    tiles (the large default, or one tuned per image) keeps per image wherever it is."""
    gpu = fake_handle("gpu")
    solver = convsolve.registry().get("gemm.Gemm1x1")
    problem = Problem.conv2d(x, (k, x[1], 1, 1), direction=direction)
    config = solver.default_config(problem, gpu)
    assert plan.merges_images(problem, False, config, gpu) is merged
    largest, smallest = configs.DEFAULT_CONFIGS["gpu"][0], configs.DEFAULT_CONFIGS["gpu"][-1]
    assert not plan.merges_images(problem, False, largest, gpu)   # 128 columns: per image
    if merged:
        assert config == smallest
    else:
        product = plan.main_product(problem, False)
        assert config == configs.default(gpu, *product, direction == "bwd")


def _in_side_by_side_chunks_of_3(monkeypatch, groups):
    """A 5-image backward-weights problem (8 x 7 outputs), with the workspace budget set so that
    GemmWrwSplitK takes it in chunks of 3 and 2 images."""
    problem = Problem.conv2d((5, 6, 9, 7), (6, 6 // groups, 3, 2), padding=((1, 0), (0, 1)),
                             groups=groups, direction="wrw")
    budget = 3 * plan.bytes_per_image(problem, True)
    monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES", budget)
    return problem


@pytest.mark.parametrize("groups, min_depth", [(1, 10), (2, 10), (6, 30)])
def test_split_reductions(handle, monkeypatch, groups, min_depth):
    """Backward-weights split into slices (a shorter last one; launches per group, or per slice
    when slices <= groups), over chunks whose partial sums accumulate, is correct and uses its
    workspace exactly."""
    monkeypatch.setattr(plan, "MIN_SLICE_DEPTH", min_depth)
    problem = _in_side_by_side_chunks_of_3(monkeypatch, groups)
    assert plan.layout(problem, side_by_side=True).chunk == 3
    depth, slices = plan.reduction_slices(problem, 3 * 56)
    assert slices > 1 and slices * depth > 3 * 56                            # uneven slices
    assert check_solver(convsolve.registry().get("gemm.GemmWrwSplitK"), handle, [problem]) == 1


def test_a_short_last_chunk_keeps_to_the_reserved_slices(handle, monkeypatch):
    """A last chunk that would split into more slices than a full one (here 23 against 21)
    is held to the partials the workspace has room for."""
    monkeypatch.setattr(plan, "MIN_SLICE_DEPTH", 1)
    monkeypatch.setattr(plan, "MAX_SLICES", 23)
    problem = _in_side_by_side_chunks_of_3(monkeypatch, groups=1)
    chunks = plan.layout(problem, side_by_side=True)
    assert (chunks.chunk, chunks.slices) == (3, 21)                              # chunks 3 and 2
    assert plan.reduction_slices(problem, 2 * 56)[1] == 23
    assert check_solver(convsolve.registry().get("gemm.GemmWrwSplitK"), handle, [problem]) == 1


def test_workspace_figures():
    """1x1 stride 1 needs none; otherwise one chunk's matrices (columns; for backward-weights
    also the partial dW, or dy and the slices' partial dW side by side), exactly."""
    gemm_1x1, im2col, split_k = (convsolve.registry().get(n) for n in SOLVERS)
    pointwise = Problem.conv2d((8, 64, 56, 56), (256, 64, 1, 1))
    assert gemm_1x1.workspace(pointwise, fake_handle("avx2")) == 0
    p3 = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    assert im2col.workspace(p3) == 8 * 64 * 9 * 56 * 56 * 4    # 8 images fit the 64 MiB budget
    big = Problem.conv2d((64, 64, 56, 56), (64, 64, 3, 3), padding=1)
    per_image = 64 * 9 * 56 * 56 * 4
    assert im2col.workspace(big) == (conv_layout.COLUMN_BUDGET_BYTES // per_image) * per_image
    wrw = p3.with_direction("wrw")      # adds one partial dW (K x C*R*S) per image
    assert im2col.workspace(wrw) == 8 * (64 * 9 * 56 * 56 + 64 * 64 * 9) * 4
    # side by side: 8 images (25088 columns) of x's columns and of dy, then a reduction of
    # 9 tiles split into min(ceil(512 / 9), 25088 // 256, 128) = 57 slices of 441 columns
    assert plan.reduction_slices(wrw, 25088) == (441, 57)
    assert split_k.workspace(wrw) == ((576 + 64) * 25088 + 57 * 64 * 576) * 4
    # 512 tiles need no split: the product goes straight into dW, after the columns and dy
    wide = Problem.conv2d((8, 512, 7, 7), (4096, 512, 1, 1), direction="wrw")
    assert split_k.workspace(wide) == (512 + 4096) * 8 * 49 * 4
    assert gemm_1x1.workspace(pointwise.with_direction("wrw"), fake_handle("gpu")) == 0
    assert not gemm_1x1.is_applicable(p3)
    assert not gemm_1x1.is_applicable(Problem.conv2d((1, 4, 5, 5), (4, 4, 1, 1), padding=1))
    assert "gemm.GemmWrwSplitK" not in convsolve.applicable_solvers(p3)     # backward-weights only
    assert "gemm.GemmWrwSplitK" in convsolve.applicable_solvers(wrw)


def test_cpu_config_equals_the_kernel_defaults():
    """DEFAULT_CONFIGS['cpu'][0] is what gemm.cl compiles to on its own (the #ifndef defaults of
    its tunables, in gemm_common.cl)."""
    source = (gemm.KERNELS / "gemm_common.cl").read_text()
    defaults = dict(re.findall(r"#ifndef (\w+)\n#define \1 (\w+)", source))
    defaults = {k: defaults.get(v, v) for k, v in defaults.items()}   # VWM defaults to TM
    assert {k: str(v) for k, v in configs.DEFAULT_CONFIGS["cpu"][0].items()} == {
        k: defaults[k] for k in configs.DEFAULT_CONFIGS["cpu"][0]}


@pytest.mark.parametrize("trans_a, trans_b", [(0, 0), (1, 0), (0, 1)])
def test_gpu_configs_compile_everywhere(handle, trans_a, trans_b):
    """gemm.cl builds with every GPU config for each transposition the solvers launch, so that
    the local-memory path is compiled on CPU test devices too."""
    for config in configs.DEFAULT_CONFIGS["gpu"]:
        config = dict(config, **(configs.TRANS_A_CONFIG["gpu"] if trans_a else {}))
        handle.build(gemm.KERNELS / "gemm.cl", "gemm", dict(config, TRANS_A=trans_a,
                                                             TRANS_B=trans_b))


def test_the_split_rule_counts_the_tiles_of_the_small_gpu_set():
    """SPLIT_TILE is the tile of the GPU's last (64 x 64) config."""
    small = configs.DEFAULT_CONFIGS["gpu"][-1]
    assert small["TM"] * small["WGD_M"] * small["MR"] == plan.SPLIT_TILE
    assert small["TN"] * small["WGD_N"] * small.get("NR", 1) == plan.SPLIT_TILE


def test_backward_data_products_take_their_own_config(handle):
    """TRANS_A products apply TRANS_A_CONFIG (on the CPU: NR = 4 column tiles per work-item)."""
    plain, trans_a = (configs.default(handle, 4096, 4096, 1, t) for t in (False, True))
    column_tiles = configs.TRANS_A_CONFIG[configs.device_kind(handle)].get("NR", 1)
    assert configs.tile_shape(trans_a)[1] == configs.tile_shape(plain)[1] * column_tiles


def test_invalid_configs_are_refused_before_any_build(handle):
    """A config the device cannot run is refused with the reason by check_config, and by the
    GEMM itself before it builds."""
    too_big = dict(configs.DEFAULT_CONFIGS["gpu"][0], WGD_M=64, WGD_N=128, KWG=4096)
    problem = Problem.conv2d((1, 4, 5, 5), (4, 4, 3, 3))
    problems = convsolve.registry().get("gemm.Im2ColGemm").check_config(problem, handle, too_big)
    assert any("work-group" in p for p in problems) and any("local memory" in p for p in problems)
    with pytest.raises(convsolve.ConvsolveError, match="does not fit"):
        gemm.Gemm(handle, too_big, trans_a=False, trans_b=False)


@pytest.mark.parametrize("device_class", sorted(configs.DEFAULT_CONFIGS))
def test_every_default_config_is_in_its_tuning_space(device_class):
    """Each device class's default configs (with TRANS_A's changes) lie in the space of their
    kind of device, so tuning starts from them and default_config passes the core's check."""
    for config in configs.DEFAULT_CONFIGS[device_class]:
        space = configs.GPU_SPACE if config["USE_LOCAL"] else configs.CPU_SPACE
        kind = "gpu" if config["USE_LOCAL"] else "cpu"
        for variant in (config, dict(config, **configs.TRANS_A_CONFIG[kind])):
            assert space.refusal(variant) is None, (device_class, variant)


def test_cpu_classes_get_their_own_vector_width(handle, monkeypatch):
    """Without tuning an AVX-512 device (native float vector width 16) gets 16-wide vectors and
    an AVX2 one (8) 8-wide ones, through convsolve.tuning's device classes."""
    from convsolve import tuning
    for width, expected in ((16, 16), (8, 8)):
        keys = ("some cpu", "cpu/unknown-arch", f"cpu/vector{width}", "cpu/acme", "cpu", "*")
        monkeypatch.setattr(tuning, "device_keys", lambda device, keys=keys: keys)
        assert configs.default(handle, 1024, 1024, 1, False)["VW"] == expected


def test_sixteen_wide_backward_weights_on_any_cpu(handle, monkeypatch):
    """The AVX-512 class's default config (16-wide vectors) computes backward-weights right on
    any CPU: its products pack op(B) = col^T (or x^T) through two 8 x 8 register transposes per
    vector, with the k past the last whole block of 8 and the columns past N clamped (K = 81
    and 35, N = 27 and 40; groups, asymmetric padding, the side-by-side split).  CPUs only: a
    GPU's check_config refuses the CPU class's kernels."""
    if not handle.is_cpu:
        pytest.skip("a CPU device class's config, which a GPU refuses")
    from convsolve import tuning
    keys = ("some cpu", "cpu/unknown-arch", "cpu/vector16", "cpu/acme", "cpu", "*")
    monkeypatch.setattr(tuning, "device_keys", lambda device: keys)
    grouped = Problem.conv2d((2, 6, 9, 11), (10, 3, 3, 3), padding=((1, 1), (0, 0)), groups=2,
                             direction=Direction.BACKWARD_WEIGHTS)
    plain = Problem.conv2d((3, 40, 5, 7), (20, 40, 1, 1), direction=Direction.BACKWARD_WEIGHTS)
    for name, problem in (("gemm.Im2ColGemm", grouped), ("gemm.GemmWrwSplitK", grouped),
                          ("gemm.Gemm1x1", plain)):
        solver = convsolve.registry().get(name)
        assert solver.default_config(problem, handle)["VW"] == 16
        assert check_solver(solver, handle, [problem], configs=0) == 1


def test_find_times_gemm_beside_naive_and_switches_remove_it(handle, monkeypatch):
    """find times Im2ColGemm beside the naive reference (the other families left out); the solver
    and family switches take it out.  How fast each is is a benchmark's question
    (BENCHMARKS.md), not this test's: under load the order of two timings is not a fact."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.[!N]*,winograd.*,fft.*,implicit_gemm.*")
    problem = Problem.conv2d((2, 8, 9, 9), (8, 8, 3, 3), padding=1)
    buffers = device_buffers(handle, random_tensors(problem))
    ranked = [s.solver for s in convsolve.find(handle, problem, **buffers, mode="NORMAL")]
    assert {"gemm.Im2ColGemm", "direct.NaiveFwd"} <= set(ranked)
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS",
                       "gemm.Im2Col*,direct.[!N]*,winograd.*,fft.*,implicit_gemm.*")
    assert "gemm.Im2ColGemm" not in convsolve.applicable_solvers(problem)
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_GEMM", "0")
    assert [s.solver for s in convsolve.find(handle, problem, **buffers, mode="NORMAL")] == [
        "direct.NaiveFwd"]


def test_plugin_lists_its_solvers():
    """The entry point yields the three solvers."""
    assert [s.name for s in convsolve_gemm.convsolve_solvers()] == list(SOLVERS)


def test_launches_take_the_largest_tile_they_fill(handle, monkeypatch):
    """With several default configs, a product too small for the large tile takes the small one."""
    large = dict(configs.default(handle, 4096, 4096, 1, False))
    if large["MR"] > 1:
        small = dict(large, MR=1, PF=0)                         # CPU: 6-row tiles, not 96
    else:
        small = dict(large, WGD_M=large["WGD_M"] // 2)          # GPU: half the rows
    monkeypatch.setattr(configs, "DEFAULT_CONFIGS", {"*": [large, small]})
    (tile_m, tile_n) = configs.tile_shape(large)
    enough = configs.FILL * handle.device.max_compute_units
    assert configs.tile_shape(small)[0] < tile_m
    assert configs.default(handle, tile_m - 1, 4096, 1, False) == small   # M below the tile
    assert configs.default(handle, tile_m * enough, tile_n, 1, False) == large
    assert configs.default(handle, tile_m, tile_n, 1, False) == small  # one group: too few
    problem = Problem.conv2d((2, 6, 9, 7), (5, 6, 3, 3), padding=1)
    assert check_solver(convsolve.registry().get("gemm.Im2ColGemm"), handle, [problem]) == 1
