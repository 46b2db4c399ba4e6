"""The ctypes layer against client/kiln.h: struct layouts measured by a C
compiler, and every call path through a fake libkiln built from the header.
The real library is exercised by test_numeric.py when it is built."""

import os
import subprocess

import numpy as np
import pytest

import kiln
from kiln import _capi

import kernels

from conftest import ROOT

LAYOUT_PROGRAM = r"""
#include <stddef.h>
#include <stdio.h>
#include "client/kiln.h"
int main(void) {
  printf("%zu %zu %zu\n", sizeof(kiln_binding),
         offsetof(kiln_binding, name), offsetof(kiln_binding, value));
  printf("%zu %zu %zu %zu %zu %zu %zu %zu\n", sizeof(kiln_arg),
         offsetof(kiln_arg, is_tensor), offsetof(kiln_arg, dtype),
         offsetof(kiln_arg, data), offsetof(kiln_arg, rank),
         offsetof(kiln_arg, shape), offsetof(kiln_arg, strides),
         offsetof(kiln_arg, scalar));
  return 0;
}
"""


def test_struct_layouts_match_the_header(cc, tmp_path):
    src = tmp_path / "layout.c"
    src.write_text(LAYOUT_PROGRAM)
    exe = tmp_path / "layout"
    subprocess.run([cc, "-I", ROOT, str(src), "-o", str(exe)], check=True)
    binding, arg = subprocess.run([str(exe)], capture_output=True, text=True,
                                  check=True).stdout.split("\n")[:2]
    B, A = _capi.KilnBinding, _capi.KilnArg
    assert list(map(int, binding.split())) == [
        __import__("ctypes").sizeof(B), B.name.offset, B.value.offset]
    assert list(map(int, arg.split())) == [
        __import__("ctypes").sizeof(A), A.is_tensor.offset, A.dtype.offset,
        A.data.offset, A.rank.offset, A.shape.offset, A.strides.offset,
        A.scalar.offset]


def test_prototypes_cover_every_function_of_the_header():
    with open(os.path.join(ROOT, "client", "kiln.h")) as f:
        header = f.read()
    import re
    declared = set(re.findall(r"\b(kiln_[a-z_]+)\(", header))
    assert declared == set(_capi.PROTOTYPES)


def test_missing_library_is_a_clear_error(tmp_path, monkeypatch):
    missing = str(tmp_path / "nowhere" / "libkiln.so")
    monkeypatch.setenv("KILN_LIBRARY", missing)
    _capi.reset_for_tests()
    try:
        assert _capi.library_path() == missing
        with pytest.raises(kiln.KilnLibraryError,
                           match="libkiln not found: set KILN_LIBRARY"):
            _capi.load()
    finally:
        _capi.reset_for_tests()


def test_version_and_status_errors(fake_lib):
    assert _capi.version() == "0.0.0-fake"
    with pytest.raises(kiln.KilnStatusError) as info:
        _capi.Client.connect("unix:/nowhere")
    assert info.value.code == 14
    assert "no kilnd at 'unix:/nowhere'" in str(info.value)
    client = _capi.Client.embedded()
    with pytest.raises(kiln.KilnStatusError, match="no kernel abc"):
        client.get_kernel("abc")


def test_kernel_handle_parts(fake_lib):
    k = _capi.Kernel.from_parts(b"\x7fELF", "meta")
    assert (k.name, k.key, k.target, k.tier, k.metadata, k.compile_log,
            k.binary) == ("meta", "00ff", "cpu", "compiled", "kiln-kernel 1",
                          "", b"ELF")


def test_jit_launch_through_the_c_abi(fake_lib):
    kernel = kernels.scale_add()
    x = np.arange(5, dtype=np.float32)
    bias = np.zeros(4, np.float32)
    y = kernel(x, bias, 1.5)
    assert fake_lib().startswith("launch main n=4 stream=0 ")
    parts = fake_lib().split(" | ")
    ptr = lambda a: format(a.__array_interface__["data"][0], "x")  # noqa
    assert parts[1] == f"f32 data={ptr(x)} rank=1 5:-1"
    assert parts[2] == f"f32 data={ptr(bias)} rank=1 4:-1"
    assert parts[3] == f"f32 data={ptr(y)} rank=1 5:-1"
    assert parts[4] == "f32 scalar=3fc00000"
    np.testing.assert_array_equal(y, 2 * x)  # the fake's observable effect


def test_compile_passes_target_bindings_and_filename(fake_lib):
    tuned = kernels.tuned_flashattn()(1, 2, 64, 64, False)
    k = tuned.kernels[-1]
    k.compile("cpu")
    assert fake_lib() == ("compile mha_fwd cpu mha_fwd.tile THREADS=128 "
                          "block_M=128 block_N=64 num_stages=2")


def test_autotune_sends_the_shape_and_configs_to_the_daemon(fake_lib):
    configs = [{"block": 256, "num_stages": 1}, {"block": 512,
                                                 "num_stages": 2}]

    tuned = kiln.autotune(configs=configs)(kernels.double)()
    with pytest.raises(kiln.KilnCompileError, match="the fake does not tune"):
        tuned(np.zeros(3001, np.float32))
    assert fake_lib() == ("autotune main cpu 1 0 N=3001 | block=256 "
                          "num_stages=1 | block=512 num_stages=2")


def test_compile_error_names_the_python_line(fake_lib):
    import kiln.language as T

    @T.prim_func
    def FAIL(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((8,), "float32")  # IR line 3
            T.copy(A, a)

    with pytest.raises(kiln.KilnCompileError) as info:
        kiln.compile(FAIL).compile("cpu")
    msg = str(info.value)
    assert "FAIL.tile:3:5: error: fake failure" in msg
    line = FAIL.line_map[3]
    assert f"{FAIL.filename}:{line}: error: fake failure (tile IR 3:5)" in msg
    assert "alloc fragment a: f32[8]" in msg  # the numbered IR follows
    assert info.value.code == 3
