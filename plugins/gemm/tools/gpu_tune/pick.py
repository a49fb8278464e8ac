"""Rank the configs of a gemm_probe log by GFLOP/s; print the top N as 'label config'."""
import re
import sys
from pathlib import Path

log, n = sys.argv[1], int(sys.argv[2])
labels = {}
for line in Path(__file__).with_name("configs.txt").read_text().splitlines():
    lab, *kv = line.split()
    labels[" ".join(sorted(kv))] = (lab, " ".join(kv))
pat = re.compile(r"^\d+x\d+x\d+ b\d+ (.*?): +([\d.]+) ms +([\d.]+) GFLOP/s.* (ok|FAIL) ")
res = {}
for line in Path(log).read_text().splitlines():
    m = pat.match(line)
    if m and m.group(4) == "ok":
        key = " ".join(sorted(m.group(1).split()))
        if key in labels:
            res[key] = max(res.get(key, 0), float(m.group(3)))
rank = sorted(res, key=res.get, reverse=True)
for key in rank[:n]:
    print(*labels[key])
for key in rank:
    print(f"{labels[key][0]} {res[key]:.0f}", file=sys.stderr)
