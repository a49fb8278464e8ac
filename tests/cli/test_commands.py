"""The convsolve command: solvers, conv (find, immediate, verify, db hit), db, errors and exit codes."""
import json
import math
import os
import shlex
import subprocess
import sys

import pytest
from convsolve.cli import main
from test_driver_args import CORPUS, LINES

SMALL = ["conv", "-n", "2", "-c", "4", "-H", "9", "-W", "7", "-k", "6", "-y", "3", "-x", "3",
         "-p", "1", "-q", "0", "-u", "2"]


def test_solvers_lists_plugins_solvers_and_switches(capsys, monkeypatch):
    """`convsolve solvers` shows each plugin's distribution and each solver on or off and why."""
    monkeypatch.setenv("CONVSOLVE_DISABLE_SOLVERS", "direct.NaiveBwd*")
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_broken_import")
    assert main(["solvers"]) == 1   # a plugin was refused
    assert main(["solvers", "--allow-refused"]) == 0
    out = capsys.readouterr().out
    assert "cs_naive" in out and "FAILED: ImportError: planted import failure" in out
    assert "direct.NaiveFwd" in out and "off (CONVSOLVE_DISABLE_SOLVERS ('direct.NaiveBwd*'))" in out
    assert main(["solvers", "--json", "--allow-refused"]) == 0
    data = json.loads(capsys.readouterr().out)
    state = {s["name"]: s["enabled"] for s in data["solvers"]}
    assert state["direct.NaiveFwd"] and not state["direct.NaiveBwdData"]


def test_conv_finds_verifies_and_prints_table(capsys):
    """conv prints the ranked table per direction and MIOpenDriver's verification lines."""
    assert main(SMALL) == 0
    out = capsys.readouterr().out
    for line in ("Forward Convolution Verifies OK on CPU reference",
                 "Backward Convolution Data Verifies OK on CPU reference",
                 "Backward Convolution Weights Verifies OK on CPU reference"):
        assert line in out
    assert "direct.NaiveFwd" in out and "GFLOP/s" in out and "benchmark" in out


def test_conv_names_the_device_once(capsys):
    """The text report says which device ran the problems, once for all directions."""
    assert main([*SMALL, "-F", "3"]) == 0
    out = capsys.readouterr().out
    assert out.count("device: ") == 1 and out.startswith("device: ")


def test_conv_second_process_reports_db_hit(tmp_path):
    """Run again in a new process, conv reports a find-db hit and benchmarks nothing."""
    env = {**os.environ, "CONVSOLVE_USER_DB_PATH": str(tmp_path / "db.sqlite")}
    command = [sys.executable, "-m", "convsolve.cli", *SMALL, "-F", "1", "--json"]
    runs = [json.loads(subprocess.run(command, env=env, capture_output=True, text=True,
                                      check=True).stdout) for _ in range(2)]
    assert runs[0]["reports"][0]["source"] == "benchmark"
    assert runs[1]["reports"][0]["source"] == "find-db"
    assert all(s["source"] == "find-db" for s in runs[1]["reports"][0]["solutions"])
    assert runs[1]["reports"][0]["verify"]["ok"]


@pytest.mark.parametrize("select", [["--select", "immediate"], ["-S", "0"]])
def test_conv_immediate_and_timing(capsys, select):
    """--select immediate (MIOpen's -S 0) ranks by the fallback on a miss; -t 1 times the
    chosen solver."""
    assert main([*SMALL, "-F", "2", *select, "-t", "1", "-i", "2"]) == 0
    out = capsys.readouterr().out
    assert "find-db miss: solutions ranked by the WTI fallback" in out and "time: " in out


def test_failed_verification_exits_non_zero(capsys, monkeypatch):
    """A solver with wrong results makes conv print FAILED and exit 1."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_wrong")
    assert main([*SMALL, "-F", "1", "--solver", "wrong.Lazy"]) == 1
    assert "Forward Convolution FAILED: " in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["-g", "5"], "invalid groups=5"),
    (["-u", "0"], "invalid stride=0"),
    (["-F", "9"], "invalid -F=9"),
    (["--solver", "nope.X"], "no solver 'nope.X' is installed"),
])
def test_bad_arguments_give_one_line_errors(capsys, args, message):
    """Bad arguments exit 2 with a single 'convsolve: error:' line and no traceback."""
    assert main([*SMALL, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("convsolve: error:") and message in err and "\n" not in err


def test_db_path_show_clear(capsys):
    """db path names both dbs; show lists what find stored; clear removes it."""
    main([*SMALL, "-F", "1", "-V", "0"])
    capsys.readouterr()
    assert main(["db", "path"]) == 0 and "user:" in capsys.readouterr().out
    assert main(["db", "show", "--json"]) == 0
    assert [r["solver"] for r in json.loads(capsys.readouterr().out)] == ["direct.NaiveFwd"]
    assert main(["db", "clear"]) == 0 and "removed 1 records" in capsys.readouterr().out


def test_zero_timed_iterations_is_a_bad_argument(capsys):
    """-t 1 -i 0 is refused (exit 2, one line), not a statistics traceback."""
    assert main([*SMALL, "-F", "1", "-t", "1", "-i", "0"]) == 2
    assert "invalid -i=0: must be at least 1" in capsys.readouterr().err


@pytest.mark.parametrize("budget", ["abc", "0", "-1", "nan"])
def test_bad_find_budget_names_the_variable(capsys, monkeypatch, budget):
    """CONVSOLVE_FIND_SOLVER_BUDGET_MS that is not a positive number is a bad argument."""
    monkeypatch.setenv("CONVSOLVE_FIND_SOLVER_BUDGET_MS", budget)
    monkeypatch.setenv("CONVSOLVE_FIND_MODE", "NORMAL")
    assert main([*SMALL, "-F", "1"]) == 2
    assert "CONVSOLVE_FIND_SOLVER_BUDGET_MS" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["devices"], [*SMALL, "-F", "1", "-V", "0"]])
def test_closed_pipe_ends_quietly(command):
    """A reader that leaves early (`| head -1`) gets no BrokenPipeError traceback."""
    process = subprocess.Popen([sys.executable, "-m", "convsolve.cli", *command],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    process.stdout.close()   # the reader is gone before the first line
    err = process.stderr.read().decode()
    assert process.wait() == 141 and "Traceback" not in err, err


def test_negative_seed_is_a_bad_argument(capsys):
    """--seed -1 is refused by the parser, not a numpy traceback."""
    with pytest.raises(SystemExit) as info:
        main([*SMALL, "--seed", "-1"])
    assert info.value.code == 2 and "must be at least 0" in capsys.readouterr().err


def test_explain_checks_the_device_before_making_tensors(capsys, handle):
    """explain on a problem too big for the device is one line and exit 2, not a MemoryError."""
    pad = math.ceil(math.isqrt(handle.device.max_mem_alloc_size // 4 + 1) / 2)   # y: 1 + 2 pad
    if (1 + 2 * pad) ** 2 >= 2 ** 31:
        pytest.skip("every tensor kernels can index fits this device's largest buffer")
    big = ["explain", "-n", "1", "-c", "1", "-H", "1", "-W", "1", "-k", "1", "-y", "1", "-x", "1",
           "-p", str(pad), "-q", str(pad), "-F", "1"]
    assert main(big) == 2 and "y bytes" in capsys.readouterr().err
    assert main([*big, "--no-run"]) == 0


def test_huge_padding_verifies_on_sampled_elements(capsys):
    """-V 1 on a problem whose padded input would not fit in memory as float64 checks sampled
    output elements and verifies."""
    assert main(["conv", "-n", "1", "-c", "1", "-H", "1", "-W", "1", "-k", "1", "-y", "1",
                 "-x", "1", "-p", "9000", "-q", "9000", "-u", "3000", "-v", "3000", "-F", "1",
                 "--solver", "direct.NaiveFwd"]) == 0
    assert "Verifies OK" in capsys.readouterr().out


def test_solver_family_finds_its_fastest(capsys, monkeypatch):
    """--solver with a family name benchmarks every candidate and runs that family's fastest."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,gemm")
    assert main([*SMALL, "-F", "4", "--solver", "gemm", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["reports"][0]
    ranked = [s["solver"] for s in report["solutions"]]
    assert len(ranked) >= 2 and all(name.startswith("gemm.") for name in ranked)
    assert report["solver"] == ranked[0] and report["verify"]["ok"]


# {{{ MIOpenDriver's command lines

@pytest.mark.parametrize("prefix", [["MIOpenDriver"], ["./bin/MIOpenDriver"],
                                    ["/opt/rocm/bin/MIOpenDriver"]])
def test_pasted_line_runs_whole(capsys, prefix):
    """A pasted MIOpenDriver line, its driver path and MIOpen-only flags included, runs."""
    line = "conv -n 1 -c 2 -H 5 -W 4 -k 2 -y 3 -x 3 -p 1 -q 1 -m conv -g 1 -F 1 -t 1 -s 0 -b 0"
    assert main([*prefix, *line.split()]) == 0
    assert "Forward Convolution Verifies OK" in capsys.readouterr().out


@pytest.mark.parametrize("n, text, expected",
                         [line for line in LINES if line[2][0] == "refused"],
                         ids=lambda v: str(v) if isinstance(v, int) else "")
def test_refused_corpus_lines_exit_2_naming_the_flag(capsys, n, text, expected):
    """Each line convsolve cannot run exits 2 with one stderr line naming the flag and value."""
    assert main(shlex.split(text.split(" #")[0])) == 2
    err = capsys.readouterr().err
    assert err.startswith("convsolve: error: invalid ") and expected[1] in err
    assert err.count("\n") == 1


def test_transposed_convolution_verifies_in_every_direction(capsys):
    """-m trans runs each direction through the one it maps to, and verifies."""
    assert main(["conv", "-n", "1", "-c", "4", "-H", "4", "-W", "3", "-k", "6", "-y", "3", "-x",
                 "2", "-u", "2", "-v", "3", "-p", "1", "-Y", "1", "-X", "2", "-g", "2",
                 "-m", "trans"]) == 0
    out = capsys.readouterr().out
    for name in ("Transposed Forward Convolution (as bwd) Verifies OK",
                 "Transposed Backward Convolution Data (as fwd) Verifies OK",
                 "Transposed Backward Convolution Weights (as wrw) Verifies OK"):
        assert name in out


def test_file_runs_the_corpus(capsys):
    """--file --json: every supported line runs and verifies, every other one carries its error
    naming the flag; a refused line makes the exit code 2."""
    assert main(["conv", "--file", str(CORPUS), "--json"]) == 2
    lines = {line["line"]: line for line in json.loads(capsys.readouterr().out)["lines"]}
    assert len(lines) == len(LINES)
    for n, _, expected in LINES:
        if expected[0] == "ok":
            assert lines[n]["reports"] and "error" not in lines[n], lines[n]
            assert all(r["verify"]["ok"] for r in lines[n]["reports"] if "verify" in r)
        else:
            assert expected[1] in lines[n]["error"]


def test_file_table_and_exit_codes(capsys, tmp_path, monkeypatch):
    """--file prints one table (problem, direction, solver, time, GFLOP/s, verified); exit 0 when
    all verify, 1 when a verification fails, 2 when a line is refused."""
    good = "MIOpenDriver conv -n 1 -c 2 -H 5 -W 5 -k 2 -y 3 -x 3 -F 1 -t 1 -i 2"
    path = tmp_path / "lines.txt"
    path.write_text(f"# my network\n{good}\n\n{good} -m trans -F 6\n")
    assert main(["conv", "--file", str(path)]) == 0
    out = capsys.readouterr().out
    for word in ("problem", "direction", "solver", "time (ms)", "GFLOP/s", "verified", "OK",
                 "fwd-n1-c2-h5-w5", "bwd (trans)", "wrw (trans)"):
        assert word in out
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_wrong")
    path.write_text(f"{good} -S wrong.Lazy\n")
    assert main(["conv", "--file", str(path)]) == 1 and "FAILED" in capsys.readouterr().out
    path.write_text(f"{good}\nconvfp16 -n 1\n")
    assert main(["conv", "--file", str(path)]) == 2
    assert "error: invalid command='convfp16'" in capsys.readouterr().out
    assert main(["conv", "--file", str(path), "-n", "2"]) == 2


def test_explain_takes_a_miopen_line(capsys):
    """explain reads the same MIOpenDriver flags (the run flags too) and a driver prefix."""
    assert main(["MIOpenDriver", "explain", "-n", "1", "-c", "2", "-H", "5", "-W", "5", "-k", "2",
                 "-F", "1", "-t", "1", "--no-run"]) == 0
    assert "fwd-n1-c2-h5-w5-k2" in capsys.readouterr().out

# }}}


def test_a_refused_solver_is_named_as_refused(capsys, monkeypatch):
    """--solver naming a solver discovery refused says why, not "not installed"."""
    monkeypatch.setenv("CONVSOLVE_PLUGINS", "cs_naive,cs_contract")
    assert main([*SMALL, "-F", "1", "--solver", "contract.Misspelt"]) == 2
    err = capsys.readouterr().err
    assert "installed but refused" in err and "did you mean 'is_applicable'?" in err


# {{{ output that cannot be written

@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
@pytest.mark.parametrize("command", [
    ["solvers", "--allow-refused"], ["devices"], ["env"], ["hooks"], ["db", "show"], ["--version"],
    ["explain", *SMALL[1:], "-F", "1", "--no-run"], [*SMALL, "-F", "1", "-V", "0"]],
    ids=lambda command: command[0])
def test_a_full_output_device_is_one_line_and_exit_1(command):
    """`convsolve ... > /dev/full` ends with one error line and exit 1, not an OSError
    traceback (nor the interpreter's own complaint at exit)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "convsolve.cli", *command], stdout=full,
                              stderr=subprocess.PIPE, text=True, check=False)
    assert done.returncode == 1, done.stderr
    assert done.stderr == "convsolve: error: cannot write the output: No space left on device\n"

# }}}


# {{{ conv --file

def test_file_takes_bare_flag_lines_and_counts_failures(capsys, tmp_path):
    """A --file line of conv's flags alone runs; a bad line is refused without a literal \\n;
    the count of failed lines follows the table; every line failing exits non-zero."""
    path = tmp_path / "lines.txt"
    path.write_text("-n 1 -c 2 -H 5 -W 5 -k 2 -y 3 -x 3 -F 1\nbogus -n 1\n")
    assert main(["conv", "--file", str(path)]) == 2
    out, err = capsys.readouterr()
    assert "fwd-n1-c2-h5-w5-k2" in out and "OK" in out and "\\n" not in out
    assert "error: invalid command='bogus -n 1'" in out and err == "1 of 2 lines failed\n"
    path.write_text("bogus\n-n 1 -q\n")
    assert main(["conv", "--file", str(path), "--json"]) == 2
    assert json.loads(capsys.readouterr().out)["failed"] == 2
    path.write_text("# nothing but a comment\n")
    assert main(["conv", "--file", str(path)]) == 2
    assert "has no command lines" in capsys.readouterr().err

# }}}


# {{{ MIOpenDriver's result lines

@pytest.mark.parametrize("forw, name, stat, sizes, read, written", [
    ("1", "Forward", "fwd-conv3x3u2", "2, 4, 5, 5, 3, 3, 6", 2016 + 864, 1200),
    ("2", "Backward Data", "bwdd-conv3x3u2", "2, 4, 3, 3, 6, 5, 5", 4 * 2 * 4 * 6 + 864, 1200),
    ("4", "Backward Weights", "bwdw-conv3x3u2", "2, 4, 5, 5, 3, 3, 6", 0, 0)])
def test_timed_conv_prints_miopendrivers_result_lines(capsys, forw, name, stat, sizes, read,
                                                      written):
    """-t 1 prints MIOpenDriver's result lines in its format: algorithm and solution, the
    average kernel time, and the stats pair with MIOpen's field order and arithmetic."""
    assert main([*SMALL, "-F", forw, "-t", "1", "-i", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("stats: name, n, c, ho, wo, x, y, k, flopCnt, bytesRead, bytesWritten, "
                     "GFLOPs, GB/s, timeMs")
    solver = {"1": "NaiveFwd", "2": "NaiveBwdData", "4": "NaiveBwdWeights"}[forw]
    assert lines[at - 2] == f"MIOpen {name} Conv. Algorithm: 1, Solution: 0/direct.{solver}"
    elapsed = lines[at - 1]
    assert elapsed.startswith(f"GPU Kernel Time {name} Conv. Elapsed: ")
    assert elapsed.endswith(" ms (average)")
    time_ms = float(elapsed.split(": ")[1].split()[0])
    assert lines[at + 1].startswith(f"stats: {stat}, {sizes},  21600, {read}, {written}, ")
    gflops, gbps, last = lines[at + 1].split(", ")[-3:]   # rates as %.0f of the printed time's
    assert abs(float(gflops) - 21600 / time_ms / 1e6) <= 0.501 and last == f"{time_ms:f}"
    assert abs(float(gbps) - (read + written) / time_ms / 1e6) <= 0.501


def test_timed_3d_conv_prints_depth_beside_each_size(capsys):
    """A 3-D problem's stats line adds depth beside each size (do, z) and counts its FLOPs."""
    assert main(["conv3d", "-n", "1", "-c", "2", "-!", "3", "-H", "4", "-W", "5", "-k", "3",
                 "-@", "2", "-y", "1", "-x", "3", "-I", "NDHWC", "-F", "1", "-t", "1",
                 "-i", "2"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index("stats: name, n, c, do, ho, wo, z, x, y, k, flopCnt, bytesRead, "
                     "bytesWritten, GFLOPs, GB/s, timeMs")
    flops = 2 * 2 * 2 * 1 * 3 * 3 * 2 * 4 * 3   # n c z y x k do ho wo
    assert lines[at + 1].startswith(f"stats: fwd-conv2x1x3u1, 1, 2, 2, 4, 3, 2, 1, 3, 3,  {flops},")

# }}}


# {{{ habits: --version, exit codes, the README's table

def test_version_names_convsolve_and_each_installed_plugin(capsys):
    """--version prints convsolve's version, then each installed plugin's distribution and
    version (whatever the autoload switch says), and exits 0."""
    import importlib.metadata

    from convsolve import __version__
    with pytest.raises(SystemExit) as info:
        main(["--version"])
    out = capsys.readouterr().out
    assert info.value.code == 0 and out.startswith(f"convsolve {__version__}\n")
    for ep in importlib.metadata.entry_points(group="convsolve.solvers"):
        assert f"{ep.dist.name} {ep.dist.version}" in out


def test_missing_requirements_exit_2(capsys, monkeypatch, tmp_path):
    """A file to read that does not exist and matplotlib missing for --plot are missing
    requirements: exit 2 with one line, as README says (they exited 1)."""
    missing = str(tmp_path / "missing.jsonl")
    assert main(["db", "import", missing]) == 2
    err = capsys.readouterr().err
    assert err == f"convsolve: error: invalid file={missing!r}: no such file\n"
    assert main(["conv", "--file", missing]) == 2
    assert "cannot be read" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["bench", "--suite", "tiny", "--plot", str(tmp_path / "p.png")]) == 2
    err = capsys.readouterr().err
    assert "pip install matplotlib" in err and err.count("\n") == 1


def test_the_plot_extra_the_error_names_exists(monkeypatch):
    """The install hint of --plot names an extra that pyproject.toml declares, with matplotlib."""
    import re
    from pathlib import Path

    from convsolve.bench.report import need_matplotlib
    from convsolve.errors import ConvsolveError
    tomllib = pytest.importorskip("tomllib")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConvsolveError) as info:
        need_matplotlib()
    extra = re.search(r"convsolve\[(\w+)\]", str(info.value)).group(1)
    project = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"][extra] == ["matplotlib"]


def test_readme_table_names_every_command_and_flag():
    """README's command table has a row for every subcommand, naming each of its --flags, and
    --version."""
    import argparse
    from pathlib import Path

    from convsolve.cli.commands import build_parser

    def subcommands(parser):
        return next((a.choices for a in parser._actions
                     if isinstance(a, argparse._SubParsersAction)), {})
    readme = (Path(__file__).parents[2] / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `convsolve ")]
    missing = []
    for name, parser in subcommands(build_parser()).items():
        own = [row for row in rows if row.startswith(f"| `convsolve {name}")]
        flags = {flag for p in (parser, *subcommands(parser).values()) for a in p._actions
                 for flag in a.option_strings if flag.startswith("--") and flag != "--help"}
        missing += [name] if not own else [f"{name} {flag}" for flag in sorted(flags)
                                           if not any(flag in row for row in own)]
    assert not missing and any(row.startswith("| `convsolve --version") for row in rows), missing

# }}}
