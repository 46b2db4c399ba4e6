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


def test_a_name_no_kernel_has_does_not_tune():
    tuned = kiln.autotune(configs=[{"block": 128}, {"block": 512}])(branchy)(
        1000)
    assert not hasattr(tuned, "no_such_attribute")
    with pytest.raises(AttributeError, match="'AutotunedKernel' object has "
                       "no attribute 'get_profilr'"):
        tuned.get_profilr  # noqa: B018 (a typo)
    assert tuned.best is None and tuned.results == []


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


def scaled_copy(n, block=None, bug=False):
    """A factory as TileLang's AutoTuner.from_kernel takes it: configs are
    keyword arguments, the result a prim_func. `bug` makes a wrong kernel,
    a block over 512 fails to translate."""
    assert block <= 512, "block too large"

    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=128) as blk:
            a = T.alloc_fragment((block,), "float32")
            T.copy(A[blk * block], a)
            for i in T.Parallel(block):
                a[i] = a[i] * 2.0 + (1.0 if bug else 0.0)
            T.copy(a, B[blk * block])

    return main


def test_explicit_autotuner_checks_times_and_reports(backend):
    configs = [{"block": 128}, {"block": 256, "bug": True},
               {"block": 1024}, {"block": 256}]
    result = (kiln.AutoTuner.from_kernel(
        kernel=lambda **c: scaled_copy(1000, **c), configs=configs)
        .set_compile_args(out_idx=[-1], target="auto")
        .set_profile_args(supply_type=kiln.TensorSupplyType.Normal,
                          ref_prog=lambda a: 2 * a, skip_check=False)
        .run(warmup=1, rep=5))
    assert result.config in (configs[0], configs[3])
    assert result.latency > 0 and result.ref_latency > 0
    errors = {r["config"].get("block"): r.get("error", "")
              for r in result.results if "error" in r}
    assert "differ by more than" in errors[256]  # the wrong kernel
    assert "block too large" in errors[1024]
    a = np.arange(1000, dtype=np.float32)
    np.testing.assert_array_equal(result.kernel(a), 2 * a)


def test_captured_inputs_are_the_ones_tuned_on(backend):
    a = np.full(300, 3.0, np.float32)
    seen = []

    def ref(x):
        seen.append(x)
        return 2 * x

    with kiln.set_autotune_inputs(a):
        tuner = kiln.AutoTuner.from_kernel(
            kernel=lambda **c: scaled_copy(300, **c),
            configs=[{"block": 128}, {"block": 64}])
    result = tuner.set_compile_args(out_idx=[-1]).set_profile_args(
        ref_prog=ref).run(warmup=1, rep=3)
    assert seen and all(x is a for x in seen)
    assert result.config["block"] in (64, 128)


@kiln.autotune(configs=[{"block": 64}, {"block": 128}], warmup=1, rep=3)
@kiln.jit(out_idx=[1])
def tuned_scale(n, block=128):
    return scaled_copy(n, block)


def test_decorator_tunes_at_once_on_captured_inputs(backend):
    a = np.ones(500, np.float32)
    with kiln.set_autotune_inputs([a]):
        kernel = tuned_scale(500)
    assert kernel.config in ({"block": 64}, {"block": 128})
    assert kernel.latency is not None and kernel.latency > 0
    assert kernel.ref_latency is None
    np.testing.assert_array_equal(kernel(a), 2 * a)
