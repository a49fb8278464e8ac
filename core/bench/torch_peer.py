"""The PyTorch peer of `convsolve bench`: the same convolutions timed by torch in worker processes.

A worker is a child process (``python -m convsolve.bench.torch_peer``) that answers one JSON request
per line on stdin.  The bench drives it one sample at a time, so torch never runs beside
convsolve and the two sides interleave.  Workers exist because glibc's malloc thresholds
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) are read once at process start: on the CPU one
worker runs with them raised (torch then reuses its output buffers instead of page-faulting fresh
ones on every call: the fair figure) and one with them unset (what a user gets by default).
"""
import importlib.util
import json
import os
import subprocess
import sys
import time

from ..errors import ConvsolveError
from ..problem import Direction, Problem

#: The environment that stops glibc from handing large blocks back to the OS between calls.
MALLOC_FAIR = {"MALLOC_MMAP_THRESHOLD_": "1073741824", "MALLOC_TRIM_THRESHOLD_": "1073741824"}
#: Untimed calls after setup (cudnn.benchmark tunes on the first call of a shape).
WARMUP = 2
#: cuDNN calls timed back to back per GPU sample (the sample is their mean): one call between
#: CUDA events also counts 0.1-0.3 ms of host launch work, which our kernel-event times exclude.
CUDA_CALLS_PER_SAMPLE = 20


def available():
    """True when torch can be imported (checked without importing it here)."""
    return importlib.util.find_spec("torch") is not None


def torch_args(problem):
    """(stride, padding, dilation, groups) for torch's conv functions; pads must be symmetric."""
    (top, bottom), (left, right) = problem.conv.pads
    if top != bottom or left != right:
        raise ConvsolveError(f"torch peer: {problem.key()} has asymmetric padding, which "
                             "torch.nn.functional.conv2d cannot express; leave --compare off")
    return problem.conv.strides, (top, left), problem.conv.dilations, problem.groups


class Peer:
    """One torch worker process on ``device`` ('cpu' or 'cuda'), ``fair`` saying which malloc env."""

    def __init__(self, device, fair):
        self.device, self.fair = device, fair
        environ = {k: v for k, v in os.environ.items() if k not in MALLOC_FAIR}
        if fair:
            environ.update(MALLOC_FAIR)
        self.proc = subprocess.Popen([sys.executable, "-m", "convsolve.bench.torch_peer"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=environ)
        self.info = self.ask({"op": "hello", "device": device})

    @property
    def label(self):
        """'torch' on a GPU; 'torch' (fair) or 'torch-default' on the CPU."""
        return "torch" if self.device != "cpu" or self.fair else "torch-default"

    def ask(self, request):
        """Send one request and return the worker's answer; a worker error is raised here."""
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
        except (BrokenPipeError, OSError) as exc:
            line, error = "", exc
        else:
            error = None
        if not line:
            raise ConvsolveError(f"torch worker ({self.label}) died on {request}: {error or 'EOF'}")
        answer = json.loads(line)
        if "error" in answer:
            raise ConvsolveError(f"torch worker ({self.label}): {answer['error']}")
        return answer

    def setup(self, problem):
        """Allocate the tensors of ``problem`` in the worker and warm the call up."""
        return self.ask({"op": "setup", "problem": problem.key()})

    def sample(self):
        """Milliseconds of one call of the set-up convolution."""
        return self.ask({"op": "time"})["ms"]

    def close(self):
        if self.proc.poll() is None:
            self.proc.stdin.close()
            self.proc.wait(timeout=30)


def start_peers(handle_is_gpu):
    """([Peer], note): the workers for a bench run, or none with the reason why not."""
    if not available():
        return [], "torch is not installed"
    if handle_is_gpu:
        peer = Peer("cuda", fair=False)
        if not peer.info.get("cuda"):
            peer.close()
            return [], "the device is a GPU but torch.cuda is not available"
        return [peer], f"torch {peer.info['torch']} on {peer.info['name']}"
    peers = [Peer("cpu", fair=True), Peer("cpu", fair=False)]
    return peers, (f"torch {peers[0].info['torch']} on the CPU, {peers[0].info['threads']} threads"
                   f"; 'torch' with {' '.join(f'{k}={v}' for k, v in MALLOC_FAIR.items())}, "
                   "'torch-default' without")


# {{{ the worker side (runs in the child process)

def _convolution(torch, problem, device):
    """A zero-argument function computing ``problem`` with torch on fresh random tensors."""
    stride, padding, dilation, groups = torch_args(problem)
    x, w, dy = (torch.randn(desc.shape, device=device, dtype=torch.float32)
                for desc in (problem.x, problem.w, problem.y))
    F, grad = torch.nn.functional, torch.nn.grad
    if problem.direction is Direction.FORWARD:
        return lambda: F.conv2d(x, w, None, stride, padding, dilation, groups)
    if problem.direction is Direction.BACKWARD_DATA:
        return lambda: grad.conv2d_input(x.shape, w, dy, stride, padding, dilation, groups)
    return lambda: grad.conv2d_weight(x, w.shape, dy, stride, padding, dilation, groups)


def _serve(stdin, stdout):
    import torch
    state = {}

    def timed(fn):
        if state["device"] == "cuda":   # back to back, as our event times exclude launch work
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CUDA_CALLS_PER_SAMPLE):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / CUDA_CALLS_PER_SAMPLE
        begin = time.perf_counter()
        fn()
        return (time.perf_counter() - begin) * 1e3

    for line in stdin:
        request = json.loads(line)
        try:
            if request["op"] == "hello":
                state["device"] = request["device"]
                cuda = torch.cuda.is_available()
                if cuda:
                    torch.backends.cudnn.benchmark = True
                    torch.backends.cuda.matmul.allow_tf32 = False
                    torch.backends.cudnn.allow_tf32 = False
                name = torch.cuda.get_device_name() if cuda and state["device"] == "cuda" else "cpu"
                answer = {"torch": torch.__version__, "cuda": cuda, "name": name,
                          "threads": torch.get_num_threads(),
                          "malloc": {k: os.environ.get(k) for k in MALLOC_FAIR}}
            elif request["op"] == "setup":
                state.pop("fn", None)
                state["fn"] = _convolution(torch, Problem.from_key(request["problem"]),
                                           state["device"])
                for _ in range(WARMUP):
                    timed(state["fn"])
                answer = {"ok": True}
            else:
                answer = {"ms": timed(state["fn"])}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()

# }}}


if __name__ == "__main__":
    _serve(sys.stdin, sys.stdout)
