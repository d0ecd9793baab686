"""Run a search through one proxy: each level a phase of its own, each batch a set of agent runs.

The experiment runner's machinery does the work (services, the proxy, sessions, agent processes, the
abort conditions); this runner only decides, batch by batch, which level the next runs go to.
A level's phase is the search's rule with the parameter set to the level's value, resolved as any
phase is (the experiment's seed and invariants), and labelled `L<index>`: its runs are `L03-1`,
`L03-2`, ..., so the same levels in the same order give the same sessions and the same fault decisions.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from brownout.proxy.experiment.config import ExperimentConfig, PhaseConfig
from brownout.proxy.experiment.manifest import ResolvedPhase, resolve_phases
from brownout.proxy.experiment.model import ExperimentResult, PhaseRun
from brownout.proxy.experiment.runner import DRAIN_S, ExperimentRunner, _Abort, load_tasks
from brownout.proxy.experiment.search.algorithm import Level, Search, SearchResult
from brownout.proxy.experiment.search.config import SearchConfig, rule_at
from brownout.proxy.experiment.search.goal import is_good
from brownout.proxy.experiment.search.scale import Scale
from brownout.proxy.experiment.search.sequential import Sprt

__all__ = ["SearchRunner", "level_label", "level_phase", "make_search"]

logger = logging.getLogger(__name__)

BYPASS = (
    "no request of the agent reached brownout at the safe end of the range: the search would measure "
    "nothing (a client that ignores HTTP(S)_PROXY, a host in NO_PROXY, or an agent that never ran)"
)


class _Bypass(Exception):
    """The agent's runs sent nothing through the proxy."""


def level_label(index: int) -> str:
    return f"L{index:02d}"


def level_phase(config: ExperimentConfig, value: float, index: int, base_dir: Path, seed: int) -> ResolvedPhase:
    """The phase of one level: the search's rule at `value`, resolved like any inline phase."""
    search = _search(config)
    phase = PhaseConfig(name=level_label(index), rules=[rule_at(search.rule, search.parameter, value)])
    return resolve_phases(config.model_copy(update={"phases": [phase]}), base_dir, seed)[0]


def _search(config: ExperimentConfig) -> SearchConfig:
    if config.search is None:
        raise ValueError("the experiment has no search")
    return config.search


def make_search(config: ExperimentConfig, **kwargs: Any) -> Search:
    """The Search that the file's `search:` describes (its batch defaults to the agent's concurrency)."""
    s = _search(config)
    scale = Scale(s.range[0], s.range[1], s.scale, s.harsher, s.integer, s.resolution)
    sprt = Sprt(s.goal.target, s.tolerance, s.confidence)
    return Search(scale, sprt, max_runs=s.max_runs, batch=s.batch or config.agent.concurrency, **kwargs)


class SearchRunner(ExperimentRunner):
    """An ExperimentRunner whose phases are the levels a Search asks for, batch by batch."""

    def __init__(self, config: ExperimentConfig, *, base_dir: Path, seed: int, **kwargs: Any) -> None:
        # A search expects failures at its harsh levels: a minimum success rate is no reason to abort it.
        config = config.model_copy(update={"abort": config.abort.model_copy(update={"min_success_rate": None})})
        self.search = make_search(config, on_batch=self._on_batch)
        self.levels: dict[int, ResolvedPhase] = {}
        first = self._phase(config, base_dir, seed, self.search.scale.value(0.0), 0)
        super().__init__(config, [first], base_dir=base_dir, seed=seed, **kwargs)
        self.search_result: SearchResult | None = None
        self._tasks: list[str] = []
        self._applied: int | None = None

    def _phase(self, config: ExperimentConfig, base_dir: Path, seed: int, value: float, index: int) -> ResolvedPhase:
        if index not in self.levels:
            self.levels[index] = level_phase(config, value, index, base_dir, seed)
        return self.levels[index]

    def _on_batch(self, search: Search, level: Level) -> None:
        on_batch = getattr(self.progress, "on_batch", None)
        if on_batch is not None:
            on_batch(search, level)

    def _run_phases(self, handle: Any, result: ExperimentResult) -> None:
        self._tasks = load_tasks(self.config, self.base_dir)
        try:
            self.search_result = self.search.run(lambda level, n: self._batch(handle, result, level, n))
        except _Abort as e:
            self._halt(handle, str(e), result)
            self.search_result = self.search.finish("stopped")
        except _Bypass:
            result.status, result.error = "failed", BYPASS
            self.search_result = self.search.finish("stopped")

    def _batch(self, handle: Any, result: ExperimentResult, level: Level, n: int) -> list[bool] | None:
        if self._stop.is_set():
            return None
        label = level_label(level.index)
        rp = self._phase(self.config, self.base_dir, self.seed, level.value, level.index)
        if self._applied != level.index:
            handle.call(handle.addon.apply_config, rp.config)
            result.phases.append(PhaseRun(label, label, 1, True, rp.digest, started_at=time.time()))
            self._applied = level.index
            self.collector.phase = label
        start, before = level.runs, len(result.runs)
        jobs = [(self._tasks[(start + j) % len(self._tasks)], start + j + 1) for j in range(n)]
        try:
            self._run_phase(rp, label, result, jobs)
        finally:
            result.phases[-1].finished_at = time.time()
        if self._stop.is_set():
            return None
        runs = sorted(result.runs[before:], key=lambda r: r.index)
        good = [is_good(_search(self.config).goal, run) for run in runs]
        if (level.index == 0 and start == 0) or self._needs_exchanges():
            time.sleep(DRAIN_S)  # the proxy finishes the batch's last exchanges
            for run in runs:
                exchanges, violations = self.collector.take(run.sessions)
                run.exchanges.extend(exchanges)
                run.violations.extend(violations)
            if level.index == 0 and start == 0 and self.collector.seen[label] == 0:
                level.outcomes.extend(good)  # they ran: the report counts them
                raise _Bypass
        return good

    def _needs_exchanges(self) -> bool:
        return _search(self.config).goal.metric not in ("success_rate", "error_rate", "timeout_rate") and not (
            _search(self.config).goal.metric.endswith("duration_s")
        )
