"""The process-wide client kernels compile with.

By default an embedded client (compiler and cache in this process; cache in
``$KILN_CACHE_DIR`` or libkiln's default). With ``KILN_ADDRESS`` set (``""``
meaning kilnd's default socket), or after ``kiln.connect()``, the kilnd
daemon compiles instead.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

_lock = threading.Lock()
_default: Optional[Any] = None


def connect(address: Optional[str] = None, timeout: float = 2.0) -> Any:
    """Connects to kilnd; later compiles in this process go through it."""
    from kiln._capi import Client
    client = Client.connect(address, timeout)
    set_default(client)
    return client


def embedded(cache_dir: Optional[str] = None, worker_threads: int = 0) -> Any:
    """Makes an embedded client the default (no daemon)."""
    from kiln._capi import Client
    client = Client.embedded(cache_dir, worker_threads)
    set_default(client)
    return client


def set_default(client: Optional[Any]) -> None:
    global _default
    with _lock:
        _default = client


def current() -> Optional[Any]:
    """The default client if one exists (no lock: a plain read)."""
    return _default


def default_client() -> Any:
    """The client compiles use, created on first use from the environment."""
    global _default
    with _lock:
        if _default is None:
            from kiln._capi import Client
            address = os.environ.get("KILN_ADDRESS")
            if address is not None:
                _default = Client.connect(address)
            else:
                _default = Client.embedded(os.environ.get("KILN_CACHE_DIR"))
        return _default
