"""Shared input validation: every bad parameter raises ``ValueError("<name> must be <range> (got x)")``."""

from __future__ import annotations

import math
import numbers
from typing import Any


def check(cond: bool, name: str, valid: str, value: Any) -> None:
    """Raise ``ValueError`` naming ``name`` and its valid range unless ``cond``."""
    if not cond:
        raise ValueError(f"{name} must be {valid} (got {value!r})")


def finite(x: Any) -> bool:
    """Whether ``x`` converts to a finite float."""
    try:
        return math.isfinite(float(x))
    except (TypeError, ValueError):
        return False


def is_int(x: Any) -> bool:
    """Whether ``x`` is an integer (Python or numpy; bools excluded)."""
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)
