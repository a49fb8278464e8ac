"""convsolve-gemm's fused epilogue: forward output GEMMs store it (either launch order of
grouped products, edge columns, chunks), backward leaves it to the core, workspace unchanged."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Epilogue, Problem
from convsolve.testing import check_solver, device_buffers, random_tensors, read_output
from convsolve_gemm import conv_layout, matmul_conv

ALL = Epilogue(True, True, True, "leaky_relu", True)
PROBLEMS = [   # images > groups (a launch per group), images <= groups (per image), odd widths
    Problem.conv2d((4, 6, 5, 7), (8, 3, 3, 3), padding=1, groups=2),
    Problem.conv2d((2, 6, 5, 7), (9, 2, 1, 1), groups=3),
    Problem.conv2d((3, 5, 7, 5), (11, 5, 1, 1)),
]


@pytest.mark.parametrize("name", ["gemm.Gemm1x1", "gemm.Im2ColGemm", "gemm.GemmWrwSplitK"])
def test_fuses_the_forward_epilogue_only(name):
    """Forward: every stage, with the bare problem's workspace; backward: none."""
    solver = convsolve.registry().get(name)
    for problem in PROBLEMS:
        for direction in solver.directions:
            p = problem.with_direction(direction)
            epilogue = ALL if direction is Direction.FORWARD else Epilogue(blend=True)
            fused = solver.fused_epilogue(p.with_epilogue(epilogue))
            assert fused == (len(ALL.stages) if direction is Direction.FORWARD else 0)
            if solver.is_applicable(p):
                assert solver.workspace(p.with_epilogue(epilogue.prefix(fused or 1))) == \
                    solver.workspace(p)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.key())
def test_fused_equals_unfused(handle, problem):
    """The fused store and the core's pass compute the same values (one header), z being y."""
    problem = problem.with_epilogue(ALL)
    rng = np.random.default_rng(4)
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    scale, bias = (cl.Buffer(handle.context, flags, hostbuf=rng.uniform(
        -1, 1, problem.k).astype(np.float32)) for _ in range(2))
    host, outputs = random_tensors(problem), []
    name = "gemm.Gemm1x1" if problem.fil_h == 1 else "gemm.Im2ColGemm"
    for solver in (name, name + "/unfused"):
        buffers = device_buffers(handle, host)
        convsolve.run(handle, problem, solver, **buffers, scale=scale, bias=bias,
                      z=buffers["y"], alpha=-1.5, beta=0.5, activation=("leaky_relu", 0.1))
        outputs.append(read_output(handle, problem, buffers))
    assert np.abs(outputs[0] - outputs[1]).max() <= 1e-6 * np.abs(outputs[1]).max()


def test_chunks_store_their_own_images(handle, monkeypatch):
    """With a workspace of two images, each chunk's GEMM fuses the epilogue of its images
    (check_solver's epilogue cases, on a 5-image problem in chunks of 2, 2 and 1)."""
    problem = Problem.conv2d((5, 6, 9, 7), (4, 3, 3, 2), stride=(2, 1), padding=((1, 0), (0, 1)),
                             groups=2)
    monkeypatch.setattr(conv_layout, "COLUMN_BUDGET_BYTES",
                        2 * matmul_conv.bytes_per_image(problem) + 1)
    assert check_solver(convsolve.registry().get("gemm.Im2ColGemm"), handle, [problem]) == 1
