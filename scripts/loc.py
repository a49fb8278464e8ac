#!/usr/bin/env python3
"""Line budget: code lines of the core and of each plugin, and of their largest modules.

Counts the lines of Python that are neither blank, comments nor docstrings, and the lines of
OpenCL (.cl, .h) that are neither blank nor comment-only.  Exits 1 when a package or a module is
over its budget (docs/architecture.md says why the budgets are what they are).

    python3 scripts/loc.py          # the table, then OK or what is over
"""
import ast
import io
import sys
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Budgets in code lines, set on 2026-12-01 from that day's counts (core 2,146 Python lines,
#: bench 682, gemm 348 + 660 OpenCL) with room for the families still to come; the core's was
#: raised from 2,600 to 3,200 the same day for the reliability layer (calls, parallel, verify,
#: worker, sampled reference: ~480 lines), then to 3,500 for MIOpenDriver's command line
#: (driver_args: ~150 lines) and room for the tuner, then to 5,000 for issue 11's tuning
#: machinery (tuning spaces and device classes, the shared SQLite store and the perf-db, search,
#: db export/import, `convsolve tune`: ~900 lines) and issue 18's crash and Oclgrind workers for
#: check_solver, then to 5,600 Python and 250 OpenCL for issue 16's epilogues (structure, fused and
#: unfused candidates, the shared epilogue header and pass, backward-bias, their driver flags and
#: check_solver cases: ~830 Python, ~160 OpenCL lines); the core's OpenCL to 275 when the
#: families' fused stores moved their store macros into convsolve_epilogue.h (CS_EPI_ARGS,
#: CS_EPI_VALUES, CS_EPI_STORE: +15 core lines, -65 plugin lines) and backward-bias became
#: bandwidth-bound (+20); to 280 when the split-sum kernel the gemm, implicit_gemm and direct
#: families each had became the core's one split_sum.cl (convsolve.SplitSum: +15 core lines,
#: -39 plugin lines).  Raising one is a decision a commit states and explains.
BUDGETS = {
    "core": {"python": 5600, "opencl": 280},
    "core/bench": {"python": 800, "opencl": 60},
}
PLUGIN_BUDGET = {"python": 1200, "opencl": 1500}   # each plugin
MODULE_BUDGET = 400


def python_lines(source):
    """Code lines of a Python source: not blank, not a comment, not part of a docstring."""
    tree = ast.parse(source)
    docstring_lines = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            docstring_lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
            code.update(range(token.start[0], token.end[0] + 1))
    return len(code - docstring_lines)


def opencl_lines(source):
    """Code lines of OpenCL C: not blank, not inside or made only of a comment."""
    count, in_comment = 0, False
    for line in source.splitlines():
        text, rest = "", line
        while rest:
            if in_comment:
                end = rest.find("*/")
                if end < 0:
                    rest = ""
                else:
                    in_comment, rest = False, rest[end + 2:]
            else:
                start = rest.find("/*")
                head = rest if start < 0 else rest[:start]
                text += head.split("//")[0]
                if start < 0 or "//" in head:
                    rest = ""
                else:
                    in_comment, rest = True, rest[start + 2:]
        count += bool(text.strip())
    return count


def package_dirs():
    """(label, folder, files to skip) for the core, its bench subpackage and each plugin."""
    yield "core", ROOT / "core", {"bench", "plugin_template"}
    yield "core/bench", ROOT / "core" / "bench", set()
    for plugin in sorted((ROOT / "plugins").iterdir()):
        if (plugin / "pyproject.toml").exists() and not plugin.name.startswith("_"):
            yield f"plugins/{plugin.name}", plugin, {"tests", "tools"}


def count(folder, skip):
    """({language: lines}, [(lines, module path)]) of the package sources under ``folder``."""
    totals, modules = {"python": 0, "opencl": 0}, []
    for path in sorted(folder.rglob("*")):
        parts = set(path.relative_to(folder).parts)
        if parts & skip or "__pycache__" in parts or not path.is_file():
            continue
        if path.suffix == ".py":
            lines = python_lines(path.read_text())
            totals["python"] += lines
            modules.append((lines, path.relative_to(ROOT)))
        elif path.suffix in (".cl", ".h"):
            totals["opencl"] += opencl_lines(path.read_text())
    return totals, modules


def main():
    over = []
    print(f"{'package':<24}{'python':>8}{'budget':>8}{'opencl':>8}{'budget':>8}  largest module")
    for label, folder, skip in package_dirs():
        totals, modules = count(folder, skip)
        budget = BUDGETS.get(label, PLUGIN_BUDGET)
        largest = max(modules, default=(0, "-"))
        print(f"{label:<24}{totals['python']:>8}{budget['python']:>8}{totals['opencl']:>8}"
              f"{budget['opencl']:>8}  {largest[1]} ({largest[0]})")
        over += [f"{label}: {totals[lang]} {lang} lines, budget {budget[lang]}"
                 for lang in totals if totals[lang] > budget[lang]]
        over += [f"{path}: {lines} lines, budget {MODULE_BUDGET} per module"
                 for lines, path in modules if lines > MODULE_BUDGET]
    print("\n".join(["over budget:", *over]) if over else "OK: every package within budget")
    return 1 if over else 0


if __name__ == "__main__":
    sys.exit(main())
