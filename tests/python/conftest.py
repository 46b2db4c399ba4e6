"""Shared fixtures: the package on sys.path, the kiln CLI, the backends, a
seeded random generator."""

import os
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, HERE)

from kiln import _capi, _client  # noqa: E402

# Defaults: the build tree of tests/run.sh (CTest sets both variables).
DEFAULT_CLI = os.path.join(ROOT, "build", "client", "kiln")
_DEFAULT_LIBRARY = os.path.join(ROOT, "build", "client", "libkiln.so")
if "KILN_LIBRARY" not in os.environ and os.path.exists(_DEFAULT_LIBRARY):
    os.environ["KILN_LIBRARY"] = _DEFAULT_LIBRARY


def cli_path() -> str:
    return os.environ.get("KILN_CLI", DEFAULT_CLI)


@pytest.fixture(scope="session")
def kiln_cli() -> str:
    """The `kiln` CLI (KILN_CLI, else the snapshot); skips when absent."""
    path = cli_path()
    if not os.access(path, os.X_OK):
        pytest.skip(f"kiln CLI not found at {path}: set KILN_CLI")
    return path


def require_libkiln() -> str:
    """The libkiln path; skips (explicitly) only when none is installed."""
    path = _capi.library_path()
    if path is None:
        pytest.skip("libkiln not found: set KILN_LIBRARY")
    return path


@pytest.fixture(params=["cli", "libkiln"])
def backend(request, kiln_cli):
    """Runs a numeric test on the CLI stand-in and, when built, libkiln."""
    from cli_backend import CliClient
    if request.param == "cli":
        _client.set_default(CliClient(kiln_cli))
    else:
        request.getfixturevalue("libkiln_embedded")
    yield request.param
    _client.set_default(None)


@pytest.fixture
def libkiln_embedded(tmp_path_factory):
    """An embedded libkiln client as the default (tuning needs libkiln:
    the CLI stand-in does not tune)."""
    require_libkiln()
    client = _capi.Client.embedded(str(tmp_path_factory.mktemp("cache")))
    _client.set_default(client)
    yield client
    _client.set_default(None)


@pytest.fixture(scope="session")
def cc():
    """A C compiler, for the layout probe and the fake libkiln."""
    import shutil
    path = shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")
    if path is None:
        pytest.skip("no C compiler (cc) to build the fake libkiln")
    return path


@pytest.fixture
def fake_lib(cc, tmp_path, monkeypatch):
    """fake_libkiln.c built against client/kiln.h and loaded as libkiln;
    yields a function returning the fake's record of its last call."""
    import ctypes
    import subprocess
    so = tmp_path / "libkiln_fake.so"
    subprocess.run([cc, "-shared", "-fPIC", "-Wall", "-Werror", "-I", ROOT,
                    os.path.join(HERE, "fake_libkiln.c"), "-o", str(so)],
                   check=True)
    monkeypatch.setenv("KILN_LIBRARY", str(so))
    monkeypatch.delenv("KILN_ADDRESS", raising=False)
    _capi.reset_for_tests()
    _client.set_default(None)
    lib = _capi.load()
    lib.fake_last_call.restype = ctypes.c_char_p
    yield lambda: lib.fake_last_call().decode()
    _client.set_default(None)
    _capi.reset_for_tests()


@pytest.fixture
def rng():
    """A NumPy generator with a fresh seed, printed (shown when a test
    fails)."""
    seed = int(np.random.SeedSequence().entropy % (1 << 32))
    print(f"random seed {seed}")
    return np.random.default_rng(seed)
