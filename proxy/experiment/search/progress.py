"""The terminal during a search: one bar over the budget of runs, and a line per batch with the level,
its runs so far, the bracket and the running estimate (plain log lines when stderr is not a terminal)."""

from __future__ import annotations

import logging

from rich.console import Console
from rich.markup import escape

from brownout.proxy.experiment.progress import RunProgress
from brownout.proxy.experiment.search.algorithm import Level, Search
from brownout.proxy.experiment.search.report import value_text

__all__ = ["SearchProgress", "batch_line"]

logger = logging.getLogger(__name__)


def batch_line(search: Search, level: Level, parameter: str) -> str:
    """`L03 delay_ms=2000: 12/12 good, holds | bracket 1000..4000 | estimate 2890 [2500, 3300] | 61/200 runs`."""
    verdict = level.decision or "undecided"
    parts = [f"L{level.index:02d} {parameter}={value_text(level.value)}: {level.good}/{level.runs} good, {verdict}"]
    if search.bracket is not None:
        lo, hi = (search.scale.at(u) for u in search.bracket)
        parts.append(f"bracket {value_text(min(lo, hi))}..{value_text(max(lo, hi))}")
    fit = search.estimate() if level.decision is not None else None
    if fit is not None:
        ends = sorted(search.scale.at(u) for u in fit.interval)
        parts.append(
            f"estimate {value_text(search.scale.at(fit.estimate))} [{value_text(ends[0])}, {value_text(ends[1])}]"
        )
    parts.append(f"{search.spent}/{search.max_runs} runs")
    return " | ".join(parts)


class SearchProgress(RunProgress):
    """RunProgress with one task for the whole search: the runner's batches advance it."""

    def __init__(
        self, parameter: str, total: int, *, enabled: bool | None = None, console: Console | None = None
    ) -> None:
        super().__init__(enabled=enabled, console=console)
        self.parameter = parameter
        self.total = total

    def start_phase(self, label: str, total: int) -> None:
        if self._progress is None:
            return
        if self._task is None:
            self._task = self._progress.add_task("search", total=self.total, statuses="")
        self._progress.update(self._task, description=f"search {escape(label)}")

    def end_phase(self) -> None:
        """The task goes on across levels."""

    def on_batch(self, search: Search, level: Level) -> None:
        line = batch_line(search, level, self.parameter)
        if self._progress is not None:
            self._progress.console.print(escape(line), soft_wrap=True)
        else:
            logger.info("%s", line)
