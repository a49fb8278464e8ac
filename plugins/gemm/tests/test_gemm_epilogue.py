"""convsolve-gemm's fused epilogue: the kernel after which each output element is final stores
it (the forward GEMM in either launch order of grouped products, edge columns; col2im,
the split sum, dW accumulated over launches), workspace unchanged.  Chunks of images, dW
summed over them included, meet check_solver's epilogue cases in test_gemm.py's
test_chunked_batches.  The solver API declared is the epilogue hook's."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Epilogue, Problem
from convsolve.testing import device_buffers, fake_handle, random_tensors, read_output

ALL = Epilogue(True, True, True, "leaky_relu", True)
GPU = fake_handle("gpu")   # the workspace figure a GPU gets (the larger: split backward-weights)
PROBLEMS = [   # images > groups (a launch per group), images <= groups (per image), odd widths
    Problem.conv2d((4, 6, 5, 7), (8, 3, 3, 3), padding=1, groups=2),
    Problem.conv2d((2, 6, 5, 7), (9, 2, 1, 1), groups=3),
    Problem.conv2d((3, 5, 7, 5), (11, 5, 1, 1)),
]


@pytest.mark.parametrize("name", ["gemm.Gemm1x1", "gemm.Im2ColGemm", "gemm.GemmWrwSplitK"])
def test_fuses_every_stage_in_every_direction(name):
    """Every direction fuses all of its epilogue (forward every stage, backward alpha and
    blend), with the bare problem's workspace."""
    solver = convsolve.registry().get(name)
    for problem in PROBLEMS:
        for direction in solver.directions:
            p = problem.with_direction(direction)
            epilogue = ALL if direction is Direction.FORWARD else Epilogue(blend=True)
            assert solver.fused_stages(p.with_epilogue(epilogue)) == len(epilogue.stages)
            if solver.is_applicable(p):   # Gemm1x1's figure is the device's (GPU: the larger)
                on = (GPU,) if name == "gemm.Gemm1x1" else ()
                assert solver.workspace(p.with_epilogue(epilogue), *on) == solver.workspace(p, *on)


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
