"""A handle's plain queue and its timing twin's profiling queue (device/handle.py's docstring)."""
import copy
import threading

import convsolve
import numpy as np
import pyopencl as cl
import pytest
from convsolve import ValidationError
from convsolve.device.tensors import device_buffers, random_tensors
from convsolve.engine import benchmark as benchmark_module
from convsolve.testing import FLOAT32_TOLERANCE, expected_output, read_output, relative_error

SOLVER = "direct.NaiveFwd"
PROBLEM = convsolve.Problem.conv2d((1, 2, 5, 5), (3, 2, 3, 3))


def _fill(queue, buffer, value, wait_for=None):
    """A fill of ``buffer`` (4-byte floats) with ``value`` on ``queue``; its event."""
    if wait_for:
        cl.enqueue_barrier(queue, wait_for=wait_for)
    return cl.enqueue_fill_buffer(queue, buffer, np.float32(value), 0, buffer.size)


def _profiled(event):
    """Whether ``event`` carries profiling timestamps."""
    event.wait()
    try:
        return event.profile.end >= event.profile.start
    except cl.Error:
        return False


def test_the_queue_profiles_only_when_asked(handle):
    """A handle's queue profiles only with profiling=True; its timing twin's always does, and a
    profiling handle is its own timing handle.  A profiling that is not a bool is refused."""
    buffer = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 64)
    assert not handle.profiling and not _profiled(_fill(handle.queue, buffer, 1))
    timing = handle.timing
    assert timing.profiling and _profiled(_fill(timing.queue, buffer, 1))
    assert timing.timing is timing and handle.timing is timing
    profiled = convsolve.Handle(handle.device, profiling=True)
    own = cl.Buffer(profiled.context, cl.mem_flags.READ_WRITE, 64)
    assert profiled.timing is profiled and _profiled(_fill(profiled.queue, own, 1))
    with pytest.raises(ValidationError, match="invalid profiling=1"):
        convsolve.Handle(handle.device, profiling=1)


def test_the_twin_shares_builds_and_rankings_but_not_invokers_or_scratch(handle):
    """The twin builds on the handle's context from the same programs and ranking; its
    invokers (which hold its queue), plans and scratch are its own; a failed invoker is
    forgotten on both; a shallow copy of the handle makes its own twin."""
    solver = convsolve.registry().solvers[SOLVER]
    timing = handle.timing
    assert timing.context is handle.context and timing.queue is not handle.queue
    ours, theirs = handle.invoker(solver, PROBLEM), timing.invoker(solver, PROBLEM)
    assert ours is not theirs and timing.invoker(solver, PROBLEM) is theirs
    assert timing._programs is handle._programs
    assert convsolve.plan(handle, PROBLEM, SOLVER) is not convsolve.plan(timing, PROBLEM, SOLVER)
    assert handle.scratch(64) is not timing.scratch(64)
    before = handle.ranking_generation
    timing.forget_invoker(solver, PROBLEM)
    assert handle.ranking_generation == timing.ranking_generation == before + 1
    assert handle.invoker(solver, PROBLEM) is not ours
    assert copy.copy(handle).timing is not timing


def test_a_timing_section_orders_the_two_queues_both_ways(handle):
    """Work enqueued on the handle's queue before a section runs before the section's work on
    the twin's queue, and the handle's next work after it, though the host waits for neither:
    each queue's work here sits behind a gate that opens only after everything is enqueued."""
    buffer = cl.Buffer(handle.context, cl.mem_flags.READ_WRITE, 4096)
    out = np.zeros(1024, np.float32)
    gate = cl.UserEvent(handle.context)
    _fill(handle.queue, buffer, 1, wait_for=[gate])   # held until the gate opens
    with handle.timing_section() as timing:
        copy_back = cl.enqueue_copy(timing.queue, out, buffer, is_blocking=False)
        later_gate = cl.UserEvent(handle.context)
        _fill(timing.queue, buffer, 2, wait_for=[later_gate])
    after = np.zeros(1024, np.float32)
    read = cl.enqueue_copy(handle.queue, after, buffer, is_blocking=False)
    gate.set_status(cl.command_execution_status.COMPLETE)
    copy_back.wait()
    assert (out == 1).all()   # the twin's copy ran after the handle's fill
    later_gate.set_status(cl.command_execution_status.COMPLETE)
    read.wait()
    assert (after == 2).all()   # the handle's read ran after the twin's fill


def test_find_times_on_the_twin_and_a_db_hit_enqueues_nothing(handle, monkeypatch):
    """find benchmarks inside one timing section, its candidates' invokers enqueuing on the
    profiling queue; a find-db hit opens none."""
    sections, timed_on = [], []
    original = type(handle).timing_section

    def counted(self):
        sections.append(self)
        return original(self)
    monkeypatch.setattr(type(handle), "timing_section", counted)
    time_invoker = benchmark_module.time_invoker

    def recorded(invoker, buffers, *args, **kwargs):
        timed_on.append(_profiled(invoker(buffers, args[0])[-1]))
        return time_invoker(invoker, buffers, *args, **kwargs)
    monkeypatch.setattr(benchmark_module, "time_invoker", recorded)
    bufs = device_buffers(handle, random_tensors(PROBLEM))
    assert convsolve.find(handle, PROBLEM, **bufs)[0].source == "benchmark"
    assert sections == [handle] and timed_on and all(timed_on)
    assert convsolve.find(handle, PROBLEM, **bufs) and sections == [handle]


def test_finds_beside_runs_in_other_threads_leave_every_output_right(handle):
    """Threads running a plan on the handle's queue while another finds (benchmarking on the
    twin's queue) on buffers of its own each read back their own right output, and so does the
    finder after each find."""
    made, wrong = convsolve.plan(handle, PROBLEM, SOLVER), []

    def check(buffers, host, who):
        got = read_output(handle, PROBLEM, buffers)
        if relative_error(got, expected_output(PROBLEM, host)) >= FLOAT32_TOLERANCE:
            wrong.append(who)

    def runner(seed):
        host = random_tensors(PROBLEM, seed=seed)
        buffers = device_buffers(handle, host)
        for _ in range(6):
            made.run(**buffers)   # no wait: the read is ordered after it on the same queue
            check(buffers, host, f"runner {seed}")

    def finder():
        host = random_tensors(PROBLEM, seed=9)
        buffers = device_buffers(handle, host)
        for _ in range(3):
            convsolve.find(handle, PROBLEM, **buffers, mode="NORMAL")
            check(buffers, host, "finder")
    threads = [threading.Thread(target=runner, args=(seed,)) for seed in range(2)]
    threads.append(threading.Thread(target=finder))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
