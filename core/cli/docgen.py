"""Markdown generated from the code: the solver contract (hookspecs.py) and the switches (env.py).

docs/hooks.md and docs/environment.md embed this output between two markers; tests keep them
equal to it, so the docstrings stay the one normative text.  ``python -m convsolve.cli.docgen DOCS``
rewrites the generated parts of both files in the folder DOCS.
"""
import inspect
import re
import sys
from pathlib import Path

from .. import env, hookspecs
from ..problem import Problem

_ROLE = re.compile(r":(?:class|func|meth|attr):`~?([^`]+)`")
_FIELD = re.compile(r"^:(param (\w+)|returns|raises [\w.]+):\s*(.*)$")


def _inline(text):
    """reST inline markup as Markdown: ``code`` and :role:`target` become `code`."""
    return _ROLE.sub(r"`\1`", text).replace("``", "`")


def docstring_markdown(doc):
    """A Sphinx-style docstring as Markdown: fields become a list, ``Example::`` a code block."""
    lines = inspect.cleandoc(doc).splitlines()
    out, i = [], 0
    while i < len(lines):
        line = lines[i]
        field = _FIELD.match(line)
        if field:
            label = field.group(2) or field.group(1)
            text = [field.group(3)]
            while i + 1 < len(lines) and lines[i + 1].startswith("  "):
                i += 1
                text.append(lines[i].strip())
            out.append(f"- **{label}**: {_inline(' '.join(text))}")
        elif line.endswith("::") and not line.startswith(".."):
            out += [_inline(line[:-2]).rstrip() + ":", "", "```python"]
            while i + 1 < len(lines) and (not lines[i + 1] or lines[i + 1].startswith("    ")):
                i += 1
                if lines[i] or out[-1] != "```python":
                    out.append(lines[i][4:])
            while out[-1] == "":
                out.pop()
            out += ["```", ""]
        elif line.startswith(".. versionadded::"):
            out.append(f"*Added in solver API {line.split('::')[1].strip()}.*")
        else:
            out.append(_inline(line))
        i += 1
    return "\n".join(out).replace("\n\n\n", "\n\n").strip() + "\n"


def signature(function, name=None):
    """``def name(arg: type, ...) -> type`` with the annotations as written (``self`` dropped)."""
    sig = inspect.signature(function)
    params = [f"{p.name}: {p.annotation}" if p.annotation is not p.empty else p.name
              for p in sig.parameters.values() if p.name != "self"]
    returns = "" if sig.return_annotation is sig.empty else f" -> {sig.return_annotation}"
    return f"def {name or function.__name__}({', '.join(params)}){returns}"


def _specs():
    return [(name, obj) for name, obj in vars(hookspecs).items()
            if inspect.isfunction(obj) and hasattr(obj, f"{hookspecs.PROJECT}_spec")]


#: Problem's dataclass fields, which have no docstrings of their own.
_PROBLEM_FIELDS = {
    "direction": "`Direction.FORWARD`, `BACKWARD_DATA` or `BACKWARD_WEIGHTS`; "
                 "`direction.output` names the tensor it writes ('y', 'x' or 'w')",
    "x": "`TensorDesc` of the input: `.shape` (N, C, spatial...: logical order), `.dtype`, "
         "`.layout` (NCHW, NHWC, ...), `.memory_shape`, `.strides` (element strides of N, C "
         "and each spatial dim), `.size`, `.nbytes`",
    "w": "`TensorDesc` of the weights, (K, C / groups, filter...)",
    "y": "`TensorDesc` of the output, (N, K, output sizes...)",
    "conv": "`ConvDesc`: `.pads` ((before, after) per spatial dim: 2-D ((top, bottom), (left, "
            "right))), `.strides`, `.dilations` (one per spatial dim), `.groups`",
}


def problem_markdown():
    """What a solver may read of a Problem: fields, derived sizes and methods, one row each."""
    rows = [(f"`problem.{name}`", meaning) for name, meaning in _PROBLEM_FIELDS.items()]
    for name, member in vars(Problem).items():
        if name.startswith("_") or name in _PROBLEM_FIELDS or isinstance(member, classmethod):
            continue
        doc = inspect.getdoc(member) or ""
        call = "()" if inspect.isfunction(member) else ""
        rows.append((f"`problem.{name}{call}`", _inline(doc.split("\n\n")[0].replace("\n", " "))))
    return "\n".join(["## Problem, for solver authors\n",
                      ("Everything `is_applicable` and the other hooks may read; decline what a "
                       "kernel does not handle (strides, pads, dilations, groups, dtype).\n"),
                      "| attribute | meaning |", "| --- | --- |",
                      *(f"| {name} | {meaning} |" for name, meaning in rows)]) + "\n"


def hooks_markdown():
    """The contract as Markdown: types, solver attributes, then one section per hook spec."""
    parts = [(f"Solver API version **{hookspecs.SOLVER_API_VERSION}** "
              "(`convsolve.SOLVER_API_VERSION`).\n"),
             "## Solver attributes\n",
             "| attribute | type | default | meaning |\n| --- | --- | --- | --- |"]
    for attr in hookspecs.SOLVER_ATTRIBUTES:
        default = "required" if attr.default is hookspecs.REQUIRED else f"`{attr.default!r}`"
        parts.append(f"| `{attr.name}` | {attr.type} | {default} | {_inline(attr.meaning)} |")
    parts[-1] += "\n"
    parts.append(problem_markdown())
    for cls in (hookspecs.Buffers, hookspecs.Invoker):
        parts.append(f"## {cls.__name__}\n")
        parts.append(docstring_markdown(cls.__doc__))
        if cls is hookspecs.Invoker:
            parts.append(f"```python\n{signature(cls.__call__, 'invoker')}\n```\n")
            parts.append(docstring_markdown(cls.__call__.__doc__))
    for name, spec in _specs():
        parts.append(f"## {name}\n")
        parts.append(f"```python\n{signature(spec)}\n```\n")
        parts.append(docstring_markdown(spec.__doc__))
    return "\n".join(parts)


def env_markdown():
    """Every variable of env.py as a Markdown table: the body of docs/environment.md."""
    lines = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for var in env.VARS.values():
        default = f"`{var.default}`" if var.default else "unset"
        lines.append(f"| `{var.name}` | {default} | {var.doc} |")
    return "\n".join(lines) + "\n"


_START, _END = "<!-- generated by", "<!-- end of generated part -->"


def splice(text, generated):
    """``text`` with the part between its generated-part markers replaced by ``generated``."""
    start = text.index("\n", text.index(_START)) + 1
    return text[:start] + generated + text[text.index(_END):]


def main(argv=None):
    docs = Path((argv or sys.argv[1:] or ["docs"])[0])
    for name, generated in (("hooks.md", hooks_markdown()), ("environment.md", env_markdown())):
        path = docs / name
        path.write_text(splice(path.read_text(), generated))
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
