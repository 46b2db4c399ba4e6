"""kiln.autotune: configs as tunables, the constants fallback, tuning."""

import re

import numpy as np
import pytest

import kiln
import kiln.language as T

import kernels


def test_integer_configs_become_tunables_of_one_program():
    tuned = kernels.tuned_flashattn()(1, 2, 64, 64, False)
    assert tuned.mode == "tunables"
    assert len(tuned.kernels) == 8
    prims = {id(k.prim_func) for k in tuned.kernels}
    assert len(prims) == 1  # one program, eight sets of bindings
    prim = tuned.kernels[0].prim_func
    assert prim.tunables == {"block_M": (64, 128), "block_N": (32, 64),
                             "num_stages": (1, 2), "THREADS": (128,)}
    assert "  tune THREADS in [128]" in prim.ir.splitlines()
    assert tuned.kernels[5].bindings == {"block_M": 128, "block_N": 32,
                                         "num_stages": 2, "THREADS": 128}


@kiln.jit(out_idx=[1])
def branchy(n, block=128):
    """Uses `block` in Python control flow, so it cannot be a tunable."""
    if block > 256:
        threads = 256
    else:
        threads = 128

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            a = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], a)
            T.copy(a, B[bx * block])

    return main


def test_python_use_of_a_config_falls_back_to_constants():
    tuned = kiln.autotune(configs=[{"block": 128}, {"block": 512}])(branchy)(
        1000)
    assert tuned.mode == "constants"
    assert [k.bindings for k in tuned.kernels] == [{}, {}]
    assert "threads(128)" in tuned.kernels[0].ir
    assert "threads(256)" in tuned.kernels[1].ir


def test_caller_given_values_skip_tuning():
    tuned = kiln.autotune(configs=[{"block": 128}, {"block": 512}])(branchy)(
        1000, block=512)
    assert tuned.mode == "given" and tuned.best is tuned.kernels[0]
    assert "alloc fragment a: f32[512]" in tuned.ir


def test_unknown_config_key():
    with pytest.raises(kiln.KilnArgumentError,
                       match="config key 'blk' is not a parameter of branchy"):
        kiln.autotune(configs=[{"blk": 1}])(branchy)(10)


def test_the_daemon_tunes_stores_and_reuses(libkiln_embedded):
    # num_stages=9 fails to compile: it is recorded and skipped.
    configs = [{"block": 256, "num_stages": 9}, {"block": 512, "num_stages": 1},
               {"block": 1024, "num_stages": 2}]

    tuned = kiln.autotune(configs=configs, warmup=1, rep=2)(kernels.double)()
    assert tuned.mode == "tunables"
    x = np.random.default_rng().standard_normal(3001).astype(np.float32)
    before = x.copy()
    y = tuned(x)
    np.testing.assert_array_equal(x, before)
    np.testing.assert_allclose(y, 2 * x)
    assert tuned.config in configs[1:]
    assert tuned.results[0]["status"] == "pruned"
    assert "stage count" in tuned.results[0]["error"]
    assert all(r["status"] == "benchmarked" and r["seconds"] > 0
               for r in tuned.results[1:])
    np.testing.assert_allclose(tuned(x[:10]), 2 * x[:10])  # no re-tuning
    assert len(tuned.results) == 3
    # The daemon's tuner chose it (the best has the lowest median) and
    # stored it under the tuning key: another tuner of the same kernel, at a
    # shape of the same bucket, gets the stored answer.
    assert re.fullmatch("[0-9a-f]{64}", tuned.tuning_key)
    assert not tuned.cached
    fastest = min(tuned.results[1:], key=lambda r: r["seconds"])
    assert tuned.config == fastest["config"]
    again = kiln.autotune(configs=configs)(kernels.double)()
    np.testing.assert_allclose(again(x[:2500]), 2 * x[:2500])
    assert again.cached and again.tuning_key == tuned.tuning_key
    assert again.config == tuned.config
