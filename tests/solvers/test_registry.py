"""Discovery through entry points, isolation of broken plugins, the contract checks, and the switches."""
import sys
import textwrap

import convsolve
import pytest
from convsolve import PluginError, Problem, SolverError, env, hookspecs

PROBLEM = Problem.conv2d((1, 2, 6, 5), (3, 2, 3, 3), padding=1)


def make_distribution(root, package="acme_solvers", entry_point="acme", body=None):
    """Write a real installed distribution (package + .dist-info with entry_points.txt) under root."""
    sys.modules.pop(package, None)
    (root / package).mkdir()
    (root / package / "__init__.py").write_text(body or textwrap.dedent('''
        from convsolve import Direction, hookimpl
        import cs_fake

        CONVSOLVE_SOLVER_API = ">=2.0,<3"

        class TiledDirect(cs_fake.FakeSolver):
            name = "acme.TiledDirect"
            family = "direct"
            dynamic = True
            wti = 0.9

        @hookimpl
        def convsolve_solvers():
            return [TiledDirect()]
    '''))
    info = root / f"{package}-1.2.3.dist-info"
    info.mkdir()
    info.joinpath("METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: 1.2.3\n")
    info.joinpath("entry_points.txt").write_text(
        f"[convsolve.solvers]\n{entry_point} = {package}\n")


def test_entry_point_plugin_is_discovered_and_used(tmp_path, monkeypatch, handle):
    """A distribution on sys.path registering convsolve.solvers is loaded, listed and used by find."""
    make_distribution(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "0")
    reg = convsolve.registry()
    info = next(p for p in reg.plugins if p.name == "acme")
    assert (info.distribution, info.version, info.error) == ("acme_solvers", "1.2.3", None)
    assert "acme.TiledDirect" in reg.solvers and "direct.NaiveFwd" in reg.solvers
    assert "acme.TiledDirect" in convsolve.applicable_solvers(PROBLEM)


def test_broken_plugins_are_isolated(monkeypatch):
    """A plugin that fails to import or whose hook raises is skipped; the others still load."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_broken_import,cs_raising_hook,cs_fake")
    reg = convsolve.registry()
    errors = {p.name: p.error for p in reg.plugins}
    assert "planted import failure" in errors["cs_broken_import"]
    assert "planted hook failure" in errors["cs_raising_hook"]
    assert errors["cs_fake"] is None and errors["cs_naive"] is None
    assert "fake.Good" in reg.solvers and "direct.NaiveFwd" in reg.solvers


def test_strict_plugins_makes_a_broken_plugin_fatal(monkeypatch):
    """CONVSOLVE_STRICT_PLUGINS=1 turns a skipped plugin into a PluginError."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_broken_import")
    monkeypatch.setenv("CONVSOLVE_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError, match="cs_broken_import"):
        convsolve.registry()


def test_contract_violations_are_refused_loudly(monkeypatch, caplog):
    """Misspelt hooks, wrong argument names, missing hooks and bad names are refused with reasons."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_contract")
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    reg = convsolve.registry()
    assert list(reg.solvers) == ["contract.Valid"]
    refused = next(p for p in reg.plugins if p.name == "cs_contract").solver_errors
    assert refused["contract.Misspelt"] == ("solver 'contract.Misspelt': unknown hook "
                                            "'is_aplicable' (did you mean 'is_applicable'?)")
    assert "prob" in refused["contract.WrongArgument"]
    assert "build_invoker" in refused["contract.MissingHook"]
    assert "family.Name" in refused["NoFamilyPrefix"]
    assert "contract.Misspelt" in caplog.text
    with pytest.raises(SolverError, match="installed but was refused at load time: .*did you mean"):
        reg.get("contract.Misspelt")
    assert reg.refused()


def test_bad_spatial_dims_and_layouts_are_refused(monkeypatch):
    """spatial_dims must be a non-empty tuple of 1, 2, 3 and layouts one of known layout
    names; discovery refuses a solver that says otherwise, naming the attribute."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_contract")
    refused = next(p for p in convsolve.registry().plugins
                   if p.name == "cs_contract").solver_errors
    assert "spatial_dims=(2, 4) is not a non-empty tuple of (1, 2, 3)" in refused[
        "contract.UnknownRank"]
    assert "layouts=('NCHW', 'CHWN')" in refused["contract.UnknownLayout"]
    assert "spatial_dims=[1, 2] is not a tuple" in refused["contract.RanksInAList"]


def test_solvers_see_only_the_ranks_and_layouts_they_declare(monkeypatch):
    """A solver without spatial_dims and layouts is never asked about a 1-D, 3-D or
    channels-last problem: the registry skips it first, naming the attribute (as it names a
    direction it does not serve); the naive solvers declare every rank and layout."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    registry = convsolve.registry()
    three = Problem.conv3d((1, 2, 4, 4, 4), (3, 2, 3, 3, 3))
    nhwc = Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3), layout={"w": "NHWC"})
    for problem, why in ((three, "does not serve spatial rank 3 (spatial_dims=(2,))"),
                         (nhwc, ("does not serve layout NHWC of w (layouts=('NCW', 'NCHW', "
                                 "'NCDHW'))"))):
        applicable, skipped = registry.candidates(problem)
        assert [s.name for s in applicable] == ["direct.NaiveFwd"]
        assert skipped["fake.Good"] == why
    assert "fake.Good" in [s.name for s in registry.candidates(PROBLEM)[0]]


def test_autoload_off_loads_only_named_plugins(monkeypatch):
    """With autoload off only CONVSOLVE_PLUGINS are loaded; with none named, no solver exists."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.delenv("CONVSOLVE_PLUGINS")
    assert convsolve.registry().solvers == {}
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "direct")
    reg = convsolve.registry()
    assert [p.name for p in reg.plugins] == ["direct"]
    assert reg.plugins[0].distribution == "convsolve-direct"


def test_family_switch_keeps_the_plugin_unimported(monkeypatch):
    """CONVSOLVE_DEBUG_CONV_DIRECT=0: the direct plugin is never imported, and says why."""
    for module in [m for m in sys.modules if m.startswith("convsolve_direct")]:
        monkeypatch.delitem(sys.modules, module)
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "0")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "direct")
    reg = convsolve.registry()
    assert "convsolve_direct" not in sys.modules and reg.solvers == {}
    assert reg.plugins[0].blocked_by == "CONVSOLVE_DEBUG_CONV_DIRECT=0"
    with pytest.raises(SolverError, match="plugin 'direct' not loaded: CONVSOLVE_DEBUG_CONV_DIRECT=0"):
        reg.enabled("direct.NaiveFwd")


@pytest.mark.parametrize("variable, value, off", [
    ("CONVSOLVE_DEBUG_CONV_DIRECT", "0", {"contract.Valid", "direct.NaiveFwd",
                                          "direct.NaiveBwdData", "direct.NaiveBwdWeights"}),
    ("CONVSOLVE_DISABLE_SOLVERS", "direct.NaiveBwd*", {"direct.NaiveBwdData",
                                                       "direct.NaiveBwdWeights"}),
    ("CONVSOLVE_DISABLE_SOLVERS", " direct.NaiveFwd , other.X", {"direct.NaiveFwd"}),
])
def test_switches_turn_solvers_off_and_say_which(monkeypatch, variable, value, off):
    """Family and per-solver switches turn exactly the matching solvers off, naming the switch."""
    monkeypatch.setattr("cs_contract.Base.family", "direct", raising=False)
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_contract")
    monkeypatch.setenv(variable, value)
    _, disabled = convsolve.registry().enabled_solvers()
    assert set(disabled) == off
    assert all(variable in why for why in disabled.values())
    with pytest.raises(SolverError, match=variable):
        convsolve.registry().enabled(min(off))


def test_bad_switch_value_is_an_error(monkeypatch):
    """A switch with a value that is not 0/1 is reported, naming the variable."""
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_GEMM", "maybe")
    with pytest.raises(convsolve.ValidationError, match="CONVSOLVE_DEBUG_CONV_GEMM"):
        env.disabled_by("gemm.X", "gemm")


@pytest.mark.parametrize("declaration, message", [
    ('CONVSOLVE_SOLVER_API = ">=3.0"',
     f"supports solver API >=3.0; this convsolve provides {hookspecs.SOLVER_API_VERSION}"),
    ("", "does not declare CONVSOLVE_SOLVER_API"),
    ('CONVSOLVE_SOLVER_API = "one"', "is not a version specifier"),
])
def test_incompatible_solver_api_is_refused(tmp_path, monkeypatch, declaration, message):
    """A plugin whose declared solver-API range excludes this core is refused, naming both."""
    make_distribution(tmp_path, body=f"from convsolve import hookimpl\n{declaration}\n"
                                     "@hookimpl\ndef convsolve_solvers():\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD", "0")
    info = next(p for p in convsolve.registry().plugins if p.name == "acme")
    assert message in info.error


def test_reduced_precision_needs_permission(monkeypatch):
    """A solver declaring reduced_precision is skipped by the numerical policy unless allowed."""
    import cs_fake
    monkeypatch.setattr(cs_fake.Good, "reduced_precision", True, raising=False)
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_fake")
    _, skipped = convsolve.registry().candidates(PROBLEM)
    assert "numerical policy" in skipped["fake.Good"]
    monkeypatch.setenv("CONVSOLVE_ALLOW_REDUCED_PRECISION", "1")
    assert "fake.Good" in convsolve.applicable_solvers(PROBLEM)


def test_registry_is_kept_until_a_loading_switch_changes(monkeypatch):
    """registry() answers the same Registry while no watched variable moves, and loads again
    (without the family) as soon as a family switch is set, even right after an answer."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "direct")
    first = convsolve.registry()
    assert convsolve.registry() is first and "direct.NaiveFwd" in first.solvers
    monkeypatch.setenv("CONVSOLVE_DEBUG_CONV_DIRECT", "0")
    assert convsolve.registry().solvers == {}
    monkeypatch.delenv("CONVSOLVE_DEBUG_CONV_DIRECT")
    assert "direct.NaiveFwd" in convsolve.registry().solvers
