"""The examples under client/python/examples translate, check and run."""

import importlib.util
import os
import subprocess

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "client", "python", "examples")


def load(name):
    """The example `name`.py, imported from its path."""
    path = os.path.join(EXAMPLES, f"{name}.py")
    found = importlib.util.spec_from_file_location(f"example_{name}", path)
    example = importlib.util.module_from_spec(found)
    found.loader.exec_module(example)
    return example


@pytest.mark.parametrize("name", ["gemm", "flash_attention"])
def test_example_keeps_tilelang_imports_in_a_comment(name):
    with open(os.path.join(EXAMPLES, f"{name}.py")) as f:
        text = f.read()
    assert "    import tilelang\n    import tilelang.language as T\n" in text
    assert "import kiln as tilelang\nimport kiln.language as T\n" in text


def test_gemm_example_ir_checks(kiln_cli, tmp_path):
    kernel = load("gemm").matmul(1000, 777, 512, 128, 128, 32)
    path = tmp_path / "gemm.tile"
    path.write_text(kernel.ir)
    r = subprocess.run([kiln_cli, "ir", "check", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_example_ir_checks(kiln_cli, tmp_path, causal):
    tuned = load("flash_attention").flashattn(1, 4, 200, 64, causal)
    assert tuned.mode == "tunables"  # its configs are tile-IR tunables
    path = tmp_path / "fa.tile"
    path.write_text(tuned.ir)
    r = subprocess.run([kiln_cli, "ir", "check", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_gemm_example_runs(backend, capsys):
    load("gemm").main(M=300, N=257, K=96)
    assert "gemm matches the reference" in capsys.readouterr().out


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_example_runs(libkiln_embedded, capsys, causal):
    # The example autotunes through the daemon's tuner: libkiln, not the
    # CLI stand-in.
    load("flash_attention").main(batch=1, heads=2, seq_len=150, dim=64,
                                 is_causal=causal)
    assert "flash attention matches the reference" in capsys.readouterr().out
