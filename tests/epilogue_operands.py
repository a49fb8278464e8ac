"""Epilogue operands the tests give: what a problem's epilogue may read, on the host."""
import numpy as np


def epilogue_operands(problem, seed):
    """scale (uniform in [-2, 2]) and bias (in [-1, 1]), one per output channel, and z (in
    [-1, 1]) in the output's memory order, float32."""
    rng = np.random.default_rng(seed)
    return {"scale": rng.uniform(-2, 2, problem.k).astype(np.float32),
            "bias": rng.uniform(-1, 1, problem.k).astype(np.float32),
            "z": rng.uniform(-1, 1, problem.y.memory_shape).astype(np.float32)}
