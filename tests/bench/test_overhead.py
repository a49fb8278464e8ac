"""Tests of bench --overhead: cold and warm find in fresh processes, and run()'s cost."""
import json


def test_overhead(isolated, capsys, bench_main):
    """--overhead: cold find benchmarks, warm find in a fresh process hits the find-db."""
    assert bench_main(["--suite", "tiny", "--layers", "0", "--overhead", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["rows"][0]
    assert row["cold"]["source"] == "benchmark" and row["warm"]["source"] == "find-db"
    assert row["cold"]["find_ms"] > 0 and row["warm"]["find_ms"] > 0
    assert row["run"]["run_us"] > 0 and row["run"]["enqueue_us"] > 0
