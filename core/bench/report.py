"""Rendering `convsolve bench` reports: text or Markdown tables, and the per-layer GFLOP/s plot."""
import numpy as np

from ..errors import ConvsolveError, ValidationError
from ..problem import Direction, Problem
from ..text import table

_LEFT = ("layer", "shape", "solver", "dir")


def gflops(flops, time_ms):
    """GFLOP/s of ``flops`` done in ``time_ms`` (None when there is no time)."""
    return flops / (time_ms * 1e6) if time_ms else None


def network_total(rows, peak_gflops=None):
    """Totals over ``rows`` weighting each layer by its count; ratio = torch time / our time."""
    def weighted(field):
        if any(row.get(field) is None for row in rows):
            return None
        return sum(row["count"] * row[field] for row in rows)
    flops = sum(row["count"] * row["flops"] for row in rows)
    total = {"layers": sum(row["count"] for row in rows), "distinct": len(rows), "flops": flops}
    for field in ("time_ms", "wall_ms", "torch_ms", "torch_default_ms"):
        total[field] = weighted(field)
    total["gflops"] = gflops(flops, total["time_ms"])
    total["peak_fraction"] = (total["gflops"] / peak_gflops
                              if total["gflops"] and peak_gflops else None)
    compare = total["wall_ms"] if rows and rows[0].get("compare_wall") else total["time_ms"]
    total["ratio"] = total["torch_ms"] / compare if total["torch_ms"] and compare else None
    return total


def shape(problem):
    """A short label of a problem's sizes: 'n8 c64 56x56 k64 3x3/1 p1' (+ ' g32' when grouped,
    + ' NHWC' when not channels-first; one size per spatial dim in 1-D and 3-D)."""
    p = problem
    group = f" g{p.groups}" if p.groups > 1 else ""
    layout = f" {p.x.layout}" if p.x.channels_last else ""
    return (f"n{p.n} c{p.c} {_sizes(p.in_sizes)} k{p.k} {_sizes(p.fil_sizes)}/"
            f"{_sizes(p.conv.strides, True)} p{_sizes([b for b, _ in p.conv.pads], True)}"
            f"{group}{layout}")


def _sizes(values, merge=False):
    """'3x7x7'; with ``merge``, one value when every dim has it ('1', not '1x1')."""
    return str(values[0]) if merge and len(set(values)) == 1 else "x".join(map(str, values))


def _fmt(value, digits=2):
    return "-" if value is None else f"{value:.{digits}f}"


def _percent(fraction):
    return _fmt(100 * fraction if fraction else None, 1)


def format_report(report, markdown=False):
    """The tables of a bench report: a header, then per direction one row per layer, the total and,
    where the suite mixes filter sizes, the subtotal of its 1x1 layers."""
    peak = report["peak"]
    load = "; ".join(" ".join(f"{v:.2f}" for v in sample) for sample in report.get("load", ()))
    batch = report["batch"] if report["batch"] is not None else "per entry"
    lines = [f"suite {report['suite']} ({report['source']}), batch {batch}",
             f"device: {report['device']}",
             (f"peak: {_fmt(peak['gflops'], 1)} GFLOP/s FMA, {_fmt(peak.get('gbps'), 1)} GB/s "
              f"copy ({peak['how']})"),
             f"torch: {report['torch'] or 'not compared (--compare torch)'}",
             f"load average (1, 5, 15 min) at start; at end: {load or '-'}"]
    if markdown:
        lines = [f"- {line}" for line in lines]
    headers = ("#", "layer", "count", "shape", "GFLOP", "solver", "ms", "wall ms", "GFLOP/s",
               "%peak", "torch ms", "torch-default ms", "speedup")
    for result in report["results"]:
        lines.append(f"\n{'#### ' if markdown else ''}{Direction.parse(result['direction']).label}"
                     f"{'' if markdown else ':'}\n")
        rows = [(r["index"], r["name"], r["count"], r["shape"], _fmt(r["flops"] / 1e9, 3),
                 r["solver"], _fmt(r["time_ms"], 3), _fmt(r["wall_ms"], 3),
                 _fmt(gflops(r["flops"], r["time_ms"]), 1), _percent(r["peak_fraction"]),
                 _fmt(r.get("torch_ms"), 3), _fmt(r.get("torch_default_ms"), 3),
                 _fmt(r.get("ratio"), 3)) for r in result["rows"]]
        rows.append(_total_row("total", result["total"]))
        pointwise = [r for r in result["rows"] if _is_1x1(r["problem"])]
        if 0 < len(pointwise) < len(result["rows"]):
            rows.append(_total_row("1x1 layers", network_total(pointwise, peak["gflops"])))
        lines.append(table(rows, headers, markdown, _LEFT))
    lines.append(f"\nms: median OpenCL profiling-event time; wall ms: enqueue to finish; each the "
                 "median call of back-to-back calls, torch's too on the CPU; speedup = "
                 f"torch ms / our {'wall' if report['compare_wall'] else 'event'} ms (> 1: "
                 "convsolve faster); totals weigh each layer by its count")
    return "\n".join(lines)


def _is_1x1(key):
    return all(size == 1 for size in Problem.from_key(key).fil_sizes)


def _total_row(label, t):
    return ("", f"{label} ({t['layers']} layers)", t["layers"], "", _fmt(t["flops"] / 1e9, 3), "",
            _fmt(t["time_ms"], 3), _fmt(t["wall_ms"], 3), _fmt(t["gflops"], 1),
            _percent(t["peak_fraction"]), _fmt(t["torch_ms"], 3), _fmt(t["torch_default_ms"], 3),
            _fmt(t["ratio"], 3))


def format_overhead(report, markdown=False):
    """The find-overhead table of a ``bench --overhead`` report."""
    rows = [(r["index"], r["name"], r["direction"], r["warm"]["solver"],
             _fmt(r["cold"]["handle_ms"], 0), _fmt(r["cold"]["find_ms"], 1),
             _fmt(r["warm"]["handle_ms"], 0), _fmt(r["warm"]["find_ms"], 1),
             _fmt(r["warm"]["compile_ms"], 1), _fmt(r["warm"]["first_run_extra_ms"], 1),
             _fmt(r["run"]["enqueue_us"], 1), _fmt(r["run"]["overhead_us"], 1))
            for r in report["rows"]]
    headers = ("#", "layer", "dir", "solver", "cold Handle ms", "cold find ms", "warm Handle ms",
               "warm find ms", "warm compile ms", "1st-run extra ms", "enqueue us",
               "run() extra us")
    title = (f"find overhead, suite {report['suite']}, batch {report['batch']}, "
             f"device {report['device']}\n")
    hot = "; ".join(_hot_line(d, h) for d, h in report.get("hot", {}).items())
    block = report.get("block")
    how = (f"back to back, {block} calls a hold of the queue; in parentheses one call at a "
           "time" if block else "one call at a time")
    return "\n".join([title, table(rows, headers, markdown, _LEFT), (
        "\ncold: a fresh process with empty kernel cache, find-db and PoCL cache (find compiles "
        "and benchmarks); warm: a second fresh process on the same caches (find-db hit, then "
        "compile from the kernel cache); Handle: creating the handle (device probe); 1st-run "
        "extra: the first run's wall time minus its kernel time; run() extra: host time of run() "
        f"minus the bare invoker's enqueue, at batch 1, median of {report['calls']} calls (fewer, "
        "down to 5, where the kernel is slow), each call timed while a user event holds the "
        "queue (the previous call's kernel has just run, so on large layers the host caches "
        "are cold)"),
        (f"\nrun() and plan.run in a hot loop (300 calls on a tiny problem, {how}), find and "
         f"get_solutions repeated on a find-db hit (200 calls): {hot or '-'}"),
        *_suite_finds(report.get("suite_finds"))])


def _hot_line(direction, hot):
    """One direction's hot-loop figures: run() and plan.run (in parentheses one call at a time,
    where timed so too), then the find-db hits."""
    single = hot.get("one_at_a_time")
    return (f"{direction}: {_run_costs(hot)}"
            + (f" (one at a time: {_run_costs(single)})" if single else "")
            + f", find-db hit: find {_fmt(hot.get('find_us'), 1)} us, get_solutions "
            f"{_fmt(hot.get('get_solutions_us'), 1)} us "
            f"({hot['solver'] if 'solver' in hot else hot['problem']})")


def _run_costs(timed):
    """'bare enqueue E us, run() +R us, plan.run +P us' of a run_overhead result."""
    return (f"bare enqueue {_fmt(timed['enqueue_us'], 1)} us, run() +"
            f"{_fmt(timed['overhead_us'], 1)} us, plan.run +"
            f"{_fmt(timed.get('plan_overhead_us'), 1)} us")


def _suite_finds(finds):
    """The lines of a report's suite finds (overhead.suite_finds), if it has them."""
    if not finds:
        return []
    parts = []
    for state, times in finds.items():
        rest = times[1:]
        parts.append(f"{state}: the first {_fmt(times[0], 1)} ms, the others median "
                     f"{_fmt(float(np.median(rest)), 1)} ms (max {_fmt(max(rest), 1)}), "
                     f"{_fmt(sum(times) / len(times), 1)} ms a layer in all")
    return [f"\nthe suite's {len(finds['warm'])} problems found one after the other in one fresh "
            "process (the first find discovers the plugins), cold then warm as above: "
            + "; ".join(parts)]


def format_pipeline(report, markdown=False):
    """The tables of a ``bench --pipeline`` report: per direction a row for convsolve's pass and
    one for each torch configuration's."""
    load = "; ".join(" ".join(f"{v:.2f}" for v in sample) for sample in report["load"])
    batch = report["batch"] if report["batch"] is not None else "per entry"
    weights = ", constant weights" if report.get("constant_weights") else ""
    lines = [(f"pipeline of suite {report['suite']} ({report['source']}), batch {batch}"
              f"{weights}, {report['rounds']} rounds"), f"device: {report['device']}",
             f"torch: {report['torch'] or 'not compared (--compare torch)'}",
             f"load average (1, 5, 15 min) at start; at end: {load}"]
    if markdown:
        lines = [f"- {line}" for line in lines]
    headers = ("side", "pass ms", "host ms", "host us/call", "kernel ms", "passes", "speedup")
    for result in report["results"]:
        lines.append(f"\n{'#### ' if markdown else ''}{Direction.parse(result['direction']).label}"
                     f": {result['calls']} calls a pass, {result['distinct']} layers, "
                     f"{result['plans']} plans\n")
        sides = [("convsolve", result["convsolve"], None), *(
            (label, side, result["ratio"][label]) for label, side in result["torch"].items())]
        rows = [(label, _fmt(side["pass_ms"], 3), _fmt(side["host_ms"], 3),
                 _fmt(side["host_us_per_call"], 1), _fmt(side["kernel_ms"], 3), side["passes"],
                 _fmt(ratio, 3)) for label, side, ratio in sides]
        lines.append(table(rows, headers, markdown, ("side",)))
    lines.append("\npass ms: a pass's wall time, every call enqueued back to back then one finish "
                 "(torch: its calls, then a synchronize on a GPU), the median pass of back-to-back "
                 "passes, median over the rounds; host ms: the enqueue loop before the finish "
                 "(torch: until its last call returned, on a GPU only); kernel ms: the sum of "
                 "the calls' profiling-event times; speedup = torch pass ms / convsolve pass ms "
                 "(> 1: convsolve faster)")
    return "\n".join(lines)


def need_matplotlib():
    """Raise a ConvsolveError saying how to install matplotlib when it is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise ConvsolveError("convsolve bench: --plot needs matplotlib, which is not installed; "
                             "pip install matplotlib (or convsolve[plot]), or leave --plot "
                             "off") from None


def plot(report, path):
    """Per-layer bars of GFLOP/s, convsolve beside torch, one panel per direction, to ``path``."""
    if report.get("pipeline"):
        raise ValidationError("--plot", path, "a --pipeline report has no per-layer times")
    need_matplotlib()
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    results = report["results"]
    width = max(8, 0.45 * max(len(r["rows"]) for r in results))
    fig, axes = plt.subplots(len(results), 1, squeeze=False, figsize=(width, 3.5 * len(results)))
    ours = ("convsolve (wall)", "wall_ms") if report["compare_wall"] else ("convsolve", "time_ms")
    for ax, result in zip(axes[:, 0], results):
        series = [(label, key) for label, key in
                  (ours, ("torch", "torch_ms"), ("torch (default malloc)", "torch_default_ms"))
                  if all(r.get(key) for r in result["rows"])]
        x = np.arange(len(result["rows"]))
        for i, (label, key) in enumerate(series):
            ax.bar(x + (i - (len(series) - 1) / 2) * 0.8 / len(series),
                   [gflops(r["flops"], r[key]) for r in result["rows"]], 0.8 / len(series),
                   label=label)
        ax.set_xticks(x, [r["name"] for r in result["rows"]], rotation=60, ha="right", fontsize=7)
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"{report['suite']}, {Direction.parse(result['direction']).label}, batch "
                     f"{report['batch']}, {report['device']}", fontsize=9)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
