"""A test stand-in for libkiln's CPU path, built on the `kiln` CLI.

`kiln compile --target cpu -o K.so` builds the kernel; launching follows
compiler/docs/kernel-handle.md: bind the dynamic symbols from the tensor
shapes, evaluate the grid, and call the entry once per block on a thread
with a large stack. It lets the numeric tests check the DSL's kernels end to
end (through kiln.jit's argument checks and kiln_arg marshalling) while
libkiln is not built; with libkiln present the same tests also run on it.
"""

import ctypes
import os
import subprocess
import tempfile
import threading
from typing import Dict, List, Sequence, Tuple

from kiln.errors import KilnCompileError

_ENTRY = ctypes.CFUNCTYPE(None, ctypes.POINTER(ctypes.c_void_p),
                          ctypes.POINTER(ctypes.c_int64), ctypes.c_int64,
                          ctypes.c_int64, ctypes.c_int64)


def _tokens(text: str) -> List[str]:
    """Splits a metadata record on spaces at parenthesis depth 0."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == " " and depth == 0:
            if cur:
                out.append(cur)
            cur = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        cur += ch
    if cur:
        out.append(cur)
    return out


def evaluate(expr: str, env: Dict[str, int]) -> int:
    """Evaluates a metadata S-expression over 64-bit integers."""
    def parse(pos: int) -> Tuple[object, int]:
        if expr[pos] == "(":
            pos += 1
            items = []
            while expr[pos] != ")":
                if expr[pos] == " ":
                    pos += 1
                    continue
                item, pos = parse(pos)
                items.append(item)
            return items, pos + 1
        end = pos
        while end < len(expr) and expr[end] not in " ()":
            end += 1
        return expr[pos:end], end

    def ev(node: object) -> int:
        if isinstance(node, str):
            return int(node) if node.lstrip("-").isdigit() else env[node]
        op, *args = node  # type: ignore[misc]
        v = [ev(a) for a in args]
        ops = {"+": lambda: v[0] + v[1], "-": lambda: v[0] - v[1],
               "*": lambda: v[0] * v[1], "/": lambda: v[0] // v[1],
               "%": lambda: v[0] % v[1], "min": lambda: min(v),
               "max": lambda: max(v), "ceildiv": lambda: -(-v[0] // v[1]),
               "neg": lambda: -v[0], "==": lambda: int(v[0] == v[1]),
               "!=": lambda: int(v[0] != v[1]), "<": lambda: int(v[0] < v[1]),
               "<=": lambda: int(v[0] <= v[1]), ">": lambda: int(v[0] > v[1]),
               ">=": lambda: int(v[0] >= v[1]),
               "&&": lambda: int(bool(v[0]) and bool(v[1])),
               "||": lambda: int(bool(v[0]) or bool(v[1])),
               "!": lambda: int(not v[0])}
        return ops[op]()

    tree, _ = parse(0)
    return ev(tree)


class CliKernel:
    """A compiled CPU kernel launched the way libkiln's CPU runtime does."""

    def __init__(self, so_path: str, metadata: str):
        self.metadata = metadata
        self.symbols: List[str] = []
        self.params: List[List[str]] = []
        self.grid: List[str] = []
        self.assumes: List[str] = []
        for line in metadata.splitlines():
            rec = _tokens(line.strip())
            if not rec or rec[0].startswith("#"):
                continue
            if rec[0] == "symbols":
                self.symbols = rec[1:]
            elif rec[0] == "param":
                self.params.append(rec[1:])
            elif rec[0] == "grid":
                self.grid = rec[1:]
            elif rec[0] == "assume":
                self.assumes.append(rec[1])
            elif rec[0] == "entry":
                entry = rec[1]
        self._lib = ctypes.CDLL(so_path)
        self._entry = _ENTRY((entry, self._lib))

    def launch(self, args: Sequence, stream: object) -> None:
        env: Dict[str, int] = {}
        ptrs = (ctypes.c_void_p * max(len(args), 1))()
        for i, (param, a) in enumerate(zip(self.params, args)):
            if param[1] == "tensor":
                dims = param[3:]
                for d, n in zip(dims, a.shape[:a.rank]):
                    if not d.lstrip("-").isdigit():
                        env[d] = n
                ptrs[i] = a.data
            else:
                ptrs[i] = ctypes.addressof(a) + type(a).scalar.offset
        for fact in self.assumes:
            if not evaluate(fact, env):
                raise AssertionError(f"assumption {fact} fails for {env}")
        syms = (ctypes.c_int64 * max(len(self.symbols), 1))(
            *[env[s] for s in self.symbols])
        gx, gy, gz = (evaluate(g, env) for g in self.grid)
        errors: List[BaseException] = []

        def run() -> None:
            try:
                for bz in range(gz):
                    for by in range(gy):
                        for bx in range(gx):
                            self._entry(ptrs, syms, bx, by, bz)
            except BaseException as e:  # noqa: BLE001
                errors.append(e)

        old = threading.stack_size(256 << 20)
        try:
            t = threading.Thread(target=run)
            t.start()
            t.join()
        finally:
            threading.stack_size(old)
        if errors:
            raise errors[0]


class CliClient:
    """Implements the part of kiln._capi.Client that kiln.jit uses."""

    def __init__(self, cli: str):
        self.cli = cli
        self.dir = tempfile.mkdtemp(prefix="kiln-cli-backend-")
        self.compiles = 0

    def compile(self, ir: str, kernel: str, target: str,
                bindings: Sequence[Tuple[str, int]], filename: str,
                timeout_seconds: float = 0.0) -> CliKernel:
        assert target == "cpu", target
        self.compiles += 1
        base = os.path.join(self.dir, f"{kernel}_{self.compiles}")
        with open(base + ".tile", "w") as f:
            f.write(ir)
        cmd = [self.cli, "compile", base + ".tile", "--target", "cpu",
               "--kernel", kernel]
        for name, value in bindings:
            cmd += ["-D", f"{name}={value}"]
        built = subprocess.run(cmd + ["-o", base + ".so"],
                               capture_output=True, text=True)
        if built.returncode != 0:
            # libkiln reports diagnostics as status 3 with this text.
            raise KilnCompileError(3, built.stderr.replace(
                base + ".tile", filename))
        meta = subprocess.run(cmd + ["--emit", "metadata"], check=True,
                              capture_output=True, text=True).stdout
        return CliKernel(base + ".so", meta)
