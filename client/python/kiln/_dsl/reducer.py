"""Updates across the iterations of a T.Parallel: T.alloc_reducer,
T.finalize_reducer, and the check that refuses such updates of other tiles.

The iterations of a ``parallel`` are independent (tile-ir.md section 5), so
in ``for i, j in T.Parallel(BM, BN): o[i] += a[i, j] * x[j]`` every ``j``
updates the same element of ``o`` at once. For a reducer (TileLang's
``T.alloc_reducer``, a fragment) that statement means a reduction over the
loop variables its index leaves out. The lowering, one temporary per update:

1. Before the loop: ``alloc fragment o_part: DT[BM, BN]`` over the loop's
   extents (its dims in the loop's order, the kept variables in the order
   the reducer's index names them); where the update sits inside an ``if``
   or a loop of the body, also ``fill o_part, IDENTITY`` (0, -inf, inf).
2. The update stores its term instead: ``o_part[i, j] = TERM`` (inside an
   ``if`` or a loop: ``+=`` for a sum, ``= max(o_part[i, j], TERM)``).
3. After the loop: one ``reduce.OP`` per left-out variable, highest dim
   first, the last into the reducer's region with ``clear=false``, so the
   terms combine with the reducer's current value.

The same update of a fragment or shared tile that is not a reducer, and an
``=`` store of a value that varies along a left-out variable, are located
errors naming the variable (checked outside the body's ``if``s, where which
iterations store is not known; an index read from memory is not judged).
Local tiles are per-thread scratch and are not checked.
"""

from __future__ import annotations

import numbers
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Set, Tuple

from kiln._dsl import expr as E
from kiln._dsl.dtypes import FLOAT_DTYPES, IR_BITS
from kiln.errors import KilnSourceError

if TYPE_CHECKING:
    from kiln._dsl.frontend import Buffer, _Translator

OPS = ("sum", "max", "min")
_UPDATE = {"sum": "{r}[...] += value",
           "max": "{r}[...] = T.max({r}[...], value)",
           "min": "{r}[...] = T.min({r}[...], value)"}

# A T.Parallel variable: (Python name, IR name, extent).
LoopVar = Tuple[str, str, Any]


def check_options(op: Any, replication: Any, dtype: str) -> str:
    """T.alloc_reducer's ``op`` once checked. ``replication`` ("all",
    "none" or TileLang's newer default None) only chose how TileLang laid
    the reducer over threads; a Kiln fragment is one logical tile."""
    if not isinstance(op, str) or op not in OPS:
        extra = " (TileLang's bitwise reducers are not supported)" \
            if op in ("bitand", "bitor", "bitxor") else ""
        raise KilnSourceError(f"T.alloc_reducer op={op!r}: expected 'sum', "
                              f"'max' or 'min'{extra}")
    if replication is not None and (not isinstance(replication, str) or
                                    replication not in ("all", "none")):
        raise KilnSourceError(f"T.alloc_reducer replication={replication!r}:"
                              " expected 'all' or 'none'")
    if dtype == "bool":
        raise KilnSourceError("T.alloc_reducer needs a numeric dtype; "
                              "got bool")
    return op


def finalize(t: "_Translator", a: Dict[str, Any]) -> None:
    """``T.finalize_reducer(r)``: a reducer's value is whole after each
    T.Parallel that updates it, so nothing is left to combine; the call
    checks its argument. TileLang's ``T.finalize_reducer(r, dst)`` copies
    the result into ``dst``."""
    from kiln._dsl.frontend import Buffer
    from kiln._dsl import tileops
    r = a["reducer"]
    if not isinstance(r, Buffer) or r.reducer is None:
        what = f"'{r.py_name}', a {r.scope} tile" if isinstance(r, Buffer) \
            else repr(r)
        raise KilnSourceError("T.finalize_reducer takes a tile made by "
                              f"T.alloc_reducer; got {what}")
    batch = a["batch"]
    if not isinstance(batch, numbers.Integral) or batch < 1:
        raise KilnSourceError(f"T.finalize_reducer batch={batch!r}: "
                              "expected a positive int")
    if a["dst"] is not None:
        dst, _ = tileops.region(t, a["dst"], "T.finalize_reducer dst",
                                tuple(r.shape))
        t.emit(f"copy {r.name} -> {dst}")


def _identity(op: str, dtype: str) -> Any:
    if op == "sum":
        return 0
    if dtype in FLOAT_DTYPES:
        return float("-inf") if op == "max" else float("inf")
    bits = IR_BITS[dtype]
    if dtype.startswith("u"):
        return 0 if op == "max" else (1 << bits) - 1
    return -(1 << (bits - 1)) if op == "max" else (1 << (bits - 1)) - 1


def _loads(e: Any) -> List[E.Expr]:
    """Every element load in ``e``."""
    if not isinstance(e, E.Expr):
        return []
    kids = e.b if e.kind in ("call", "load") else \
        (e.b, e.c) if e.kind == "bin" else \
        (e.b,) if e.kind in ("un", "cast") else ()
    own = [e] if e.kind == "load" else []
    return own + [x for k in kids for x in _loads(k)]


def _reads(e: Any, target: str) -> bool:
    """True when ``e`` loads the element whose IR text is ``target``."""
    return any(E.render(x) == target for x in _loads(e))


def _has_load(e: Any) -> bool:
    return bool(_loads(e))


def _sum_terms(e: E.Expr, sign: int = 1) -> List[Tuple[int, E.Expr]]:
    if e.kind == "bin" and e.a in ("+", "-"):
        return _sum_terms(e.b, sign) + \
            _sum_terms(e.c, sign if e.a == "+" else -sign)
    return [(sign, e)]


def _term(buf: "Buffer", target: str, op: str, value: Any) -> Any:
    """What an update of a reducer element combines into it, or None for a
    store that does not update it (reads no old value). Raises where the
    update does not match the reducer's op."""
    kind = buf.reducer
    how = _UPDATE[kind].format(r=buf.py_name)

    def mismatch(spelled: str) -> KilnSourceError:
        return KilnSourceError(
            f"'{buf.py_name}' is a T.alloc_reducer(op=\"{kind}\") reducer: "
            f"update it as `{how}`, not with {spelled}")

    if op != "=":
        if kind != "sum" or op not in ("+=", "-="):
            raise mismatch(f"'{op}'")
        return value if op == "+=" else E.unop("-", value)
    if not _reads(value, target):
        return None
    e = E.as_expr(value)
    if kind == "sum":
        terms = _sum_terms(e)
        hits = [k for k, (s, x) in enumerate(terms)
                if s > 0 and E.render(x) == target]
        rest = [terms[k] for k in range(len(terms)) if hits[:1] != [k]]
        if len(hits) == 1 and not any(_reads(x, target) for _, x in rest):
            out: Any = None
            for s, x in rest:
                out = (x if s > 0 else E.unop("-", x)) if out is None else \
                    E.binop("+" if s > 0 else "-", out, x)
            return 0 if out is None else out
    elif e.kind == "call" and e.a in OPS and len(e.b) == 2:
        for k in (0, 1):
            if E.render(e.b[k]) == target and not _reads(e.b[1 - k], target):
                if e.a != kind:
                    raise mismatch(f"T.{e.a}")
                return e.b[1 - k]
    spelled = {"bin": f"'{e.a}'", "call": f"T.{e.a}"}.get(e.kind,
                                                         "this expression")
    raise mismatch(spelled)


def _names(e: Any) -> Set[str]:
    return {n.a for n in E.names_in(E.as_expr(e))}


class ParallelUpdates:
    """The T.Parallel whose body is being translated: its variables, and
    the temporaries and reductions its reducer updates add around it."""

    def __init__(self, t: "_Translator", loop_vars: List[LoopVar]):
        self.vars = loop_vars
        self.start = len(t.lines) - 1  # the `parallel` line
        self.depth = t.depth           # the body's
        self.guards = t.parallel_guards
        self.outer = frozenset(t.names.used)
        self.before: List[List] = []   # line records put before the loop
        self.after: List[List] = []    # and after it
        self.reducers: Dict[str, "Buffer"] = {}

    # --- the body's stores ------------------------------------------------

    def store(self, t: "_Translator", buf: "Buffer", idx: List[Any],
              op: str, value: Any) -> bool:
        """Judges the body's store ``buf[idx] op value``: True when it was
        lowered as a reducer update (emitted here), False for an ordinary
        element store; raises where the iterations would race."""
        value = E.as_expr(value)
        target = E.render(E.load(buf.name, idx, buf.dtype_ir))
        full = [E.substitute(E.as_expr(e), t.let_values) for e in idx]
        used = set().union(*(_names(e) for e in full)) if full else set()
        racing = [v for v in self.vars if v[1] not in used and
                  not (isinstance(v[2], int) and v[2] == 1)]
        if not racing:
            return False  # element-wise (`r[i] = r[i] / n` included)
        term = _term(buf, target, op, value) if buf.reducer else None
        if term is not None:
            self._lower(t, buf, idx, full, term)
            return True
        if t.parallel_guards > self.guards or \
                any(_has_load(e) for e in full):
            return False
        quoted = [f"'{v[0]}'" for v in racing]
        names = quoted[0] if len(quoted) == 1 else \
            f"{', '.join(quoted[:-1])} and {quoted[-1]}"
        plural = "s" if len(racing) > 1 else ""
        what = f"every iteration of {names}"
        if buf.reducer:
            how = _UPDATE[buf.reducer].format(r=buf.py_name)
            hint = f"update the reducer as `{how}` to reduce over {names}"
        else:
            hint = (f"to reduce over {names}, allocate '{buf.py_name}' with "
                    "T.alloc_reducer (a sum: `+=`; a max or min: "
                    "`r[i] = T.max(r[i], v)`), or store the terms into a "
                    "tile over the loop and use T.reduce_sum / "
                    "T.reduce_max")
        if op != "=" or _reads(value, target):
            raise KilnSourceError(
                f"'{buf.py_name}[...] {op}' inside T.Parallel: the index "
                f"leaves out the loop variable{plural} {names}, so {what} "
                f"updates the same element of '{buf.py_name}' at once (the "
                f"iterations race); {hint}")
        varying = _names(E.substitute(value, t.let_values))
        if varying.isdisjoint(v[1] for v in racing):
            return False  # every iteration stores the same value
        raise KilnSourceError(
            f"'{buf.py_name}[...] =' inside T.Parallel: the index leaves out "
            f"the loop variable{plural} {names} the value depends on, so "
            f"{what} stores a different value into the same element of "
            f"'{buf.py_name}' (the iterations race); {hint}")

    def _lower(self, t: "_Translator", buf: "Buffer", idx: List[Any],
               full: List[E.Expr], term: Any) -> None:
        """Emits the update's store of ``term`` into a new temporary and
        queues the temporary's alloc and its reductions (see the top)."""
        region, order = self._region(t, buf, idx, full)
        kept = {v[1] for v in order}
        slots = [k for k, v in enumerate(self.vars) if v[1] in kept]
        tmp_vars = list(self.vars)
        for slot, v in zip(slots, order):
            tmp_vars[slot] = v
        dims = [v[2] for v in tmp_vars]
        dtype, op = buf.dtype_ir, buf.reducer
        line = getattr(t.node, "lineno", 0)
        depth = self.depth - 1
        tmp = t.names.fresh(f"{buf.py_name}_part")
        self.before.append([depth, f"alloc fragment {tmp}: {dtype}["
                            f"{', '.join(t.r(d) for d in dims)}]", line])
        at = E.load(tmp, [E.Expr("name", v[1], ty="int") for v in tmp_vars],
                    dtype)
        top = t.depth == self.depth and t.parallel_guards == self.guards
        if top:  # runs once per iteration: its store is the whole term
            t.emit(f"{t.r(at)} = {t.r(term)}")
        else:
            init = _identity(op, dtype)
            self.before.append([depth, f"clear {tmp}" if op == "sum" else
                                f"fill {tmp}, {t.r(init)}", line])
            if op == "sum":
                t.emit(f"{t.r(at)} += {t.r(term)}")
            else:
                t.emit(f"{t.r(at)} = {t.r(E.call(op, [at, term]))}")
        reduced = [k for k, v in enumerate(tmp_vars) if v[1] not in kept]
        src = tmp
        for n, d in enumerate(reversed(reduced)):
            del dims[d]
            if n == len(reduced) - 1:
                self.after.append([depth, f"reduce.{op} {src} -> {region}, "
                                   f"dim={d}, clear=false", line])
                break
            nxt = t.names.fresh(f"{buf.py_name}_part")
            self.after.append([depth, f"alloc fragment {nxt}: {dtype}["
                               f"{', '.join(t.r(x) for x in dims)}]", line])
            self.after.append([depth, f"reduce.{op} {src} -> {nxt}, dim={d}",
                               line])
            src = nxt
        self.reducers[buf.name] = buf

    def _region(self, t: "_Translator", buf: "Buffer", idx: List[Any],
                full: List[E.Expr]) -> Tuple[str, List[LoopVar]]:
        """The reducer's region the reduction lands in, and the loop
        variables it keeps, in the order its index names them. Each index
        is a loop variable plus an offset, or a value the loop does not
        change; both must be usable after the loop."""
        parts: List[str] = []
        order: List[LoopVar] = []
        whole = len(idx) == len(buf.shape)
        for d, (e, f) in enumerate(zip(idx, full)):
            hit = [v for v in self.vars if v[1] in _names(f)]
            text = E.render(E.as_expr(e))
            if len(hit) > 1 or (hit and any(v[1] == hit[0][1]
                                            for v in order)):
                raise KilnSourceError(
                    f"reducer '{buf.py_name}' index '{text}': each index of "
                    "a reducer updated across a T.Parallel names at most one "
                    "loop variable, and each variable once")
            var = hit[0] if hit else None
            offset = self._outside(t, E.as_expr(e), f, var)
            if offset is None:
                uses = f"the loop variable '{var[0]}' plus an offset" \
                    if var else "a value"
                raise KilnSourceError(
                    f"reducer '{buf.py_name}' index '{text}' is not {uses} "
                    "that the code after the T.Parallel can compute: index "
                    "a reducer by a loop variable plus an offset, or by "
                    "values set before the loop")
            if var is None:
                parts.append(t.r(offset))
                whole = False
                continue
            order.append(var)
            zero = isinstance(offset, int) and offset == 0
            if zero and E.render_value(var[2]) == \
                    E.render_value(buf.shape[d]):
                parts.append(":")
                continue
            whole = False
            parts.append(f"{t.r(offset)}:+{t.r(var[2])}")
        region = buf.name if whole else f"{buf.name}[{', '.join(parts)}]"
        return region, order

    def _outside(self, t: "_Translator", e: E.Expr, full: E.Expr,
                 var: Optional[LoopVar]) -> Any:
        """``e`` less ``var`` over names declared outside the loop, else
        the same of its let-free form ``full`` when that reads no memory
        (a let of the body, `row = i + 1`); None when neither is."""
        inner = (set(t.names.used) - self.outer) | {v[1] for v in self.vars}
        for form in (e, full):
            x = form if var is None else \
                E.difference(form, E.Expr("name", var[1], ty="int"))
            if _names(x) & inner or (form is full and _has_load(x)):
                continue
            return x
        return None

    # --- after the loop ---------------------------------------------------

    def close(self, t: "_Translator") -> None:
        """After the loop's closing brace: refuses any other access of a
        reducer the body reduces into (its value is whole only after the
        loop), then puts the temporaries before the loop and the reductions
        after it."""
        body = t.lines[self.start + 1:-1]
        for name, buf in self.reducers.items():
            pattern = re.compile(rf"(?<![\w.]){re.escape(name)}\b")
            for _, text, line in body:
                if pattern.search(text):
                    raise KilnSourceError(
                        f"reducer '{buf.py_name}' is read or stored in the "
                        "T.Parallel that reduces into it; its value is "
                        "whole only after the loop: read it there",
                        t.filename, line)
        t.lines[self.start:self.start] = self.before
        t.lines.extend(self.after)
