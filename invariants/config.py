"""The `invariants:` config section: a list discriminated on `type`, names unique.

    invariants:
      - {type: latency_budget, total_ms: 30000, severity: warning}
      - {type: no_pii, direction: both}
"""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import AfterValidator, Field, TypeAdapter

from invariants import config_types
from invariants.base import InvariantConfigBase, Severity

__all__ = ["InvariantConfig", "InvariantList", "Severity", "parse_invariants"]

# Built from the registry so adding an invariant needs no edit here. pydantic's error for an
# unknown `type` lists every valid tag.
InvariantConfig = Annotated[Union[config_types()], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa


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
