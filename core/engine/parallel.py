"""Waiting with a time limit on work in daemon threads: calls (find builds candidates this way)
and the JSON lines a child process writes (the worker processes' replies); and a child's watch
on its parent (a worker process ends with its caller); builds handed to other processes first."""
import contextvars
import json
import os
import queue
import threading
import time

#: Seconds between a child's checks that its parent is alive (exit_with_parent).
PARENT_POLL_S = 0.2
#: The exit code of a child that ended because its parent did.
ORPHAN_EXIT = 70


#: Where builds go first, if anywhere: a function given [(solver name, problem key, config)]
#: that builds them in other processes, so that this one's builds load binaries from the cache.
#: A timing worker of a Dask cluster sets it (scale/workers.py) on drivers that build one
#: program at a time per process (NVIDIA's: 16 threads built 0.95 programs/s, one 1.05; 16
#: processes 8.1, with its JIT cache handing the machine code over: docs/architecture.md).
BUILD_AHEAD = contextvars.ContextVar("convsolve_build_ahead", default=None)


def build_ahead(builds):
    """Hand ``builds`` (an iterable of (solver name, problem key, config), read only here) to
    BUILD_AHEAD's function and wait for it, where one is set and there are two builds or more."""
    ahead = BUILD_AHEAD.get()
    builds = [] if ahead is None else list(builds)
    if len(builds) > 1:
        ahead(builds)


class Overdue(Exception):
    """A call that did not return within its time limit (its thread is left behind)."""


def call_all(function, items, workers, limit_s):
    """{item: (result, error)} of ``function(item)`` for every item, ``workers`` at a time.

    A call that raises gives (None, the exception); one still running ``limit_s`` seconds after
    it started gives (None, Overdue): its daemon thread is abandoned (Python cannot stop it) and
    another takes its place, so one hung call costs ``limit_s`` and a worker, not the whole run.
    """
    items = list(dict.fromkeys(items))   # each item once, so each gets one outcome
    todo, done = queue.Queue(), queue.Queue()
    for item in items:
        todo.put(item)
    started = {}   # item -> start time, for calls in flight

    def worker():
        while True:
            try:
                item = todo.get_nowait()
            except queue.Empty:
                return
            started[item] = time.monotonic()
            try:
                done.put((item, function(item), None))
            except Exception as exc:  # noqa: BLE001 - the caller decides what an error means
                done.put((item, None, exc))

    def spawn():   # in a copy of the caller's context (its device hold: device/timing.py)
        threading.Thread(target=contextvars.copy_context().run, args=(worker,),
                         daemon=True).start()

    for _ in range(min(workers, len(items))):
        spawn()
    outcome = {}
    while len(outcome) < len(items):
        try:
            item, result, error = done.get(timeout=0.05)
            if item not in outcome:
                outcome[item] = (result, error)
            continue
        except queue.Empty:
            pass
        now = time.monotonic()
        for item, start in list(started.items()):
            if item not in outcome and now - start > limit_s:
                outcome[item] = (None, Overdue(f"did not return within {limit_s:g} s"))
                spawn()   # the stuck worker's replacement
    return outcome


class LineReader:
    """The JSON lines of ``stream`` (a child process's stdout), read by a daemon thread, so that
    the caller can wait for the next one with a time limit."""

    def __init__(self, stream):
        self._lines = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream):
        for line in stream:
            self._lines.put(line)
        self._lines.put(None)

    def next(self, limit_s):
        """The next line's value; None when none comes within ``limit_s`` seconds, EOFError
        when the stream has ended."""
        try:
            line = self._lines.get(timeout=limit_s)
        except queue.Empty:
            return None
        if line is None:
            raise EOFError
        return json.loads(line)


def exit_with_parent(parent_pid, cleanup=None):
    """End this process (a child) soon after its parent, process ``parent_pid``, ends: at once
    if it has ended already, else within PARENT_POLL_S, even while the main thread is stuck (a
    kernel that never finishes, whose wait releases the GIL).

    A daemon thread polls os.getppid(): a child whose parent died belongs to another process
    (init or a subreaper).  It then calls ``cleanup()`` (its errors are ignored: nobody is left
    to tell) and ends the process with os._exit(ORPHAN_EXIT), which stops its other threads
    too.  Not PR_SET_PDEATHSIG: its SIGKILL leaves no time for ``cleanup``, and it fires when
    the thread that started the child ends, even though the parent lives on.
    """
    def end():
        try:
            if cleanup is not None:
                cleanup()
        finally:
            os._exit(ORPHAN_EXIT)

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        end()

    if os.getppid() != parent_pid:
        end()
    threading.Thread(target=watch, name="exit_with_parent", daemon=True).start()
