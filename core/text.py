"""Text output shared by the command line and bench: aligned or Markdown tables, byte counts,
MIOpenDriver's result lines."""
import math


def format_bytes(count):
    """``count`` bytes as text with a binary unit: '512 B', '1.5 KiB', '12.0 MiB'."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def table(rows, headers, markdown=False, left=()):
    """Aligned text columns, or a Markdown table; columns headed by a name in ``left`` are
    left-aligned, the others right-aligned."""
    rows = [tuple(str(v) for v in row) for row in rows]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |",
                 "|" + "|".join(":---" if h in left else "---:" for h in headers) + "|"]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(v) for v in column) for column in zip(headers, *rows)]
    return "\n".join("  ".join(v.ljust(w) if h in left else v.rjust(w)
                               for v, w, h in zip(row, widths, headers)).rstrip()
                     for row in (headers, *rows))


#: MIOpen's miopenConvAlgorithm_t number of each shipped family (MIOpen has none for others: -1).
MIOPEN_ALGORITHMS = {"gemm": 0, "direct": 1, "fft": 2, "winograd": 3, "implicit_gemm": 5}
#: Per direction: MIOpenDriver's name in its result lines and its stats line's name prefix.
_DRIVER_NAMES = {"fwd": ("Forward", "fwd-conv"), "bwd": ("Backward Data", "bwdd-conv"),
                 "wrw": ("Backward Weights", "bwdw-conv")}


def miopen_result(problem, direction, solver, family, average_ms, transposed=False):
    """MIOpenDriver conv's result lines of one direction under -t 1, in its format (MIOpen's
    driver/conv_driver.hpp): algorithm and solution, kernel time, and the stats header and values.

    ``direction`` is the one asked for ('fwd', 'bwd', 'wrw'); ``problem`` computes it (with
    ``transposed``, -m trans, its y is the driver's input).  convsolve has no numeric solution
    ids: 0, MIOpen's "no id", then the solver's name.  The stats are MIOpen's own arithmetic, so
    they compare one to one with its lines: its byte counts (backward data reads n*c*k floats
    and the weights, writes y; backward weights counts none), the field order of its values.
    """
    name, stat = _DRIVER_NAMES[direction]
    x, y = (problem.y, problem.x) if transposed else (problem.x, problem.y)   # MIOpen's in, out
    (n, c, *_), (_, k, *outs), fils = x.shape, y.shape, problem.w.shape[2:]
    flops = 2 * n * c * math.prod(fils) * k * math.prod(outs) // problem.conv.groups
    read, written = {"fwd": (x.nbytes + problem.w.nbytes, y.nbytes),
                     "bwd": (4 * n * c * k + problem.w.nbytes, y.nbytes), "wrw": (0, 0)}[direction]
    sizes = (n, c, *fils, k, *outs) if direction == "bwd" else (n, c, *outs, *fils, k)
    header = (f"stats: name, n, c, {'do, ' * (len(outs) == 3)}ho, wo, "
              f"{'z, ' * (len(outs) == 3)}x, y, k, flopCnt, bytesRead, bytesWritten, GFLOPs, "
              "GB/s, timeMs")   # 3-D: depth beside each size (convsolve's extension)
    rate = (lambda amount: amount / average_ms / 1e6 if average_ms else float("inf"))  # as C's
    values = (f"stats: {stat}{'x'.join(map(str, fils))}u{problem.conv.strides[0]}, "
              f"{', '.join(map(str, sizes))},"
              f"  {flops}, {read}, {written}, {rate(flops):.0f}, {rate(read + written):.0f}, "
              f"{average_ms:f}")
    algorithm = f"Algorithm: {MIOPEN_ALGORITHMS.get(family, -1)}, Solution: 0/{solver}"
    return [f"MIOpen {name} Conv. {algorithm}",
            f"GPU Kernel Time {name} Conv. Elapsed: {average_ms:f} ms (average)", header, values]


def print_table(rows, headers, left=(0, 1)):
    """Rows under headers, columns padded; the columns at indices ``left`` left-aligned."""
    print(table(rows, headers, left={headers[i] for i in left}))
