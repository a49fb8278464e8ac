"""torch fp32 matmul (cuBLAS), TF32 off, CUDA events: 4096^3 and the conv-shaped batched GEMMs."""
import statistics
import sys
from pathlib import Path

import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision("highest")
print("torch", torch.__version__, torch.cuda.get_device_name(0),
      "allow_tf32", torch.backends.cuda.matmul.allow_tf32, torch.get_float32_matmul_precision())

def timeit(fn, n=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(n):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record(); e.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts), min(ts)

shapes = [("4096^3", 4096, 4096, 4096, 1, 0, 0)]
for line in Path(sys.argv[1]).read_text().splitlines():
    if line.strip() and not line.startswith("#"):
        lab, m, n, k, b, ta, tb = line.split()
        shapes.append((lab, int(m), int(n), int(k), int(b), int(ta), int(tb)))
for lab, m, n, k, b, ta, tb in shapes:
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(b, k, m, device="cuda", generator=g).transpose(1, 2) if ta else torch.randn(b, m, k, device="cuda", generator=g)
    bb = torch.randn(b, n, k, device="cuda", generator=g).transpose(1, 2) if tb else torch.randn(b, k, n, device="cuda", generator=g)
    out = torch.empty(b, m, n, device="cuda")
    fn = ((lambda a=a, bb=bb, out=out: torch.matmul(a[0], bb[0], out=out[0])) if b == 1
          else (lambda a=a, bb=bb, out=out: torch.bmm(a, bb, out=out)))
    med, best = timeit(fn)
    fl = 2.0 * m * n * k * b
    print(f"torch {lab} {m}x{n}x{k} b{b} TA={ta} TB={tb}: {med:8.3f} ms {fl / med * 1e-9:8.2f} TFLOP/s (best {fl / best * 1e-9:.2f})")
