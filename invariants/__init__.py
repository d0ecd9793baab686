"""The invariant catalogue: one module per invariant type, registered here by hand.

Adding an invariant = one module + one line in `INVARIANTS` + tests/invariants/test_<type>.py;
tests/invariants/test_registry.py checks the registry, the config union and the tests.
"""

from __future__ import annotations

from collections.abc import Iterable

from brownout.invariants.base import Invariant, InvariantConfigBase
from brownout.invariants.call_budget import CallBudget
from brownout.invariants.custom import Custom
from brownout.invariants.injection_followed import InjectionFollowed
from brownout.invariants.latency_budget import LatencyBudget
from brownout.invariants.no_loop import NoLoop
from brownout.invariants.no_pii import NoPii
from brownout.invariants.retry_discipline import RetryDiscipline
from brownout.invariants.stream_complete import StreamComplete
from brownout.invariants.token_budget import TokenBudget
from brownout.invariants.tool_arguments_json import ToolArgumentsJson

__all__ = ["INVARIANTS", "REGISTRY", "build_registry", "config_types", "create"]

INVARIANTS: tuple[type[Invariant], ...] = (
    LatencyBudget,
    ToolArgumentsJson,
    NoPii,
    NoLoop,
    RetryDiscipline,
    TokenBudget,
    CallBudget,
    StreamComplete,
    InjectionFollowed,
    Custom,
)


def build_registry(classes: Iterable[type[Invariant]]) -> dict[str, type[Invariant]]:
    """Map type names to invariant classes; a duplicate or mismatched name fails loudly."""
    registry: dict[str, type[Invariant]] = {}
    for cls in classes:
        name = cls.type
        if name in registry:
            raise ValueError(f"duplicate invariant type {name!r}: {registry[name].__name__} and {cls.__name__}")
        literal = cls.Config.model_fields["type"].annotation
        if getattr(literal, "__args__", None) != (name,):
            raise ValueError(f"{cls.__name__}.Config.type must be Literal[{name!r}]")
        registry[name] = cls
    return registry


REGISTRY: dict[str, type[Invariant]] = build_registry(INVARIANTS)


def config_types() -> tuple[type[InvariantConfigBase], ...]:
    """Every invariant's Config model, for the config's discriminated union on `type`."""
    return tuple(cls.Config for cls in REGISTRY.values())


def create(config: InvariantConfigBase) -> Invariant:
    """The invariant instance for a validated config."""
    return REGISTRY[config.type](config)
