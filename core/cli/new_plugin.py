"""`convsolve new-plugin`: stamp a new plugin from the copy-me template (plugins/_template)."""
import re
from importlib import resources
from pathlib import Path

from ..errors import ValidationError

TEMPLATE = resources.files("convsolve") / "plugin_template"
PLACEHOLDER = "template"   # the template's plugin name; every occurrence becomes the new name
PACKAGE = "convsolve_template"   # the template's package, renamed first when --package is given
FAMILY = 'family = "direct"'     # the template solver's family attribute
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SKIP = ("__pycache__", ".egg-info", ".pyc", ".pytest_cache")


def stamp(name, directory=".", package=None, family=None):
    """Copy the template to ``directory/name`` with the plugin renamed to ``name``; returns the path.

    ``name`` becomes the entry-point name, the solver-name prefix (``name.DirectFwd``) and the
    distribution ``convsolve-<name>``; the package is ``package`` (default ``convsolve_<name>``)
    and the solver's family ``family`` (default ``direct``, the template's).
    """
    for field, value in (("plugin name", name), ("--package", package), ("--family", family)):
        if (value is not None or field == "plugin name") and not _NAME_RE.match(value or ""):
            raise ValidationError(field, value, "use lowercase letters, digits and _, "
                                                "starting with a letter")
    renames = [(PACKAGE, package or f"convsolve_{name}"), (PLACEHOLDER, name)]
    if family:
        renames.insert(0, (FAMILY, f'family = "{family}"'))
    target = Path(directory) / name
    if target.exists():
        raise ValidationError("--dir", str(target), "already exists; choose another directory")
    root = Path(str(TEMPLATE))
    for source in sorted(root.rglob("*")):
        relative = source.relative_to(root)
        if source.is_dir() or any(part in str(relative) for part in _SKIP):
            continue
        path, text = str(relative), source.read_text()
        for old, new in renames:
            path, text = path.replace(old, new), text.replace(old, new)
        destination = target / path
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(text)
    return target
