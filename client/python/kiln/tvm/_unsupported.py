"""TVM names that Kiln does not provide, as objects that say so when used.

An object rather than a missing attribute, so that ``from tvm.tirx import
IndexMap`` at the top of a module still imports and the error points at
the line that uses the name, with what to write instead.
"""

from __future__ import annotations

from typing import Any, NoReturn

from kiln.errors import KilnSourceError


class Unsupported:
    """``name`` (as TileLang spells it): calling it or reading one of its
    attributes raises a KilnSourceError naming it and ``advice``."""

    def __init__(self, name: str, advice: str):
        self._name = name
        self._advice = advice

    def _refuse(self) -> NoReturn:
        raise KilnSourceError(
            f"{self._name} is not supported by Kiln: {self._advice}")

    def __call__(self, *_args: Any, **_kwargs: Any) -> NoReturn:
        self._refuse()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_"):  # copy, pickle and inspect probes
            raise AttributeError(attr)
        self._refuse()

    def __repr__(self) -> str:
        return f"<{self._name}: not supported by Kiln>"
