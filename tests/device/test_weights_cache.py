"""Constant weights (device/weights_cache.py): the keyword's checks, what invalidates packed
weights, the cache's bound and lifetime, solvers without build_packing, find's own key."""
import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Direction, Problem, ValidationError, reference
from convsolve.db.find_db import FindDb
from convsolve.device.weights_cache import DB_SUFFIX, check_keywords

#: A tiny 3x3 problem Winograd serves: odd sizes, asymmetric padding.
PROBLEM = Problem.conv2d((1, 4, 7, 5), (6, 4, 3, 3), padding=((1, 0), (2, 1)))
WINOGRAD = "winograd.F2x3"
MF = cl.mem_flags


@pytest.fixture(autouse=True)
def installed_plugins(monkeypatch):
    """The installed families (Winograd packs its filters, direct.DepthwiseNhwc its weights
    transposed; direct.Tiled and gemm have no packing)."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "0")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "")


def weights(seed, problem=PROBLEM):
    return np.random.default_rng(seed).standard_normal(problem.w.shape).astype(np.float32)


def random_x(handle):
    """PROBLEM's x on the device, random: find's output check reads it (a buffer left
    uninitialised may hold floats whose products overflow, which that check then reports)."""
    x = np.random.default_rng(9).standard_normal(PROBLEM.x.shape).astype(np.float32)
    return cl.Buffer(handle.context, MF.READ_ONLY | MF.COPY_HOST_PTR, hostbuf=x)


@pytest.fixture
def call(handle):
    """call(solver, w_buffer, **keywords) -> y of PROBLEM's forward run on the session handle
    (the same x), and a w buffer maker: ``buffer(seed)``."""
    x = np.random.default_rng(9).standard_normal(PROBLEM.x.shape).astype(np.float32)
    xb = cl.Buffer(handle.context, MF.READ_ONLY | MF.COPY_HOST_PTR, hostbuf=x)
    yb = cl.Buffer(handle.context, MF.READ_WRITE, PROBLEM.y.nbytes)
    handle.weights_cache.clear()

    def run(solver, wb, **keywords):
        convsolve.run(handle, PROBLEM, solver, x=xb, w=wb, y=yb, **keywords)
        y = np.empty(PROBLEM.y.shape, np.float32)
        cl.enqueue_copy(handle.queue, y, yb)
        return y

    def buffer(seed):
        return cl.Buffer(handle.context, MF.READ_WRITE | MF.COPY_HOST_PTR, hostbuf=weights(seed))

    run.expected = lambda seed: reference.compute(PROBLEM, x, weights(seed), None)
    run.buffer = buffer
    return run


def write(handle, buffer, seed):
    cl.enqueue_copy(handle.queue, buffer, weights(seed), is_blocking=True)


def close(actual, expected, tolerance=1e-4):
    return reference.relative_error(actual, expected) < tolerance


def test_bumped_version_repacks(handle, call):
    """Packed weights follow a bumped weights_version; the same version keeps the packed ones
    (a write without a bump is the caller's broken promise, unseen)."""
    wb = call.buffer(1)
    assert close(call(WINOGRAD, wb, constant_weights=True), call.expected(1))
    assert handle.weights_cache.packs == 1 and handle.weights_cache.nbytes > 0
    write(handle, wb, 2)
    assert close(call(WINOGRAD, wb, constant_weights=True), call.expected(1))   # cached
    assert close(call(WINOGRAD, wb, constant_weights=True, weights_version=1), call.expected(2))
    assert handle.weights_cache.packs == 2 and len(handle.weights_cache) == 1


def test_another_buffer_packs_its_own(handle, call):
    """Another weights buffer never meets a buffer's packed weights."""
    first, second = call.buffer(1), call.buffer(3)
    assert close(call(WINOGRAD, first, constant_weights=True), call.expected(1))
    assert close(call(WINOGRAD, second, constant_weights=True), call.expected(3))
    assert len(handle.weights_cache) == 2


def test_without_the_keyword_nothing_is_cached(handle, call):
    """Without constant_weights a changed weights buffer gives the new result at once, and the
    handle keeps no packed weights."""
    wb = call.buffer(1)
    assert close(call(WINOGRAD, wb), call.expected(1))
    write(handle, wb, 2)
    assert close(call(WINOGRAD, wb), call.expected(2))
    assert handle.weights_cache.nbytes == 0 and handle.weights_cache.packs == 0


@pytest.mark.parametrize("solver", ["direct.Tiled", "gemm.Im2ColGemm"])
def test_solvers_without_the_hook_ignore_it(handle, call, solver):
    """A solver without build_packing accepts constant_weights and runs as always."""
    wb = call.buffer(1)
    assert close(call(solver, wb, constant_weights=True, weights_version=4), call.expected(1))
    write(handle, wb, 2)
    assert close(call(solver, wb, constant_weights=True, weights_version=4), call.expected(2))
    assert handle.weights_cache.nbytes == 0


def test_bound_evicts_least_recently_used(handle, call, monkeypatch):
    """CONVSOLVE_WEIGHTS_CACHE_BYTES bounds the packed bytes: the least recently used go first,
    and packed weights larger than the bound are not cached (packed on each call)."""
    first, second = call.buffer(1), call.buffer(3)
    call(WINOGRAD, first, constant_weights=True)
    one = handle.weights_cache.nbytes
    monkeypatch.setenv("CONVSOLVE_WEIGHTS_CACHE_BYTES", str(one + one // 2))
    assert close(call(WINOGRAD, second, constant_weights=True), call.expected(3))
    assert len(handle.weights_cache) == 1 and handle.weights_cache.nbytes == one
    packs = handle.weights_cache.packs
    assert close(call(WINOGRAD, first, constant_weights=True), call.expected(1))   # evicted
    assert handle.weights_cache.packs == packs + 1
    monkeypatch.setenv("CONVSOLVE_WEIGHTS_CACHE_BYTES", str(one - 4))
    handle.weights_cache.clear()
    assert close(call(WINOGRAD, first, constant_weights=True), call.expected(1))
    write(handle, first, 2)
    assert close(call(WINOGRAD, first, constant_weights=True), call.expected(2))
    assert len(handle.weights_cache) == 0


def test_cache_never_outlives_the_context():
    """Handle.release frees the packed weights; a new handle (a new context) starts empty and
    packs from its own buffer."""
    x = np.random.default_rng(9).standard_normal(PROBLEM.x.shape).astype(np.float32)
    results = []
    for seed in (1, 2):
        handle = convsolve.Handle()
        xb, wb = (cl.Buffer(handle.context, MF.READ_ONLY | MF.COPY_HOST_PTR, hostbuf=a)
                  for a in (x, weights(seed)))
        yb = cl.Buffer(handle.context, MF.READ_WRITE, PROBLEM.y.nbytes)
        convsolve.run(handle, PROBLEM, WINOGRAD, x=xb, w=wb, y=yb, constant_weights=True)
        assert handle.weights_cache.packs == 1 and len(handle.weights_cache) == 1
        y = np.empty(PROBLEM.y.shape, np.float32)
        cl.enqueue_copy(handle.queue, y, yb)
        results.append(y)
        handle.release()
        assert handle.weights_cache.nbytes == 0 and len(handle.weights_cache) == 0
    for seed, y in zip((1, 2), results):
        assert close(y, reference.compute(PROBLEM, x, weights(seed), None))


@pytest.mark.parametrize(("field", "keywords"), [
    ("weights_version", {"constant_weights": True, "weights_version": "1"}),
    ("weights_version", {"constant_weights": True, "weights_version": 1.0}),
    ("weights_version", {"constant_weights": True, "weights_version": -1}),
    ("weights_version", {"constant_weights": True, "weights_version": True}),
    ("constant_weights", {"constant_weights": "yes"}),
    ("constant_weights", {"constant_weights": 1}),
])
def test_bad_values_are_refused(handle, call, field, keywords):
    """A version that is not an int >= 0 and a constant_weights that is not a bool are
    ValidationErrors naming the field, from run, plan.run and the numpy API."""
    with pytest.raises(ValidationError) as info:
        call(WINOGRAD, call.buffer(1), **keywords)
    assert info.value.field == field
    x = np.zeros(PROBLEM.x.shape, np.float32)
    with pytest.raises(ValidationError) as info:
        convsolve.conv2d(x, weights(1), padding=((1, 0), (2, 1)), solver=WINOGRAD,
                         handle=handle, **keywords)
    assert info.value.field == field


def test_backward_weights_refuses_constant_weights(handle):
    """Backward-weights writes w: constant_weights there is a ValidationError naming it, from
    run, plan and find, before anything reaches OpenCL."""
    problem = Problem.conv2d((1, 4, 7, 5), (6, 4, 3, 3), padding=1,
                             direction=Direction.BACKWARD_WEIGHTS)
    buffers = {name: cl.Buffer(handle.context, MF.READ_WRITE, getattr(problem, name).nbytes)
               for name in "xwy"}
    calls = [lambda: convsolve.run(handle, problem, WINOGRAD, **buffers, constant_weights=True),
             lambda: convsolve.plan(handle, problem, constant_weights=True),
             lambda: convsolve.find(handle, problem, **buffers, constant_weights=True)]
    for refused in calls:
        with pytest.raises(ValidationError) as info:
            refused()
        assert info.value.field == "constant_weights"
    check_keywords(problem, False, 3)   # without the promise, nothing to refuse


def test_find_ranks_constant_weights_under_its_own_key(handle, call):
    """find(constant_weights=True) records under the policy's key + '-cw', leaving the
    ordinary key's records alone; a plan with constant weights takes that ranking."""
    wb, x, y = call.buffer(1), random_x(handle), cl.Buffer(handle.context, MF.READ_WRITE,
                                                           PROBLEM.y.nbytes)
    ranked = convsolve.find(handle, PROBLEM, x=x, w=wb, y=y, mode="NORMAL",
                            constant_weights=True)
    db = FindDb()
    key = PROBLEM.key()
    assert db.records(handle.db_key, key) == []
    assert {r.solver for r in db.records(handle.db_key, key + DB_SUFFIX)} >= {
        s.solver for s in ranked}
    assert convsolve.plan(handle, PROBLEM, constant_weights=True).solver == ranked[0].solver
    assert handle.best_solver(key) is None


def test_numpy_api_caches_by_array(handle):
    """conv2d(..., constant_weights=True) packs once per array and version: the same array
    rewritten in place keeps its packed weights until the version moves; conv_transpose2d
    takes the keywords too."""
    x = np.random.default_rng(9).standard_normal(PROBLEM.x.shape).astype(np.float32)
    w = weights(1)
    pad = ((1, 0), (2, 1))
    handle.weights_cache.clear()
    y = convsolve.conv2d(x, w, padding=pad, solver=WINOGRAD, handle=handle,
                         constant_weights=True)
    assert close(y, reference.compute(PROBLEM, x, weights(1), None))
    w[...] = weights(2)
    stale = convsolve.conv2d(x, w, padding=pad, solver=WINOGRAD, handle=handle,
                             constant_weights=True)
    assert close(stale, y, 1e-7)
    fresh = convsolve.conv2d(x, w, padding=pad, solver=WINOGRAD, handle=handle,
                             constant_weights=True, weights_version=1)
    assert close(fresh, reference.compute(PROBLEM, x, weights(2), None))
    assert handle.weights_cache.packs == 2
    up = convsolve.conv_transpose2d(np.ascontiguousarray(y[:, :, :3, :3]), w, handle=handle,
                                    constant_weights=True)
    assert up.shape == (1, 4, 5, 5)


@pytest.fixture
def counted(monkeypatch):
    """Only fake_plugins/cs_packing's counting solver (and cs_naive's), its counters zeroed."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_packing")
    import cs_packing
    cs_packing.CALLS.clear()
    return cs_packing.CALLS


def test_find_times_the_packed_invoker_after_one_pack(handle, call, counted):
    """find(constant_weights=True) packs the weights once and times only runs from the packed
    weights (the cached cost); without the keyword it times the plain invoker and packs
    nothing."""
    x, y = random_x(handle), cl.Buffer(handle.context, MF.READ_WRITE, PROBLEM.y.nbytes)
    wb = call.buffer(1)
    ranked = convsolve.find(handle, PROBLEM, x=x, w=wb, y=y, mode="NORMAL",
                            constant_weights=True)
    assert "packing.Counted" in {s.solver for s in ranked}
    assert counted["pack"] == 1 and counted["packed"] >= 2 and counted["plain"] == 0
    counted.clear()
    convsolve.find(handle, PROBLEM, x=x, w=wb, y=y, mode="NORMAL")
    assert counted["pack"] == 0 and counted["packed"] == 0 and counted["plain"] >= 2


def test_a_failing_packing_runs_unpacked(handle, call, counted, monkeypatch):
    """A build_packing that raises is logged and the solver runs as without the keyword."""
    import cs_packing
    monkeypatch.setattr(cs_packing.Counted, "build_packing",
                        lambda self, problem, handle, config: 1 / 0)
    assert close(call("packing.Counted", call.buffer(1), constant_weights=True),
                 call.expected(1))
    assert counted["plain"] == 1 and len(handle.weights_cache) == 0
