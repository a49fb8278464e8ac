"""convsolve.tuning: config spaces as data, and the device-class fallback of parameter tables."""
import itertools
import random

import pytest
from convsolve import ConfigSpace, ValidationError, tuning
from convsolve.testing import fake_device

SPACE = ConfigSpace({"TM": (2, 4, 8), "VW": (4, 8, 16)}, ["TM * VW <= 64", "VW >= TM"])


def test_a_space_holds_exactly_the_configs_its_constraints_admit():
    configs = list(SPACE)
    assert configs == [{"TM": tm, "VW": vw} for tm in (2, 4, 8) for vw in (4, 8, 16)
                       if tm * vw <= 64 and vw >= tm]
    assert SPACE.size() == 9 and {"TM": 4, "VW": 8} in SPACE


@pytest.mark.parametrize("constraints", [
    ["A < C", "B != 2 or D == 1"],                       # tested as soon as C, then D, is set
    ["min(x for x in (A, D)) >= 1", "abs(B - C) < 3"],   # names read inside a generator
    ["A // (B - 2) >= 0"],                               # raises for B == 2: refused there
    ["E > 0"],                                           # an unknown name: nothing admitted
    ["A + C * 0 == 1", "D <= A"],
])
def test_iterating_a_space_gives_the_constraints_filter_of_the_product(constraints):
    """Iteration tests each constraint once its last parameter is set, and still yields exactly
    the configs of the parameters' product that refusal admits, in the product's order."""
    space = ConfigSpace({"A": (0, 1, 2), "B": (1, 2, 3), "C": (0, 1, 2, 3), "D": (0, 1)},
                        constraints)
    product = [dict(zip("ABCD", v)) for v in itertools.product(*space.params.values())]
    assert list(space) == [c for c in product if space.refusal(c) is None]


@pytest.mark.parametrize("config, reason", [
    ({"TM": 8, "VW": 16}, "constraint 'TM * VW <= 64' is false"),
    ({"TM": 3, "VW": 4}, "TM=3 is not one of [2, 4, 8]"),
    ({"TM": 2}, "parameters ['VW'] missing"),
    ({"TM": 2, "VW": 4, "KU": 1}, "parameters ['KU'] not in the space"),
    ([2, 4], "is not a dict"),
])
def test_refusals_name_the_parameter_or_constraint(config, reason):
    assert reason in SPACE.refusal(config)


def test_bad_spaces_are_refused_when_made():
    with pytest.raises(ValidationError, match="constraints"):
        ConfigSpace({"TM": (1,)}, ["TM >"])
    with pytest.raises(ValidationError, match="at least one value"):
        ConfigSpace({"TM": ()})


def test_samples_are_distinct_and_valid_and_neighbours_one_step_away():
    big = ConfigSpace({f"P{i}": tuple(range(6)) for i in range(5)}, ["P0 + P1 < 8"])
    drawn = big.sample(20, random.Random(1))
    assert len(drawn) == 20 and len({tuning.config_key(c) for c in drawn}) == 20
    assert all(c in big for c in drawn)
    start = {"TM": 4, "VW": 8}
    assert sorted(tuning.config_key(c) for c in SPACE.neighbours(start)) == sorted(
        tuning.config_key(c) for c in ({"TM": 2, "VW": 8}, {"TM": 8, "VW": 8},
                                       {"TM": 4, "VW": 4}, {"TM": 4, "VW": 16}))


def test_config_keys_are_canonical():
    assert tuning.config_key({"b": 1, "a": 2}) == tuning.config_key({"a": 2, "b": 1}) == \
        '{"a":2,"b":1}'


AVX512 = fake_device("avx512", name="pthread-skylake-avx512-Intel(R) Xeon(R)",
                     version="OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-skylake-avx512")
ZEN3 = fake_device("avx2", name="pthread-znver3-AMD EPYC",
                   version="OpenCL 3.0 PoCL HSTR: pthread-x86_64-pc-linux-gnu-znver3")


def test_device_keys_run_from_the_exact_device_to_its_type():
    assert tuning.device_keys(AVX512) == (
        "pthread-skylake-avx512-Intel(R) Xeon(R)", "cpu/skylake-avx512", "cpu/vector16",
        "cpu/genuineintel", "cpu", "*")


def test_pick_falls_back_from_device_to_architecture_to_isa_to_type():
    table = {"pthread-znver3-AMD EPYC": "exact", "cpu/skylake-avx512": "arch",
             "cpu/vector8": "avx2", "cpu": "cpu", "*": "any"}
    assert tuning.pick(table, ZEN3) == "exact"
    assert tuning.pick(table, AVX512) == "arch"
    assert tuning.pick({k: v for k, v in table.items() if k != "pthread-znver3-AMD EPYC"},
                       ZEN3) == "avx2"
    assert tuning.pick({"cpu": "cpu", "*": "any"}, AVX512) == "cpu"
    gpu = fake_device("gpu")   # NVIDIA H200, OpenCL 3.0 CUDA
    assert tuning.pick({"cpu": "cpu", "*": "any"}, gpu) == "any"
    with pytest.raises(KeyError, match="no entry"):
        tuning.pick({"cpu": 1}, gpu)


def test_sampling_a_mostly_invalid_space_still_gives_what_is_asked():
    """Where the constraints reject nearly every combination, samples come from the valid ones."""
    sparse = ConfigSpace({f"P{i}": tuple(range(8)) for i in range(6)},
                         ["P0 == P1 == P2 == P3 == P4"])
    drawn = sparse.sample(5, random.Random(3))
    assert len(drawn) == 5 and all(c in sparse for c in drawn)
    assert len({tuning.config_key(c) for c in drawn}) == 5
