"""Polls the config file and hands changes to a callback (hot reload).

The poll (a stat) runs on the event loop; the callback runs in a worker thread, so parsing YAML,
validating and importing plugins never holds up traffic (the addon applies the result on the loop).
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

__all__ = ["ConfigWatcher"]

log = logging.getLogger(__name__)


class ConfigWatcher:
    """Calls `on_change(path)` when the file's mtime or size changes; polling works everywhere (ConfigMaps too)."""

    def __init__(self, path: str, on_change: Callable[[str], object], *, interval_s: float = 1.0) -> None:
        self.path = path
        self.on_change = on_change
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None
        self._sig = self._signature()

    def _signature(self) -> tuple[float, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_mtime, st.st_size

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None

    def changed(self) -> bool:
        """One poll: True (once) when the file changed since the last poll."""
        sig = self._signature()
        if sig is None or sig == self._sig:
            return False
        self._sig = sig
        return True

    def check(self) -> bool:
        """One poll, handing a change on in this thread; True when it did."""
        if not self.changed():
            return False
        self._hand_on()
        return True

    def _hand_on(self) -> None:
        try:
            self.on_change(self.path)
        except Exception:
            log.exception("brownout: config reload failed")

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            if self.changed():
                await asyncio.to_thread(self._hand_on)
