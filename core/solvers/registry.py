"""Plugin discovery and the solver registry: load, validate against the contract, enable or disable."""
import difflib
import importlib
import importlib.metadata
import inspect
import logging
import re
import threading
from dataclasses import dataclass, field

import pluggy
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import Version

from .. import env, hookspecs
from ..errors import PluginError, SolverError
from ..hookspecs import solver_attribute
from ..problem import ALL_LAYOUTS, SPATIAL_RANKS, Direction
from . import errata
from .policy import Policy

log = logging.getLogger("convsolve")

ENTRY_POINT_GROUP = "convsolve.solvers"
_NAME_RE = re.compile(r"^[A-Za-z_]\w*\.[A-Za-z_]\w*$")


@dataclass
class PluginInfo:
    """One plugin as discovery saw it: where it came from, and whether it loaded."""

    name: str                       # entry-point (or module) name
    module: str                     # the module it points at
    distribution: str = None        # the distribution that declares it, if any
    version: str = None
    error: str = None               # None when it loaded
    blocked_by: str = None          # the family switch that kept it from being imported
    solvers: list = field(default_factory=list)   # names of its solvers that passed validation
    solver_errors: dict = field(default_factory=dict)  # refused solver (or object) -> reason


#: Problems whose candidates a Registry keeps (then it forgets them all and starts again).
CANDIDATES_KEPT = 4096


class Registry:
    """The loaded plugins and their validated solvers, with enable/disable switches applied on use."""

    def __init__(self, manager, plugins, solvers):
        self.manager = manager
        self.plugins = plugins      # [PluginInfo]
        self.solvers = solvers      # {name: solver}, in load order
        # (problem, policy, device, env.generation()) -> (errata entries, applicable, skipped)
        self._candidates = {}

    def get(self, name):
        """The installed solver called ``name``, or a SolverError listing what is installed."""
        try:
            return self.solvers[name]
        except KeyError:
            refused = self.refusal(name)
            if refused:
                raise SolverError(f"solver {name!r} is installed but was refused at load "
                                  f"time: {refused}") from None
            blocked = "".join(f"; plugin {p.name!r} not loaded: {p.blocked_by}"
                              for p in self.plugins if p.blocked_by)
            raise SolverError(f"no solver {name!r} is installed; installed: "
                              f"{', '.join(self.solvers) or 'none'}{blocked}") from None

    def refusal(self, name):
        """Why discovery refused the solver called ``name``, or None."""
        return next((p.solver_errors[name] for p in self.plugins if name in p.solver_errors),
                    None)

    def refused(self):
        """Whether discovery refused any plugin or solver (a failed import included)."""
        return any(p.error or p.solver_errors for p in self.plugins)

    def enabled(self, name):
        """The solver called ``name`` if installed and on, else a SolverError saying why not."""
        solver = self.get(name)
        reason = env.disabled_by(solver.name, solver.family)
        if reason:
            raise SolverError(f"solver {name!r} is disabled by {reason}")
        return solver

    def enabled_solvers(self):
        """(solvers that are on, {name: switch} of those turned off)."""
        on, off = [], {}
        for solver in self.solvers.values():
            reason = env.disabled_by(solver.name, solver.family)
            if reason:
                off[solver.name] = reason
            else:
                on.append(solver)
        return on, off

    def candidates(self, problem, policy=None, device=None):
        """(solvers that are on, admitted by the numerical ``policy`` (None: the environment's),
        applicable to ``problem`` and excluded by no erratum (errata.py) on the device named
        ``device`` (None: entries for a device do not match), {solver name: why not} for the
        rest).  Kept per problem while no watched variable (env.generation) and no errata file
        changed (is_applicable is pure), so a find-db hit asks no solver again."""
        policy, entries = policy or Policy.resolve(), errata.active()
        key = (problem, policy, device, env.generation())
        kept = self._candidates.get(key)
        if kept is None or kept[0] is not entries:
            if len(self._candidates) >= CANDIDATES_KEPT:
                self._candidates.clear()
            kept = self._candidates[key] = (entries, *self._find_candidates(
                problem, policy, entries, device))
        return list(kept[1]), dict(kept[2])

    def _find_candidates(self, problem, policy, entries, device):
        on, skipped = self.enabled_solvers()
        skipped = {name: f"disabled by {switch}" for name, switch in skipped.items()}
        skipped.update({f"{p.name}.*": f"plugin not loaded: disabled by {p.blocked_by}"
                        for p in self.plugins if p.blocked_by})
        applicable = []
        for solver in on:
            refusal = policy.refusal(solver)
            if refusal:
                skipped[solver.name] = refusal
                continue
            if problem.direction not in solver.directions:
                skipped[solver.name] = f"does not serve {problem.direction.name}"
                continue
            refusal = shape_refusal(solver, problem)
            if refusal:
                skipped[solver.name] = refusal
                continue
            try:
                ok = bool(solver.is_applicable(problem))
            except Exception as exc:  # noqa: BLE001 - a faulty solver is only not applicable
                skipped[solver.name] = f"is_applicable raised {exc!r}"
                log.info("skip %r: %s", solver.name, skipped[solver.name])
                continue
            erratum = ok and errata.exclusion(entries, solver.name, problem, device)
            if erratum:
                skipped[solver.name] = erratum
            elif ok:
                applicable.append(solver)
            else:
                skipped[solver.name] = "not applicable"
        return applicable, skipped


def shape_refusal(solver, problem):
    """Why ``solver`` does not serve ``problem``'s spatial rank or layouts (its ``spatial_dims``
    and ``layouts`` attributes), or None; checked before ``is_applicable``."""
    ranks = solver_attribute(solver, "spatial_dims")
    if problem.spatial_dims not in ranks:
        return f"does not serve spatial rank {problem.spatial_dims} (spatial_dims={ranks})"
    layouts = solver_attribute(solver, "layouts")
    for name, layout in zip("xwy", problem.layouts):
        if layout not in layouts:
            return f"does not serve layout {layout} of {name} (layouts={layouts})"
    return None


# {{{ validation

def _check_attributes(solver):
    """Reasons the solver's plain attributes break the contract (empty when fine)."""
    problems = []
    name = getattr(solver, "name", None)
    if not isinstance(name, str) or not _NAME_RE.match(name):
        problems.append(f"name={name!r} is not of the form 'family.Name'")
    if not isinstance(getattr(solver, "family", None), str) or not solver.family:
        problems.append(f"family={getattr(solver, 'family', None)!r} is not a family name")
    directions = getattr(solver, "directions", None)
    if not directions or not all(isinstance(d, Direction) for d in directions):
        problems.append(f"directions={directions!r} is not a non-empty collection of Direction")
    if not isinstance(getattr(solver, "dynamic", None), bool):
        problems.append(f"dynamic={getattr(solver, 'dynamic', None)!r} is not a bool")
    if getattr(solver, "nonfinite", "exact") not in hookspecs.NONFINITE_MODES:
        problems.append(f"nonfinite={solver.nonfinite!r} is not one of "
                        f"{list(hookspecs.NONFINITE_MODES)}")
    for attribute, default in hookspecs.OPTIONAL_SOLVER_ATTRIBUTES.items():
        value = getattr(solver, attribute, default)
        if type(value) is not type(default) or (isinstance(value, float) and not value > 0):
            problems.append(f"{attribute}={value!r} is not a {type(default).__name__}"
                            + (" > 0" if isinstance(default, float) else ""))
    for attribute, known in (("spatial_dims", SPATIAL_RANKS), ("layouts", ALL_LAYOUTS)):
        value = getattr(solver, attribute, None)
        if isinstance(value, tuple) and not (value and set(value) <= set(known)):
            problems.append(f"{attribute}={value!r} is not a non-empty tuple of {known}")
    return problems


def _check_api_version(info, module):
    """Refuse a plugin whose CONVSOLVE_SOLVER_API does not admit this core's solver API."""
    declared = getattr(module, "CONVSOLVE_SOLVER_API", None)
    provided = hookspecs.SOLVER_API_VERSION
    if declared is None:
        raise PluginError(f"plugin {info.name!r} does not declare CONVSOLVE_SOLVER_API (the solver "
                          f"API versions it supports); this convsolve provides {provided}", info)
    try:
        supported = Version(provided) in SpecifierSet(str(declared))
    except InvalidSpecifier:
        raise PluginError(f"plugin {info.name!r}: CONVSOLVE_SOLVER_API={declared!r} is not a "
                          "version specifier such as '>=2.0,<3'", info) from None
    if not supported:
        raise PluginError(f"plugin {info.name!r} supports solver API {declared}; this convsolve "
                          f"provides {provided}", info)


class _PluginManager(pluggy.PluginManager):
    """pluggy's manager of the hook specifications, told that a dunder name is never a hook.
    pluggy looks up each of a plugin's names statically (no descriptor runs), and the dunders
    every object has were half of a solver's registration: 10 of a process's first 26 ms of find
    for 18 solvers (2-vCPU Intel Xeon, 2026-12-06; 5 ms now)."""

    def __init__(self):
        super().__init__(hookspecs.PROJECT)
        self.add_hookspecs(hookspecs)

    def parse_hookimpl_opts(self, plugin, name):
        return None if name.startswith("__") else super().parse_hookimpl_opts(plugin, name)


def contract_refusal(solver):
    """Why discovery would refuse ``solver`` (its plugin module's CONVSOLVE_SOLVER_API, its
    attributes, its hooks), in discovery's words, or None; for check_solver."""
    manager = _PluginManager()
    package = type(solver).__module__.split(".")[0]
    try:
        _check_api_version(PluginInfo(package, package), importlib.import_module(package))
        _register_solver(manager, solver)
    except PluginError as exc:
        return str(exc)
    return None


_HOOKS = [name for name in dir(hookspecs) if hasattr(getattr(hookspecs, name), "convsolve_spec")]


def _explain(error):
    """pluggy's refusal in the core's words: an unknown hook gets a "did you mean"."""
    unknown = re.match(r"unknown hook '(\w+)'", str(error))
    if not unknown:
        return str(error)
    guess = difflib.get_close_matches(unknown.group(1), _HOOKS, n=1)
    return (f"unknown hook {unknown.group(1)!r}"
            + (f" (did you mean {guess[0]!r}?)" if guess else f"; the hooks are {_HOOKS}"))


def _register_solver(manager, solver):
    """Register one solver with pluggy; raise PluginError when it breaks the contract."""
    problems = _check_attributes(solver)
    if problems:
        raise PluginError(f"solver {solver!r}: " + "; ".join(problems), solver)
    if manager.get_plugin(solver.name) is not None:
        raise PluginError(f"solver {solver.name!r} is provided twice", solver)
    try:
        manager.register(solver, name=solver.name)
        manager.check_pending()
    except pluggy.PluginValidationError as exc:
        if manager.is_registered(solver):   # pluggy < 1.7 leaves a refused plugin registered
            manager.unregister(solver)
        raise PluginError(f"solver {solver.name!r}: {_explain(exc)}", solver) from exc
    implemented = {caller.name for caller in manager.get_hookcallers(solver) or ()}
    missing = [hook for hook in hookspecs.REQUIRED_SOLVER_HOOKS if hook not in implemented]
    if missing:
        manager.unregister(solver)
        where = inspect.getsourcefile(type(solver)) or type(solver).__module__
        raise PluginError(f"solver {solver.name!r} ({type(solver).__qualname__} in {where}) "
                          f"does not implement {missing} as @hookimpl methods", solver)
    tuning = [hook for hook in hookspecs.TUNING_HOOKS[:2] if hook in implemented]
    if len(tuning) == 1:
        manager.unregister(solver)
        raise PluginError(f"solver {solver.name!r}: a tunable solver implements both "
                          f"config_space and default_config; this one only {tuning[0]}", solver)

# }}}


# {{{ discovery

def _sources():
    """(name, module path, distribution, version) of each plugin to load, in discovery order."""
    entry_points = {ep.name: ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP)}
    names = sorted(entry_points) if not env.flag(env.DISABLE_PLUGIN_AUTOLOAD) else []
    names += [name for name in env.names(env.PLUGINS) if name not in names]
    sources = []
    for name in dict.fromkeys(names):
        ep = entry_points.get(name)
        if ep is None:  # not an entry point: an importable module name
            sources.append((name, name, None, None))
        else:
            dist = getattr(ep, "dist", None)
            sources.append((name, ep.value, dist and dist.name, dist and dist.version))
    return sources


def _family_switch_off(plugin_name):
    """The family switch set to 0 that blocks a plugin named after its family, or None.

    Plugins of the built-in families are named after them (entry point ``gemm``), so a family
    that is off is never imported; a third-party solver of that family is still turned off by
    the same switch, through its ``family`` attribute.
    """
    switch = env.FAMILY_SWITCHES.get(plugin_name)
    if switch is not None and not env.flag(switch):
        return f"{switch.name}={switch.raw()}"
    return None


def _load_plugin(manager, info, strict):
    """Import one plugin, call its convsolve_solvers() and register each solver it returns."""
    try:
        module = importlib.import_module(info.module.split(":")[0])
        if ":" in info.module:
            for attr in info.module.split(":")[1].split("."):
                module = getattr(module, attr)
        _check_api_version(info, module)
        manager.register(module, name=f"plugin:{info.name}")
        manager.check_pending()
        impls = [impl for impl in manager.hook.convsolve_solvers.get_hookimpls()
                 if impl.plugin is module]
        if not impls:
            raise PluginError(f"plugin {info.name!r} ({info.module}) has no @hookimpl "
                              "convsolve_solvers()", module)
        solvers = [solver for impl in impls for solver in impl.function()]
    except Exception as exc:
        info.error = f"{type(exc).__name__}: {exc}"
        if strict:
            raise PluginError(f"plugin {info.name!r} failed to load: {info.error}", info) from exc
        log.error("skip plugin %r (%s): %s", info.name, info.module, info.error)
        return {}
    loaded = {}
    for solver in solvers:
        try:
            _register_solver(manager, solver)
        except PluginError as exc:
            info.solver_errors[getattr(solver, "name", repr(solver))] = str(exc)
            if strict:
                raise
            log.error("skip solver of plugin %r: %s", info.name, exc)
            continue
        loaded[solver.name] = solver
        info.solvers.append(solver.name)
    return loaded


def load():
    """Discover and validate plugins now, following the autoload and plugin-list switches."""
    manager = _PluginManager()
    strict = env.flag(env.STRICT_PLUGINS)
    plugins, solvers = [], {}
    for name, module, dist, version in _sources():
        info = PluginInfo(name, module, dist, version, blocked_by=_family_switch_off(name))
        plugins.append(info)
        if info.blocked_by:
            log.info("plugin %r not imported: %s", name, info.blocked_by)
            continue
        solvers.update(_load_plugin(manager, info, strict))
    log.debug("loaded %d solvers from %d plugins", len(solvers), len(plugins))
    return Registry(manager, plugins, solvers)


#: [(env.generation(), the loading switches' values, the Registry)] of the last answer; None
#: after reset().  A generation unchanged since answers at once (0.5 us).
_kept = [None]
_lock = threading.Lock()
_generation = [0]   # bumped by reset(), so caches of resolved solvers notice a reload


def generation():
    """A number that changes whenever reset() makes the registry reload."""
    return _generation[0]


def reset():
    """Forget the loaded Registry, so the next registry() discovers plugins again."""
    with _lock:
        _kept[0] = None
        _generation[0] += 1


def registry():
    """The process's Registry, loaded on first use and again when a loading switch changes.

    Plugins installed while the process runs are seen after reset().
    """
    seen, kept = env.generation(), _kept[0]   # the switches are among the watched variables
    if kept is not None and kept[0] == seen:
        return kept[2]
    state = (env.DISABLE_PLUGIN_AUTOLOAD.raw(), env.PLUGINS.raw(), env.STRICT_PLUGINS.raw(),
             *(switch.raw() for switch in env.FAMILY_SWITCHES.values()))
    with _lock:
        kept = _kept[0]
        loaded = kept[2] if kept is not None and kept[1] == state else load()
        _kept[0] = seen, state, loaded
        return loaded

# }}}
