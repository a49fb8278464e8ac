"""Epilogues (issue 16): the structure and its key, the float64 reference, batch-norm folding, the
shipped solvers without the fused_stages hook with every structure and its edge values, and
every shipped solver with every activation (check_solver checks the fused solvers' structures)."""
import math

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import Activation, Direction, Epilogue, Problem, ValidationError, reference
from convsolve.engine.fusion import candidates
from convsolve.epilogue import ACTIVATIONS, STAGES, activation_mode, fold_batch_norm
from convsolve.solvers import registry as plugins
from convsolve.testing import random_tensors, read_output
from convsolve.testing.epilogue_cases import CASES

FORWARD = [Problem.conv2d((2, 4, 6, 5), (6, 4, 3, 3), padding=1),
           Problem.conv2d((2, 8, 5, 4), (6, 8, 1, 1)),
           Problem.conv2d((4, 4, 5, 5), (6, 2, 3, 3), padding=((1, 0), (0, 1)), groups=2)]
#: An image large enough for several tiles of fft.TiledFft, which takes none of FORWARD.
WIDE = Problem.conv2d((1, 3, 14, 11), (4, 3, 3, 3), padding=((1, 2), (0, 1)))
BACKWARD = [p.with_direction(d) for p in (*FORWARD[:2], WIDE) for d in ("bwd", "wrw")]
#: The solvers whose kernels cover every type the epilogue header's code is instantiated with:
#: scalars (direct.NaiveFwd, as implicit GEMM, col2im and the sums store), direct's pixel
#: vectors (direct.Tiled, as direct.Depthwise), Winograd's runs of tiles (F2x3, as F4x3 and
#: F6x3), the GEMM's column vectors (Im2ColGemm, as Gemm1x1) and the core's pass (fft.Fft2d,
#: which has no fused_stages hook).  Every fused solver meets the structures' edge cases in
#: check_solver; the activations are one header's code whichever solver stores them.
ACTIVATION_SOLVERS = ["direct.NaiveFwd", "direct.Tiled", "winograd.F2x3", "gemm.Im2ColGemm",
                      "fft.Fft2d"]
#: 37 output columns: two whole 16-lane vectors and a part; F2x3's 19 tiles a row: a whole run
#: of 16 and a part.
ACTIVATION_PROBLEM = Problem.conv2d((1, 3, 4, 37), (5, 3, 3, 3), padding=1)
#: Every activation at the limits of its parameters (and once inside them).
ACTIVATION_CASES = [(f"{mode} {params}", Epilogue(bias=True, activation=mode),
                     {"activation": (mode, *params), "alpha": -0.5}, "")
                    for mode, params in [("identity", ()), ("logistic", ()), ("tanh", (0.0, 2.0)),
                                         ("tanh", (1.5, -1.0)), ("relu", ()), ("softrelu", ()),
                                         ("abs", ()), ("power", (0.0, 0.0, 2.0)),
                                         ("power", (1.0, 0.5, 2.0)), ("clipped_relu", (0.0,)),
                                         ("clipped_relu", (0.5,)), ("leaky_relu", (0.0,)),
                                         ("leaky_relu", (-0.25,)), ("elu", (0.0,)),
                                         ("elu", (2.0,))]]


# {{{ the structure, its key and its checks

def test_key_unchanged_without_epilogue_and_round_trips_with_one():
    """Problem.key() is as before without an epilogue; with one it gains '-epi...' and
    Problem.from_key gives the same problem back."""
    bare = Problem.conv2d((8, 64, 56, 56), (64, 64, 3, 3), padding=1)
    assert bare.key() == "fwd-n8-c64-h56-w56-k64-y3-x3-p1.1-q1.1-u1-v1-l1-j1-g1-float32-NCHW"
    assert bare.epilogue is None and bare.with_epilogue(None) == bare
    for structure in [Epilogue(), Epilogue(True, True, True, "leaky_relu", True),
                      Epilogue(bias=True, activation="relu")]:
        problem = bare.with_epilogue(structure)
        assert problem.key().startswith(bare.key() + "-epi") and problem != bare
        assert Problem.from_key(problem.key()) == problem
        assert hash(Problem.from_key(problem.key())) == hash(problem)
    assert bare.with_epilogue(Epilogue(bias=True, activation="relu")).key().endswith(
        "-NCHW-epi.bias.relu")
    assert Problem.conv2d((1, 1, 1, 1), (1, 1, 1, 1), epilogue=Epilogue()).epilogue == Epilogue()


def test_stages_prefix_and_defines():
    """stages lists the present parts in STAGES order; prefix keeps the first n; defines says
    the first stage the core's pass applies after a solver fused some."""
    full = Epilogue(True, True, True, "elu", True)
    assert full.stages == STAGES
    assert Epilogue(bias=True, blend=True).stages == ("alpha", "bias", "blend")
    assert full.prefix(3) == Epilogue(scale=True, bias=True)
    assert full.defines(4)["CS_EPI_FIRST"] == STAGES.index("activation")
    assert Epilogue(bias=True, blend=True).defines(2)["CS_EPI_FIRST"] == STAGES.index("blend")
    assert full.defines()["CS_EPI_ACT"] == ACTIVATIONS["elu"][0] == 9


def test_backward_directions_take_alpha_and_blend_only():
    """A backward problem's epilogue may blend (and scale by alpha), nothing else."""
    problem = FORWARD[0].with_direction("bwd")
    assert problem.with_epilogue(Epilogue(blend=True)).key().endswith("-epi.blend")
    with pytest.raises(ValidationError, match="invalid epilogue='epi.bias'.*alpha and blend"):
        problem.with_epilogue(Epilogue(bias=True))
    with pytest.raises(ValidationError, match="epilogue.bias"):
        Epilogue(bias=1)
    with pytest.raises(ValidationError, match="activation='swish'"):
        Epilogue(activation="swish")
    with pytest.raises(ValidationError, match="epilogue key"):
        Problem.from_key(FORWARD[0].key() + "-epi.relu.bias")   # parts out of order


def test_activation_names_and_defaults_are_miopens():
    """MIOpen's names and mode numbers name the same activations; unset parameters take the
    mode's defaults; a NaN parameter is refused."""
    assert Activation("LEAKYRELU") == Activation("leaky_relu") == Activation(8)
    assert Activation("CLIPPEDRELU").a == 6.0 and Activation("PASTHRU").mode == "identity"
    assert Activation.parse(("power", 1.0, 2.0)) == Activation("power", 1.0, 2.0, 1.0)
    assert Activation.parse(None, "elu").a == 1.0
    with pytest.raises(ValidationError, match="has 'relu'"):
        Activation.parse("elu", "relu")
    with pytest.raises(ValidationError, match="activation.a"):
        Activation("elu", math.nan)


@pytest.mark.parametrize("value", [-1, -2, "-1", "-9", "10", "+1", "_3", True, 3.0])
def test_mode_numbers_are_matched_whole(value):
    """A mode number is 0 to 9 as written: -1 and -2 are no modes (they ran logistic and tanh,
    by a minus sign read as an underscore and dropped)."""
    with pytest.raises(ValidationError, match="mode number 0 to 9"):
        activation_mode(value)
    assert activation_mode(" 8 ") == activation_mode(np.int64(8)) == "leaky_relu"


@pytest.mark.parametrize("value", [(), ("tanh", 1, 2, 3, 4), ["relu", 0, 0, 0, 0, 0]])
def test_activation_tuples_hold_a_name_and_up_to_3_parameters(value):
    """A tuple of no items or over 4 is a ValidationError naming it (it was a raw TypeError,
    or () silently identity)."""
    with pytest.raises(ValidationError, match=r"expected \(name, a\[, b\[, g\]\]\)"):
        Activation.parse(value)

# }}}


# {{{ the reference

def test_reference_activations_at_their_edges():
    """The float64 activations: relu(-inf) = 0 (no 0 * inf), NaN propagates through every
    mode, leaky relu with a = 0 is relu, power of a zero base is 0 (MIOpen's rule)."""
    v = np.array([-np.inf, -2.0, -0.0, 0.5, np.inf, np.nan])
    assert np.array_equal(reference.activate("relu", v), [0, 0, 0, 0.5, np.inf, np.nan],
                          equal_nan=True)
    assert np.array_equal(reference.activate(("leaky_relu", 0.0), v),
                          reference.activate("relu", v), equal_nan=True)
    assert reference.activate(("leaky_relu", 0.5), v)[1] == -1.0
    assert np.array_equal(reference.activate(("clipped_relu", 1.0), v),
                          [0, 0, 0, 0.5, 1, np.nan], equal_nan=True)
    assert np.array_equal(reference.activate(("power", 1.0, 1.0, 2.0), v)[1:4], [1, 1, 2.25])
    assert reference.activate(("elu", 2.0), v)[0] == -2.0
    assert reference.activate("logistic", v)[0] == 0 and reference.activate("softrelu", v)[4] \
        == np.inf
    for mode in ACTIVATIONS:
        assert np.isnan(reference.activate(mode, v)[-1]), mode


def test_reference_leaves_zero_coefficients_operands_unread():
    """alpha = 0: a NaN convolution does not show; beta = 0: a NaN prior does not; z_scale = 0:
    nor a NaN z."""
    problem = FORWARD[1].with_epilogue(Epilogue(residual=True, blend=True))
    nan = np.full(problem.y.shape, np.nan)
    out = reference.epilogue(problem, nan, nan, alpha=0.0, beta=0.0, z_scale=0.0, z=nan)
    assert np.array_equal(out, np.zeros(problem.y.shape))


def test_fold_batch_norm_is_batch_norm_in_float64():
    """conv * scale + bias equals inference batch-norm of conv + bias (float64 on the host)."""
    rng = np.random.default_rng(3)
    gamma, beta, mean = (rng.standard_normal(6) for _ in range(3))
    var, bias = rng.uniform(0.1, 2, 6), rng.standard_normal(6)
    scale, shift = fold_batch_norm(gamma, beta, mean, var, 1e-3, bias)
    assert scale.dtype == shift.dtype == np.float32
    conv = rng.standard_normal((2, 6, 3, 3))
    expected = (gamma[:, None, None] * (conv + bias[:, None, None] - mean[:, None, None])
                / np.sqrt(var[:, None, None] + 1e-3) + beta[:, None, None])
    got = conv * scale[:, None, None].astype(np.float64) + shift[:, None, None]
    assert np.abs(got - expected).max() < 1e-5
    with pytest.raises(ValidationError, match="var \\+ eps"):
        fold_batch_norm(gamma, beta, mean, -var, 1e-3)
    with pytest.raises(ValidationError, match="batch-norm shapes"):
        fold_batch_norm(gamma, beta[:3], mean, var)

# }}}


# {{{ every shipped solver, every structure

@pytest.fixture
def shipped(monkeypatch):
    """Every installed solver (autoload on), not only the naive ones of the core's tests."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "0")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "")
    plugins.reset()


def _case_inputs(problem, values, how, seed=5):
    """Host tensors (the output's holding its prior contents) and the epilogue's arrays."""
    host = random_tensors(problem, seed)
    out, rng = problem.direction.output, np.random.default_rng(seed)
    if "inf" in how:
        host["w"].flat[0] = np.inf
    if "nan-x" in how:
        host[next(n for n in "xwy" if n != out)].flat[-1] = np.nan
    if "nan-y" in how:
        host[out][...] = np.nan
    channels = getattr(problem, out).shape[1]
    arrays = {"scale": rng.uniform(-2, 2, channels).astype(np.float32),
              "bias": rng.uniform(-1, 1, channels).astype(np.float32),
              "z": host[out] if "alias" in how else rng.uniform(-1, 1, host[out].shape).astype(
                  np.float32)}
    return host, arrays


def _run(handle, problem, name, host, arrays, values, how):
    """``problem``'s output by solver (or candidate) ``name`` through convsolve.run."""
    out, flags = problem.direction.output, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR
    buffers = {n: cl.Buffer(handle.context, flags, hostbuf=a) for n, a in host.items()}
    structure, parts = problem.epilogue, {}
    for part, present in (("scale", structure and structure.scale),
                          ("bias", structure and structure.bias),
                          ("z", structure and structure.residual)):
        if present:
            parts[part] = buffers[out] if part == "z" and "alias" in how else cl.Buffer(
                handle.context, flags, hostbuf=arrays[part])
    convsolve.run(handle, problem, name, **buffers, **parts, **(values if structure else {}))
    return read_output(handle, problem, buffers)


def _run_candidates(handle, problem, case, solver_names):
    """{candidate name: why it is wrong} for every candidate of ``problem`` with ``case`` whose
    solver is one of ``solver_names``, run through convsolve.run on fresh buffers: its finite
    values within its solver's tolerance of the float64 reference, its NaN and inf exactly where
    the reference's epilogue of the solver's own bare output has them (the bare convolution's
    non-finite values are check_solver's business)."""
    _, structure, values, how = case
    problem = problem.with_epilogue(structure)
    host, arrays = _case_inputs(problem, values, how)
    prior = host[problem.direction.output]
    with np.errstate(all="ignore"):
        expected = reference.compute(problem, *(host[n] for n in "xwy"), **arrays, **values)
    wrong, bare = {}, {}
    names = [c.name for c in candidates(problem)[0] if c.solver.name in solver_names]
    assert names, problem.key()
    for name in names:
        solver = plugins.registry().get(name.split("/")[0])
        if solver.name not in bare:
            bare[solver.name] = _run(handle, problem.with_epilogue(None), solver.name, host,
                                     arrays, values, how)
        got = _run(handle, problem, name, host, arrays, values, how)
        with np.errstate(all="ignore"):
            own = reference.epilogue(problem, bare[solver.name], prior, **arrays, **values)
        why = reference.mismatch(got, np.where(np.isfinite(own), expected, own),
                                 plugins.solver_attribute(solver, "tolerance"))
        if why:
            wrong[name] = why
    return wrong


def _without_the_hook():
    """The shipped solvers whose every epilogue is the core's pass (no fused_stages hook):
    check_solver checks the others' epilogues."""
    return {name for name, solver in plugins.registry().solvers.items()
            if not callable(getattr(solver, "fused_stages", None))}


@pytest.mark.parametrize("case", CASES[Direction.FORWARD], ids=lambda case: case[0])
def test_forward_solvers_without_the_hook_with_every_structure(handle, shipped, case):
    """Every shipped forward solver without the hook, its output through the core's pass,
    matches the float64 reference with each structure and its edge values (alpha 0 and
    negative, beta 0 over a NaN-filled y, z being y, activation parameters at their limits,
    infinities)."""
    names, checked = _without_the_hook(), 0
    for problem in (*FORWARD, WIDE):
        if any(plugins.registry().get(n).is_applicable(problem) for n in names):
            assert _run_candidates(handle, problem, case, names) == {}, problem.key()
            checked += 1
    assert checked, f"no forward problem for the solvers without the hook, {sorted(names)}"


@pytest.mark.parametrize("case", CASES["backward"], ids=lambda case: case[0])
def test_backward_solvers_without_the_hook_with_alpha_and_beta(handle, shipped, case):
    """dx = alpha * conv_bwd + beta * dx_prior and dw likewise, for every shipped solver
    without the hook."""
    names, checked = _without_the_hook(), 0
    for problem in BACKWARD:
        if any(plugins.registry().get(n).is_applicable(problem) for n in names):
            assert _run_candidates(handle, problem, case, names) == {}, problem.key()
            checked += 1
    assert checked, f"no backward problem for the solvers without the hook, {sorted(names)}"


@pytest.mark.parametrize("case", ACTIVATION_CASES, ids=lambda case: case[0])
def test_each_way_of_storing_with_every_activation(handle, shipped, case):
    """Each activation at the limits of its parameters, through each way a kernel instantiates
    the header's code (ACTIVATION_SOLVERS), fused and unfused, on a problem wide enough for
    whole vectors and a partial one in every row."""
    for name in ACTIVATION_SOLVERS:
        assert _run_candidates(handle, ACTIVATION_PROBLEM, case, {name}) == {}, name

# }}}
