"""Python ``while`` in a kernel body: the counted induction form only.

The tile IR has no while loop, only loops with a trip count. TileLang's
persistent walks (its AMD FlashAttention examples) write

    bx = T.alloc_var(T.int32)
    bx = b_split
    while bx < num_q_blocks:
        ...
        bx = bx + num_split_q

which counts: the body runs for V0, V0 + STEP, ... while below BOUND. The
lowering, for ``while V < BOUND`` (``V <= BOUND``, ``BOUND > V``,
``BOUND >= V``) whose body ends in ``V = V + STEP`` / ``V += STEP`` /
``V = STEP + V`` (or ``V = A + STEP`` with ``A = V`` earlier in the body,
as TileLang's AMD attention walk's ``current_bx``):

1. Check the form: V a name bound to an integer (a ``T.alloc_var``, a let
   or a Python int); no ``else``, ``break`` or ``continue``; V written only
   by the last statement; no name that BOUND or STEP reads written in the
   body; STEP an integer, positive where it is a constant (a kernel value
   is taken to be positive, as the while would not end otherwise).
2. Evaluate V0, BOUND and STEP once, before the loop (a ``T.alloc_var``'s
   value is read into a let).
3. Emit ``for it in serial(max(ceildiv(BOUND - V0, STEP), 0))`` (``BOUND -
   V0 + 1`` for ``<=``), bind V to ``let V = V0 + it * STEP`` inside, and
   walk the body without its last statement.
4. After the loop V holds what the while leaves: ``V0 + trips * STEP``
   (stored into the ``T.alloc_var``, or a new let / Python value).

Every other while is a located error naming what makes it unsupported.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING, Any, List, Optional, Set, Tuple

from kiln._dsl import expr as E
from kiln.errors import KilnSourceError
from kiln.language import ceildiv
from kiln.language import max as kmax

if TYPE_CHECKING:
    from kiln._dsl.frontend import _Translator

_FORM = ("write `while V < BOUND:` (or `V <= BOUND`, `BOUND > V`, "
         "`BOUND >= V`) whose body ends with `V = V + STEP` or `V += STEP`")


def lower(t: "_Translator", node: ast.While) -> None:
    """Emits the counted loop for ``node``, or raises a located
    KilnSourceError naming what makes the while unsupported."""
    if node.orelse:
        raise t.error("while-else is not supported in a kernel", node)
    name, bound_node, inclusive = _condition(t, node.test)
    body, update = node.body[:-1], node.body[-1]
    _no_jumps(t, node.body)
    step_node = _step(t, name, body, update, node)
    for what, expr in (("bound", bound_node), ("step", step_node)):
        _invariant(t, name, what, expr, node.body)

    from kiln._dsl.frontend import LocalVar, _is_kernel_value
    old, kind, _ = t.lookup(name)
    if kind in ("block", "loop", "param", "buffer"):
        raise t.error(f"the while variable '{name}' is a {kind} name and "
                      "cannot change; copy it into a T.alloc_var", node.test)
    bound = t.ev(bound_node)
    saved = t.node
    t.node = update
    step = t.ev(step_node)
    t.node = saved
    start = old
    for what, v, at in (("variable", old, node.test),
                        ("bound", bound, bound_node),
                        ("step", step, update)):
        if not _is_integer(v):
            raise t.error(f"the while {what} must be an integer; got "
                          f"'{E.as_expr(v) if _is_kernel_value(v) else v}'",
                          at)
    if not _is_kernel_value(step) and step <= 0:
        raise t.error(f"the while step {step} is not positive: the loop "
                      "would not end", update)
    if isinstance(old, LocalVar) or not isinstance(old, (E.Expr, int)):
        first = t.names.fresh(name)
        t.emit(f"let {first} = {t.r(old)}")
        start = E.Expr("name", first, ty=E.as_expr(old).ty)
    span = E.binop("-", bound, start)
    if inclusive:
        span = E.binop("+", span, 1)
    trips = kmax(ceildiv(span, step), 0)

    it = t.names.fresh(name + "_it")
    it_e = E.Expr("name", it, ty="int")
    t.emit(f"for {it} in serial({t.r(trips)}) {{")
    t.depth += 1
    t.scope = type(t.scope)(t.scope)
    try:
        ir = t.names.fresh(name)
        value = _affine(start, it_e, step)
        t.emit(f"let {ir} = {t.r(value)}")
        t.let_values[ir] = E.as_expr(value)
        t.bind(name, E.Expr("name", ir, ty=E.as_expr(value).ty), "let")
        for s in body:
            t.stmt(s)
    finally:
        t.scope = t.scope.parent  # type: ignore[assignment]
        t.depth -= 1
    t.emit("}")
    t._assign_name(name, _affine(start, trips, step))


def _condition(t: "_Translator",
               test: ast.expr) -> Tuple[str, ast.expr, bool]:
    """(V, BOUND, inclusive) of ``V < BOUND`` and its mirrored forms."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        op, left, right = test.ops[0], test.left, test.comparators[0]
        if isinstance(op, (ast.Lt, ast.LtE)) and isinstance(left, ast.Name):
            return left.id, right, isinstance(op, ast.LtE)
        if isinstance(op, (ast.Gt, ast.GtE)) and isinstance(right, ast.Name):
            return right.id, left, isinstance(op, ast.GtE)
    raise t.error("unsupported while condition "
                  f"'{ast.unparse(test)}': {_FORM}", test)


def _no_jumps(t: "_Translator", stmts: List[ast.stmt]) -> None:
    """Refuses a break or continue of this loop (not of a nested one)."""
    for s in stmts:
        for n in _walk_loop_level(s):
            if isinstance(n, (ast.Break, ast.Continue)):
                word = "break" if isinstance(n, ast.Break) else "continue"
                raise t.error(f"`{word}` in a while loop is not supported: "
                              "a kernel while is lowered to a counted "
                              "serial loop", n)


def _walk_loop_level(node: ast.AST):
    yield node
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, (ast.For, ast.While, ast.FunctionDef,
                                  ast.Lambda)):
            yield from _walk_loop_level(child)


def _step(t: "_Translator", name: str, body: List[ast.stmt],
          update: ast.stmt, node: ast.While) -> ast.expr:
    """STEP of the last statement, after checking V is written nowhere
    else (an alias ``A = V`` may stand for V in the update)."""
    for s in body:
        hit = _first_write(s, {name})
        if hit is not None:
            raise t.error(f"'{name}' is written here, before the last "
                          "statement of the while body; a kernel while "
                          f"updates '{name}' once per iteration, as the "
                          "body's last statement", hit)
    step = _update_step(name, _aliases(name, body), update)
    if step is None:
        raise t.error(f"the last statement of the while body must update "
                      f"'{name}' as `{name} = {name} + STEP` or "
                      f"`{name} += STEP`; got '{ast.unparse(update)}'",
                      update)
    return step


def _aliases(name: str, body: List[ast.stmt]) -> Set[str]:
    """Names bound by ``A = V`` at the body's top level and never again."""
    found = {s.targets[0].id for s in body
             if isinstance(s, ast.Assign) and len(s.targets) == 1 and
             isinstance(s.targets[0], ast.Name) and
             isinstance(s.value, ast.Name) and s.value.id == name}
    return {a for a in found
            if sum(_first_write(s, {a}) is not None for s in body) == 1}


def _update_step(name: str, aliases: Set[str],
                 s: ast.stmt) -> Optional[ast.expr]:
    if isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add) and \
            isinstance(s.target, ast.Name) and s.target.id == name:
        return s.value
    if not (isinstance(s, ast.Assign) and len(s.targets) == 1 and
            isinstance(s.targets[0], ast.Name) and
            s.targets[0].id == name and isinstance(s.value, ast.BinOp) and
            isinstance(s.value.op, ast.Add)):
        return None
    v = {name} | aliases
    left, right = s.value.left, s.value.right
    if isinstance(left, ast.Name) and left.id in v:
        return right
    if isinstance(right, ast.Name) and right.id in v:
        return left
    return None


def _invariant(t: "_Translator", name: str, what: str, expr: ast.expr,
               body: List[ast.stmt]) -> None:
    """Refuses a BOUND or STEP that reads V or a name the body writes."""
    reads = {n.id for n in ast.walk(expr) if isinstance(n, ast.Name)}
    if name in reads:
        raise t.error(f"the while {what} '{ast.unparse(expr)}' reads the "
                      f"loop variable '{name}'", expr)
    for s in body[:-1]:
        hit = _first_write(s, reads)
        if hit is not None:
            raise t.error(f"the while body writes '{_written(hit, reads)}',"
                          f" which the {what} '{ast.unparse(expr)}' reads: "
                          f"the {what} must not change in the loop", hit)


def _first_write(stmt: ast.stmt, names: Set[str]) -> Optional[ast.AST]:
    """The first node in ``stmt`` that assigns one of ``names`` (a name or
    an element of it), else None."""
    for n in ast.walk(stmt):
        targets: List[ast.AST] = []
        if isinstance(n, ast.Assign):
            targets = list(n.targets)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)):
            targets = [n.target]
        elif isinstance(n, ast.For):
            targets = [n.target]
        elif isinstance(n, ast.With):
            targets = [i.optional_vars for i in n.items if i.optional_vars]
        if any(r in names for tg in targets for r in _roots(tg)):
            return n
    return None


def _written(node: ast.AST, names: Set[str]) -> str:
    for tg in ast.walk(node):
        for r in _roots(tg) if isinstance(tg, ast.expr) else []:
            if r in names:
                return r
    return "?"


def _roots(target: ast.AST) -> List[str]:
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Subscript, ast.Attribute)):
        return _roots(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [r for e in target.elts for r in _roots(e)]
    if isinstance(target, ast.Starred):
        return _roots(target.value)
    return []


def _is_integer(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return True
    try:
        return E.is_int(E.as_expr(v).ty) and E.as_expr(v).ty != "bool"
    except KilnSourceError:
        return False


def _affine(start: Any, count: Any, step: Any) -> Any:
    """``start + count * step``, without the ``* 1`` and ``0 +``."""
    moved = count if isinstance(step, int) and step == 1 else \
        E.binop("*", count, step)
    if isinstance(start, int) and start == 0:
        return moved
    return E.binop("+", start, moved)
