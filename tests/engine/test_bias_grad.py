"""Backward-bias: a deterministic reduction, accurate on large N*H*W, under each device type's
config (both run on the test device) and tiny ones that take several passes; its workspace
exact; alpha and beta; bad input refused before OpenCL; clean under Oclgrind."""
import json
import os
import subprocess
import sys

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import ValidationError, reference
from convsolve.engine import bias_grad
from convsolve.engine.bias_grad import (
    CONFIGS,
    Config,
    backward_bias,
    backward_bias_workspace,
    passes,
)
from convsolve.testing import isolation as check_worker

#: Configs whose chunks are tiny, so that small shapes take three passes or more.
TINY = {"tiny-strided": Config(group=4, items=2, share=1, vector=4, accs=1, strided=True),
        "tiny-contiguous": Config(group=2, items=2, share=1, vector=4, accs=2, strided=False)}
#: Odd sizes: 7x7 and 1x1 planes, N = 1, runs shorter and longer than a vector, channels that
#: share a work-group (K not a multiple of channels per group), several chunks per channel.
SHAPES = [(1, 3, 7, 7), (1, 5, 1, 1), (33, 2, 1, 1), (3, 4, 5, 9), (2, 3, 1, 17), (5, 3, 4, 4),
          (4, 37, 7, 7), (2, 40, 14, 14), (1, 2, 1, 20000), (3, 2, 56, 56)]


def _use(monkeypatch, name):
    chosen = {**CONFIGS, **TINY}[name]
    monkeypatch.setattr(bias_grad, "config_for", lambda handle: chosen)
    return chosen


@pytest.fixture(params=CONFIGS)
def device_config(request, monkeypatch):
    """Each device type's config in turn, whatever the test device is."""
    return _use(monkeypatch, request.param)


@pytest.fixture(params=[*CONFIGS, *TINY])
def config(request, monkeypatch):
    """Each device type's config, and the tiny ones, in turn."""
    return _use(monkeypatch, request.param)


def _buffer(handle, array):
    flags = cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    return cl.Buffer(handle.context, flags, hostbuf=np.ascontiguousarray(array))


def _db(handle, dy, alpha=1.0, beta=0.0, prior=None, scratch=None):
    db = _buffer(handle, np.zeros(dy.shape[1], np.float32) if prior is None else prior)
    backward_bias(handle, dy.shape, dy=_buffer(handle, dy), db=db, alpha=alpha, beta=beta,
                  scratch=scratch)
    out = np.empty(dy.shape[1], np.float32)
    cl.enqueue_copy(handle.queue, out, db)
    return out


def test_passes_and_workspace(handle):
    """Chunks and teams follow the config; the workspace holds two consecutive passes' partial
    sums, exactly for the handle's device and enough for any device without one."""
    gpu, cpu, Pass = CONFIGS["gpu"], CONFIGS["cpu"], bias_grad.Pass
    assert passes((32, 64, 112, 112), gpu) == [
        Pass(run=3136, units=100352, chunks=13, unit=4, team=256),
        Pass(run=13, units=13, chunks=1, unit=1, team=1)]
    assert passes((32, 512, 28, 28), gpu) == [Pass(196, 6272, 1, 4, 256)]
    assert passes((8, 2048, 7, 7), gpu) == [Pass(49, 392, 1, 1, 16)]
    assert passes((8, 2048, 7, 7), cpu) == [Pass(49, 392, 1, 1, 1)]
    assert [p.chunks for p in passes((3, 2, 56, 56), TINY["tiny-strided"])] == [294, 10, 1]
    shape = (32, 64, 56, 56)   # more than one chunk per channel under every device type's config
    chunks = {name: passes(shape, c)[0].chunks for name, c in CONFIGS.items()}
    assert min(chunks.values()) > 1, chunks
    ours = passes(shape, bias_grad.config_for(handle))[0].chunks
    assert backward_bias_workspace(shape, handle) == 4 * 64 * ours
    assert backward_bias_workspace(shape) == 4 * 64 * max(chunks.values())
    assert backward_bias_workspace((1, 3, 4, 4), handle) == 0


def test_accurate_and_deterministic_on_a_large_batch(handle, device_config):
    """On 2**20 elements per channel of mean 1 the sum stays within 1e-7 of float64, a hundred
    times closer than one float32 accumulator gets, and two runs agree bitwise."""
    dy = np.random.default_rng(0).uniform(0, 2, (64, 3, 128, 128)).astype(np.float32)
    exact = dy.astype(np.float64).sum(axis=(0, 2, 3))
    sequential = np.cumsum(dy.transpose(1, 0, 2, 3).reshape(3, -1), axis=1,
                           dtype=np.float32)[:, -1]
    first = _db(handle, dy)
    assert reference.relative_error(first, exact) < 1e-7
    assert reference.relative_error(sequential, exact) > 100 * reference.relative_error(
        first, exact)
    assert np.array_equal(first, _db(handle, dy))


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_odd_sizes(handle, config, shape):
    """Every channel's sum, for each shape, within float32's reach of float64, bitwise the
    same on a second run."""
    dy = np.random.default_rng(3).uniform(-1, 2, shape).astype(np.float32)
    got = _db(handle, dy, 1.5)
    assert reference.relative_error(got, reference.backward_bias(dy, 1.5)) < 3e-7
    assert np.array_equal(got, _db(handle, dy, 1.5))


def test_alpha_beta_and_unread_operands(handle, config):
    """db = alpha * sum + beta * db; alpha = 0 leaves a NaN dy unread, beta = 0 a NaN db."""
    rng = np.random.default_rng(1)
    dy = rng.standard_normal((3, 5, 7, 40)).astype(np.float32)
    prior = rng.standard_normal(5).astype(np.float32)
    expected = reference.backward_bias(dy, -0.5, 2.0, prior)
    assert reference.relative_error(_db(handle, dy, -0.5, 2.0, prior), expected) < 1e-6
    assert np.array_equal(_db(handle, np.full_like(dy, np.nan), 0.0, 2.0, prior), 2 * prior)
    assert np.array_equal(_db(handle, np.full_like(dy, np.nan), 0.0, 0.0, prior), 0 * prior)
    assert not np.isnan(_db(handle, dy, 1.0, 0.0, np.full(5, np.nan, np.float32))).any()
    nan_dy = dy.copy()
    nan_dy[1, 2, 3, 4] = np.nan
    assert np.isnan(_db(handle, nan_dy))[2] and np.isfinite(np.delete(_db(handle, nan_dy), 2)).all()


def test_zero_batch(handle, config):
    """N = 0: db = beta * db, with no dy buffer at all."""
    prior = np.arange(3, dtype=np.float32)
    db = _buffer(handle, prior)
    backward_bias(handle, (0, 3, 4, 4), dy=None, db=db, beta=-2.0)
    out = np.empty(3, np.float32)
    cl.enqueue_copy(handle.queue, out, db)
    assert np.array_equal(out, -2 * prior)


def test_workspace_and_bad_input_are_refused(handle):
    """A scratch buffer smaller than the workspace, a non-finite alpha, dy as db, a dy of the
    wrong size and 2**30 elements per channel are ValidationErrors naming the field."""
    dy = np.ones((4, 2, 100, 100), np.float32)
    small = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4)
    with pytest.raises(ValidationError, match="invalid scratch=4"):
        _db(handle, dy, scratch=small)
    with pytest.raises(ValidationError, match="invalid alpha=inf"):
        _db(handle, dy, alpha=np.inf)
    buffer = _buffer(handle, dy)
    with pytest.raises(ValidationError, match="invalid db="):
        backward_bias(handle, dy.shape, dy=buffer, db=buffer)
    with pytest.raises(ValidationError, match="invalid dy buffer size"):
        backward_bias(handle, (5, 2, 100, 100), dy=buffer,
                      db=_buffer(handle, np.zeros(2, np.float32)))
    with pytest.raises(ValidationError, match="invalid dy_shape"):
        backward_bias(handle, (1024, 2, 1024, 1024), dy=buffer, db=buffer)


def test_numpy_api(handle):
    """conv2d_backward_bias sums dy over images and pixels, blends db, handles a zero batch."""
    dy = np.random.default_rng(2).standard_normal((2, 4, 3, 5)).astype(np.float32)
    prior = np.arange(4, dtype=np.float32)
    got = convsolve.conv2d_backward_bias(dy, 2.0, 0.5, prior, handle=handle)
    assert reference.relative_error(got, reference.backward_bias(dy, 2.0, 0.5, prior)) < 1e-6
    assert np.array_equal(convsolve.conv2d_backward_bias(dy[:0], beta=0.5, db=prior), prior / 2)
    with pytest.raises(ValidationError, match="invalid db=None"):
        convsolve.conv2d_backward_bias(dy, beta=1.0)
    with pytest.raises(ValidationError, match="invalid dy.dtype='float64'"):
        convsolve.conv2d_backward_bias(dy.astype(np.float64))


# {{{ Oclgrind

#: Shapes run under Oclgrind, small (it is about 1000x slower than PoCL): a channel in one work-
#: item, channels sharing a group, two passes; with beta, and each config.
SANITIZED = [(2, 3, 5, 7), (3, 37, 1, 1), (1, 2, 1, 8200)]


def _sanitized_errors(profile):
    """In a process on Oclgrind with its checks (check_worker's): each config on SANITIZED, the
    relative error of each result, and Oclgrind's reports; the test's child process."""
    handle = check_worker.oclgrind_handle(profile)
    errors = []
    for config in [bias_grad.config_for(handle), *TINY.values()]:
        bias_grad.config_for = lambda _, config=config: config
        for shape in SANITIZED:
            dy = np.random.default_rng(4).uniform(-1, 2, shape).astype(np.float32)
            prior = np.linspace(-1, 1, shape[1], dtype=np.float32)
            got = _db(handle, dy, 0.5, 2.0, prior)
            errors.append(reference.relative_error(
                got, reference.backward_bias(dy, 0.5, 2.0, prior)))
    return errors


@pytest.mark.sanitized
@pytest.mark.parametrize("profile", check_worker.PROFILES)
def test_clean_under_oclgrind(profile, tmp_path):
    """Each config's kernels, as a CPU and as a GPU, give the right sums on Oclgrind with no
    invalid access, data race or API error reported."""
    check_worker.oclgrind_or_skip()
    log = tmp_path / "oclgrind.log"
    env = {**os.environ, **check_worker.OCLGRIND_CHECKS, **check_worker.BUILD_ENV,
           "OCLGRIND_LOG": str(log), "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    done = subprocess.run([sys.executable, __file__, profile], env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    reports = check_worker.stderr_reports(done.stderr)
    reports += [log.read_text()] if log.exists() and log.read_text().strip() else []
    assert not reports, "\n".join(reports)[:3000]
    errors = json.loads(done.stdout.strip().splitlines()[-1])
    assert max(errors) < 3e-7, errors


if __name__ == "__main__":   # test_clean_under_oclgrind's child process
    print(json.dumps(_sanitized_errors(sys.argv[1])))
# }}}


@pytest.mark.parametrize("layouts", [("NCW", "NCHW", "NCDHW"), ("NWC", "NHWC", "NDHWC")],
                         ids=["channels-first", "channels-last"])
def test_any_rank_and_layout(handle, layouts):
    """A dy of spatial rank 1, 2 or 3 (the driver's -b 1 of such a problem): channels-first,
    each channel's pixels summed as one run; channels-last, as N * pixels runs of one float."""
    from convsolve import Problem
    from convsolve.device.tensors import read_tensor
    from convsolve.testing import device_buffers, random_tensors
    for problem in (Problem.conv1d((2, 3, 9), (4, 3, 3), layout=layouts[0]),
                    Problem.conv2d((3, 2, 5, 7), (5, 2, 1, 1), layout=layouts[1]),
                    Problem.conv3d((2, 3, 3, 4, 5), (4, 3, 1, 2, 3), layout=layouts[2])):
        dy = random_tensors(problem)["y"]   # in memory order
        buffers = device_buffers(handle, {"dy": dy, "db": np.zeros(problem.k, np.float32)})
        cl.wait_for_events(convsolve.backward_bias(handle, problem.y, dy=buffers["dy"],
                                                   db=buffers["db"]))
        got = read_tensor(handle, type(problem.y)((problem.k,)), buffers["db"])
        expected = reference.backward_bias(reference.logical(problem.y, dy))
        assert reference.relative_error(got, expected) < 1e-6, problem.key()
