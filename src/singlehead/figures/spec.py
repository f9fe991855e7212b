"""The frozen spec of one reproduction figure: named fields, real defaults, validated on construction.

Every figure of the reproduction has one :class:`FigureSpec` subclass (a frozen dataclass) that
holds every size it computes with: dimensions, seeds, grids of alpha and lam, test-set sizes.
The defaults of a subclass are its ``quick`` preset (laptop scale); the class methods
:meth:`FigureSpec.quick`, :meth:`FigureSpec.full` (paper scale) and :meth:`FigureSpec.smoke`
(tests) return the three presets as instances, and :meth:`FigureSpec.replace` changes fields of
one. A spec is validated when it is built (:func:`validate_fields`): an invalid field raises a
``ValueError`` that names the class, the field and the valid range.
"""

from __future__ import annotations

import dataclasses
import numbers
from typing import Any, TypeVar

from singlehead.model.results import jsonable, stable_hash

__all__ = ["FigureSpec", "validate_fields", "check_same_length", "PRESETS"]

#: The presets every spec provides (class methods of the same names).
PRESETS = ("quick", "full", "smoke")

S = TypeVar("S", bound="FigureSpec")


class FigureSpec:
    """Base of the per-figure specs (subclasses are ``@dataclass(frozen=True)``).

    Conventions checked by :func:`validate_fields` for every field, unless the field's metadata
    says otherwise (``metadata={"min": m}`` sets the smallest allowed value, inclusive for
    integers, exclusive for reals when ``"open"`` is true, the default for reals):

    - an ``int`` field is an integer ``>= 1``;
    - a ``float`` field is a real ``> 0``;
    - a tuple field is non-empty and each entry obeys the rule of its type;
    - ``bool``, ``str`` and other objects (a :class:`~singlehead.model.problem.Problem`, options)
      are not checked here (their own classes validate them).

    Subclasses add cross-field checks (e.g. one seed count per size) in ``check()``.
    """

    def __post_init__(self) -> None:
        validate_fields(self)
        self.check()

    def check(self) -> None:
        """Cross-field checks of a subclass (none by default)."""

    def replace(self: S, **changes: Any) -> S:
        """A copy with ``changes`` applied (validated like a new spec)."""
        return dataclasses.replace(self, **changes)  # type: ignore[type-var]

    def to_dict(self) -> dict[str, Any]:
        """The fields as plain JSON types (objects with ``to_dict`` through it)."""
        out = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            v = getattr(self, f.name)
            out[f.name] = v.to_dict() if hasattr(v, "to_dict") else jsonable(v)
        return out

    def key(self) -> str:
        """A stable hash of the spec (``singlehead.model.results.stable_hash`` of :meth:`to_dict`)."""
        return stable_hash({"spec": type(self).__name__, **self.to_dict()})

    @classmethod
    def quick(cls: type[S]) -> S:
        """Laptop scale (2 cores): the class defaults."""
        return cls()

    @classmethod
    def full(cls: type[S]) -> S:
        """Paper scale; the quick preset unless a subclass says otherwise."""
        return cls()

    @classmethod
    def smoke(cls: type[S]) -> S:
        """Tests (seconds); subclasses override it with small sizes."""
        return cls()

    @classmethod
    def preset(cls: type[S], name: str) -> S:
        """The preset called ``name`` (one of :data:`PRESETS`)."""
        if name not in PRESETS:
            raise ValueError(f"mode must be one of {', '.join(map(repr, PRESETS))} (got {name!r})")
        return getattr(cls, name)()


def _check_value(owner: str, name: str, v: Any, meta: dict[str, Any]) -> None:
    if isinstance(v, bool) or isinstance(v, str) or not isinstance(v, numbers.Real):
        return
    lo = meta.get("min")
    if isinstance(v, numbers.Integral):
        lo = 1 if lo is None else lo
        if v < lo:
            raise ValueError(f"{owner}.{name} must be an integer >= {lo} (got {v!r})")
        return
    lo = 0.0 if lo is None else lo
    if not (v > lo if meta.get("open", True) else v >= lo):  # NaN fails too
        raise ValueError(
            f"{owner}.{name} must be a real number {'>' if meta.get('open', True) else '>='} {lo:g} (got {v!r})"
        )


def validate_fields(spec: Any) -> None:
    """Check every field of the dataclass ``spec`` by the rules of :class:`FigureSpec`."""
    owner = type(spec).__name__
    for f in dataclasses.fields(spec):
        v = getattr(spec, f.name)
        meta = dict(f.metadata)
        if isinstance(v, tuple):
            if not v and not meta.get("empty", False):
                raise ValueError(f"{owner}.{f.name} must not be empty (got ())")
            for x in v:
                if isinstance(x, numbers.Real) and not isinstance(x, bool):
                    try:
                        _check_value(owner, f.name, x, meta)
                    except ValueError:
                        raise ValueError(
                            f"{owner}.{f.name} must hold values valid for its type "
                            f"(>= {meta.get('min', 1)} for integers, > {meta.get('min', 0)} for reals) "
                            f"(got {v!r})"
                        ) from None
        else:
            _check_value(owner, f.name, v, meta)


def check_same_length(spec: Any, a: str, b: str) -> None:
    """``ValueError`` naming ``b`` unless the tuple fields ``a`` and ``b`` have equal lengths."""
    va, vb = getattr(spec, a), getattr(spec, b)
    if len(va) != len(vb):
        raise ValueError(f"{type(spec).__name__}.{b} must have one entry per entry of {a} ({len(va)}) (got {vb!r})")
