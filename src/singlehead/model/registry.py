"""A name -> class registry, the one mechanism behind the channel and student registries."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Classes of one kind (subclasses of ``base`` with a non-empty ``name``), by name, in
    registration order. Names are resolved to instances by :meth:`get`; an instance of ``base``
    passes through, so user objects need no registration to be used in code."""

    def __init__(self, kind: str, base: type[T]) -> None:
        self.kind, self.base = kind, base
        self._classes: dict[str, type[T]] = {}

    def register(self, cls: type[T]) -> type[T]:
        """Register ``cls`` under ``cls.name`` (re-registering a name replaces the earlier class)."""
        if not (isinstance(cls, type) and issubclass(cls, self.base)) or not getattr(cls, "name", ""):
            raise ValueError(f"{self.kind} must be a {self.base.__name__} subclass with a non-empty name (got {cls!r})")
        self._classes[cls.name] = cls
        return cls

    def names(self) -> tuple[str, ...]:
        """The registered names, in registration order."""
        return tuple(self._classes)

    def cls(self, name: str) -> type[T]:
        """The class registered under ``name``; an unknown name raises ``ValueError`` naming the kind."""
        if isinstance(name, str) and name in self._classes:
            return self._classes[name]
        raise ValueError(f"{self.kind} must be one of {self.names()} (got {name!r})")

    def get(self, spec: str | T) -> T:
        """The object for a registered name; an unknown name raises ``ValueError`` naming the kind."""
        if isinstance(spec, self.base):
            return spec
        if isinstance(spec, str) and spec in self._classes:
            return self._classes[spec]()
        raise ValueError(f"{self.kind} must be one of {self.names()} (got {spec!r})")
