"""Text output shared by the command line and bench: aligned or Markdown tables, byte counts."""


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
