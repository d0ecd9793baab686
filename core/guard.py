"""Traffic first: every component call is contained, logged once, and counted, in one place.

brownout's components (wire parsers, faults, invariants, exporters, plugins) run inside the
agent's traffic. One `Guard` per proxy contains their exceptions: it counts them per
component (what `/status` and `brownout_internal_errors_total` report), logs the first of each
component with its traceback, and lets the exchange go on as if the component had done
nothing. A strict guard (`Guard(strict=True)`, used by the tests) re-raises bugs instead, so a
broken component fails a test rather than becoming a log line; expected outside failures (a
busy port, an unreachable collector: `trace=False`) are never raised. Data lost to the outside
world (a full disk, a removed directory) is no brownout failure at all: the component counts
the loss where it belongs (an export drop) and reports it through `lost`, logged once.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TypeVar, TypeVarTuple

__all__ = ["Guard"]

log = logging.getLogger(__name__)
T = TypeVar("T")
# The wrapped callable's positional parameters: the type checker matches `*args` against them, as
# for asyncio's `call_soon` (a ParamSpec would forbid the guard's own keyword options).
Ts = TypeVarTuple("Ts")


class Guard:
    """Runs component code so that its exceptions never reach the agent's traffic."""

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()  # the control API and exporter threads report through it too
        self.listeners: list[Callable[[str], None]] = []  # e.g. a Prometheus counter, added by exporters
        self._losses: set[tuple[str, str]] = set()

    def failed(
        self,
        component: str,
        exc: BaseException,
        context: str = "",
        *,
        level: int = logging.ERROR,
        trace: bool = True,
    ) -> None:
        """Count a contained failure; log it once per component (with its traceback unless `trace` is off).

        `trace=False` marks an expected outside failure (a busy port, a closed file): one log
        line, and a strict guard does not raise it. Call it from an `except` block.
        """
        with self._lock:
            self.errors[component] += 1
            first = self.errors[component] == 1
        if first:
            log.log(
                level,
                "brownout %s failed (%s: %s); traffic continues",
                component,
                context or "no context",
                exc,
                exc_info=exc if trace else None,
            )
        else:
            log.debug("brownout %s failed again (%s): %r", component, context, exc)
        for listener in self.listeners:
            try:
                listener(component)
            except Exception:
                log.debug("error listener failed", exc_info=True)
        if self.strict and trace:
            raise exc

    def lost(self, component: str, exc: BaseException, context: str = "") -> None:
        """Data lost for an outside reason, counted by the caller (e.g. `brownout_export_dropped_total`).

        Logged once per component and context (say, per file), without a traceback; not an internal
        error, never raised, not even by a strict guard: a full disk is no bug to fail a test with.
        """
        key = (component, context)
        with self._lock:
            first = key not in self._losses
            self._losses.add(key)
        if first:
            log.error("brownout %s lost data (%s: %s); traffic continues, losses are counted", component, context, exc)
        else:
            log.debug("brownout %s lost data again (%s): %r", component, context, exc)

    def snapshot(self) -> dict[str, int]:
        """A consistent copy of the counts, safe from any thread."""
        with self._lock:
            return dict(self.errors)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.errors.values())

    def call(
        self,
        component: str,
        fn: Callable[[*Ts], T],
        *args: *Ts,
        default: T | None = None,
        context: str = "",
        level: int = logging.ERROR,
    ) -> T | None:
        """fn(*args), or `default` when it raises."""
        try:
            return fn(*args)
        except Exception as e:  # noqa: BLE001 - the one place component errors stop
            self.failed(component, e, context, level=level)
            return default

    async def acall(
        self,
        component: str,
        fn: Callable[[*Ts], Awaitable[T]],
        *args: *Ts,
        default: T | None = None,
        context: str = "",
    ) -> T | None:
        """await fn(*args), or `default` when it raises."""
        try:
            return await fn(*args)
        except Exception as e:  # noqa: BLE001 - the one place component errors stop
            self.failed(component, e, context)
            return default
