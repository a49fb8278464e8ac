"""The heuristics collection: its rounds (interleaved, rotating, a slow solver settled on two
looks) and a resumed collection's record file."""
from convsolve.bench import collect


def scripted(times):
    """A ``timed(solver)`` returning each solver's scripted times in turn (the last one from then
    on), and the list of its calls in order."""
    calls = []

    def timed(solver):
        script = times[solver]
        seen = calls.count(solver)
        calls.append(solver)
        return script[min(seen, len(script) - 1)]
    return timed, calls


def round_one(timed, solvers):
    """Round one's samples, as time_problem takes them: one timed batch per solver."""
    return {solver: [timed(solver)] for solver in solvers}


def test_an_outlier_past_the_cutoff_gets_a_second_look():
    """A first sample past the cutoff is timed again at once: an outlier rejoins the race (its
    label a median of the rounds), a solver slow twice is settled on the lower look."""
    timed, calls = scripted({"fast": [1.0], "outlier": [30.0, 1.2], "slow": [40.0, 25.0]})
    samples = round_one(timed, ["fast", "outlier", "slow"])
    labels = collect.later_rounds(samples, timed, dict.fromkeys(samples, 1), repeat=5)
    assert labels == {"fast": 1.0, "outlier": 1.2, "slow": 25.0}
    assert calls.count("slow") == collect.CUTOFF_LOOKS
    assert calls.count("fast") == 5 and calls.count("outlier") == 6


def test_rounds_rotate_and_stop_at_the_minimum_once_the_budget_is_spent():
    """Each round starts one solver later; past MIN_ROUNDS a spent budget ends the rounds, and an
    even count of samples is labelled by the lower middle one."""
    timed, calls = scripted({"a": [300.0, 290.0, 310.0], "b": [250.0, 260.0, 240.0]})
    samples = round_one(timed, ["a", "b"])
    labels = collect.later_rounds(samples, timed, {"a": 1, "b": 1}, repeat=5)
    assert calls == ["a", "b", "b", "a", "a", "b"]
    assert collect.MIN_ROUNDS == 3 and labels == {"a": 300.0, "b": 250.0}
    timed, calls = scripted({"a": [5.0, 4.0, 3.0, 6.0]})
    labels = collect.later_rounds(round_one(timed, ["a"]), timed, {"a": 1}, repeat=4)
    assert labels == {"a": 4.0}


def test_a_resumed_collection_times_and_counts_only_what_its_file_lacks(handle, tmp_path,
                                                                        monkeypatch, capsys):
    """A resumed collect times the problems its record file lacks and counts only those (a
    problem the file holds twice, as merged collections do, is one problem already there)."""
    from convsolve import Problem
    from convsolve.scale import connect
    timed = []
    monkeypatch.setattr(collect, "time_problem", lambda handle, problem, repeat, naive: (
        timed.append(problem.key()) or ({"direct.NaiveFwd": 1.0}, {})))
    problems = [Problem.conv2d((1, 2, 5, 5), (2, 2, 3, 3)), Problem.conv2d((1, 2, 6, 6),
                                                                           (2, 2, 3, 3))]
    path = tmp_path / "records.jsonl"
    collect.collect(connect(None), handle, problems, path, quiet=True)
    assert "2 of 2 problems timed (0 were already" in capsys.readouterr().err
    header, first, _ = path.read_text().splitlines()
    path.write_text(f"{header}\n{first}\n{first}\n")
    collect.collect(connect(None), handle, problems, path, quiet=True)
    assert "1 of 1 problems timed (1 were already" in capsys.readouterr().err
    assert timed == [p.key() for p in problems] + [problems[1].key()]
    assert len(path.read_text().splitlines()) == 4
