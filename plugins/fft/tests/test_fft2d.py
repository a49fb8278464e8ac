"""fft.Fft2d: the contract on the standard set, and a sweep of awkward shapes in every direction."""
import types

import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Problem, hookimpl
from convsolve.testing import (
    check_solver,
    nonfinite_reach,
    random_tensors,
    relative_error,
    standard_problems,
)
from convsolve_fft import Fft2d, configs, fft2d, layout, transforms
from fft_checks import assert_matches, run

#: (x, w, stride, padding, dilation, groups): filters 1 to 11, even and odd, non-square images
#: and filters, strides (polyphase), dilation, groups, depthwise, asymmetric and large padding.
SHAPES = [
    ((1, 3, 12, 13), (5, 3, 2, 7), 1, ((1, 2), (3, 0)), 1, 1),
    ((2, 4, 16, 9), (3, 4, 4, 4), 1, 0, 1, 1),
    ((1, 2, 11, 11), (2, 2, 11, 11), 1, 5, 1, 1),
    ((3, 5, 10, 14), (4, 5, 6, 6), 2, 2, 1, 1),
    ((2, 6, 9, 8), (6, 2, 5, 5), 1, 4, 2, 3),
    ((2, 3, 19, 17), (4, 3, 7, 7), (3, 2), 3, 1, 1),
    ((1, 4, 7, 30), (3, 4, 1, 9), 1, (0, 4), 1, 1),
    ((2, 8, 8, 8), (8, 1, 5, 5), 1, 2, 1, 8),
    ((1, 1, 25, 26), (2, 1, 3, 3), 1, 0, (4, 5), 1),
    ((2, 3, 33, 41), (2, 3, 9, 10), 1, (4, 5), 1, 1),
    ((1, 2, 3, 3), (2, 2, 3, 3), 1, ((3, 0), (0, 2)), 1, 1),
    ((1, 3, 9, 9), (2, 3, 3, 3), (4, 3), 1, (3, 2), 1),
    ((2, 2, 8, 9), (3, 2, 2, 3), 3, ((2, 1), (0, 2)), (2, 1), 1),
    # a dilated 1x7 wider than the image: backward-weights' taps 5 and 6 read only padding
    ((2, 3, 2, 5), (4, 3, 1, 7), 1, ((0, 0), (4, 5)), 2, 1),
]


def test_conformance_on_the_standard_set(handle):
    """Fft2d passes check_solver (correct, whole output, honest workspace, deterministic, the
    FFT non-finite semantics) on every standard problem, with its default config."""
    assert check_solver(Fft2d(), handle, configs=0) == len(standard_problems())


def test_awkward_shapes_match_the_reference(handle):
    """Every shape of the sweep, in every direction, is within the tolerance."""
    assert assert_matches(handle, Fft2d(), SHAPES) == 3 * len(SHAPES)


@pytest.mark.parametrize("direction", list(Direction), ids=lambda d: d.value)
def test_chunks(handle, monkeypatch, direction):
    """With a budget of two images a chunk, 5 images run as 2, 2 and 1 (backward-weights
    accumulating its spectra over chunks), correctly and within the reported workspace."""
    problem = Problem.conv2d((5, 4, 9, 7), (6, 2, 3, 4), stride=(1, 2), padding=((2, 0), (1, 2)),
                             groups=2, direction=direction)
    per_image = layout.Layout(problem).workspace // 5   # rough: the weights come on top
    monkeypatch.setattr(layout, "CHUNK_BUDGET_BYTES", 2 * per_image)
    fft2d._whole_image.cache_clear()
    try:
        assert Fft2d().layout(problem).chunks() == [(0, 2), (2, 2), (4, 1)]
        assert check_solver(Fft2d(), handle, [problem], configs=0) == 1
    finally:
        fft2d._whole_image.cache_clear()


@pytest.mark.parametrize("height, small", [(12, True), (100, False)], ids=["dft-small", "tall"])
def test_a_config_builds_two_programs(handle, monkeypatch, height, small):
    """The transforms and the dft_small pair (where the weights' transform is short enough) come
    from one program (fft.cl) built with the transforms' defines, the products from cgemm.cl
    with theirs."""
    builds = []
    build = handle.build
    monkeypatch.setattr(handle, "build", lambda file, kernel, defines=None: (
        builds.append((file.name, kernel, dict(defines))), build(file, kernel, defines))[1])
    problem = Problem.conv2d((1, 4, height, 8), (4, 4, 3, 3), padding=1)
    solver = Fft2d()
    config = solver.default_config(problem, handle)
    solver.build_invoker(problem, handle, config)
    transforms = [(kernel, d) for file, kernel, d in builds if file == "fft.cl"]
    assert {file for file, _, _ in builds} == {"fft.cl", "cgemm.cl"}
    assert all(d == transforms[0][1] for _, d in transforms)
    assert transforms[0][1]["FFT_SMALL"] == int(small)   # the pair only where FH / 2 + 1 <= 48
    assert {kernel for kernel, _ in transforms} == {
        "fft2d_forward", "fft2d_inverse",
        *(("dft_small_forward", "dft_small_inverse") if small else ())}
    assert transforms[0][1]["LANES"] == config["LANES"] and "TM" not in transforms[0][1]


def test_images_too_large_are_declined():
    """A transform longer than the kernels' buffers (256 points) is TiledFft's, not Fft2d's."""
    assert Fft2d().is_applicable(Problem.conv2d((1, 1, 200, 250), (1, 1, 5, 5), padding=2))
    assert not Fft2d().is_applicable(Problem.conv2d((1, 1, 200, 300), (1, 1, 5, 5), padding=2))


def test_nonfinite_inputs_spoil_only_their_reach(handle):
    """A NaN in one image's input spoils that image's outputs (of the group) and no other; an
    inf weight spoils its output channel; everything finite stays right."""
    problem = Problem.conv2d((3, 4, 10, 11), (4, 2, 5, 5), padding=2, groups=2)
    host = random_tensors(problem, 3)
    host["x"][1, 3, 4, 4] = np.nan
    host["w"][0, 1, 2, 2] = np.inf
    result, expected = run(handle, Fft2d(), problem, host=host)
    ours, theirs = ~np.isfinite(result), ~np.isfinite(expected)
    assert (theirs <= ours).all() and (ours <= nonfinite_reach(problem, host)).all()
    assert relative_error(result[~ours], expected[~ours]) < Fft2d.tolerance
    assert np.isfinite(result[0, 1:]).all() and np.isfinite(result[2, 1:]).all()
    assert not np.isfinite(result[1, 2:]).all()


#: The solver API StrayNaN, a solver of this module, supports (discovery reads it here).
CONVSOLVE_SOLVER_API = ">=2.3,<3"


class StrayNaN(Fft2d):
    """Fft2d that also writes a NaN to y[0, 1, 0, 0] when x holds a non-finite value: out of the
    reach of check_solver's planted values (x's last element, w's first) on a batch of 2 and
    2 output channels."""

    @hookimpl
    def build_invoker(self, problem, handle, config):
        inner = super().build_invoker(problem, handle, config)

        def invoker(buffers, scratch):
            events = inner(buffers, scratch)
            x = np.empty(problem.x.shape, np.float32)
            cl.enqueue_copy(handle.queue, x, buffers.x, wait_for=events)
            if not np.isfinite(x).all():
                events.append(cl.enqueue_fill_buffer(handle.queue, buffers.y, np.float32(np.nan),
                                                     problem.out_h * problem.out_w * 4, 4))
            return events
        return invoker


def test_check_solver_holds_fft_to_its_planes(handle):
    """nonfinite = "spread": check_solver fails a non-finite output that no non-finite input
    reaches."""
    problem = Problem.conv2d((2, 2, 6, 7), (2, 2, 3, 3), padding=1)
    assert Fft2d.nonfinite == "spread"
    with pytest.raises(AssertionError, match="1 outputs non-finite out of the non-finite inputs"):
        check_solver(StrayNaN(), handle, [problem], configs=0, isolate=False)

#: Images whose whole-image transforms need more than the H200's 48 KiB of local memory (the
#: shapes the H200 run failed on: 224 x 224 3x3, 321 x 201 5x2), few channels, every direction.
LARGE = [((1, 1, 224, 224), (2, 1, 3, 3), 1, 1, 1, 1), ((1, 3, 321, 201), (2, 3, 5, 2), 1, 0, 1, 1)]


def test_planes_larger_than_local_memory_go_through_global_memory(limited_handle):
    """On a device with 48 KiB of local memory, images too large for it get a valid default
    config and run right, the planes between the passes in their spectra: with the default
    (vector lanes), and with the GPU shape (64 work-items a plane, a global barrier)."""
    handle = limited_handle(local_mem_size=48 << 10)
    problems = [Problem.conv2d(*shape[:5], groups=shape[5], direction=direction)
                for shape in LARGE for direction in Direction]
    assert check_solver(Fft2d(), handle, problems, configs=0, isolate=False,
                        sanitize=False) == len(problems)
    gpu = dict(configs.DEFAULT_CONFIGS["gpu"])
    assert assert_matches(handle, Fft2d(), LARGE, gpu) == len(problems)


@pytest.mark.sanitized
def test_global_memory_planes_are_clean_under_oclgrind():
    """The global-memory path has no memory error or race on Oclgrind (as a CPU and a GPU, whose
    32 KiB of local memory an 88 x 88 image's 90-point planes do not fit with any lanes)."""
    oclgrind = types.SimpleNamespace(local_mem_size=32 << 10)
    assert not any(transforms.in_local_memory(90, 90, lanes, oclgrind) for lanes in (1, 8, 16))
    problems = [Problem.conv2d((1, 1, 88, 88), (1, 1, 3, 3), padding=1, direction=direction)
                for direction in Direction]
    assert check_solver(Fft2d(), problems=problems, configs=0, sanitize=True) == 3
