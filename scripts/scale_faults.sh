#!/bin/bash
# Issue 32's fault runs, on this host's default device with every installed plugin:
#  1. `convsolve tune --suite tiny --directions all` through a scheduler that is SIGKILLed after
#     RESTART_AFTER_S and started again on the same port (a `convsolve worker` serves it);
#  2. the same tune on `--cluster local`, its client SIGKILLed once the journal has a job done
#     and one not, then run again to resume.
# Each starts on empty dbs and an empty PoCL cache, and prints the find-db's problems and
# records and the journal's states: both must end with 9 problems, every job done, and the same
# record count (each record once).
#     bash scripts/scale_faults.sh        (from the repository root, after python3 dev.py test and
#                                          pip install distributed; PART=2 runs the second alone)
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
CS="$ROOT/.venv/bin/convsolve"
PY="$ROOT/.venv/bin/python"
WORK=$(mktemp -d)
PORT=${PORT:-8799}
TUNE=(tune --suite tiny --directions all --budget-configs 3 --budget-s 2 --quiet)
count() {   # problems, records, journal states of the dbs under $1
  "$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]);
print('problems, records:', c.execute('select count(distinct problem), count(*) from find_v3').fetchone(),
      'journal:', dict(c.execute('select state, count(*) from journal_v1 group by state')))" "$1/find.sqlite"
}
dbs() {   # empty dbs and an empty PoCL cache (cold builds: a run long enough to hit)
  mkdir -p "$1"; : > "$1/system.jsonl"
  export CONVSOLVE_USER_DB_PATH=$1/find.sqlite CONVSOLVE_PERF_DB_PATH=$1/perf.sqlite \
         CONVSOLVE_SYSTEM_DB_PATH=$1/system.jsonl POCL_CACHE_DIR=$1/pocl; }

if [ "${PART:-1}" = 1 ]; then
echo "== 1. scheduler restarted mid-run"
dbs "$WORK/restart"
"$ROOT/.venv/bin/dask" scheduler --port "$PORT" --dashboard-address :0 > "$WORK/s1.log" 2>&1 &
S=$!; sleep 3
"$CS" worker --scheduler "tcp://127.0.0.1:$PORT" > "$WORK/worker.log" 2>&1 &
W=$!; sleep 3
"$CS" "${TUNE[@]}" --cluster "tcp://127.0.0.1:$PORT" > "$WORK/client.log" 2>&1 &
C=$!; sleep "${RESTART_AFTER_S:-40}"
kill -9 $S; echo "scheduler SIGKILLed at $(date +%T)"; sleep 2
"$ROOT/.venv/bin/dask" scheduler --port "$PORT" --dashboard-address :0 > "$WORK/s2.log" 2>&1 &
S=$!
wait $C; echo "client exit $? at $(date +%T); $(grep -c 'submitting it again' "$WORK/client.log") jobs submitted again"
kill -TERM $W; wait $W; kill $S; wait $S 2>/dev/null
count "$WORK/restart"
fi

echo "== 2. client SIGKILLed mid-run, then resumed"
dbs "$WORK/resume"
"$CS" "${TUNE[@]}" --cluster local > "$WORK/c1.log" 2>&1 &
C=$!
until "$PY" -c "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); s = dict(c.execute(
'select state, count(*) from journal_v1 group by state')); sys.exit(not (s.get('done') and
s.get('running')))" "$WORK/resume/find.sqlite" 2>/dev/null; do sleep 1; done   # a job done, one not
kill -9 $C; wait $C 2>/dev/null; echo "client SIGKILLed at $(date +%T)"
count "$WORK/resume"
"$CS" "${TUNE[@]}" --cluster local > "$WORK/c2.log" 2>&1
echo "resumed: exit $?, $(grep -c 'done before' "$WORK/c2.log") rows done before"
count "$WORK/resume"
echo "logs in $WORK"
