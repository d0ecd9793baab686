"""Run a staging experiment: each phase switched on across the fleet, probed, and switched off.

For each phase in order: a chaos phase's rules go to the fleet under a lease (renewed every third of
it) and the runner waits for the replicas' acknowledgements; every `probe_interval_s` the checks in
the phase's scope are asked of Prometheus; after `warmup_s + duration_s` the phase is removed and its
gate checks judged over the part after the warm-up. In a chaos phase, a check that breaches
`abort.after_breaches` probes in a row (warm-up included: safety does not wait) pulls the fleet's kill
switch at once, and the experiment ends aborted. Ctrl-C (a cancelled task) and SIGTERM remove the
phase and end it aborted too; a runner killed outright leaves the lease to expire. Before the first
chaos phase, a check that did not hold in the phases before it skips the chaos (status failed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config
from brownout.proxy.experiment.staging import figures
from brownout.proxy.experiment.staging.config import Check, StagingExperiment, StagingPhase
from brownout.proxy.experiment.staging.model import PhaseRecord, Probe, StagingResult, judge
from brownout.proxy.experiment.staging.promql import PromError, Prometheus
from brownout.proxy.experiment.staging.targets import FleetTarget, TargetError
from brownout.proxy.overlay import PhaseBody, overlay_rule_name

__all__ = ["StagingRunner", "phase_rules"]

log = logging.getLogger(__name__)

ACK_POLL_S = 0.2


class _Abort(Exception):
    def __init__(self, reason: str, **detail: Any) -> None:
        super().__init__(reason)
        self.detail = detail


def phase_rules(phase: StagingPhase, base_dir: Path) -> list[dict[str, Any]]:
    """The rules a chaos phase applies: inline, or those of its config file."""
    if phase.rules is not None:
        return list(phase.rules)
    if phase.config is None:
        return []
    config: BrownoutConfig = load_config(base_dir / phase.config)
    return [r.model_dump(mode="json", exclude_none=True) for r in config.rules]


class StagingRunner:
    """Runs the phases of one staging experiment against one fleet, reading one Prometheus."""

    def __init__(
        self,
        config: StagingExperiment,
        *,
        target: FleetTarget,
        prometheus: Prometheus,
        base_dir: Path,
        run_id: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.target = target
        self.prom = prometheus
        self.base_dir = base_dir
        self.run_id = run_id
        self.clock = clock
        self.selector = config.prometheus.selector
        self._applied: PhaseBody | None = None
        self._started: float | None = None
        self._lost: str | None = None  # why the phase's lease is gone (the runner did not remove it)
        self._failed: str | None = None  # why the phase cannot go on (a replica rejected it)
        self._tasks: set[asyncio.Task[None]] = set()

    async def run(self) -> StagingResult:
        """Every phase; never raises for an abort, an error or a cancellation (they end up in the result)."""
        result = StagingResult(self.config.name, self.run_id, self.target.describe(), started_at=self.clock())
        self._started = result.started_at
        result.phases = [PhaseRecord(p.name, p.is_chaos, p.warmup_s, p.duration_s) for p in self.config.phases]
        try:
            await self._preflight()
            for i, phase in enumerate(self.config.phases):
                if phase.is_chaos and result.skipped_chaos is None:
                    result.skipped_chaos = self._before_failed(result, i)
                if phase.is_chaos and result.skipped_chaos is not None:
                    continue
                await self._phase(i, phase, result.phases[i], result)
        except _Abort:
            pass  # the kill switch is pulled and the phase removed (see _phase)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()  # the cleanup below still awaits
            result.interrupted, result.status = True, "aborted"
            result.abort = {"at": self.clock(), "reason": "interrupted (Ctrl-C or SIGTERM)", "paused_at": None}
            result.event("interrupted: the phase is removed, the fleet goes back to its own rules")
        except (TargetError, PromError, ValueError, OSError) as e:
            result.status, result.error = "failed", f"{type(e).__name__}: {e}"
            result.event(f"error: {e}")
        finally:
            await self._remove(result)
            await self.target.close()
        result.finished_at = self.clock()
        return result

    # --- before the first phase ------------------------------------------------------------

    async def _preflight(self) -> None:
        view = await self.target.view(self.run_id)
        if not view.replicas:
            raise TargetError("no replica of the fleet answers (a wrong URL or key_prefix, or none is running)")
        paused = sorted(r for r, p in view.replicas.items() if p)
        if paused:
            raise TargetError(
                f"the fleet is paused (kill switch on, {len(paused)} of {len(view.replicas)} replicas): resume it "
                "(`brownout ctl resume`) once whoever paused it agrees; an experiment never lifts a kill switch"
            )
        if view.held_by is not None:
            raise TargetError(f"another experiment holds the fleet: {view.held_by}")
        for check in [*self.config.steady_state, *self.config.gate]:
            if check.query is not None:
                await self.prom.query(
                    figures.fill(check.query, self.config.prometheus.window_s)
                )  # a bad query fails here
        for phase in self.config.phases:
            if phase.is_chaos and not phase_rules(phase, self.base_dir):
                raise ValueError(f"phase {phase.name}: its config has no rules")

    def _before_failed(self, result: StagingResult, index: int) -> str | None:
        for k, check in enumerate(self.config.steady_state):
            for j in range(index):
                probes = [p for p in result.phases[j].probes.get(k, []) if p.judged and p.ok is not None]
                if self.config.in_scope(check, j) and any(not p.ok for p in probes):
                    reason = f"steady state {check.label!r} did not hold in phase {result.phases[j].name}"
                    result.event(f"chaos skipped: {reason}")
                    return reason
        return None

    # --- one phase ---------------------------------------------------------------------------

    async def _phase(self, index: int, phase: StagingPhase, record: PhaseRecord, result: StagingResult) -> None:
        record.started_at = start = self.clock()
        record.status = "running"
        renewer: asyncio.Task[None] | None = None
        try:
            if phase.is_chaos:
                body = PhaseBody(
                    owner=self.run_id,
                    id=f"{self.run_id}.{index}",
                    experiment=self.config.name,
                    phase=phase.name,
                    rules=phase_rules(phase, self.base_dir),
                    lease_s=self.config.target.lease_s,
                    started_at=start,
                )
                self._applied = body  # first: interrupted while the call is out, the phase is removed all the same
                await self.target.apply(body)
                record.applied_at = self.clock()
                record.rules = [overlay_rule_name(body.experiment, body.phase, str(r["name"])) for r in body.rules]
                rules = f"{len(body.rules)} rule" + ("s" if len(body.rules) != 1 else "")
                result.event(f"phase {phase.name}: applied ({rules})", phase=phase.name)
                renewer = asyncio.create_task(self._renew(body))
                watcher = asyncio.create_task(self._watch_acks(body, record, result))
                self._tasks.add(watcher)
                watcher.add_done_callback(self._tasks.discard)
            else:
                result.event(f"phase {phase.name}: the fleet's own rules", phase=phase.name)
            await self._probe_until(index, phase, record, start)
            record.status = "completed"
        except _Abort as e:
            record.status = "aborted"
            await self._halt(result, str(e), e.detail)  # the kill switch first, then the phase goes
            raise
        except BaseException:
            record.status = "aborted"
            raise
        finally:
            if renewer is not None:
                renewer.cancel()
            await self._remove(result)
            record.finished_at = self.clock()
        await self._judge_gate(index, record, start + phase.warmup_s, record.finished_at)

    async def _probe_until(self, index: int, phase: StagingPhase, record: PhaseRecord, start: float) -> None:
        interval = self.config.prometheus.probe_interval_s
        judged_from, end = start + phase.warmup_s, start + phase.warmup_s + phase.duration_s
        checks = [(k, c) for k, c in enumerate(self.config.steady_state) if self.config.in_scope(c, index)]
        streaks = dict.fromkeys(range(len(self.config.steady_state)), 0)
        blind = 0  # probes in a row that Prometheus did not answer
        limit = self.config.abort.after_breaches
        n = 1
        while (now := self.clock()) < end:
            await asyncio.sleep(max(0.0, min(start + n * interval, end) - now))
            n += 1
            self._check_stops()
            at = self.clock()
            values = await asyncio.gather(*(self._evaluate(c, at) for _, c in checks))
            errors = [e for _, _, e in values if e is not None]
            blind = blind + 1 if errors else 0
            if errors:
                log.warning("probe at %.1f s: %s", at - start, errors[0])
            if phase.is_chaos and limit is not None and blind >= limit:
                # Chaos nobody can see is not an experiment: stopped as a breach would stop it.
                raise _Abort(f"Prometheus did not answer {limit} probes in a row in phase {phase.name}: {errors[0]}")
            for (k, check), (value, ok, _) in zip(checks, values, strict=True):
                record.probes.setdefault(k, []).append(Probe(at, value, ok, at >= judged_from))
                if ok is None:
                    continue
                streaks[k] = 0 if ok else streaks[k] + 1
                if phase.is_chaos and limit is not None and streaks[k] >= limit:
                    shown = [p.value for p in record.probes[k][-limit:]]
                    raise _Abort(
                        f"steady state {check.label!r} breached {limit} probes in a row in phase {phase.name} "
                        f"(values {', '.join('n/a' if v is None else f'{v:.4g}' for v in shown)})",
                        phase=phase.name,
                        check=check.label,
                        values=shown,
                    )

    def _check_stops(self) -> None:
        if self._failed is not None:
            raise TargetError(self._failed)
        if self._lost is not None:
            lost, self._lost = self._lost, None
            raise _Abort(lost)
        limit = self.config.abort.max_duration_s
        if limit is not None and self._started is not None and self.clock() - self._started > limit:
            raise _Abort(f"wall-clock limit of {limit:g} s reached")

    async def _evaluate(self, check: Check, at: float) -> tuple[float | None, bool | None, str | None]:
        """(worst value, held, why it could not be asked): a probe Prometheus did not answer holds nothing."""
        window_s = self.config.prometheus.window_s
        try:
            if check.query is not None:
                samples = await self.prom.query(figures.fill(check.query, window_s), at)
                return (*judge(check, [s.value for s in samples]), None)
            value = await figures.figure(self.prom, check.metric, self.selector, at - window_s, at)
        except PromError as e:
            return None, None, str(e)
        return (*judge(check, [value]), None)

    async def _judge_gate(self, index: int, record: PhaseRecord, start: float, end: float) -> None:
        if record.status != "completed" or end <= start:
            return
        for check in self.config.gate:
            if not self.config.in_scope(check, index):
                continue
            entry: dict[str, Any] = {"check": check.label, "threshold": check.threshold}
            try:
                if check.query is not None:
                    samples = await self.prom.query(figures.fill(check.query, end - start), end)
                    value, ok = judge(check, [s.value for s in samples])
                else:
                    value, ok = judge(check, [await figures.figure(self.prom, check.metric, self.selector, start, end)])
            except PromError as e:  # not measured: the check fails, the experiment goes on
                value, ok, entry["note"] = None, False, f"not measured: {e}"
            record.gate.append({**entry, "value": value, "ok": ok is True})

    # --- the lease, the acknowledgements, the end ----------------------------------------------

    async def _renew(self, body: PhaseBody) -> None:
        every = self.config.target.lease_s / 3
        while True:
            await asyncio.sleep(every)
            try:
                if not await self.target.renew(body):
                    self._lost = f"phase {body.phase} was removed from the fleet by someone else, or its lease lapsed"
                    return
            except TargetError as e:  # the next renewal may get through before the lease ends
                log.warning("renewing phase %s: %s", body.phase, e)

    async def _watch_acks(self, body: PhaseBody, record: PhaseRecord, result: StagingResult) -> None:
        deadline = self.clock() + self.config.target.apply_timeout_s
        applied = record.applied_at or self.clock()
        while self._applied is body:
            try:
                view = await self.target.view(self.run_id)
            except TargetError as e:
                log.warning("reading the acknowledgements of phase %s: %s", body.phase, e)
                view = None
            if view is not None:
                record.acknowledged = {
                    r: a.split(" ", 1)[1] for r, a in view.acks.items() if a.startswith(body.id + " ")
                }
                rejected = {r: a for r, a in record.acknowledged.items() if a != "ok"}
                if rejected:
                    # Some replicas would run the phase and others not: not the experiment that was asked for.
                    self._failed = f"phase {body.phase}: rejected by " + ", ".join(
                        f"{r} ({a.removeprefix('rejected: ')})" for r, a in rejected.items()
                    )
                    return
                if view.replicas and set(view.replicas) <= set(record.acknowledged):
                    record.acknowledged_after_s = self.clock() - applied
                    result.event(
                        f"phase {body.phase}: on every replica ({len(view.replicas)}) after "
                        f"{record.acknowledged_after_s:.2f} s"
                    )
                    return
            if self.clock() > deadline:
                result.event(
                    f"phase {body.phase}: {len(record.acknowledged)} of {len(view.replicas) if view else '?'} replicas "
                    f"acknowledged it within {self.config.target.apply_timeout_s:g} s"
                )
                return
            await asyncio.sleep(ACK_POLL_S)

    async def _remove(self, result: StagingResult) -> None:
        body, self._applied = self._applied, None
        if body is None:
            return
        try:
            await self.target.remove(body.owner)
        except TargetError as e:
            result.event(f"phase {body.phase}: could not be removed ({e}); it ends with its lease")
            return
        when = self.clock()
        for r in result.phases:
            if r.name == body.phase:
                r.removed_at = when
        result.event(f"phase {body.phase}: removed, the fleet back on its own rules", phase=body.phase)

    async def _halt(self, result: StagingResult, reason: str, detail: dict[str, Any]) -> None:
        at = self.clock()
        result.status = "aborted"
        result.abort = {"at": at, "reason": reason, **detail, "paused_at": None}
        result.event(f"abort: {reason}")
        try:
            await self.target.pause()  # the kill switch first: every fault of the fleet stops
        except TargetError as e:
            result.abort["pause_error"] = str(e)
            result.event(f"the kill switch could not be pulled: {e}")
        else:
            result.abort["paused_at"] = self.clock()
            result.event("kill switch pulled: the whole fleet stopped injecting (`brownout ctl resume` to lift it)")
