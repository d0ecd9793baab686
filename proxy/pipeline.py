"""What happens to a finished exchange: span, invariants, exporters, listeners."""

from __future__ import annotations

import logging
from collections.abc import Callable

from proxy.exchange import Exchange
from proxy.failopen import Guard

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)


class Pipeline:
    """Runs every consumer of finished exchanges, each contained by the guard."""

    def __init__(self, guard: Guard) -> None:
        self.guard = guard
        self.listeners: list[Callable[[Exchange], None]] = []

    def complete(self, exchange: Exchange) -> None:
        for listener in self.listeners:
            self.guard.call("listener", listener, exchange, context=f"exchange {exchange.id}")
