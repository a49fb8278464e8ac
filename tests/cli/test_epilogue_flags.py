"""`convsolve conv` and `explain` with epilogues: -b 1 (forward bias, backward-bias), the
activation and residual flags, and their refusals."""
import json

from convsolve.cli import main

SMALL = ["conv", "-n", "2", "-c", "3", "-H", "7", "-W", "6", "-k", "4", "-y", "3", "-x", "3",
         "-p", "1", "-q", "1"]


def test_bias_is_honoured_forward_and_backward(capsys):
    """-b 1: the forward problem carries a bias epilogue and verifies; the backward run computes
    db too, timed and verified; the JSON report has both."""
    assert main([*SMALL, "-b", "1", "-t", "1"]) == 0
    out = capsys.readouterr().out
    assert "-NCHW-epi.bias (" in out and "Forward Convolution Verifies OK" in out
    assert "Backward Bias Verifies OK on CPU reference" in out and "Backward Bias: " in out
    assert main([*SMALL, "-b", "1", "-F", "4", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["reports"][0]
    assert report["backward_bias"]["verify"]["ok"] and report["verify"]["ok"]


def test_backward_bias_of_a_channels_last_dy(capsys):
    """-b 1 on an NHWC backward-data problem: db of the channels-last dy verifies against the
    reference of its logical tensor."""
    layout = ["--in_layout", "NHWC", "--fil_layout", "NHWC", "--out_layout", "NHWC"]
    assert main([*SMALL, "-F", "2", "-b", "1", *layout]) == 0
    assert "Backward Bias Verifies OK on CPU reference" in capsys.readouterr().out


def test_activation_and_residual_flags(capsys):
    """--activation (MIOpen's name too) with --activation-params and --residual join the
    forward epilogue and verify; explain shows the problem with them."""
    assert main([*SMALL, "-F", "1", "-b", "1", "--residual", "--activation", "LEAKYRELU",
                 "--activation-params", "0.2"]) == 0
    out = capsys.readouterr().out
    assert "epi.bias.residual.leaky_relu" in out and "Verifies OK" in out
    assert main(["explain", *SMALL[1:], "-F", "1", "--activation", "elu", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reports"][0]["problem"].endswith("-epi.elu")


def test_bad_epilogue_flags_exit_2_naming_them(capsys):
    """A bad activation, parameters without an activation, and -b 1 with -m trans are refused
    with exit 2, naming flag and value."""
    for flags, message in [(["--activation", "swish"], "invalid activation='swish'"),
                           (["--activation-params", "1"], "invalid --activation-params='1'"),
                           (["--activation", "elu", "--activation-params", "x"],
                            "invalid --activation-params='x'"),
                           (["-b", "1", "-m", "trans"], "invalid -b=1"),
                           (["-b", "2"], "invalid -b='2'")]:
        assert main([*SMALL, "-F", "1", *flags]) == 2
        assert message in capsys.readouterr().err


def test_activation_and_residual_need_a_forward_convolution(capsys, tmp_path):
    """--activation and --residual join the forward convolution's epilogue: a command that runs
    none (-F without 1, -m trans, a backward --key; each --file line on its own) exits 2 naming
    the flag (the flags were dropped without a word); with -F 3 the forward one takes them and
    backward-data runs bare.  --activation -1 is no mode (it ran logistic)."""
    for flags, flag in [(["-F", "2", "--activation", "relu"], "--activation='relu'"),
                        (["-F", "6", "--residual"], "--residual=True"),
                        (["-F", "1", "-m", "trans", "--activation", "relu"], "--activation"),
                        (["-F", "2", "-m", "trans", "--activation", "relu"], "--activation"),
                        (["-F", "1", "--activation", "-1"], "activation='-1'"),
                        (["-F", "1", "--activation", "-2"], "activation='-2'")]:
        assert main([*SMALL, *flags]) == 2, flags
        err = capsys.readouterr().err
        assert f"invalid {flag}" in err and err.count("\n") == 1, err
    assert main([*SMALL, "-F", "3", "--activation", "relu", "--json"]) == 0
    reports = json.loads(capsys.readouterr().out)["reports"]
    assert [r["problem"].split("NCHW")[1] for r in reports] == ["-epi.relu", ""]
    key = reports[1]["problem"]
    assert main(["explain", "--key", key, "--no-run", "--activation", "relu"]) == 2
    assert "backward-data and backward-weights take alpha and beta only" in (
        capsys.readouterr().err)
    lines = tmp_path / "lines.txt"
    lines.write_text("".join(f"{' '.join(SMALL)} {f}\n" for f in ("-F 1", "-F 2", "-F 0")))
    assert main(["conv", "--file", str(lines), "--activation", "relu", "--json"]) == 2
    got = json.loads(capsys.readouterr().out)["lines"]
    assert "error" not in got[0] and "error" not in got[2]    # line 3's bwd problem is line 2's
    assert got[1]["error"].startswith("invalid --activation='relu'")
    assert [len(line.get("reports", ())) for line in got] == [1, 0, 3]
