"""MIOpenDriver's conv command line: the flag table, prefixes, defaults, refusals and the corpus."""
import shlex
from pathlib import Path

import pytest
from convsolve import Direction, Problem, ValidationError
from convsolve.cli.driver_args import FLAGS, parse_args, parse_file, parse_line, strip_driver

CORPUS = Path(__file__).parents[1] / "data" / "miopen_commands.txt"
LINES = [(n, text, text.rsplit("#", 1)[1].split()) for n, text, _ in parse_file(CORPUS)]


def test_flag_table_is_miopens():
    """Every flag of MIOpen's AddCmdLineArgs is there once, with its short name and default."""
    assert len({f.short for f in FLAGS}) == len({f.long for f in FLAGS}) == len(FLAGS) == 50
    by_long = {f.long: f for f in FLAGS}
    for long, short, default in [("forw", "F", "0"), ("batchsize", "n", "100"), ("in_d", "!", "32"),
                                 ("trans_output_pad_h", "Y", "0"), ("solution", "S", "-1"),
                                 ("spatial_dim", "_", "2"), ("pad_mode", "z", "default")]:
        assert (by_long[long].short, by_long[long].default) == (short, default)


def test_defaults_are_miopens():
    """No flags: MIOpen's defaults (n 100, c 3, 32x32, k 32, 3x3), all three directions, find."""
    command = parse_args([])
    assert [p.direction for p in command.problems] == list(Direction)
    assert command.problems[0] == Problem.conv2d((100, 3, 32, 32), (32, 3, 3, 3))
    assert (command.verify, command.time, command.iterations) == (True, False, 10)
    assert not (command.exhaustive or command.immediate or command.solver or command.transposed)


@pytest.mark.parametrize("prefix", ["MIOpenDriver", "./bin/MIOpenDriver",
                                    "/opt/rocm/bin/MIOpenDriver",
                                    "MIOpen(HIP): Command [LogCmdConvolution] ./bin/MIOpenDriver"])
def test_driver_prefixes_are_dropped(prefix):
    """A leading MIOpenDriver (any path, after a log line's prefix) is dropped; flags stay."""
    assert strip_driver([*prefix.split(), "conv", "-n", "2"]) == ["conv", "-n", "2"]
    assert strip_driver(["conv", "-d", "x/MIOpenDriver"]) == ["conv", "-d", "x/MIOpenDriver"]


@pytest.mark.parametrize("word", ["convfp16", "convbfp16", "convint8", "convfp8", "convbfp8"])
def test_other_data_types_name_the_command(word):
    """A conv command word of another data type is refused, naming it."""
    with pytest.raises(ValidationError, match=f"invalid command='{word}'.*float32 only"):
        strip_driver(["MIOpenDriver", word, "-n", "1"])


def test_solution_search_and_mode():
    """-S -1 finds, -S 0 is immediate mode, -S NAME names a solver, -s 1 is exhaustive."""
    assert not parse_args(["-S", "-1"]).immediate and parse_args(["-S", "0"]).immediate
    assert parse_args(["--solution", "gemm.Im2ColGemm"]).solver == "gemm.Im2ColGemm"
    assert parse_args(["-s", "1"]).exhaustive
    command = parse_args(["-m", "trans", "-c", "4", "-k", "6", "-g", "2", "-F", "5"])
    assert command.transposed and command.requested == (Direction.FORWARD,
                                                         Direction.BACKWARD_WEIGHTS)
    assert [p.direction for p in command.problems] == [Direction.BACKWARD_DATA,
                                                       Direction.BACKWARD_WEIGHTS]
    assert command.problems[0].w.shape == (4, 3, 3, 3)   # MIOpen's (c, k/g, y, x)


@pytest.mark.parametrize("mode, pads", [("same", ((1, 1), (0, 0))), ("valid", ((0, 0), (0, 0))),
                                        ("default", ((2, 2), (2, 2)))])
def test_pad_mode(mode, pads):
    """-z same and valid set the padding as MIOpen does (same: 7 % 2 -> 1, 6 % 2 -> 0); default
    keeps -p -q."""
    problem = parse_args(f"-H 7 -W 6 -u 2 -v 2 -p 2 -q 2 -z {mode} -F 1".split()).problems[0]
    assert problem.conv.pads == pads


def test_long_names_and_case():
    """--long names work as the short ones; layouts are upper-cased as MIOpen does."""
    assert parse_args(["--batchsize", "3", "--in_layout", "nchw"]).problems[0].n == 3
    with pytest.raises(ValidationError, match="invalid -n='x': expected an integer"):
        parse_args(["-n", "x"])
    with pytest.raises(ValidationError, match="needs a value"):
        parse_args(["-n"])


@pytest.mark.parametrize("n, text, expected", LINES, ids=[str(n) for n, _, _ in LINES])
def test_corpus_line_parses_or_names_its_flag(n, text, expected):
    """Each corpus line parses, or is refused with one message naming the flag and its value."""
    if expected[0] == "ok":
        assert parse_line(text).problems
    else:
        with pytest.raises(ValidationError) as info:
            parse_line(text)
        assert expected[1] in str(info.value) and "\n" not in str(info.value)


def test_corpus_covers_every_flag_mode_and_type():
    """The corpus has at least 40 lines and uses every flag, both modes and every data type."""
    words = {w for _, text, _ in LINES for w in shlex.split(text.split(" #")[0])}
    assert len(LINES) >= 40
    assert all(f"-{f.short}" in words or f"--{f.long}" in words for f in FLAGS), [
        f.long for f in FLAGS if f"-{f.short}" not in words and f"--{f.long}" not in words]
    assert {"trans", "conv", "convfp16", "convbfp16", "convint8", "NHWC"} <= words


def test_parse_file_skips_comments_and_blank_lines(tmp_path):
    """parse_file keeps line numbers, skips # comments and blank lines, returns refusals."""
    path = tmp_path / "lines.txt"
    path.write_text("# a comment\n\nMIOpenDriver conv -n 1 -F 1\nconvfp16 -n 1\n")
    (n1, _, ok), (n2, _, refused) = parse_file(path)
    assert (n1, n2) == (3, 4) and ok.problems[0].n == 1 and isinstance(refused, ValidationError)


def test_a_line_of_bare_flags_parses(tmp_path):
    """A line of conv's flags alone (as `convsolve conv` takes them) is a command line too; a
    line that is neither is refused in one line, without the line's end as a literal \\n."""
    command = parse_line("-n 2 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3 -F 1\n")
    assert command.problems == (Problem.conv2d((2, 4, 8, 8), (4, 4, 3, 3)),)
    path = tmp_path / "lines.txt"
    path.write_text("-n 2 -c 4 -H 8 -W 8 -k 4 -y 3 -x 3\nbogus -n 2\n")
    (_, _, ok), (_, _, refused) = parse_file(path)
    assert ok.problems[0].n == 2 and isinstance(refused, ValidationError)
    assert str(refused) == ("invalid command='bogus -n 2': expected MIOpenDriver conv and its "
                            "flags, or conv's flags alone")


def test_a_file_that_cannot_be_read_is_a_bad_argument(tmp_path):
    """--file naming no readable file is a ValidationError naming it, not an OSError."""
    with pytest.raises(ValidationError, match="invalid --file=.*missing.txt.*cannot be read: No "
                                              "such file"):
        parse_file(tmp_path / "missing.txt")


@pytest.mark.parametrize("line", ["explain ./bin/MIOpenDriver conv -n 2",
                                  "explain /opt/rocm/bin/MIOpenDriver conv -n 2",
                                  "explain conv -n 2", "MIOpenDriver explain -n 2"])
def test_explain_keeps_its_subcommand_before_a_pasted_line(line):
    """After `explain`, a pasted line's MIOpenDriver and conv are dropped: explain stays the
    subcommand (it used to become `conv`, which benchmarks and verifies)."""
    assert strip_driver(line.split()) == ["explain", "-n", "2"]
    with pytest.raises(ValidationError, match="invalid command='convfp16'"):
        strip_driver(["explain", "MIOpenDriver", "convfp16", "-n", "2"])


def test_3d_flags_and_layouts_are_honoured():
    """--spatial_dim 3 (or the command word conv3d) reads MIOpen's depth flags (-! -@ -$ -#
    -^ and -%), -I -f -O give each tensor's layout (empty: channels-first; -I is a transposed
    convolution's input), and a layout of another rank is refused naming its flag."""
    flags = "-n 2 -c 4 -! 5 -H 6 -W 7 -k 6 -@ 3 -y 1 -x 2 -$ 1 -p 0 -q 1 -# 2 -u 1 -v 1 -^ 2 -g 2"
    expected = Problem.conv3d((2, 4, 5, 6, 7), (6, 2, 3, 1, 2), (2, 1, 1),
                              ((1, 1), (0, 0), (1, 1)), (2, 1, 1), 2, layout={"x": "NDHWC"})
    for line in (f"conv {flags} -_ 3 -I ndhwc -F 1", f"MIOpenDriver conv3d {flags} -I NDHWC -F 1"):
        assert parse_line(line).problems == (expected,)
    nhwc = parse_args(shlex.split("-n 1 -c 2 -H 5 -W 5 -k 3 -f NHWC -O NHWC -F 1")).problems[0]
    assert nhwc.layouts == ("NCHW", "NHWC", "NHWC")
    trans = parse_args(shlex.split("-_ 3 -m trans -c 2 -k 4 -! 3 -% 1 -# 2 -I NDHWC -F 1"))
    assert trans.problems[0].y.layout == "NDHWC"
    assert trans.problems[0].x.shape[2] == (3 - 1) * 2 + 2 + 1 + 1   # (D-1)*u + (Z-1) + pad + 1
    with pytest.raises(ValidationError) as info:
        parse_args(["-_", "3", "-I", "NHWC"])
    assert info.value.field == "-I"
