"""Tests of bench --overhead: cold and warm find in fresh processes, and run()'s cost."""
import json

from convsolve import Problem
from convsolve.bench import overhead
from convsolve.bench.report import format_overhead


def test_overhead(isolated, capsys, bench_main):
    """--overhead: cold find benchmarks, warm find in a fresh process hits the find-db; run(),
    plan.run and the find-db hits of find and get_solutions are timed."""
    assert bench_main(["--suite", "tiny", "--layers", "0", "--overhead", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    row, hot = report["rows"][0], report["hot"]["fwd"]
    assert row["cold"]["source"] == "benchmark" and row["warm"]["source"] == "find-db"
    assert row["cold"]["find_ms"] > 0 and row["warm"]["find_ms"] > 0
    assert row["run"]["run_us"] > 0 and row["run"]["enqueue_us"] > 0
    assert row["run"]["plan_us"] > 0 and hot["plan_us"] > 0
    assert hot["calls"] >= overhead.BLOCK and hot["calls"] % overhead.BLOCK == 0
    assert hot["one_at_a_time"]["plan_us"] > 0 and report["block"] == overhead.BLOCK
    assert hot["find_us"] > 0 and hot["get_solutions_us"] > 0
    text = format_overhead(report)
    assert f"back to back, {overhead.BLOCK} calls a hold of the queue" in text
    assert "(one at a time: bare enqueue" in text


def test_finds_in_one_process_are_each_timed(isolated):
    """The suite's child times each find in order: the first benchmarks, a repeat hits the
    find-db."""
    keys = [Problem.conv2d((1, 4, 6, 6), (4, 4, 3, 3), padding=1).key(),
            Problem.conv2d((1, 4, 6, 6), (8, 4, 1, 1)).key()]
    times = overhead._measure_finds([*keys, keys[0]])["find_ms"]
    assert len(times) == 3 and all(t > 0 for t in times)
    assert times[2] < times[0]


def test_the_report_shows_the_suite_finds():
    """format_overhead: the first find apart from the others, cold and warm."""
    report = {"suite": "s", "batch": 1, "device": "d", "rows": [], "calls": 5, "hot": {},
              "suite_finds": {"cold": [900.0, 300.0, 500.0, 100.0],
                              "warm": [20.0, 2.0, 4.0, 3.0]}}
    text = format_overhead(report)
    assert "4 problems found one after the other" in text
    assert "cold: the first 900.0 ms, the others median 300.0 ms (max 500.0), 450.0 ms" in text
    assert "warm: the first 20.0 ms, the others median 3.0 ms (max 4.0), 7.2 ms" in text
