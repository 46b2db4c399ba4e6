"""Exceptions raised by the kiln package; all derive from KilnError."""

from __future__ import annotations

from typing import Optional


class KilnError(Exception):
    """Base class of every error kiln raises."""


class KilnSourceError(KilnError):
    """Misuse of the DSL, located in the user's Python source.

    The message starts with ``FILE:LINE:`` (the ``filename`` and ``lineno``
    attributes), so editors and terminals can jump to the offending line.
    """

    def __init__(self, message: str, filename: Optional[str] = None,
                 lineno: Optional[int] = None, col: Optional[int] = None):
        self.message = message
        self.filename = filename
        self.lineno = lineno
        self.col = col
        super().__init__(self._render())

    def _render(self) -> str:
        if self.filename is None or self.lineno is None:
            return self.message
        return f"{self.filename}:{self.lineno}: {self.message}"

    def located(self, filename: str, lineno: int,
                col: Optional[int] = None) -> "KilnSourceError":
        """Returns this error with a location, keeping one already set."""
        if self.filename is not None and self.lineno is not None:
            return self
        return type(self)(self.message, filename, lineno, col)


class KilnArgumentError(KilnError, ValueError):
    """A kernel was called with arguments that do not fit its parameters."""


class KilnLibraryError(KilnError):
    """libkiln could not be found or loaded."""


class KilnStatusError(KilnError):
    """A libkiln call failed; ``code`` is its absl/gRPC status code."""

    def __init__(self, code: int, message: str):
        self.code = code
        self.detail = message
        super().__init__(f"{message} (status {code})" if message else
                         f"libkiln call failed (status {code})")


class KilnCompileError(KilnStatusError):
    """Compiling a kernel failed; the message holds every diagnostic."""
