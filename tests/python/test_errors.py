"""DSL misuse: KilnSourceError naming the user's file and line."""

import importlib.util
import textwrap

import pytest

import kiln

HEADER = "import kiln\nimport kiln.language as T\n"


def load(tmp_path, source, name="my_kernel"):
    """Writes HEADER + source to my_kernel.py and imports it."""
    path = tmp_path / f"{name}.py"
    path.write_text(HEADER + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def line_of(path, marker):
    """The 1-based line of the first line containing ``marker``."""
    with open(path) as f:
        for n, line in enumerate(f, 1):
            if marker in line:
                return n
    raise AssertionError(marker)


# (name, kernel body inside `with T.Kernel(1, threads=128) as bx:`, the
# marker of the offending line, a fragment of the message)
CASES = [
    ("copy_arity", "T.copy(a)  # HERE", "T.copy(src, dst",
     ),
    ("copy_not_a_tile", "T.copy(a, 3)  # HERE",
     "T.copy destination expects a tile, a tensor or a region of one; got 3"),
    ("copy_shape", "T.copy(A[0:32, 0:16], r3)  # HERE",
     "T.copy: source shape [32, 16] does not match destination shape "
     "[4, 4, 4]"),
    ("two_elements", "T.copy(A[0, 0], B[0, 0])  # HERE",
     "both name single elements"),
    ("int_true_div", "for i, j in T.Parallel(64, 64):\n"
     "    a[i, j] = i / j  # HERE", "'i / j' divides two integers"),
    ("float_floordiv", "for i, j in T.Parallel(64, 64):\n"
     "    a[i, j] = a[i, j] // 2  # HERE", "floor division '//' takes integers"),
    ("global_compound_store_by_the_block", "A[0, 0] += 1.0  # HERE",
     "may race; use T.atomic_add"),
    ("view_of_a_tile", "v = T.Tensor((64, 64), 'float32', a.data)  # HERE",
     "'a.data': only global tensors can be viewed (T.Tensor(shape, dtype, "
     "buf.data)); 'a' is a fragment tile"),
    ("store_past_a_tile_in_parallel",
     "s = T.alloc_fragment((2,), 'float32')\nfor i in T.Parallel(64):\n"
     "    s[i] = 1.0  # HERE",
     "'s' has 2 elements along dim 0, but the T.Parallel loop stores to it"),
    ("global_compound_store", "for i, j in T.Parallel(64, 64):\n"
     "    A[i, j] += 1.0  # HERE", "may race; use T.atomic_add"),
    ("tile_op_in_parallel", "for i, j in T.Parallel(64, 64):\n"
     "    T.clear(a)  # HERE", "T.clear cannot be used inside T.Parallel"),
    ("nested_parallel", "for i in T.Parallel(64):\n"
     "    for j in T.Parallel(64):  # HERE\n        a[i, j] = 0",
     "T.Parallel loops cannot nest"),
    ("parallel_arity", "for i in T.Parallel(64, 64):  # HERE\n    pass",
     "T.Parallel has 2 extents but binds 1 names"),
    ("undefined_name", "T.fill(a, missing)  # HERE",
     "name 'missing' is not defined"),
    ("unknown_op", "T.reduce_abssum(a, a)  # HERE",
     "has no attribute 'reduce_abssum'"),
    ("symbolic_tile", "t = T.alloc_fragment((M, 4), 'float32')  # HERE",
     "uses the symbolic dim 'M'"),
    ("let_rebound_in_block", "x = bx + 1\nfor i in T.Serial(4):\n"
     "    x = x + i  # HERE", "defined in an enclosing block"),
    ("stages", "for k in T.Pipelined(4, num_stages=9):  # HERE\n"
     "    T.clear(a)", "num_stages=9: expected 0 (off) to 8"),
    ("reduce_dim", "r = T.alloc_fragment((64,), 'float32')\n"
     "T.reduce_max(a, r, dim=2)  # HERE", "dim=2 is out of range"),
    ("fragment_layout", "T.annotate_layout({a: "
     "kiln.layout.make_swizzled_layout(a)})  # HERE",
     "only shared tiles take a layout"),
    ("unused_value", "T.exp(1.0) + bx  # HERE",
     "the value of this expression is unused"),
    ("while", "while True:  # HERE\n    pass",
     "unsupported while condition 'True'"),
    ("bool_condition", "if bx:  # HERE\n    T.clear(a)",
     "is not a bool; compare it explicitly"),
    ("gemm_rank", "T.gemm(A, A, r3)  # HERE", "T.gemm C must be a 2-d"),
]


@pytest.mark.parametrize("name,stmt,message", CASES,
                         ids=[c[0] for c in CASES])
def test_misuse_points_at_the_python_line(tmp_path, name, stmt, message):
    body = textwrap.indent(stmt, " " * 20)
    source = f"""
        import kiln.layout
        M = T.symbolic("M")

        def build():
            @T.prim_func
            def main(A: T.Tensor((M, 64), "float32"),
                     B: T.Tensor((M, 64), "float32")):
                with T.Kernel(1, threads=128) as bx:
                    a = T.alloc_fragment((64, 64), "float32")
                    r3 = T.alloc_fragment((4, 4, 4), "float32")
{body}
            return main
        """
    module, path = load(tmp_path, source)
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    err = info.value
    line = line_of(path, "# HERE")
    assert str(err).startswith(f"{path}:{line}: "), str(err)
    assert err.filename == path and err.lineno == line
    assert message in str(err)


def test_parameter_without_annotation(tmp_path):
    module, path = load(tmp_path, """
        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32"),
                     B):  # HERE
                with T.Kernel(1, threads=32) as bx:
                    pass
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="parameter 'B' needs an annotation") as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")


def test_unknown_dtype(tmp_path):
    module, path = load(tmp_path, """
        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    a = T.alloc_shared((8,), "float12")  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="unknown dtype 'float12'") as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")


def test_missing_kernel_block(tmp_path):
    module, path = load(tmp_path, """
        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):  # HERE
                pass
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="has no `with T.Kernel") as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")


def test_statement_outside_kernel_block(tmp_path):
    module, path = load(tmp_path, """
        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    pass
                T.clear(A)  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="put this statement inside it") as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")


def test_tensor_dim_must_be_int_or_symbol(tmp_path):
    module, path = load(tmp_path, """
        def build(n):
            @T.prim_func
            def main(A: T.Tensor((n, 4), "float32")):  # HERE
                with T.Kernel(1, threads=32) as bx:
                    pass
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="dim 2.5 of parameter 'A'") as info:
        module.build(2.5).ir
    assert info.value.lineno == line_of(path, "# HERE")


def test_jit_function_must_return_a_prim_func(tmp_path):
    module, path = load(tmp_path, """
        @kiln.jit
        def factory():  # HERE
            return 3
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="must return a @T.prim_func; it returned int"):
        module.factory()


def test_tile_ops_outside_a_prim_func_raise():
    import kiln.language as T
    with pytest.raises(kiln.KilnSourceError,
                       match="T.copy can only be used inside a @T.prim_func"):
        T.copy(1, 2)
    with pytest.raises(kiln.KilnSourceError,
                       match="T.Parallel loops only run inside"):
        for _ in T.Parallel(4):
            pass


def test_helper_exception_is_located(tmp_path):
    module, path = load(tmp_path, """
        def helper(x):
            raise ValueError("bad helper")

        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    a = T.alloc_fragment((8,), "float32")
                    for i in T.Parallel(8):
                        a[i] = helper(a[i])  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="helper\\(...\\) raised ValueError: bad helper") \
            as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")


def test_error_inside_a_macro_points_at_the_macro_line(tmp_path):
    module, path = load(tmp_path, """
        @T.macro
        def zero(tile):
            T.clear(tile, 0)  # HERE

        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    a = T.alloc_fragment((8,), "float32")
                    zero(a)
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="too many positional arguments") as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")
    assert info.value.filename == path


@pytest.mark.parametrize("construct", ["thread_binding", "call_extern",
                                       "alloc_barrier", "make_tensor"])
def test_tilelang_constructs_kiln_lacks_are_named(tmp_path, construct):
    module, path = load(tmp_path, f"""
        def build():
            @T.prim_func
            def main(X: T.Tensor((128,), "float32")):
                with T.Kernel(1, threads=128) as bx:
                    x = T.{construct}(0, 128)  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")
    assert f"T.{construct} is not supported: " in str(info.value)
    assert construct in kiln.language.UNSUPPORTED


def test_a_pointer_annotation_says_why_when_the_function_is_defined(
        tmp_path):
    # `T.ptr` in a signature is read by Python when the function is
    # defined, before Kiln translates it: the AttributeError names it.
    with pytest.raises(AttributeError,
                       match=r"T.ptr is not supported: raw pointers") as info:
        load(tmp_path, """
            @T.prim_func
            def main(Ptrs: T.Tensor((4,), T.ptr)):  # HERE
                with T.Kernel(1, threads=32) as bx:
                    pass
            """)
    path = str(tmp_path / "my_kernel.py")
    # (pytest's traceback entries count lines from 0.)
    assert any(str(frame.path) == path and
               frame.lineno + 1 == line_of(path, "# HERE")
               for frame in info.traceback)

