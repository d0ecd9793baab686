"""The `invariants:` config section: a list discriminated on `type`, names unique.

    invariants:
      - {type: latency_budget, total_ms: 30000, severity: warning}
      - {type: no_pii, direction: both}

The types are the built-ins plus, when the validation context carries them
(`invariant_types`), the plugins of the config being validated.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Annotated, Any, Union

from pydantic import (
    AfterValidator,
    Field,
    TypeAdapter,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from brownout.core.config import check_type, context_value
from brownout.invariants import REGISTRY
from brownout.invariants.base import Invariant, InvariantConfigBase, Severity

__all__ = ["InvariantConfig", "InvariantList", "Severity", "parse_invariants"]

_BUILTIN = tuple(cls.Config for cls in REGISTRY.values())
# The JSON schema shows the built-in types; an unknown `type` is reported as for faults (`check_type`).
_Union = Annotated[Union[_BUILTIN], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007


@lru_cache(maxsize=32)
def _adapter(types: tuple[type[InvariantConfigBase], ...]) -> TypeAdapter[Any]:
    union: Any = Annotated[Union[types], Field(discriminator="type")]  # noqa: UP007
    return TypeAdapter(union)


def _by_catalogue(value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo) -> Any:
    registry: Mapping[str, type[Invariant]] = context_value(info, "invariant_types", REGISTRY)
    if not isinstance(value, InvariantConfigBase):
        check_type(value, registry, "invariant")  # the message an unknown fault type gets
    types = tuple(cls.Config for cls in registry.values())
    if types == _BUILTIN:
        return handler(value)
    return _adapter(types).validate_python(value, context=info.context)


InvariantConfig = Annotated[_Union, WrapValidator(_by_catalogue)]


def _unique_names(configs: list[InvariantConfigBase]) -> list[InvariantConfigBase]:
    seen: set[str] = set()
    for config in configs:
        if config.key in seen:
            raise ValueError(f"duplicate invariant name {config.key!r}: give one of them a distinct `name`")
        seen.add(config.key)
    return configs


InvariantList = Annotated[list[InvariantConfig], AfterValidator(_unique_names)]

_ADAPTER: TypeAdapter[list[InvariantConfigBase]] = TypeAdapter(InvariantList)


def parse_invariants(data: object, context: Mapping[str, Any] | None = None) -> list[InvariantConfigBase]:
    """Validate a raw `invariants:` list (pydantic.ValidationError on bad input)."""
    return _ADAPTER.validate_python(data, context=context)
