"""convsolve-winograd's local-memory GEMM (wino_gemm_local.cl, config GEMM = "local"): the
numbers on odd sizes in every direction, and the GPU configs' choice and refusals per device.

The kernels run on the test device (PoCL) through configs forced on a solver whose config hooks
answer as on an H200 (fake_handle("gpu")); tests/testing/test_sanitized.py runs the "gpu"
default (the local GEMM) under Oclgrind as a GPU, with its memory and data-race checks."""
import re
from pathlib import Path

import convsolve_winograd
import pytest
from convsolve import Direction, Problem, hookimpl
from convsolve.testing import check_solver, fake_handle
from convsolve_winograd import F2x3, configs, plan

#: ForcedLocal's plugin is this module: it declares the API the plugin's solvers do.
CONVSOLVE_SOLVER_API = convsolve_winograd.CONVSOLVE_SOLVER_API
H200 = fake_handle("gpu")
#: The forced configs: the "gpu" default's pins with two blocks, neither of them square, whose
#: sizes no problem below is a multiple of (RM x RN of 4 x 8 and 8 x 4, BK 8 and 16).
BLOCKS = [{"BM": 32, "BN": 64, "BK": 8, "RM": 4, "RN": 8},
          {"BM": 64, "BN": 32, "BK": 16, "RM": 8, "RN": 4}]


class ForcedLocal(F2x3):
    """F2x3 (its kernels build fastest) with a config space, default and check as on an H200,
    the default being the "gpu" class's with the block ``block``."""

    def __init__(self, block):
        self.block = block

    @hookimpl
    def config_space(self, problem, handle):
        return configs.space(H200)

    @hookimpl
    def default_config(self, problem, handle):
        return {**configs.DEFAULT_CONFIGS["gpu"], **self.block}

    @hookimpl
    def check_config(self, problem, handle, config):
        return configs.refusals(H200, config)


def _odd_problems():
    """Rows (output channels of the correlation) of 37 and 6 a group, reductions of 13 and 3 a
    group (not multiples of BK), 60 and 63 tiles a chunk (not multiples of BN), 3 groups, the
    16 positions of F(2, 3), in every direction."""
    shapes = [((2, 13, 9, 11), (37, 13, 3, 3), 1, 1),
              ((3, 9, 6, 11), (18, 3, 3, 3), ((2, 0), (1, 1)), 3)]
    return [Problem.conv2d(x, w, padding=pad, groups=g, direction=d)
            for d in Direction for x, w, pad, g in shapes]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: "x".join(map(str, b.values())))
def test_local_gemm_matches_the_reference_on_odd_sizes(handle, block):
    """check_solver (reference, guard zones, exact workspace, determinism, planted inf and NaN,
    epilogues) with the local GEMM forced, in every direction, on sizes that leave every block
    edge partial."""
    solver = ForcedLocal(block)
    assert solver.default_config(None, None) in configs.space(H200)
    assert check_solver(solver, handle, _odd_problems(), configs=0, isolate=False,
                        sanitize=False) == 6


def test_local_gemm_sums_chunks_in_backward_weights(handle, monkeypatch):
    """With a budget of two tile rows, backward-weights runs in 5 chunks (the last shorter) and
    the local GEMM adds each chunk's product to the sum of the earlier ones; forward and
    backward-data take chunks of as many tiles."""
    problems = [Problem.conv2d((3, 5, 10, 10), (6, 5, 3, 3), padding=((1, 0), (2, 1)),
                               direction=d) for d in Direction]
    geo = plan.geometry(problems[-1], 2)
    monkeypatch.setattr(plan, "CHUNK_BYTES", 2 * geo.tile_bytes * geo.tiles_w + 1)
    assert len(plan.geometry(problems[-1], 2).chunks()) == 8           # 15 tile rows: 2,..,1
    assert check_solver(ForcedLocal(BLOCKS[0]), handle, problems, configs=0, isolate=False,
                        sanitize=False) == 3


@pytest.mark.parametrize("splits", [3, 16])
def test_local_gemm_sums_backward_weights_in_splits(handle, monkeypatch, splits):
    """Split-K: with the tiles' sum in 3 parts (uneven) or 16 (the last ones empty: 60 and 63
    tiles a chunk, BK 8), each into its own copy of S that wino_filter_out adds up, backward-
    weights matches the reference within the exact workspace, also summed over chunks of two
    tile rows."""
    monkeypatch.setattr(plan, "wrw_splits", lambda geo, handle: splits if geo.wrw else 1)
    problems = [p for p in _odd_problems() if p.direction is Direction.BACKWARD_WEIGHTS]
    assert plan.device_geometry(problems[0], 2, handle).splits == splits
    assert check_solver(ForcedLocal(BLOCKS[0]), handle, problems, configs=0, isolate=False,
                        sanitize=False) == 2
    geo = plan.geometry(problems[0], 2)
    monkeypatch.setattr(plan, "CHUNK_BYTES", 2 * geo.tile_bytes * geo.tiles_w + 1)
    assert check_solver(ForcedLocal(BLOCKS[1]), handle, problems[:1], configs=0, isolate=False,
                        sanitize=False) == 1


def test_wrw_splits_fill_an_h200():
    """Backward-weights on an H200 splits the tiles' sum where 64 x 64 blocks leave compute
    units idle (ResNet-50 at batch 32, F(4, 3): 8 parts at 56x56 x 64, 2 at 28x28 x 128, 1 at
    7x7 x 512), never in the other directions nor on a CPU; the workspace holds the copies."""
    def layer(c, side, direction="wrw"):
        return Problem.conv2d((32, c, side, side), (c, c, 3, 3), padding=1, direction=direction)
    cpu = fake_handle("avx2")
    assert [plan.device_geometry(layer(c, s), 4, H200).splits
            for c, s in ((64, 56), (128, 28), (512, 7))] == [8, 2, 1]
    assert plan.device_geometry(layer(64, 56, "fwd"), 4, H200).splits == 1
    assert plan.device_geometry(layer(64, 56), 4, cpu).splits == 1
    one, eight = plan.geometry(layer(64, 56), 4, plan.GPU_CHUNK_BYTES), \
        plan.device_geometry(layer(64, 56), 4, H200)
    assert eight.fixed_floats - one.fixed_floats == 7 * one.positions * one.plane
    assert eight.workspace() - one.workspace() == 7 * one.positions * one.plane * 4


def test_gpu_default_takes_the_local_gemm_with_a_block_that_fills_the_device():
    """On an H200 the default is the local GEMM, 64 x 64 blocks where the grid gives its 132
    compute units a work-group each, smaller blocks where it would not; every default lies in
    the space and passes check_config; the CPU classes keep the vector GEMM."""
    space = configs.space(H200)
    layer = Problem.conv2d((32, 128, 28, 28), (128, 128, 3, 3), padding=1)
    config = configs.default(layer, H200, 4)
    assert (config["GEMM"], config["BM"], config["BN"], config["BK"]) == ("local", 64, 64, 8)
    thin = Problem.conv2d((32, 64, 56, 56), (64, 64, 3, 3), padding=1, direction="wrw")
    assert (configs.default(thin, H200, 4)["BM"], configs.default(thin, H200, 4)["BN"]) == (32, 32)
    for problem in (layer, thin):
        assert configs.default(problem, H200, 4) in space
        assert not configs.refusals(H200, configs.default(problem, H200, 4))
    assert all("GEMM" not in table for key, table in configs.DEFAULT_CONFIGS.items()
               if not key.startswith("gpu"))
    assert configs.local_bytes(config) == 2 * 8 * (64 + 4 + 64) * 4


def test_local_gemm_configs_beyond_the_device_are_refused():
    """A device with 16 KiB of local memory and work-groups of at most 128 refuses the local
    GEMM's 128 x 128 blocks of BK 16 (33,280 bytes) and 256-item groups, naming each limit, and its
    default takes a block it holds; one with 4 KiB and groups of 32 refuses every local block
    and its default is the vector GEMM, which it accepts."""
    small = fake_handle("gpu", name="small", local_mem_size=16 << 10, max_work_group_size=128)
    base = configs.DEFAULT_CONFIGS["gpu"]
    big = {**base, "BM": 128, "BN": 128, "BK": 16, "RM": 8, "RN": 8}
    assert configs.local_bytes(big) == 33280
    assert any("33280 bytes of local memory > the device's 16384" in r
               for r in configs.refusals(small, big))
    assert any("work-group of 256 > the device's 128" in r for r in configs.refusals(small, base))
    assert not configs.refusals(H200, big) and not configs.refusals(H200, base)
    layer = Problem.conv2d((32, 128, 28, 28), (128, 128, 3, 3), padding=1)
    chosen = configs.default(layer, small, 4)
    assert chosen["GEMM"] == "local" and not configs.refusals(small, chosen)
    assert configs.local_group(chosen) <= 128
    tiny = fake_handle("gpu", name="tiny", local_mem_size=4 << 10, max_work_group_size=32)
    fallback = configs.default(layer, tiny, 4)
    assert fallback["GEMM"] == "vector" and not configs.refusals(tiny, fallback)
    assert fallback in configs.space(tiny)


def test_local_kernel_defaults_equal_the_gpu_default():
    """wino_gemm_local.cl compiles on its own to the "gpu" default's block (its #ifndef
    defaults), forward (WRW 0), backward-weights in one part (SPLIT 1)."""
    text = (Path(plan.KERNELS) / "wino_gemm_local.cl").read_text()
    found = {k: int(v) for k, v in re.findall(r"#ifndef (\w+)\n#define \1 (\d+)", text)}
    gpu = configs.DEFAULT_CONFIGS["gpu"]
    assert found == {"WRW": 0, "SPLIT": 1, **{k: gpu[k] for k in plan.LOCAL_TUNABLES}}

