"""Traffic first: every component call is contained, logged once, and counted."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

__all__ = ["Guard"]

log = logging.getLogger(__name__)
T = TypeVar("T")


class Guard:
    """Runs component code so that its exceptions never reach the agent's traffic."""

    def __init__(self) -> None:
        self.errors: Counter[str] = Counter()
        self._lock = threading.Lock()  # the control API reads the counts from its own thread
        self.listeners: list[Callable[[str], None]] = []  # e.g. a Prometheus counter, added by exporters

    def failed(
        self, component: str, exc: BaseException, context: str = "", *, level: int = logging.ERROR, trace: bool = True
    ) -> None:
        """Count a contained failure; log it (with its traceback unless `trace` is off) once per component."""
        with self._lock:
            self.errors[component] += 1
            first = self.errors[component] == 1
        if first:
            # A traceback helps with a bug; an expected outside failure (a busy port) needs one line.
            log.log(
                level,
                "brownout %s failed (%s: %s); traffic continues",
                component,
                context or "no context",
                exc,
                exc_info=exc if trace else None,
            )
        else:
            log.debug("brownout %s failed again: %r", component, exc)
        for listener in self.listeners:
            try:
                listener(component)
            except Exception:  # a broken listener must not recurse into failed()
                log.debug("error listener failed", exc_info=True)

    def snapshot(self) -> dict[str, int]:
        """A consistent copy of the counts, safe from any thread."""
        with self._lock:
            return dict(self.errors)

    def call(
        self, component: str, fn: Callable[..., T], *args: object, default: T | None = None, context: str = ""
    ) -> T | None:
        """fn(*args), or `default` when it raises."""
        try:
            return fn(*args)
        except Exception as e:
            self.failed(component, e, context)
            return default
