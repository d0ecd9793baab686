"""What happens to a finished exchange: span, invariants, exporters, listeners.

Order per exchange: price it (tokens -> currency) -> build the span (attributes, fault events) -> run span- and session-level
invariants on it -> add violation events and end it (BatchSpanProcessor ships it off-loop)
-> metrics and logs -> listeners. Each step is contained by the guard: traffic first.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from brownout.core.cost import Pricer
from brownout.core.exchange import Exchange
from brownout.core.guard import Guard
from brownout.core.spans import SpanBuilder
from brownout.exporters.hub import Exporters
from brownout.invariants.records import Violation
from brownout.invariants.runner import InvariantRunner
from brownout.proxy.config import BrownoutConfig

__all__ = ["Pipeline"]

log = logging.getLogger(__name__)

SWEEP_EVERY_S = 1.0


class Pipeline:
    """Runs every consumer of finished exchanges, each contained by the guard."""

    def __init__(self, config: BrownoutConfig, guard: Guard) -> None:
        self.guard = guard
        self.listeners: list[Callable[[Exchange], None]] = []
        self.violation_listeners: list[Callable[[Violation], None]] = []
        self._started = False
        self.prices_loaded = threading.Event()  # the price table is in memory (or failed to load)
        self._last_sweep = time.monotonic()
        self.pricer = Pricer()
        self._build(config)

    def _build(self, config: BrownoutConfig) -> None:
        catalogue = config.catalogue
        self.exporters = Exporters(
            config.exporters, guard=self.guard, extra=catalogue.exporters, providers=catalogue.wire.providers
        )
        self.spans = SpanBuilder(self.exporters.tracer_provider, capture_content=config.proxy.capture_content)
        self.invariants = InvariantRunner(
            config.invariants, guard=self.guard, types=catalogue.invariants, idle_s=config.proxy.session_idle_s
        )

    def reload(self, config: BrownoutConfig) -> None:
        """Before start: rebuild everything. After: new invariants and content capture only;
        exporter endpoints and listen addresses take a restart (they own sockets and threads)."""
        if not self._started:
            self.exporters.shutdown(timeout_s=0.1)
            self._build(config)
            return
        self.invariants.reload(config.invariants, config.catalogue.invariants)
        self.spans.capture_content = config.proxy.capture_content

    @property
    def needs_spans(self) -> bool:
        """Spans cost ~30 us each: build them only when something reads or exports them."""
        return bool(self.invariants.invariants) or self.exporters.otlp is not None or self.exporters.span_consumers > 0

    def complete(self, exchange: Exchange) -> None:
        if exchange.cost is None:
            exchange.cost = self.guard.call("cost", self.pricer.price, exchange, context=f"exchange {exchange.id}")
        violations: list[Violation] = []
        if not self.needs_spans:
            self.invariants.check_without_span(exchange)  # keeps the session count current
            span = None
        else:
            span = self.guard.call("spans", self.spans.start, exchange, context=f"exchange {exchange.id}")
        if span is not None:
            violations = self.guard.call("invariants", self.invariants.check, span, exchange, default=[]) or []
            self.guard.call("spans", self.spans.finish, span, violations, context=f"exchange {exchange.id}")
        self.exporters.on_exchange(exchange, violations)
        for listener in self.listeners:
            self.guard.call("listener", listener, exchange, context=f"exchange {exchange.id}")
        self._announce(violations)
        if time.monotonic() - self._last_sweep >= SWEEP_EVERY_S:
            self.sweep()

    def sweep(self, *, close_all: bool = False) -> list[Violation]:
        """Close idle sessions (or all, at shutdown): their session-end violations are exported."""
        self._last_sweep = time.monotonic()
        fn: Any = self.invariants.close_all if close_all else self.invariants.sweep
        found: list[Violation] = self.guard.call("invariants", fn, default=[]) or []
        for violation in found:
            self.exporters.on_violation(violation)
        self._announce(found)
        return found

    def _announce(self, violations: list[Violation]) -> None:
        for violation in violations:
            for listener in self.violation_listeners:
                self.guard.call("listener", listener, violation, context=f"violation {violation.invariant}")

    def start(self, *, rules: Callable[[], Any]) -> None:
        self._started = True
        # Off the loop: loading the price table takes a moment that traffic should not wait for.
        threading.Thread(target=self._warm_prices, name="brownout-prices", daemon=True).start()
        self.exporters.watch(sessions=lambda: self.invariants.sessions_active, rules=rules)
        self.exporters.start()

    def _warm_prices(self) -> None:
        try:
            self.guard.call("cost", self.pricer.warm)
        finally:
            self.prices_loaded.set()

    def shutdown(self, timeout_s: float = 3.0) -> None:
        """Close every session, flush spans and logs with a bounded wait."""
        self.sweep(close_all=True)
        self.exporters.shutdown(timeout_s=timeout_s)
