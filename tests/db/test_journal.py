"""The job journal: states and attempts per job, in the user find-db's file, forgotten on demand."""
from convsolve.cli import commands as cli
from convsolve.db.find_db import FindDb, Record
from convsolve.db.journal import Entry, Journal


def test_marks_keep_attempts_and_forget_drops_jobs():
    """mark() sets a state and counts a start only when asked; forget() drops the entry."""
    journal = Journal()
    journal.mark(["a", "b"], "running")
    journal.mark(["a"], "running", started=True)
    journal.mark(["a"], "running", started=True)
    journal.mark(["a"], "done", '{"x": 1}')
    assert journal.entries() == {"a": Entry("done", 2, '{"x": 1}'), "b": Entry("running", 0, "")}
    journal.forget(["a"])
    assert list(journal.entries()) == ["b"]


def test_journal_lives_beside_the_find_db_and_db_clear_empties_both(capsys):
    """The journal is a table of the user find-db's file; `convsolve db clear` empties it with
    the records (a journal saying done for records that are gone would skip their jobs)."""
    FindDb().store("dev/1cu", "key", [Record("s", "f", 1.0, 0)])
    Journal().mark(["job"], "done")
    assert Journal().user_path == FindDb().user_path
    assert len(FindDb().rows()) == 1 and Journal().entries()
    assert cli.main(["db", "clear"]) == 0
    assert FindDb().rows() == [] and Journal().entries() == {}
