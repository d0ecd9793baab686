"""Polls the config file and hands changes to a callback (hot reload)."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable

__all__ = ["ConfigWatcher"]

log = logging.getLogger(__name__)


class ConfigWatcher:
    """Calls `on_change(path)` when the file's mtime or size changes; polling works everywhere (ConfigMaps too)."""

    def __init__(self, path: str, on_change: Callable[[str], None], *, interval_s: float = 1.0) -> None:
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

    def check(self) -> bool:
        """One poll; True when a change was handed on."""
        sig = self._signature()
        if sig is None or sig == self._sig:
            return False
        self._sig = sig
        try:
            self.on_change(self.path)
        except Exception:  # the watcher must outlive any reload bug
            log.exception("brownout: config reload failed")
        return True

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            self.check()
