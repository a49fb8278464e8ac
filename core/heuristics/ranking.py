"""Immediate mode's ranking: the learned model for the device, and solvers it has not seen.

A model is chosen along ``tuning.device_keys`` (exact device, architecture, vector width,
vendor, type), the user's own (``convsolve heuristics fit --install``) before the shipped one at
each key.  A file that does not load is reported once and skipped.  A solver the model does not
know (a third-party one, an epilogue's unfused variant) gets the time its WTI implies relative
to the solvers the model knows on the same problem: the median over known solvers s of
predicted(s) * WTI(s) / WTI(it), with s its own fused form where it is an unfused variant.
"""
import json
import logging
import statistics
from importlib import resources
from pathlib import Path

import platformdirs

from .. import env, tuning
from ..errors import ContractError, ModelError
from ..solvers.calls import wti_of
from .features import DeviceFacts
from .model import RankingModel

log = logging.getLogger("convsolve")

SHIPPED = resources.files("convsolve.heuristics") / "models"
_models: dict[str, tuple[RankingModel, DeviceFacts] | None] = {}   # device name -> model
_broken: set[str] = set()   # files already reported


def user_dir():
    """Where ``heuristics fit --install`` puts the user's models: in platformdirs' data dir."""
    return Path(platformdirs.user_data_dir("convsolve")) / "heuristics"


def _index(folder):
    try:
        return json.loads((folder / "index.json").read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        _report(str(folder / "index.json"), exc)
        return {}


def _report(path, exc):
    if path not in _broken:
        _broken.add(path)
        log.warning("heuristics: model %s not used (%s); ranking by WTI where no other applies",
                    path, exc)


def _load(path):
    try:
        return RankingModel.load(path)
    except (ModelError, OSError) as exc:
        _report(str(path), exc)
        return None


def model_for(device):
    """(model, device facts) for an OpenCL device, or None: CONVSOLVE_HEURISTICS=0, or no model
    along its keys loads.  Cached per device name (forget() drops the cache)."""
    setting = env.HEURISTICS.raw().strip()
    if setting == "0":
        return None
    name = device.name.strip() + "\0" + setting
    if name not in _models:
        found = _along_keys(device) if setting in ("", "1") else _load(Path(setting))
        _models[name] = (found, DeviceFacts.from_cl(device)) if found else None
    return _models[name]


def _along_keys(device):
    """The first model that loads along the device's keys, the user's before the shipped one
    at each; None when none does."""
    for key in tuning.device_keys(device):
        for folder in (user_dir(), SHIPPED):
            file = _index(folder).get(key)
            found = file and _load(folder / file)
            if found:
                return found
    return None


def forget():
    """Drop the cached models (after an install, or in tests)."""
    _models.clear()
    _broken.clear()


def predicted_ms(device, problem, solvers):
    """{solver name: predicted ms} for ``solvers`` (applicable, with .name) on ``problem``; {}
    when no model applies (models learn 2-D NCHW problems only).  Unseen solvers are placed
    by their WTI (module docstring)."""
    chosen = model_for(device) if problem.is_2d_nchw else None
    if chosen is None:
        return {}
    model, facts = chosen
    known = model.predict_ms(problem.with_epilogue(None), facts, [s.name for s in solvers])
    if all(s.name in known for s in solvers):   # no WTI needed (they cost on the hot path)
        return known
    wtis = {}
    for solver in solvers:
        try:
            wtis[solver.name] = wti_of(solver, problem)
        except ContractError:
            continue
    anchors = [(ms, wtis[n]) for n, ms in known.items() if wtis.get(n, -1) > 0]
    for solver in solvers:
        wti, base = wtis.get(solver.name, -1), solver.name.split("/")[0]
        if solver.name in known or wti <= 0 or not anchors:
            continue
        own = [(known[base], wtis[base])] if base in known and wtis.get(base, -1) > 0 else []
        known[solver.name] = statistics.median(ms * w / wti for ms, w in own or anchors)
    return known
