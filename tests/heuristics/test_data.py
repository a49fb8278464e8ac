"""convsolve.heuristics.data: the data file reads back what was written, and a bad one is a
ModelError naming the file and the line."""
import gzip
import json

import pytest
from convsolve.errors import ModelError
from convsolve.heuristics import Dataset, Record, read_dataset, write_dataset
from synthetic_corpus import DEVICE, corpus

HEADER = {"device": {**DEVICE.to_dict(), "name": "fake", "keys": ["fake", "cpu/x", "*"],
                     "type": "cpu"}, "date": "2026-12-05", "command": "collect", "convsolve": "0.1"}


@pytest.mark.parametrize("name", ["d.jsonl", "d.jsonl.gz"])
def test_a_data_file_round_trips(tmp_path, name):
    """Written and read back (plain or gzip, found by its bytes): the device, the header's
    fields and every record's problem, times and failures."""
    records = list(corpus(5, 1).records)
    records[0] = Record(records[0].problem, {"fake.A": 1.5}, {"fake.B": "build failed"})
    dataset = Dataset(DEVICE, tuple(records), HEADER)
    write_dataset(dataset, tmp_path / name)
    again = read_dataset(tmp_path / name)
    assert again.device == DEVICE and again.header["device"]["name"] == "fake"
    assert again.header["command"] == "collect"
    assert [(r.problem, dict(r.times_ms), dict(r.failed)) for r in again.records] == [
        (r.problem, dict(r.times_ms), dict(r.failed)) for r in records]
    assert again.solvers() == sorted({n for r in records for n in r.times_ms})


def _lines(*lines):
    return "".join(json.dumps(line) + "\n" for line in lines)


GOOD = {"problem": corpus(1, 1).records[0].problem.key(), "times_ms": {"a": 1.0}}
BAD = {
    "no header": (_lines(GOOD), ":1: the first line must be a 'header'"),
    "bad device": (_lines({"header": {"device": {"name": "x"}}}), ":1: header: invalid device"),
    "bad json": (_lines({"header": HEADER}) + "{oops\n", ":2: not JSON"),
    "bad key": (_lines({"header": HEADER}, {**GOOD, "problem": "fwd-n1"}), ":2: no valid 'problem'"),
    "bad time": (_lines({"header": HEADER}, {**GOOD, "times_ms": {"a": -1}}), ":2: 'times_ms'"),
    "bad failed": (_lines({"header": HEADER}, {**GOOD, "failed": []}), ":2: 'failed'"),
    "empty": ("", "empty; expected a header line"),
}


@pytest.mark.parametrize("name", BAD)
def test_a_bad_data_file_names_file_and_line(tmp_path, name):
    text, message = BAD[name]
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(ModelError, match=message) as caught:
        read_dataset(path)
    assert str(path) in str(caught.value)


def test_a_truncated_gzip_data_file_is_a_model_error(tmp_path):
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(gzip.compress(_lines({"header": HEADER}, GOOD).encode())[:-12])
    with pytest.raises(ModelError, match="cannot read the data file"):
        read_dataset(path)


def test_repeat_records_of_a_problem_merge_into_their_geometric_mean():
    """Two collections read together: one record a problem, in first-seen order, each solver's
    time the geometric mean of the times it has; a failure stays only where nothing timed it."""
    a, b = (r.problem for r in corpus(2, 1).records)
    first = [Record(a, {"s.A": 1.0, "s.B": 8.0}, {"s.C": "build failed"}),
             Record(b, {"s.A": 3.0}, {"s.B": "wrong"})]
    second = [Record(b, {"s.A": 12.0, "s.B": 5.0}), Record(a, {"s.A": 4.0, "s.C": 2.0})]
    merged = Dataset(DEVICE, tuple(first + second), HEADER).merged()
    assert [r.problem for r in merged.records] == [a, b]
    assert dict(merged.records[0].times_ms) == pytest.approx({"s.A": 2.0, "s.B": 8.0, "s.C": 2.0})
    assert dict(merged.records[0].failed) == {}
    assert dict(merged.records[1].times_ms) == pytest.approx({"s.A": 6.0, "s.B": 5.0})
    assert dict(merged.records[1].failed) == {}
    single = Dataset(DEVICE, tuple(first), HEADER)
    assert single.merged() is single
    assert dict(Dataset(DEVICE, (first[1], first[1]), HEADER).merged().records[0].failed) == {
        "s.B": "wrong"}
