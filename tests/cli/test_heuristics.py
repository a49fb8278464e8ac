"""`convsolve heuristics fit` and `eval` on a record file: a model that loads, and scores."""
import math

from convsolve import Problem
from convsolve.cli import heuristics as heuristics_cli
from convsolve.cli import main
from convsolve.heuristics import (
    Dataset,
    DeviceFacts,
    RankingModel,
    Record,
    read_dataset,
    write_dataset,
)
from convsolve.heuristics.evaluate import evaluate

DEVICE = DeviceFacts(compute_units=2, vector_width=8, is_gpu=False, local_mem_bytes=65536,
                     max_work_group_size=4096, global_mem_bytes=8 << 30)


def _records(tmp_path):
    """A record file of 48 problems where fake.Wide wins on many channels, fake.Narrow on few."""
    records = []
    for i in range(48):
        c = 2 ** (1 + i % 8)
        problem = Problem.conv2d((1 + i // 8, c, 9 + i % 5, 9), (8, c, 3, 3), padding=1)
        records.append(Record(problem, {"fake.Wide": 1.0 + 8 / c, "fake.Narrow": 0.3 * c,
                                        "fake.Slow": 50.0}))
    path = tmp_path / "records.jsonl.gz"
    write_dataset(Dataset(DEVICE, tuple(records), {"date": "2026-12-05"}), path)
    return path


def test_fit_saves_a_model_of_the_records_that_loads(tmp_path, capsys):
    """fit --data --out prints the record count and saves a model that ranks as the data do."""
    data, out = _records(tmp_path), tmp_path / "model.json.gz"
    assert main(["heuristics", "fit", "--data", str(data), "--out", str(out)]) == 0
    assert "fitted on 48 records" in capsys.readouterr().out
    model = RankingModel.load(out)
    assert sorted(model.solvers) == ["fake.Narrow", "fake.Slow", "fake.Wide"]
    for c, winner in ((4, "fake.Narrow"), (128, "fake.Wide")):
        guess = model.predict_ms(Problem.conv2d((2, c, 10, 9), (8, c, 3, 3), padding=1), DEVICE,
                                 model.solvers)
        assert min(guess, key=guess.get) == winner and math.isfinite(guess["fake.Slow"])


def test_eval_reports_the_model_beside_wti(tmp_path, capsys):
    """eval prints the problem count, the folds, and the model's and WTI's rows."""
    assert main(["heuristics", "eval", "--data", str(_records(tmp_path)), "--folds", "2"]) == 0
    out = capsys.readouterr().out
    assert "48 problems, 2 folds grouped by geometry" in out
    assert any(line.split()[:2] == ["model", "all"] for line in out.splitlines())
    assert any(line.split()[:2] == ["WTI", "all"] for line in out.splitlines())


def test_eval_scores_a_given_model_as_it_is(tmp_path, capsys):
    """eval --model scores that model on every record (no refit, no folds): a model fitted on
    the records picks within 10% on all of them; one fitted on the opposite costs does worse."""
    data, fitted = _records(tmp_path), tmp_path / "model.json.gz"
    assert main(["heuristics", "fit", "--data", str(data), "--out", str(fitted)]) == 0
    flipped = tmp_path / "flipped.jsonl.gz"
    records = [Record(r.problem, {"fake.Wide": r.times_ms["fake.Narrow"],
                                  "fake.Narrow": r.times_ms["fake.Wide"], "fake.Slow": 50.0})
               for r in read_dataset(data).records]
    write_dataset(Dataset(DEVICE, tuple(records), {"date": "2026-12-07"}), flipped)
    capsys.readouterr()
    within10 = {}
    for name, path in (("same", data), ("flipped", flipped)):
        assert main(["heuristics", "eval", "--data", str(path), "--model", str(fitted)]) == 0
        out = capsys.readouterr().out
        assert f"48 problems, the model {fitted} (no refit)" in out
        row = next(line.split() for line in out.splitlines() if line.split()[:2] == ["model",
                                                                                        "all"])
        within10[name] = float(row[3].rstrip("%"))
    assert within10["same"] == 100.0 and within10["flipped"] < 50.0


def test_a_problem_in_several_record_files_counts_once(tmp_path, capsys):
    """Repeat collections given together are merged per problem, not counted twice."""
    data = str(_records(tmp_path))
    assert main(["heuristics", "fit", "--data", data, data]) == 0
    assert "fitted on 48 records" in capsys.readouterr().out


def test_rounds_reach_the_fitted_ensembles_and_eval(tmp_path, monkeypatch, capsys):
    """fit --rounds saves a model of that many trees an ensemble; eval --rounds cross-validates
    with it; a count out of range is refused by name."""
    data, out = str(_records(tmp_path)), tmp_path / "model.json.gz"
    assert main(["heuristics", "fit", "--data", data, "--out", str(out), "--rounds", "7"]) == 0
    model = RankingModel.load(out)
    assert model.params.rounds == 7 and len(model.solvers["fake.Wide"].leaf) == 7
    seen = []
    monkeypatch.setattr(heuristics_cli, "evaluate",
                        lambda *args, **kw: seen.append(args[3].rounds) or evaluate(*args, **kw))
    assert main(["heuristics", "eval", "--data", data, "--folds", "2", "--rounds", "9"]) == 0
    assert seen == [9]
    assert main(["heuristics", "fit", "--data", data, "--rounds", "0"]) != 0
    assert "invalid params.rounds=0" in capsys.readouterr().err
