"""``@kiln.autotune(configs=...)`` over ``@kiln.jit``, as TileLang stacks them.

- Integer config values become tile-IR tunables: the jit function is called
  once with placeholders, so the kernel's IR carries ``tune NAME in [...]``
  and each config is a set of bindings of one program. Such a program is
  tuned by the daemon's autotuner (the Autotune RPC, as ``kiln tune``), on
  the first launch, for that launch's device and shape: the configs are the
  candidates; each is compiled in parallel, run in an isolated benchmark
  worker on random inputs at the launch's shape, checked against the first
  correct candidate and timed (CUDA events on GPUs, wall clock on the CPU).
  The result is stored under the tuning key (kernel, device model, shape
  bucket), so another process asking again gets it at once (``cached``).
  ``warmup`` and ``rep`` do not apply there: the daemon picks the runs.
- If that call fails (the function uses a value in Python control flow, or
  a value is not an int), each config is translated separately with its
  values as constants, and the configs are timed here instead, on copies
  of the launch's arguments (``warmup`` and ``rep`` are milliseconds, as in
  TileLang, wall clock). Configs that fail to compile or launch are skipped
  and recorded in ``results``; these results are not stored.
"""

from __future__ import annotations

import copy as _copy
import sys
import threading
import time
from typing import (Any, Callable, Dict, List, Optional, Sequence, Tuple,
                    Union)

from kiln import _client
from kiln._dsl.expr import Tunable
from kiln._dsl.names import RESERVED
from kiln.errors import KilnArgumentError, KilnCompileError, KilnError
from kiln.jit import JITFunction, JITKernel

Config = Dict[str, Any]
Configs = Union[Sequence[Config], Callable[..., Sequence[Config]]]


def autotune(configs: Configs = (), warmup: float = 25, rep: float = 100,
             timeout: float = 100, **_options: Any) -> Callable:
    """Decorates a ``@kiln.jit`` function; TileLang's other options are
    accepted and ignored (the daemon checks every candidate's output
    against the first correct one's)."""
    def wrap(fn: Any) -> "AutoTuner":
        if not isinstance(fn, JITFunction):
            raise KilnError("@kiln.autotune goes above @kiln.jit")
        return AutoTuner(fn, configs, warmup, rep)
    return wrap


class AutoTuner:
    """What ``@kiln.autotune`` returns; ``AutoTuner.from_kernel(...)`` is
    TileLang's explicit tuner (ExplicitAutoTuner)."""

    @staticmethod
    def from_kernel(kernel: Callable, configs: Configs) -> "ExplicitAutoTuner":
        return ExplicitAutoTuner(kernel, configs)

    def __init__(self, fn: JITFunction, configs: Configs, warmup: float,
                 rep: float):
        self.fn = fn
        self.configs = configs
        self.warmup = warmup
        self.rep = rep
        # Eager functions: the tuned choice per call shape (_call_key).
        self._eager_choices: Dict[Any, "AutotunedKernel"] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> "AutotunedKernel":
        configs = _without_pass_configs(
            self.configs(*args, **kwargs) if callable(self.configs)
            else list(self.configs))
        if not configs:
            raise KilnError("kiln.autotune needs at least one config")
        sig = self.fn.signature()
        bound = sig.bind_partial(*args, **kwargs)
        keys = sorted({k for c in configs for k in c})
        for k in keys:
            if k not in sig.parameters:
                raise KilnArgumentError(
                    f"config key '{k}' is not a parameter of "
                    f"{self.fn.func.__name__}")
        if self.fn.eager:
            return self._eager(args, kwargs, configs, keys, bound.arguments)
        if all(k in bound.arguments for k in keys):
            # Every tunable given by the caller: no tuning, as in TileLang.
            return AutotunedKernel([self.fn(*args, **kwargs)],
                                   [dict()], self, "given")
        kernels = self._as_tunables(configs, keys, bound.arguments)
        if kernels is not None:
            tuned = AutotunedKernel(kernels, configs, self, "tunables")
        else:
            tuned = AutotunedKernel([self.fn.make_kernel(self.fn.func(**{
                **bound.arguments, **c})) for c in configs], configs, self,
                "constants")
        inputs = _captured_inputs()
        if inputs is not None:  # inside set_autotune_inputs: tune now
            with tuned._lock:
                tuned._tune(inputs)
        return tuned

    def _eager(self, args: Sequence[Any], kwargs: Dict[str, Any],
               configs: List[Config], keys: List[str],
               given: Dict[str, Any]) -> Any:
        """An eager function called with its tensors (TileLang's
        ``@autotune`` over an eager ``@jit``): runs the best config's
        kernel on them and returns its outputs. The configs are timed on
        copies of the arguments the first time a shape is seen (each
        config's kernel built as a direct call builds it); later calls
        with the same shapes and Python values reuse the choice."""
        if all(k in given for k in keys):
            return self.fn(*args, **kwargs)
        key = _call_key(args, kwargs)
        tuned = self._eager_choices.get(key) if key is not None else None
        if tuned is None:
            built = [self.fn.eager_bind(args, {**kwargs, **c})
                     for c in configs]
            tuned = AutotunedKernel([k for k, _ in built], configs, self,
                                    "constants")
            with tuned._lock:
                tuned._tune(built[0][1])
            if key is not None:
                self._eager_choices[key] = tuned
        _, inputs = self.fn.eager_bind(args, {**kwargs, **tuned._config})
        return tuned.best(*inputs)  # type: ignore[misc]

    def compile(self, *args: Any, **kwargs: Any) -> "AutotunedKernel":
        """TileLang's ``tuned_fn.compile(...)``: the tuned kernel for these
        arguments, tuned now (on the profiler's random inputs, or those of
        ``set_autotune_inputs``) so that ``.config`` and ``.latency`` are
        known."""
        if self.fn.eager:
            # Dims and Python values by keyword: one kernel per config.
            configs = _without_pass_configs(
                self.configs(*args, **kwargs) if callable(self.configs)
                else list(self.configs))
            if not configs:
                raise KilnError("kiln.autotune needs at least one config")
            tuned = AutotunedKernel(
                [self.fn.compile(*args, **{**kwargs, **c}) for c in configs],
                configs, self, "constants")
        else:
            tuned = self(*args, **kwargs)
        tuned.tune()
        return tuned

    def _as_tunables(self, configs: List[Dict[str, Any]], keys: List[str],
                     given: Dict[str, Any]) -> Optional[List[JITKernel]]:
        values: Dict[str, List[int]] = {k: [] for k in keys}
        for c in configs:
            if set(c) != set(keys):
                return None
            for k, v in c.items():
                if not isinstance(v, int) or isinstance(v, bool):
                    return None
                values[k].append(v)
        placeholders = {k: Tunable(_ir_name(k), vs)
                        for k, vs in values.items()}
        try:
            prim = self.fn.func(**{**given, **placeholders})
            base = self.fn.make_kernel(prim)
        except Exception:  # noqa: BLE001 (fall back to constants)
            return None
        used = set(prim.tunables)
        return [JITKernel(prim, self.fn.out_idx, self.fn.target,
                          {placeholders[k].a: v for k, v in c.items()
                           if placeholders[k].a in used})
                for c in configs] or [base]


class AutotunedKernel:
    """The candidates of a tuning; launches the best once it is known."""

    def __init__(self, kernels: List[JITKernel], configs: List[Dict[str, Any]],
                 tuner: AutoTuner, mode: str):
        self.kernels = kernels
        # "tunables": one program, configs bind its tunables; "constants":
        # one program per config; "given": the caller fixed every value.
        self.mode = mode
        self.configs = configs
        self._tuner = tuner
        self.best: Optional[JITKernel] = kernels[0] if len(kernels) == 1 \
            else None
        self._config: Optional[Dict[str, Any]] = configs[0] \
            if len(kernels) == 1 else None
        self.results: List[Dict[str, Any]] = []
        # Set by the daemon's tuning ("tunables" mode): the tuning key, whether
        # the answer was stored already, and the daemon's whole answer.
        self.tuning_key: Optional[str] = None
        self.cached = False
        self.answer: Optional[Dict[str, Any]] = None
        self._lock = threading.Lock()

    @property
    def ir(self) -> str:
        """The tile IR: one program with tunables, or the first config's."""
        return (self.best or self.kernels[0]).ir

    @property
    def config(self) -> Optional[Dict[str, Any]]:
        """The best config; reading it before the first launch tunes on
        the profiler's random inputs (TileLang tunes when called)."""
        self.tune()
        return self._config

    @property
    def latency(self) -> Optional[float]:
        """Milliseconds per launch of the best config (tuned now if need
        be, as ``config``); None when the caller fixed every value."""
        self.tune()
        for r in self.results:
            if r.get("config") == self._config and "seconds" in r:
                return r["seconds"] * 1e3
        return None

    def tune(self) -> "AutotunedKernel":
        """Tunes now, unless a launch (or an earlier call) has: on the
        inputs of ``set_autotune_inputs`` when inside one, else on the
        profiler's random inputs for the kernel's (constant) shapes."""
        with self._lock:
            if self.best is None:
                inputs = _captured_inputs()
                if inputs is None:
                    inputs = self.kernels[0].get_profiler().inputs()
                self._tune(list(inputs))
        return self

    def __getattr__(self, name: str) -> Any:
        # The best kernel's other attributes (get_profiler,
        # get_kernel_source, params...), as TileLang returns a kernel.
        # A name no kernel has is an AttributeError at once: hasattr() and
        # a typo do not tune.
        if name.startswith("_") or name in ("kernels", "best", "mode") or \
                not hasattr(self.kernels[0], name):
            raise AttributeError(
                f"'{type(self).__name__}' object has no attribute '{name}'")
        self.tune()
        return getattr(self.best, name)

    # No reference program is run by the decorator's tuning.
    ref_latency: Optional[float] = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        with self._lock:
            if self.best is None:
                self._tune(args)
        return self.best(*args, **kwargs)  # type: ignore[misc]

    def _tune(self, args: Sequence[Any]) -> None:
        if self.mode == "tunables":
            self._tune_by_daemon(args)
            return
        best_time = None
        for kernel, config in zip(self.kernels, self.configs):
            entry: Dict[str, Any] = {"config": config}
            try:
                copies = [_clone(a) for a in args]
                entry["seconds"] = self._time(kernel, copies)
            except KilnError as e:
                entry["error"] = str(e)
            self.results.append(entry)
            t = entry.get("seconds")
            if t is not None and (best_time is None or t < best_time):
                best_time, self.best, self._config = t, kernel, config
        if self.best is None:
            failures = "\n".join(f"  {r['config']}: {r['error']}"
                                 for r in self.results)
            raise KilnError(f"kiln.autotune: every config failed:\n{failures}")

    def _tune_by_daemon(self, args: Sequence[Any]) -> None:
        first = self.kernels[0]
        shape, device = _problem(first, args)
        target = "cpu" if device == "cpu" else first.target
        client = _client.default_client()
        try:
            answer = client.autotune(first.ir, first.name, target, shape,
                                     [k.bindings for k in self.kernels])
        except KilnCompileError as e:
            raise KilnCompileError(
                e.code, first._explain(e.detail, f"{first.name}.tile")) \
                from None
        self.tuning_key = answer["tuning_key"]
        self.cached = bool(answer["cached"])
        self.answer = answer
        by_label = {c["label"]: c
                    for c in answer["result"].get("candidates", [])}
        excluded = dict(e.split(": ", 1) for e in answer.get("excluded", []))
        best = {k: int(v) for k, v in answer["best"].items()}
        for kernel, config in zip(self.kernels, self.configs):
            label = _label(kernel.bindings)
            entry: Dict[str, Any] = {"config": config}
            c = by_label.get(label)
            if c is None:
                entry["error"] = excluded.get(label, "not a candidate")
            else:
                entry["status"] = c.get("status", "").replace(
                    "CANDIDATE_STATUS_", "").lower()
                if entry["status"] == "benchmarked":
                    entry["seconds"] = float(c["median_us"]) / 1e6
                else:
                    entry["error"] = c.get("reason", entry["status"])
            self.results.append(entry)
            if self.best is None and kernel.bindings == best:
                self.best, self._config = kernel, config
        if self.best is None:
            raise KilnError(f"kiln.autotune: the daemon chose {best}, "
                            "which is none of the configs")

    def _time(self, kernel: JITKernel, args: List[Any]) -> float:
        sync = _synchronizer(args)
        start = time.perf_counter()
        kernel(*args)
        sync()
        once = max(time.perf_counter() - start, 1e-6)
        for _ in range(int(min(self._tuner.warmup / 1e3 / once, 100))):
            kernel(*args)
        n = max(1, int(min(self._tuner.rep / 1e3 / once, 1000)))
        sync()
        start = time.perf_counter()
        for _ in range(n):
            kernel(*args)
        sync()
        return (time.perf_counter() - start) / n


# --- inputs captured for tuning, and TileLang's explicit AutoTuner ---------

_captured = threading.local()


class set_autotune_inputs:  # noqa: N801 (TileLang's name)
    """``with set_autotune_inputs(a, b): ...``: tunings started inside the
    block (``AutoTuner.run`` and ``@autotune`` kernels built there) run on
    these input tensors instead of the profiler's random ones."""

    def __init__(self, *tensors: Any):
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tuple(tensors[0])
        self.tensors = list(tensors)
        self._saved: Optional[List[Any]] = None

    def __enter__(self) -> "set_autotune_inputs":
        self._saved = getattr(_captured, "inputs", None)
        _captured.inputs = self.tensors
        return self

    def __exit__(self, *_exc: Any) -> None:
        _captured.inputs = self._saved


def _captured_inputs() -> Optional[List[Any]]:
    return getattr(_captured, "inputs", None)


class AutotuneResult:
    """The best configuration of a tuning: ``config``, ``latency`` (ms),
    ``ref_latency`` (ms of the reference program, when one was given),
    ``kernel`` (the compiled best), and every config's outcome in
    ``results``."""

    def __init__(self, config: Dict[str, Any], latency: float,
                 ref_latency: Optional[float], kernel: JITKernel,
                 results: List[Dict[str, Any]]):
        self.config = config
        self.latency = latency
        self.ref_latency = ref_latency
        self.kernel = kernel
        self.results = results

    def __repr__(self) -> str:
        return (f"AutotuneResult(config={self.config}, "
                f"latency={self.latency:.4g} ms, "
                f"ref_latency={self.ref_latency})")


class ExplicitAutoTuner:
    """``AutoTuner.from_kernel(kernel=f, configs=[...])`` then
    ``.set_compile_args(...)``, ``.set_profile_args(...)`` and
    ``.run(warmup=, rep=)``: each config is translated (``f(**config)``
    returns a prim_func), compiled, checked against ``ref_prog`` (unless
    ``skip_check``) and timed with the profiler on one set of inputs (the
    captured ones, else made by ``supply_type``); configs that fail are
    recorded and skipped. TileLang's other arguments are accepted and
    ignored."""

    def __init__(self, kernel: Callable, configs: Configs):
        self.fn = kernel.func if isinstance(kernel, JITFunction) else kernel
        self.configs = configs
        self.out_idx: Any = None
        self.target = "auto"
        self.supply: Any = None
        self.ref_prog: Optional[Callable] = None
        self.skip_check = False
        self.rtol, self.atol = 1e-2, 1e-2
        self.max_mismatched = 0.01
        self.inputs = _captured_inputs()

    def set_compile_args(self, out_idx: Any = None, target: str = "auto",
                         **profile: Any) -> "ExplicitAutoTuner":
        self.out_idx = out_idx
        self.target = target
        # (Older TileLang passes the profile arguments here.)
        return self.set_profile_args(**profile) if profile else self

    def set_profile_args(self, supply_type: Any = None,
                         ref_prog: Optional[Callable] = None,
                         skip_check: bool = False, rtol: float = 1e-2,
                         atol: float = 1e-2,
                         max_mismatched_ratio: float = 0.01,
                         **_ignored: Any) -> "ExplicitAutoTuner":
        if supply_type is not None:
            self.supply = supply_type
        if ref_prog is not None:
            self.ref_prog = ref_prog
        self.skip_check = skip_check
        self.rtol, self.atol = rtol, atol
        self.max_mismatched = max_mismatched_ratio
        return self

    def run(self, warmup: float = 25, rep: float = 100,
            timeout: float = 100, **_ignored: Any) -> AutotuneResult:
        from kiln.profiler import TensorSupplyType
        configs = _without_pass_configs(
            self.configs() if callable(self.configs) else list(self.configs))
        if not configs:
            raise KilnError("AutoTuner needs at least one config")
        supply = self.supply if self.supply is not None \
            else TensorSupplyType.Auto
        results: List[Dict[str, Any]] = []
        best: Optional[Tuple[float, Dict[str, Any], JITKernel, Any]] = None
        inputs = self.inputs
        for config in configs:
            entry: Dict[str, Any] = {"config": config}
            results.append(entry)
            try:
                kernel = JITKernel(self.fn(**config), self.out_idx,
                                   self.target)
                profiler = kernel.get_profiler(tensor_supply_type=supply)
                if inputs is None:
                    inputs = profiler.inputs()  # one set for every config
                if self.ref_prog is not None and not self.skip_check:
                    profiler.assert_allclose(
                        self.ref_prog, inputs, atol=self.atol,
                        rtol=self.rtol,
                        max_mismatched_ratio=self.max_mismatched)
                entry["latency"] = profiler.do_bench(
                    warmup=warmup, rep=rep, input_tensors=inputs)
            except (KilnError, AssertionError) as e:
                entry["error"] = str(e)
                continue
            if best is None or entry["latency"] < best[0]:
                best = (entry["latency"], config, kernel, profiler)
        if best is None:
            failures = "\n".join(f"  {r['config']}: {r['error']}"
                                  for r in results)
            raise KilnError(f"AutoTuner: every config failed:\n{failures}")
        latency, config, kernel, profiler = best
        ref_latency = None
        if self.ref_prog is not None:
            ref_latency = profiler.do_bench(self.ref_prog, warmup=warmup,
                                            rep=rep, input_tensors=inputs)
        return AutotuneResult(config, latency, ref_latency, kernel, results)


def _call_key(args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
    """What a call's tuning depends on: each array's shape and dtype, the
    other values as they are; None when one is not hashable."""
    def one(v: Any) -> Any:
        if hasattr(v, "shape") and hasattr(v, "dtype"):
            return ("array", tuple(v.shape), str(v.dtype))
        return v
    key = (tuple(one(a) for a in args),
           tuple(sorted((k, one(v)) for k, v in kwargs.items())))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def _without_pass_configs(configs: List[Config]) -> List[Config]:
    """The configs without TileLang's ``pass_configs`` entries (compiler
    options Kiln has no use for; see kiln.PassConfigKey)."""
    return [{k: v for k, v in c.items() if k != "pass_configs"}
            for c in configs]


def _ir_name(key: str) -> str:
    """The tunable's tile-IR name: the config key, upper-cased when the key
    is a tile-IR word (``threads`` -> ``THREADS``)."""
    return key.upper() if key in RESERVED else key


def _label(bindings: Dict[str, int]) -> str:
    """The daemon's candidate label: "BM=64,BN=128" (names sorted)."""
    return ",".join(f"{k}={v}" for k, v in sorted(bindings.items()))


def _problem(kernel: JITKernel, args: Sequence[Any]) -> Tuple[Dict[str, int],
                                                              str]:
    """The shape to tune at (every symbol, from the launch's tensors, and
    the integer scalars) and the device the tensors are on."""
    inputs, _, symbols, _, device = kernel.check_inputs(args)
    shape = {kernel.params[i].name: a for i, a in zip(inputs, args)
             if not kernel.params[i].is_tensor and isinstance(a, int)
             and not isinstance(a, bool)}
    shape.update({name: value for name, (value, _) in symbols.items()})
    return shape, device


def _clone(value: Any) -> Any:
    """A copy, so that candidates cannot change the caller's data."""
    if hasattr(value, "clone") and callable(value.clone):
        return value.clone()
    if hasattr(value, "copy") and callable(value.copy):
        return value.copy()
    return _copy.copy(value)


def _synchronizer(args: Sequence[Any]) -> Callable[[], None]:
    torch = sys.modules.get("torch")
    if torch is not None and any(isinstance(a, torch.Tensor) and a.is_cuda
                                 for a in args):
        return torch.cuda.synchronize
    return lambda: None
