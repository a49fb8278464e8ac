"""The PyTorch peer of `convsolve bench`: the same convolutions timed by torch in worker processes.

A worker is a child process (``python -m convsolve.bench.torch_peer``) that answers one JSON request
per line on stdin (a convolution's setup and samples; for --pipeline a pass of many, built
and then sampled by name).  The bench drives it one sample at a time, so torch never runs beside
convsolve and the two sides interleave; on the CPU a sample is a hot loop (hot_loop.HotLoop),
as a framework calls, not one call after the pause in which torch's threads fell asleep.
Workers exist because glibc's malloc thresholds
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) are read once at process start: on the CPU one
worker runs with them raised (torch then reuses its output buffers instead of page-faulting fresh
ones on every call: the fair figure) and one with them unset (what a user gets by default).
"""
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import time

from ..errors import ConvsolveError
from ..problem import Direction, Problem
from . import hot_loop

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
    pads = problem.conv.pads
    if any(before != after for before, after in pads):
        raise ConvsolveError(f"torch peer: {problem.key()} has asymmetric padding, which "
                             "torch.nn.functional.conv2d cannot express; leave --compare off")
    return (problem.conv.strides, tuple(before for before, _ in pads), problem.conv.dilations,
            problem.groups)


def memory_format(torch, problem, channels_last=None):
    """torch's memory format for ``problem``'s tensors: channels_last (2-D) or
    channels_last_3d when ``channels_last`` (None: whether its x is channels-last), else None
    (contiguous; torch has no channels-last 1-D format, so an NWC problem is compared with
    torch's NCW)."""
    wanted = problem.x.channels_last if channels_last is None else channels_last
    if not wanted or problem.spatial_dims == 1:
        return None
    return torch.channels_last if problem.spatial_dims == 2 else torch.channels_last_3d


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
        """Milliseconds per call of the set-up convolution: one sample (see the worker's side)."""
        return self.ask({"op": "time"})["ms"]

    def setup_pipeline(self, name, layers, channels_last=False):
        """Build in the worker the pass ``name``: ``layers`` ([(problem key, count)]) each
        called count times in order, on tensors in NCHW or channels_last; warm it up."""
        return self.ask({"op": "pipeline", "name": name, "layers": [list(l) for l in layers],
                         "channels_last": channels_last})

    def sample_pipeline(self, name):
        """{'ms', 'host_ms', 'passes'}: the median pass of one hot-loop sample of the pass
        ``name``, its median host time until the last call returned (None on the CPU, where a
        call returns when it is done) and how many passes were timed."""
        return self.ask({"op": "pass", "name": name})

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


def start_for(compare, handle_is_gpu):
    """([Peer], note) for --compare ``compare`` ('torch' or None): start_peers' workers, or none
    and a note that says why, also printed on stderr when torch was asked for but cannot run."""
    if compare != "torch":
        return [], None
    peers, note = start_peers(handle_is_gpu)
    if peers:
        return peers, note
    print(f"convsolve bench: no torch comparison: {note}", file=sys.stderr)
    return [], f"not compared: {note}"


# {{{ the worker side (runs in the child process)

#: The tensors epilogue_call takes, in order.
EPILOGUE_TENSORS = ("x", "w", "scale", "bias", "z", "prior")
#: In-place torch calls of each activation (MIOpen's table, default parameters).
ACTIVATIONS = {
    "identity": lambda torch, y: y, "relu": lambda torch, y: y.relu_(),
    "logistic": lambda torch, y: y.sigmoid_(), "tanh": lambda torch, y: y.tanh_(),
    "softrelu": lambda torch, y: torch.nn.functional.softplus(y),
    "abs": lambda torch, y: y.abs_(), "power": lambda torch, y: y.pow_(1.0),
    "clipped_relu": lambda torch, y: y.clamp_(0.0, 6.0),
    "leaky_relu": lambda torch, y: torch.nn.functional.leaky_relu_(y, 0.01),
    "elu": lambda torch, y: torch.nn.functional.elu_(y),
}


def epilogue_call(torch, problem, device, tensors, conv_args):
    """(A zero-argument function computing ``problem``'s forward convolution and epilogue with
    beta 1 from ``tensors`` (x, w, scale, bias, z, prior: torch tensors), what it calls):
    cuDNN's fused conv + bias (+ z) + relu on a GPU where the structure is that (2-D), else
    eager conv1d / conv2d / conv3d (with the bias when no scale comes first) and in-place
    calls."""
    structure, F = problem.epilogue, torch.nn.functional
    x, w, scale, bias, z, prior = (tensors[name] for name in EPILOGUE_TENSORS)
    if (device == "cuda" and structure.bias and structure.activation == "relu"
            and not (structure.scale or structure.blend) and problem.spatial_dims == 2):
        if structure.residual:
            return (lambda: torch.cudnn_convolution_add_relu(x, w, z, 1.0, bias, *conv_args),
                    "torch.cudnn_convolution_add_relu")
        return (lambda: torch.cudnn_convolution_relu(x, w, bias, *conv_args),
                "torch.cudnn_convolution_relu")
    activate, column = ACTIVATIONS[structure.activation], (1, -1) + (1,) * problem.spatial_dims
    conv = getattr(F, f"conv{problem.spatial_dims}d")   # any rank; tensors in any memory format

    def eager():
        y = conv(x, w, bias if structure.bias and not structure.scale else None, *conv_args)
        if structure.scale:
            y.mul_(scale.view(column))
            if structure.bias:
                y.add_(bias.view(column))
        if structure.residual:
            y.add_(z)
        y = activate(torch, y)
        return y.add_(prior) if structure.blend else y
    return eager, f"eager conv{problem.spatial_dims}d and in-place ops"


def _convolution(torch, problem, device, memory_format=None):
    """(A zero-argument function computing ``problem`` with torch on fresh random tensors,
    what it calls); x, w and y in ``memory_format`` (torch.channels_last) when one is given."""
    stride, padding, dilation, groups = torch_args(problem)

    def random(desc):
        made = torch.randn(desc.shape, device=device, dtype=torch.float32)
        return made if memory_format is None else made.contiguous(memory_format=memory_format)
    x, w, dy = (random(desc) for desc in (problem.x, problem.w, problem.y))
    F, grad = torch.nn.functional, torch.nn.grad
    if problem.epilogue is not None:
        k = problem.y.shape[1]
        tensors = {"x": x, "w": w, "scale": torch.randn(k, device=device),
                   "bias": torch.randn(k, device=device), "z": torch.randn_like(dy), "prior": dy}
        return epilogue_call(torch, problem, device, tensors, (stride, padding, dilation, groups))
    name = f"conv{problem.spatial_dims}d"
    if problem.direction is Direction.FORWARD:
        conv = getattr(F, name)
        return lambda: conv(x, w, None, stride, padding, dilation, groups), name
    if problem.direction is Direction.BACKWARD_DATA:
        data = getattr(grad, name + "_input")
        return (lambda: data(x.shape, w, dy, stride, padding, dilation, groups), name + "_input")
    weights = getattr(grad, name + "_weight")
    return (lambda: weights(x, w.shape, dy, stride, padding, dilation, groups), name + "_weight")


def _dropping(fn):
    """``fn`` called for its time alone: its output is let go at once, as a hot loop of a
    framework lets it go, so the allocator hands the next call the same block (outputs kept for
    a sample would make each call write fresh memory: 1.5x on a 28x28 depthwise layer)."""
    def call():
        fn()
    return call


def _warm(fn):
    """``fn`` after WARMUP untimed calls."""
    for _ in range(WARMUP):
        fn()
    return fn


def _pipeline_pass(torch, device, calls):
    """A zero-argument function calling each of ``calls`` in order, each output let go at once
    (as _dropping), then on a GPU synchronizing; it returns the host ms until the last call
    returned, before the synchronize (None on the CPU)."""
    def one_pass():
        begin = time.perf_counter()
        for call in calls:
            call()
        if device != "cuda":
            return None
        launched = time.perf_counter()
        torch.cuda.synchronize()
        return (launched - begin) * 1e3
    return one_pass


def _serve(stdin, stdout):
    import torch
    state = {}

    def timed():   # milliseconds per call
        if state["device"] == "cuda":   # back to back, as our event times exclude launch work
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(CUDA_CALLS_PER_SAMPLE):
                state["fn"]()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / CUDA_CALLS_PER_SAMPLE
        return hot_loop.median_ms(state["loop"].sample())

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
                state.pop("loop", None)
                problem = Problem.from_key(request["problem"])
                fn, op = _convolution(torch, problem, state["device"],
                                      memory_format(torch, problem))
                state["fn"] = _warm(fn)
                if state["device"] != "cuda":
                    state["loop"] = hot_loop.HotLoop(_dropping(state["fn"]))
                answer = {"ok": True, "op": op}
            elif request["op"] == "pipeline":
                state.setdefault("passes", {}).pop(request["name"], None)   # its memory first
                calls = []
                for key, count in request["layers"]:
                    problem = Problem.from_key(key)
                    fn, op = _convolution(torch, problem, state["device"], memory_format(
                        torch, problem, request["channels_last"]))
                    calls += [_warm(fn)] * count
                state["passes"][request["name"]] = hot_loop.HotLoop(
                    _pipeline_pass(torch, state["device"], calls))
                answer = {"ok": True, "op": op}
            elif request["op"] == "pass":
                timed = state["passes"][request["name"]].sample()
                hosts = [host for _, host in timed if host is not None]
                answer = {"ms": hot_loop.median_ms(timed), "passes": len(timed),
                          "host_ms": statistics.median(hosts) if hosts else None}
            else:
                answer = {"ms": timed()}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which raises it
            answer = {"error": f"{type(exc).__name__}: {exc}"}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()

# }}}


if __name__ == "__main__":
    _serve(sys.stdin, sys.stdout)
