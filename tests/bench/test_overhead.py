"""Tests of bench --overhead: cold and warm find in fresh processes, and run()'s cost."""
import json


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
    assert hot["find_us"] > 0 and hot["get_solutions_us"] > 0
