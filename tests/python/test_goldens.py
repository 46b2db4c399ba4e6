"""DSL -> tile IR goldens; every generated kernel passes `kiln ir check`.

KILN_UPDATE_GOLDENS=1 rewrites the golden files instead of comparing.
"""

import os
import subprocess

import pytest

from goldens_cases import cases

GOLDENS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "goldens")
CASES = cases()


@pytest.mark.parametrize("name", sorted(CASES))
def test_ir_matches_golden(name):
    ir = CASES[name]().ir
    path = os.path.join(GOLDENS, name + ".tile")
    if os.environ.get("KILN_UPDATE_GOLDENS") == "1":
        with open(path, "w") as f:
            f.write(ir)
        return
    assert os.path.exists(path), \
        f"{path} is missing: run with KILN_UPDATE_GOLDENS=1 to create it"
    with open(path) as f:
        expected = f.read()
    assert ir == expected, (
        f"tile IR of {name} changed; if intended, rerun with "
        "KILN_UPDATE_GOLDENS=1 and review the diff")


@pytest.mark.parametrize("name", sorted(CASES))
def test_ir_checks_and_is_canonical(name, kiln_cli, tmp_path):
    path = tmp_path / f"{name}.tile"
    path.write_text(CASES[name]().ir)
    check = subprocess.run([kiln_cli, "ir", "check", str(path)],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stderr
    fmt = subprocess.run([kiln_cli, "ir", "fmt", "--check", str(path)],
                         capture_output=True, text=True)
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_every_golden_has_a_case():
    files = {f[:-len(".tile")] for f in os.listdir(GOLDENS)
             if f.endswith(".tile")}
    assert files == set(CASES)
