"""Updates of shared tiles (and fragments) inside T.Parallel that two
iterations may share (issue 22, issue 25): a block-local histogram first
bins its keys into a shared tile, then merges the bins into the output.
The key is read from memory, so the compiler cannot show the iterations
write distinct bins: the update is atomic on GPUs (tile-ir.md §8) and the
CPU target runs the iterations in order. Written both as
``T.atomic_add(bins[k], 1)`` and as ``bins[k] += 1``, and on a fragment;
the running maximum per bin with T.atomic_max. A ``-=`` that iterations
may share has no atomic form and is a located error."""

import numpy as np
import pytest

import kiln
import kiln.language as T

from test_errors import line_of, load


# Counts and per-bin maxima of `n` keys; each block of `chunk` keys keeps
# its own bins in shared memory.
@kiln.jit(out_idx=[])
def binned(n, bins=32, chunk=512, spelled_as_call=True, tally_in="shared"):
    @T.prim_func
    def main(Keys: T.Tensor((n,), "int32"), Vals: T.Tensor((n,), "float32"),
             Count: T.Tensor((bins,), "int32"),
             Peak: T.Tensor((bins,), "float32")):
        with T.Kernel(T.ceildiv(n, chunk), threads=128) as blk:
            if tally_in == "shared":
                tally = T.alloc_shared((bins,), "int32")
            else:  # (a fragment indexed by keys: shared memory on GPUs)
                tally = T.alloc_fragment((bins,), "int32")
            peak = T.alloc_shared((bins,), "float32")
            T.clear(tally)
            T.fill(peak, -T.infinity("float32"))
            for e in T.Parallel(chunk):
                at = blk * chunk + e
                if at < n:
                    b = Keys[at] % bins
                    if spelled_as_call:
                        T.atomic_add(tally[b], 1)
                    else:
                        tally[b] += 1
                    T.atomic_max(peak[b], Vals[at])
            for b in T.Parallel(bins):
                T.atomic_add(Count[b], tally[b])
                T.atomic_max(Peak[b], peak[b])

    return main


def reference(keys, vals, bins, count, peak):
    want_count, want_peak = count.copy(), peak.copy()
    for k, v in zip(keys % bins, vals):
        want_count[k] += 1
        want_peak[k] = max(want_peak[k], v)
    return want_count, want_peak


@pytest.mark.parametrize("spelled_as_call, tally_in", [
    (True, "shared"), (False, "shared"), (True, "fragment")])
def test_shared_bins_count_every_key(backend, rng, spelled_as_call, tally_in):
    n, bins = 1500, 32  # three blocks, the last ragged
    kernel = binned(n, bins, spelled_as_call=spelled_as_call,
                    tally_in=tally_in)
    assert "tally[b] += 1" in kernel.ir
    assert "peak[b] max= " in kernel.ir
    keys = rng.integers(-100, 100, n).astype(np.int32)
    keys[::3] = 7  # a third of the keys in one bin: many updates collide
    vals = rng.uniform(-5, 5, n).astype(np.float32)
    count = rng.integers(0, 4, bins).astype(np.int32)
    peak = np.full(bins, -10.0, np.float32)
    want_count, want_peak = reference(keys, vals, bins, count, peak)
    kernel(keys, vals, count, peak)
    np.testing.assert_array_equal(count, want_count)
    np.testing.assert_array_equal(peak, want_peak)
    assert count[7] >= n // 3


def test_shared_subtraction_two_iterations_share_is_located(tmp_path):
    mod, path = load(tmp_path, """
        @T.prim_func
        def main(X: T.Tensor((64,), "float32"),
                 Y: T.Tensor((32,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                s = T.alloc_shared((32,), "float32")
                T.clear(s)
                for i in T.Parallel(64):
                    s[i // 2] -= X[i]  # HERE
                T.copy(s, Y)
        """)
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(mod.main)(np.zeros(64, np.float32),
                               np.zeros(32, np.float32))
    message = str(info.value)
    assert "'-=' into shared tile" in message, message
    assert "write the same element" in message, message
    assert f":{line_of(path, '# HERE')}:" in message, message
