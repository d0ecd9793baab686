"""The fault catalogue: one module per fault type, registered here by hand.

Adding a fault = one module + one line in `FAULTS` + tests/faults/test_<type>.py + a section in
docs/faults.md; tests/faults/test_registry.py checks the last two.
"""

from __future__ import annotations

from collections.abc import Mapping

from brownout.core.registry import build_registry
from brownout.faults.base import Fault, FaultParams
from brownout.faults.close import CloseFault
from brownout.faults.drop import DropFault
from brownout.faults.duplicate import DuplicateFault
from brownout.faults.empty import EmptyFault
from brownout.faults.hang import HangFault
from brownout.faults.header_mismatch import HeaderMismatchFault
from brownout.faults.http_error import HttpErrorFault
from brownout.faults.inject import InjectFault
from brownout.faults.latency import LatencyFault
from brownout.faults.malformed_json import MalformedJsonFault
from brownout.faults.mutate import MutateFault
from brownout.faults.rate_limits import RateLimitsFault
from brownout.faults.reset import ResetFault
from brownout.faults.rug_pull import RugPullFault
from brownout.faults.server_gone import ServerGoneFault
from brownout.faults.session_expired import SessionExpiredFault
from brownout.faults.stall import StallFault
from brownout.faults.throttle import ThrottleFault
from brownout.faults.truncate import TruncateFault
from brownout.faults.unsupported_version import UnsupportedVersionFault

__all__ = ["FAULTS", "REGISTRY", "create"]

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
    RugPullFault,
    MutateFault,
    DropFault,
    DuplicateFault,
    CloseFault,
    RateLimitsFault,
    SessionExpiredFault,
    ServerGoneFault,
    HeaderMismatchFault,
    UnsupportedVersionFault,
)

# The built-in types, read-only. A config's plugins add theirs to its own catalogue, never here.
REGISTRY: Mapping[str, type[Fault]] = build_registry("fault", FAULTS, "Params")


def create(params: FaultParams, registry: Mapping[str, type[Fault]] = REGISTRY) -> Fault:
    """The fault instance for validated params."""
    return registry[params.type](params)  # type: ignore[attr-defined]
