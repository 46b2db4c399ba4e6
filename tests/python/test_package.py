"""client/python installs with pip and works from the installed copy."""

import os
import shutil
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT

PACKAGE = os.path.join(ROOT, "client", "python")


def test_pyproject_lists_every_package():
    with open(os.path.join(PACKAGE, "pyproject.toml"), "rb") as f:
        listed = set(tomllib.load(f)["tool"]["setuptools"]["packages"])
    found = {os.path.relpath(d, PACKAGE).replace(os.sep, ".")
             for d, _, files in os.walk(os.path.join(PACKAGE, "kiln"))
             if "__init__.py" in files}
    assert listed == found


def test_pip_install_and_import(tmp_path):
    probe = subprocess.run(
        [sys.executable, "-c", "import setuptools, pip"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip("pip or setuptools not installed for this python3")
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src, ignore=shutil.ignore_patterns(
        "build", "*.egg-info", "__pycache__"))
    target = tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                    "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(target), str(src)], check=True)
    script = (
        "import kiln, kiln.language as T\n"
        "assert kiln.__file__.startswith(%r)\n"
        "@kiln.jit(out_idx=[-1])\n"
        "def f(n):\n"
        "    @T.prim_func\n"
        "    def k(A: T.Tensor((n,), 'float32'), B: T.Tensor((n,), 'float32')):\n"
        "        with T.Kernel(1, threads=32) as bx:\n"
        "            a = T.alloc_fragment((n,), 'float32')\n"
        "            T.copy(A, a)\n"
        "            T.copy(a, B)\n"
        "    return k\n"
        "print(f(8).ir)\n" % str(target))
    (tmp_path / "probe.py").write_text(script)
    env = dict(os.environ, PYTHONPATH=str(target))
    out = subprocess.run([sys.executable, str(tmp_path / "probe.py")],
                         env=env, cwd=tmp_path, capture_output=True,
                         text=True, check=True).stdout
    assert out.startswith("kernel k(A: f32[8], B: f32[8])\n")
