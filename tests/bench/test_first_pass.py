"""Tests of bench --first-pass: the forward pass at an unseen batch in fresh processes."""
import json

import pytest
from convsolve.bench import first_pass
from convsolve.engine.find import FindMode
from convsolve.errors import ConvsolveError, ValidationError
from convsolve.problem import Problem


def test_first_pass(isolated, capsys, bench_main):
    """--first-pass primes at another batch, then times each mode warm and cold in fresh
    processes, each on a find-db path of its own: warm builds nothing the priming built, cold
    builds from source; --render prints the table again."""
    argv = ["--suite", "tiny", "--layers", "0,1", "--first-pass", "--modes", "default,FAST",
            "--repeat", "2", "--json"]
    assert bench_main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert (report["kind"], report["batch"], report["prime_batch"]) == ("first-pass", 2, 3)
    assert {Problem.from_key(r["problem"]).n for r in report["prime"]["layers"]} == {3}
    runs = report["runs"]
    assert [(r["mode"], r["cache"]) for r in runs] == [
        ("DYNAMIC_HYBRID (default)", "warm"), ("DYNAMIC_HYBRID (default)", "cold"),
        ("FAST", "warm"), ("FAST", "cold")]
    assert [r["find_mode"] for r in runs] == ["DYNAMIC_HYBRID"] * 2 + ["FAST"] * 2
    dbs = [report["prime"]["find_db"]] + [r["find_db"] for r in runs]
    assert len(set(dbs)) == len(dbs)
    for run in runs:
        assert {Problem.from_key(row["problem"]).n for row in run["layers"]} == {2}
        assert run["programs"] == (0 if run["cache"] == "warm" else sum(
            row["programs"] for row in run["layers"])) and run["first_ms"] > 0
        assert run["ratio"] == pytest.approx(run["first_ms"] / run["steady_ms"])
        assert run["settling"] == first_pass.SETTLE_CALLS   # layer 1 runs once a pass
        assert run["settling_extra_ms"] is not None
        assert run["dynamic_layers"] == 2 and all(row["solver"] and "work_groups" in row
                                                  for row in run["layers"])
    assert all(run["programs"] > 0 for run in runs if run["cache"] == "cold")
    saved = isolated / "first_pass.json"
    saved.write_text(json.dumps(report))
    assert bench_main(["--render", str(saved)]) == 0
    text = capsys.readouterr().out
    assert "first pass on an unseen batch, suite tiny, batch 2" in text and "FAST" in text
    assert text.count(", warm: compiled in the first pass though a dynamic solver") == 2


@pytest.mark.parametrize("argv, field", [
    (["--batch", "2", "--prime-batch", "2"], "--prime-batch"),
    (["--prime-batch", "0"], "--prime-batch"),
    (["--directions", "bwd"], "--directions"),
    (["--modes", "fast,SLOW"], "--modes"),
])
def test_first_pass_refuses(isolated, bench_main, argv, field):
    """A priming batch equal to the pass's (or below 1), a backward direction and an unknown
    find mode are refused, naming the flag, before any process starts."""
    with pytest.raises(ValidationError) as info:
        bench_main(["--suite", "tiny", "--first-pass", *argv])
    assert info.value.field == field


def test_parse_modes():
    """'default' is the numpy API's own mode; a mode named twice is measured once."""
    assert first_pass.parse_modes("default, DYNAMIC_HYBRID,fast,2") == [
        (FindMode.DYNAMIC_HYBRID, True), (FindMode.FAST, False)]
    with pytest.raises(ValidationError):
        first_pass.parse_modes(" , ")


def test_fresh_find_db_required(tmp_path):
    """A pass refuses to start on a find-db that exists: the batch would not be unseen."""
    db = tmp_path / "db.sqlite"
    db.write_text("")
    with pytest.raises(ConvsolveError, match="exists"):
        first_pass._child([], tmp_path, None, 0, db=db)


def test_compiled():
    """New cache files count as programs built from source (convsolve's .bin, PoCL's
    program.bc) or driver compiles (PoCL's work-group .so, NVIDIA's JIT entries), the rest
    not at all."""
    new = {("CONVSOLVE_CACHE_DIR", "kernels-v1/ab/abc.bin"), ("POCL_CACHE_DIR", "AB/CD/program.bc"),
           ("POCL_CACHE_DIR", "AB/CD/k/8-1-1-goffs0-smallgrid/k.so"),
           ("POCL_CACHE_DIR", "AB/CD/last_accessed"), ("POCL_CACHE_DIR", "tempfile_x"),
           ("CUDA_CACHE_PATH", "ComputeCache/index"), ("CUDA_CACHE_PATH", "ComputeCache/a/b1")}
    assert first_pass.compiled(new) == {"programs": 2, "driver": 2}
