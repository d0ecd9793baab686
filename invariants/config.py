"""The `invariants:` config section: a list discriminated on `type`, names unique.

invariants:
  - {type: latency_budget, total_ms: 30000, severity: warning}
  - {type: no_pii, direction: both}
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Union

from pydantic import AfterValidator, Field, TypeAdapter, ValidatorFunctionWrapHandler, WrapValidator

from brownout.invariants import config_types
from brownout.invariants.base import InvariantConfigBase, Severity

__all__ = ["InvariantConfig", "InvariantList", "Severity", "parse_invariants"]

# Built from the registry so adding an invariant needs no edit here. pydantic's error for an
# unknown `type` lists every valid tag.
_BUILTIN = config_types()
_Union = Annotated[Union[_BUILTIN], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa


@lru_cache(maxsize=8)
def _adapter(types: tuple[type[InvariantConfigBase], ...]) -> TypeAdapter[Any]:
    return TypeAdapter(Annotated[Union[types], Field(discriminator="type")])  # type: ignore[valid-type]  # noqa


def _by_registry(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # Plugins (proxy.plugins) add types after import: validate against the registry as it is now.
    types = config_types()
    if types == _BUILTIN:
        return handler(value)
    return _adapter(types).validate_python(value)


# The JSON schema shows the built-in types; validation accepts plugin types too.
InvariantConfig = Annotated[_Union, WrapValidator(_by_registry)]


def _unique_names(configs: list[InvariantConfigBase]) -> list[InvariantConfigBase]:
    seen: set[str] = set()
    for config in configs:
        if config.key in seen:
            raise ValueError(f"duplicate invariant name {config.key!r}: give one of them a distinct `name`")
        seen.add(config.key)
    return configs


InvariantList = Annotated[list[InvariantConfig], AfterValidator(_unique_names)]

_ADAPTER: TypeAdapter[list[InvariantConfigBase]] = TypeAdapter(InvariantList)


def parse_invariants(data: object) -> list[InvariantConfigBase]:
    """Validate a raw `invariants:` list (pydantic.ValidationError on bad input)."""
    return _ADAPTER.validate_python(data)
