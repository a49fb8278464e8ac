"""Processes and threads sharing one find-db and one kernel cache, some killed mid-write.

Nothing committed is lost, the db passes integrity_check, no cache entry that loads is corrupt and
no surviving process sees an error.  The default run takes a few seconds; a larger one:

    CONVSOLVE_STRESS_PROCESSES=16 CONVSOLVE_STRESS_ROUNDS=10 CONVSOLVE_STRESS_RECORDS=40 \\
        .venv/bin/python -m pytest -q tests/test_concurrency.py -s

(the sizes are read when the module is imported, as the isolation fixture clears CONVSOLVE_*,
and handed to the workers).
"""
import hashlib
import logging
import multiprocessing
import os
import random
import signal
import sqlite3
import threading
import time
import traceback

import suite_env
from convsolve import env
from convsolve.db.find_db import FindDb, Record
from convsolve.device.kernel_cache import KernelCache

PROCESSES = env.integer(suite_env.STRESS_PROCESSES, minimum=2)
ROUNDS = env.integer(suite_env.STRESS_ROUNDS, minimum=1)
RECORDS = env.integer(suite_env.STRESS_RECORDS, minimum=1)   # per thread and round
SEED = env.integer(suite_env.STRESS_SEED, minimum=0) or random.randrange(1, 1 << 30)
THREADS = 2
KILLS = max(1, PROCESSES // 4)   # per round
SHARED_ENTRIES = 4               # cache keys every process writes and reads
PAYLOAD_BYTES = 64 * 1024        # large enough for a kill to land inside a write

KEY = "fwd-n1-c3-h8-w8-k4-y3-x3-p0.0-q0.0-u1-v1-l1-j1-g1-float32-NCHW"


def _cache_key(name):
    return hashlib.sha256(name.encode()).hexdigest()


def _payload(key):
    return hashlib.sha256(key.encode()).digest() * (PAYLOAD_BYTES // 32)


def _records(i):
    return [Record("a.X", "a", float(i), 0), Record("b.Y", "b", None, 0, failure="no build")]


def _work(db, cache, tag, records, say, committed):
    """One thread: store records and cache entries under its own keys, read them back."""
    for i in range(records):
        problem = f"{KEY}-{tag}-{i}"
        db.store("dev", problem, _records(i))
        say(f"db {problem}")
        entry = _cache_key(f"{tag}-{i}")
        cache.store(entry, _payload(entry))
        say(f"kc {entry}")
        shared = _cache_key(f"shared-{i % SHARED_ENTRIES}")
        cache.store(shared, _payload(shared))
        committed()
        earlier = f"{KEY}-{tag}-{i // 2}"
        if [r.solver for r in db.lookup("dev", earlier)] != ["a.X", "b.Y"]:
            say(f"error lost {earlier}")
        for key in (shared, _cache_key(f"{tag}-{i // 2}")):
            if cache.load(key) != _payload(key):
                say(f"error cache entry {key} wrong or missing")


def _worker(db_path, cache_dir, system_path, tag, records, log_path, progress, kill_after):
    """A process: THREADS threads at work; reports each commit to ``log_path`` (one line, one
    write).  One to be killed tells the test after ``kill_after`` commits, and stays alive (its
    pid ours to kill) until it is killed or the test closes the pipe."""
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def say(line):
        os.write(fd, f"{line}\n".encode())

    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: say(f"warn {record.getMessage()}")
    logging.getLogger("convsolve").addHandler(handler)
    count, lock = [0], threading.Lock()

    def committed():
        with lock:
            count[0] += 1
            if count[0] == kill_after:
                progress.send_bytes(b"kill me")

    def thread(number):
        try:
            _work(FindDb(db_path, system_path), KernelCache(cache_dir), f"{tag}t{number}",
                  records, say, committed)
        except BaseException:   # noqa: BLE001 - reported to the test, which fails on it
            say("error " + traceback.format_exc().replace("\n", " | "))
    threads = [threading.Thread(target=thread, args=(n,)) for n in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if kill_after is not None:
        if count[0] < kill_after:   # an error stopped it short
            progress.send_bytes(b"kill me")
        progress.poll(120)


def _lines(log_path):
    """The complete lines of a worker's log (a killed worker may have left half of one)."""
    if not log_path.exists():
        return []
    text = log_path.read_text()
    return text.splitlines() if text.endswith("\n") else text.splitlines()[:-1]


def _round(ctx, rng, tmp_path, number, paths):
    """Start PROCESSES workers together and SIGKILL KILLS of them mid-run; (logs, killed)."""
    victims = set(rng.sample(range(PROCESSES), KILLS))
    started = []
    for p in range(PROCESSES):
        log_path = tmp_path / f"r{number}p{p}.log"
        receive, send = ctx.Pipe()
        kill_after = rng.randrange(1, THREADS * RECORDS // 2 + 1) if p in victims else None
        proc = ctx.Process(target=_worker, args=(*paths, f"r{number}p{p}", RECORDS, log_path,
                                                 send, kill_after))
        proc.start()
        send.close()
        started.append((proc, receive, log_path))
    for p in sorted(victims):
        proc, receive, _ = started[p]
        assert receive.poll(120), "a worker to be killed never got going"
        os.kill(proc.pid, signal.SIGKILL)
    killed = 0
    for proc, receive, _ in started:
        proc.join(120)
        receive.close()
        assert proc.exitcode is not None, "a worker hung"
        killed += proc.exitcode == -signal.SIGKILL
    return [(proc.exitcode, _lines(log)) for proc, _, log in started], killed


def test_processes_threads_and_kills_lose_nothing(tmp_path):
    """PROCESSES processes x THREADS threads x ROUNDS rounds store and read back records and
    cache entries, starting on a garbage db, KILLS per round SIGKILLed mid-run: every committed
    record and entry is there, the db is intact, the garbage was set aside once, and no surviving
    process logged an error or a cache warning."""
    db_path, cache_dir, system_path = (tmp_path / "find.sqlite", tmp_path / "kernels",
                                       tmp_path / "system.jsonl")
    system_path.write_text("")
    db_path.write_bytes(b"garbage, not sqlite\n" * 200)
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["convsolve.db.find_db", "convsolve.device.kernel_cache"])
    rng = random.Random(SEED)
    start, logs, kills = time.monotonic(), [], 0
    for number in range(ROUNDS):
        outcome, killed = _round(ctx, rng, tmp_path, number, (db_path, cache_dir, system_path))
        logs += outcome
        kills += killed
    problems = [line[3:] for _, lines in logs for line in lines if line.startswith("db ")]
    entries = [line[3:] for _, lines in logs for line in lines if line.startswith("kc ")]
    for code, lines in logs:
        bad = [line for line in lines if line.startswith("error")
               or line.startswith("warn") and ("kernel cache" in line or "moved aside" in line)]
        assert code in (0, -signal.SIGKILL) and not bad, (SEED, code, bad[:3])
    db = FindDb(db_path, system_path)
    lost = [p for p in problems if [r.solver for r in db.lookup("dev", p)] != ["a.X", "b.Y"]]
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    assert len(list(tmp_path.glob("find.sqlite.corrupt-*"))) == 1, SEED   # the garbage, once
    cache = KernelCache(cache_dir)
    on_disk = [p.stem for p in cache_dir.rglob("*.bin")]
    wrong = [k for k in on_disk if cache.load(k) != _payload(k)]
    missing = [k for k in entries if cache.load(k) is None]
    print(f"\nstress (seed {SEED}): {PROCESSES} processes x {THREADS} threads x {ROUNDS} rounds x "
          f"{RECORDS} records; {kills} killed; {len(problems)} committed records, {len(lost)} "
          f"lost; {len(entries)} committed cache entries, {len(missing)} missing, {len(wrong)} "
          f"bad of {len(on_disk)} on disk, {len(list(cache_dir.rglob('.tmp-*')))} temporary "
          f"files of killed writers; {time.monotonic() - start:.1f} s")
    assert not lost and not wrong and not missing, (SEED, lost[:3], wrong[:3], missing[:3])
    assert len(problems) >= (PROCESSES - KILLS) * ROUNDS * THREADS * RECORDS


def _start_on(db_path, system_path, barrier, number):
    barrier.wait(60)
    FindDb(db_path, system_path).store("dev", f"{KEY}-{number}", _records(number))


def test_processes_starting_together_on_a_garbage_db_set_it_aside_once(tmp_path):
    """PROCESSES processes released together on a garbage db (ROUNDS times, a fresh one each):
    it is set aside exactly once and every process's record is in the rebuilt db (a process
    that found the garbage late must not move the rebuilt db aside)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["convsolve.db.find_db", "convsolve.device.kernel_cache"])
    system_path = tmp_path / "system.jsonl"
    system_path.write_text("")
    for number in range(ROUNDS * 2):
        db_path = tmp_path / f"r{number}" / "find.sqlite"
        db_path.parent.mkdir()
        db_path.write_bytes(b"garbage, not sqlite\n" * 200)
        barrier = ctx.Barrier(PROCESSES)
        procs = [ctx.Process(target=_start_on, args=(db_path, system_path, barrier, p))
                 for p in range(PROCESSES)]
        for proc in procs:
            proc.start()
        for proc in procs:
            proc.join(120)
        assert [proc.exitcode for proc in procs] == [0] * PROCESSES
        db = FindDb(db_path, system_path)
        assert all(db.lookup("dev", f"{KEY}-{p}") for p in range(PROCESSES)), number
        assert len(list(db_path.parent.glob("find.sqlite.corrupt-*"))) == 1, number
