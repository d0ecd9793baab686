"""A rich progress bar per phase; silent when stdout is not a terminal (CI logs stay clean)."""

from __future__ import annotations

import logging
from collections import Counter
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

__all__ = ["RunProgress"]

logger = logging.getLogger(__name__)


class RunProgress:
    """Phase progress: completed runs and their statuses."""

    def __init__(self, *, enabled: bool | None = None, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True)
        on = self.console.is_terminal if enabled is None else enabled
        self._progress: Progress | None = (
            Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[statuses]}"),
                console=self.console,
                transient=False,
            )
            if on
            else None
        )
        self._task: TaskID | None = None
        self._counts: Counter[str] = Counter()

    def __enter__(self) -> RunProgress:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> Any:
        if self._progress is not None:
            self._progress.stop()
        return None

    def start_phase(self, label: str, total: int) -> None:
        self._counts = Counter()
        if self._progress is not None:
            self._task = self._progress.add_task(label, total=total, statuses="")
        else:
            logger.info("phase %s: %d runs", label, total)

    def advance(self, status: str) -> None:
        self._counts[status] += 1
        if self._progress is not None and self._task is not None:
            text = " ".join(f"{k}={v}" for k, v in sorted(self._counts.items()))
            self._progress.update(self._task, advance=1, statuses=text)

    def end_phase(self) -> None:
        self._task = None
