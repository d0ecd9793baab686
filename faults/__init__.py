"""The fault catalogue: one module per fault type, registered here by hand.

Adding a fault = one module + one line in `FAULTS` + tests/faults/test_<type>.py + a README
section; tests/faults/test_registry.py checks the last two.
"""

from __future__ import annotations

from collections.abc import Iterable

from brownout.faults.base import Fault, FaultParams
from brownout.faults.empty import EmptyFault
from brownout.faults.hang import HangFault
from brownout.faults.http_error import HttpErrorFault
from brownout.faults.inject import InjectFault
from brownout.faults.latency import LatencyFault
from brownout.faults.malformed_json import MalformedJsonFault
from brownout.faults.reset import ResetFault
from brownout.faults.stall import StallFault
from brownout.faults.throttle import ThrottleFault
from brownout.faults.truncate import TruncateFault

__all__ = ["FAULTS", "REGISTRY", "build_registry", "create", "params_types"]

FAULTS: tuple[type[Fault], ...] = (
    LatencyFault,
    StallFault,
    ThrottleFault,
    TruncateFault,
    MalformedJsonFault,
    HttpErrorFault,
    ResetFault,
    HangFault,
    EmptyFault,
    InjectFault,
)


def build_registry(classes: Iterable[type[Fault]]) -> dict[str, type[Fault]]:
    """Map type names to fault classes; a duplicate or mismatched name fails loudly."""
    registry: dict[str, type[Fault]] = {}
    for cls in classes:
        name = cls.type
        if name in registry:
            raise ValueError(f"duplicate fault type {name!r}: {registry[name].__name__} and {cls.__name__}")
        literal = cls.Params.model_fields["type"].annotation
        if getattr(literal, "__args__", None) != (name,):
            raise ValueError(f"{cls.__name__}.Params.type must be Literal[{name!r}]")
        registry[name] = cls
    return registry


REGISTRY: dict[str, type[Fault]] = build_registry(FAULTS)


def params_types() -> tuple[type[FaultParams], ...]:
    """Every fault's Params model, for the config's discriminated union on `type`."""
    return tuple(cls.Params for cls in REGISTRY.values())


def create(params: FaultParams) -> Fault:
    """The fault instance for validated params."""
    return REGISTRY[params.type](params)  # type: ignore[attr-defined]
