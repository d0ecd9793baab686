"""Run an experiment: one proxy, phase by phase, agent runs in parallel, each in its own session."""

from __future__ import annotations

import concurrent.futures as cf
import logging
import os
import subprocess
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from brownout.proxy.endpoints import free_endpoints
from brownout.proxy.experiment.agentproc import format_command, kill_process, placeholders, run_attempt, tail
from brownout.proxy.experiment.collector import Collector, traceparent_for
from brownout.proxy.experiment.config import ExperimentConfig, ExperimentError, TasksFile
from brownout.proxy.experiment.manifest import ResolvedPhase
from brownout.proxy.experiment.model import ExperimentResult, PhaseRun, RunResult
from brownout.proxy.experiment.progress import RunProgress
from brownout.proxy.experiment.services import ServiceError, Services

__all__ = ["ExperimentRunner", "load_tasks"]

logger = logging.getLogger(__name__)

DRAIN_S = 0.3  # let the proxy finish the last exchanges of a phase before attributing them
SETTLE_S = 10.0  # at most this long for an analysis process (proxy.analysis) to judge what it still has
POLL_S = 0.1


def load_tasks(config: ExperimentConfig, base_dir: Path) -> list[str]:
    tasks = config.agent.tasks
    if isinstance(tasks, TasksFile):
        path = base_dir / tasks.file
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as e:
            raise ExperimentError(f"agent.tasks.file: cannot read {path}: {e.strerror or e}") from e
        tasks = [line.strip() for line in lines if line.strip()]
    if not tasks:
        raise ExperimentError("agent.tasks: no tasks")
    return list(tasks)


class _Abort(Exception):
    """An abort condition held."""


class ExperimentRunner:
    """Runs the phases of an experiment through one embedded brownout proxy."""

    def __init__(
        self,
        config: ExperimentConfig,
        phases: list[ResolvedPhase],
        *,
        base_dir: Path,
        seed: int,
        proxy_factory: Callable[..., AbstractContextManager[Any]] | None = None,
        confdir: str | None = None,
        progress: RunProgress | None = None,
        before_check: Callable[[ExperimentResult], bool] | None = None,
        log_dir: Path | None = None,
        proxy_options: list[str] | None = None,
    ) -> None:
        self.config = config
        self.proxy_options = proxy_options or []  # --set options of the proxy (replay, record)
        self.phases = phases
        self.base_dir = base_dir
        self.seed = seed
        self.confdir = confdir
        self.collector = Collector()
        self.progress = progress or RunProgress(enabled=False)
        # Called once the phases before the first chaos phase are done; False skips the chaos.
        self.before_check = before_check
        # Where the services' logs go (run_experiment passes the report directory).
        self.log_dir = log_dir
        self.services: Services | None = None
        self._proxy_factory = proxy_factory
        self._stop = threading.Event()
        self._procs: set[subprocess.Popen[str]] = set()
        self._procs_lock = threading.Lock()
        self._handle: Any = None

    def _factory(self) -> Callable[..., AbstractContextManager[Any]]:
        if self._proxy_factory is not None:
            return self._proxy_factory
        from brownout.proxy.embed import running_proxy

        return running_proxy

    def run(self) -> ExperimentResult:
        """Run every phase; never raises for agent failures, aborts or Ctrl-C (they end up in the result)."""
        result = ExperimentResult(name=self.config.name, seed=self.seed, started_at=time.time())
        first = self.phases[0].config
        services = self.services = Services(self.config.services, base_dir=self.base_dir, log_dir=self.log_dir)
        try:
            services.start()  # first, and stopped last: the proxy and the agents may need them throughout
            # Free ports: experiments side by side never clash; replay/record options ride along.
            options = [*self.proxy_options, *(f"{k}={v}" for k, v in free_endpoints(first).items())]
            proxy = self._factory()(
                config=first, confdir=self.confdir, on_exchange=self.collector.on_exchange, extra_options=options
            )
            with proxy as handle:
                self._handle = handle
                handle.call(self.collector.attach, handle.addon)
                try:
                    with self.progress:
                        self._run_phases(handle, result)
                except KeyboardInterrupt:
                    self._halt(handle, "interrupted (Ctrl-C)", result)
                    result.interrupted = True
                finally:
                    time.sleep(DRAIN_S)
                    handle.addon.pipeline.wait_judged(SETTLE_S)  # proxy.analysis: process
                    handle.call(self.collector.detach, handle.addon)
        except KeyboardInterrupt:
            self._halt(None, "interrupted (Ctrl-C)", result)
            result.interrupted = True
        except ServiceError as e:  # not a bug: the message names the service and quotes its log
            logger.info("%s", e)  # the result carries it; the CLI prints it once, in its summary
            result.error = str(e)
            result.status = "failed"
        except Exception as e:  # proxy failed to start, bad config at apply time: an errored experiment
            logger.exception("experiment errored")
            result.error = f"{type(e).__name__}: {e}"
            result.status = "failed"
        finally:
            services.stop()
        result.services = [r.to_dict() for r in services.records]
        self._attribute(result)
        result.finished_at = time.time()
        return result

    def _run_phases(self, handle: Any, result: ExperimentResult) -> None:
        chaos_idx = [i for i, p in enumerate(self.phases) if p.phase.is_chaos]
        first_chaos = chaos_idx[0] if chaos_idx else len(self.phases)
        for i, rp in enumerate(self.phases):
            if i == first_chaos and i > 0 and self.before_check is not None:
                self._attribute(result)
                if not self.before_check(result):
                    logger.warning("steady state did not hold before the chaos; skipping the chaos phases")
                    return
            for rep in range(1, rp.phase.repeat + 1):
                label = rp.phase.name if rp.phase.repeat == 1 else f"{rp.phase.name}.r{rep}"
                handle.call(handle.addon.apply_config, rp.config)
                pr = PhaseRun(rp.phase.name, label, rep, rp.phase.is_chaos, rp.digest, started_at=time.time())
                result.phases.append(pr)
                self.collector.phase = label
                try:
                    self._run_phase(rp, label, result)
                except _Abort as e:
                    self._halt(handle, str(e), result)
                    return
                finally:
                    pr.finished_at = time.time()
                if self._stop.is_set():
                    return

    def _halt(self, handle: Any, reason: str, result: ExperimentResult) -> None:
        logger.warning("experiment aborted: %s", reason)
        result.status, result.abort_reason = "aborted", reason
        self._stop_all(handle)

    def _stop_all(self, handle: Any) -> None:
        self._stop.set()
        if handle is not None:
            handle.call(handle.addon.engine.pause)  # stop injecting at once, before the agents are killed
        with self._procs_lock:
            for proc in list(self._procs):
                kill_process(proc)

    def _run_phase(
        self, rp: ResolvedPhase, label: str, result: ExperimentResult, jobs: list[tuple[str, int]] | None = None
    ) -> None:
        """Run `jobs` (task, run index), by default every task `runs_per_task` times."""
        agent = self.config.agent
        if jobs is None:
            tasks = load_tasks(self.config, self.base_dir)
            jobs = [(task, k + 1) for k, task in enumerate(t for _ in range(agent.runs_per_task) for t in tasks)]
        self.progress.start_phase(label, len(jobs))
        done: list[RunResult] = []
        with cf.ThreadPoolExecutor(max_workers=agent.concurrency, thread_name_prefix=f"run-{label}") as pool:
            futures = {pool.submit(self._one_run, rp, label, task, index): index for task, index in jobs}
            pending = set(futures)
            try:
                while pending:
                    finished, pending = cf.wait(pending, timeout=POLL_S, return_when=cf.FIRST_COMPLETED)
                    for f in finished:
                        run = f.result()
                        if run is not None:
                            done.append(run)
                            result.runs.append(run)
                            self.progress.advance(run.status)
                    self._check_abort(result, done)
            except BaseException:
                # Before the pool's exit waits for its threads: stop injecting, kill the agents.
                self._stop_all(self._handle)
                raise
            finally:
                for f in pending:
                    f.cancel()
        self.progress.end_phase()

    def _check_abort(self, result: ExperimentResult, phase_runs: list[RunResult]) -> None:
        a = self.config.abort
        if a.max_duration_s is not None and time.time() - result.started_at > a.max_duration_s:
            raise _Abort(f"wall-clock limit of {a.max_duration_s:g} s reached")
        crit = self.collector.severities.get("critical", 0)
        if a.max_critical_violations is not None and crit > a.max_critical_violations:
            raise _Abort(f"{crit} critical violations (limit {a.max_critical_violations})")
        if a.min_success_rate is not None and len(phase_runs) >= a.after_runs:
            rate = sum(r.passed for r in phase_runs) / len(phase_runs)
            if rate < a.min_success_rate:
                raise _Abort(f"success rate {rate:.2f} below {a.min_success_rate:g} after {len(phase_runs)} runs")

    def _one_run(self, rp: ResolvedPhase, label: str, task: str, index: int) -> RunResult | None:
        if self._stop.is_set():
            return None
        agent = self.config.agent
        run_id = f"{label}-{index}"
        run = RunResult(run_id=run_id, phase=rp.phase.name, label=label, task=task, index=index, started_at=time.time())
        cwd = str((self.base_dir / agent.cwd) if agent.cwd else self.base_dir)
        for attempt in range(1, agent.retries + 2):
            session = run_id if attempt == 1 else f"{run_id}.a{attempt}"
            traceparent, trace_id = traceparent_for(self.seed, session)
            self.collector.alias(trace_id, session)
            env = {
                **os.environ,
                **(self.services.exports if self.services else {}),
                **agent.env,
                **self._handle.env_for(session),
                "BROWNOUT_SESSION": session,
                "TRACEPARENT": traceparent,
                "BROWNOUT_RUN": run_id,
                "BROWNOUT_TASK": task,
                "BROWNOUT_PHASE": rp.phase.name,
                "BROWNOUT_ATTEMPT": str(attempt),
            }
            cmd, shell = format_command(agent.command, placeholders(run_id, task, rp.phase.name))
            att = run_attempt(
                cmd,
                shell=shell,
                env=env,
                cwd=cwd,
                timeout_s=agent.timeout_s,
                success=agent.success,
                track=lambda p: self._track(p),
            )
            if self._stop.is_set():
                return None  # killed by an abort or Ctrl-C: not a result of the agent
            run.sessions.append(session)
            run.attempts, run.status, run.exit_code, run.reason = attempt, att.status, att.exit_code, att.reason
            run.duration_s += att.duration_s
            run.stdout_tail, run.stderr_tail = tail(att.stdout), tail(att.stderr)
            if att.status == "passed":
                break
        return run

    def _track(self, proc: subprocess.Popen[str] | None) -> None:
        me = threading.get_ident()
        with self._procs_lock:
            if proc is None:
                self._procs = {p for p in self._procs if getattr(p, "_brownout_thread", None) != me}
            else:
                proc._brownout_thread = me  # type: ignore[attr-defined]
                self._procs.add(proc)
                if self._stop.is_set():
                    # Launched while an abort or Ctrl-C was killing the others (it passed the stop
                    # check before): kill it too, or the experiment waits out its whole timeout.
                    kill_process(proc)

    def _attribute(self, result: ExperimentResult) -> None:
        for phase in result.phases:
            phase.exchanges_seen = self.collector.seen[phase.label]
        for run in result.runs:
            exchanges, violations = self.collector.take(run.sessions)
            run.exchanges.extend(exchanges)
            run.violations.extend(violations)
        run_sessions = {s for r in result.runs for s in r.sessions}
        stray = [s for s in self.collector.leftover_sessions() if s not in run_sessions]
        if stray:
            logger.debug("exchanges from sessions outside the runs: %s", ", ".join(stray[:10]))
