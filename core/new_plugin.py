"""`convsolve new-plugin`: stamp a new plugin from the copy-me template (plugins/_template)."""
import re
from importlib import resources
from pathlib import Path

from .errors import ValidationError

TEMPLATE = resources.files("convsolve") / "plugin_template"
PLACEHOLDER = "template"   # the template's plugin name; every occurrence becomes the new name
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]*$")
_SKIP = ("__pycache__", ".egg-info", ".pyc", ".pytest_cache")


def stamp(name, directory="."):
    """Copy the template to ``directory/name`` with the plugin renamed to ``name``; returns the path.

    ``name`` becomes the entry-point name, the solver-name prefix (``name.DirectFwd``), the
    package ``convsolve_<name>`` and the distribution ``convsolve-<name>``.
    """
    if not _NAME_RE.match(name or ""):
        raise ValidationError("plugin name", name, "use lowercase letters, digits and _, "
                                                   "starting with a letter")
    target = Path(directory) / name
    if target.exists():
        raise ValidationError("--dir", str(target), "already exists; choose another directory")
    root = Path(str(TEMPLATE))
    for source in sorted(root.rglob("*")):
        relative = source.relative_to(root)
        if source.is_dir() or any(part in str(relative) for part in _SKIP):
            continue
        destination = target / str(relative).replace(PLACEHOLDER, name)
        destination.parent.mkdir(parents=True, exist_ok=True)
        destination.write_text(source.read_text().replace(PLACEHOLDER, name))
    return target
