"""The backend of the hot paths, picked in this one place: the Cython extension
(``kproto._codec``) or its pure-Python twins (``kproto._pure``).

``KPROTO_PURE=1`` forces the pure twin. Without it, a missing or broken
extension falls back to pure Python with a RuntimeWarning (kproto stays usable,
just slow).
"""

from __future__ import annotations

import os
import warnings
from types import ModuleType

IS_PURE: bool
backend: ModuleType

if os.environ.get("KPROTO_PURE") == "1":
    from . import _pure as backend

    IS_PURE = True
else:
    try:
        from . import _codec as backend

        IS_PURE = False
    except ImportError as exc:  # pragma: no cover - only without a built extension
        warnings.warn(f"kproto's Cython extension is not available ({exc}); using the "
                      "pure-Python implementation, which is much slower", RuntimeWarning,
                      stacklevel=2)
        from . import _pure as backend

        IS_PURE = True

__all__ = ["backend", "IS_PURE"]
