"""Traffic first: every component call is contained, logged once, and counted."""

from __future__ import annotations

import logging
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
        self.listeners: list[Callable[[str], None]] = []  # e.g. a Prometheus counter, added by exporters

    def failed(self, component: str, exc: BaseException, context: str = "", *, level: int = logging.ERROR) -> None:
        """Count a contained failure; log it with its traceback the first time per component."""
        self.errors[component] += 1
        if self.errors[component] == 1:
            log.log(level, "brownout %s failed (%s); traffic continues", component, context or "no context", exc_info=exc)
        else:
            log.debug("brownout %s failed again: %r", component, exc)
        for listener in self.listeners:
            try:
                listener(component)
            except Exception:  # a broken listener must not recurse into failed()
                log.debug("error listener failed", exc_info=True)

    def call(self, component: str, fn: Callable[..., T], *args: object, default: T | None = None, context: str = "") -> T | None:
        """fn(*args), or `default` when it raises."""
        try:
            return fn(*args)
        except Exception as e:
            self.failed(component, e, context)
            return default
