"""`convsolve new-plugin`: the stamped plugin installs, is discovered, used, and passes its tests."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
from convsolve import ValidationError
from convsolve.cli.new_plugin import stamp


def run(args, env, cwd=None):
    done = subprocess.run([sys.executable, *args], check=False, env=env, cwd=cwd,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_stamped_plugin_installs_and_works(tmp_path):
    """Stamp 'acme', pip-install it, see it in `convsolve solvers`, run it, pass its own tests."""
    plugin = stamp("acme", tmp_path)
    assert (plugin / "convsolve_acme" / "kernels" / "direct_fwd.cl").exists()
    site = tmp_path / "site"
    run(["-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--target", str(site),
         str(plugin)], os.environ)
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "CONVSOLVE_DISABLE_PLUGIN_AUTOLOAD": "0",
           "CONVSOLVE_PLUGINS": "",
           "CONVSOLVE_USER_DB_PATH": str(tmp_path / "db.sqlite")}
    solvers = json.loads(run(["-m", "convsolve.cli", "solvers", "--json"], env))
    acme = next(p for p in solvers["plugins"] if p["name"] == "acme")
    assert acme["distribution"] == "convsolve-acme" and acme["solvers"] == ["acme.DirectFwd"]
    out = run(["-m", "convsolve.cli", "conv", "-n", "2", "-c", "6", "-H", "9", "-W", "7", "-k", "5",
               "-g", "1", "-F", "1", "--solver", "acme.DirectFwd"], env)
    assert "Forward Convolution Verifies OK" in out
    report = tmp_path / "report.xml"
    run(["-m", "pytest", "-q", f"--junitxml={report}", str(plugin / "tests")], env, cwd=plugin)
    outcomes = _outcomes(report)
    assert sorted(outcomes) == ["test_clean_under_oclgrind", "test_conformance",
                                "test_discovered_through_its_entry_point"], outcomes
    assert outcomes["test_conformance"] == "passed", outcomes
    assert outcomes["test_discovered_through_its_entry_point"] == "passed", outcomes
    # run where Oclgrind is installed, skipped saying so where it is not (a GPU machine)
    oclgrind = outcomes["test_clean_under_oclgrind"]
    assert oclgrind == "passed" or oclgrind.startswith("skipped: Oclgrind is not installed"), \
        outcomes


def _outcomes(report):
    """{test name: 'passed', 'failed' or 'skipped: <reason>'} of a pytest JUnit XML report."""
    outcomes = {}
    for case in ET.parse(report).iter("testcase"):
        skipped = case.find("skipped")
        failed = case.find("failure") is not None or case.find("error") is not None
        outcomes[case.get("name")] = ("failed" if failed else "passed" if skipped is None
                                      else f"skipped: {skipped.get('message')}")
    return outcomes


def test_bad_names_and_existing_dirs_are_refused(tmp_path):
    """Names must be lowercase identifiers; an existing target is never overwritten."""
    with pytest.raises(ValidationError, match="plugin name"):
        stamp("Acme-X", tmp_path)
    stamp("ok", tmp_path)
    with pytest.raises(ValidationError, match="already exists"):
        stamp("ok", tmp_path)


def test_package_and_family_are_stamped_as_asked(tmp_path):
    """--package and --family rename the package (folder, imports, entry point) and the family."""
    plugin = stamp("acme", tmp_path, package="acme_solvers", family="custom")
    assert (plugin / "acme_solvers" / "kernels" / "direct_fwd.cl").exists()
    assert not (plugin / "convsolve_acme").exists()
    assert 'acme = "acme_solvers"' in (plugin / "pyproject.toml").read_text()
    assert 'family = "custom"' in (plugin / "acme_solvers" / "direct_fwd.py").read_text()
    assert "from acme_solvers import" in (plugin / "tests" / "test_direct_fwd.py").read_text()
    with pytest.raises(ValidationError, match="--package"):
        stamp("other", tmp_path, package="Bad-Name")
