"""Registries of pluggable types (faults, invariants): a name -> class map that fails loudly."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

__all__ = ["build_registry"]


def build_registry[T](kind: str, classes: Iterable[type[T]], model_attr: str) -> Mapping[str, type[T]]:
    """A read-only map of `cls.type` -> cls.

    ValueError on a duplicate name, or when `cls.<model_attr>.type` is not `Literal[cls.type]`
    (the config's discriminator would then dispatch to the wrong class).
    """
    registry: dict[str, type[T]] = {}
    for cls in classes:
        name: Any = getattr(cls, "type", None)
        if not isinstance(name, str) or not name:
            raise ValueError(f"{kind} class {cls.__name__} has no `type` name")
        if name in registry:
            raise ValueError(f"duplicate {kind} type {name!r}: {registry[name].__name__} and {cls.__name__}")
        model = getattr(cls, model_attr)
        literal = model.model_fields["type"].annotation
        if getattr(literal, "__args__", None) != (name,):
            raise ValueError(f"{cls.__name__}.{model_attr}.type must be Literal[{name!r}]")
        registry[name] = cls
    return MappingProxyType(registry)
