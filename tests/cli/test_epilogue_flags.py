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
