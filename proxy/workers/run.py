"""`brownout run --workers N`: N worker processes on one port, with one /metrics, one control API and
one summary, all served by the supervising process (this one).

The supervisor checks what would go wrong before anything starts (proxy/workers/plan.py), holds the
port (proxy/reuseport.py), creates the CA once, serves /metrics and the control API at the configured
addresses (proxy/workers/endpoints.py), starts the workers (proxy/workers/supervisor.py), prints the
start-up lines once, and at SIGINT/SIGTERM drains every worker as `brownout run` drains (a second
signal cuts), then prints one summary: the sum of what each worker reported at its stop.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brownout.proxy.certs import ensure_ca
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.reuseport import hold_port
from brownout.proxy.startup import StopReport, listening_lines
from brownout.proxy.workers.control import FleetControl
from brownout.proxy.workers.endpoints import serving
from brownout.proxy.workers.metrics import FleetMetrics
from brownout.proxy.workers.plan import (
    ENDPOINT_OPTIONS,
    FleetAddress,
    FleetSetupError,
    check_fleet,
    fleet_destinations,
    split_options,
)
from brownout.proxy.workers.spec import WorkerSpec
from brownout.proxy.workers.summaries import merged
from brownout.proxy.workers.supervisor import Supervisor, WorkerStartError, WorkerState

__all__ = ["run_fleet"]

log = logging.getLogger(__name__)

# Past the drain, a worker closes its exporters (bounded at a few seconds each) and its proxy.
_STOP_SLACK_S = 30.0


def run_fleet(
    count: int,
    config: BrownoutConfig,
    config_path: str | None,
    *,
    listen: tuple[str, int],
    mode: str,
    confdir: str | None,
    options: list[str],
    report: StopReport,
    echo: Callable[[str], None] | None = None,
) -> int:
    """Run the fleet until SIGINT/SIGTERM (or until no worker is left); the exit status. Start-up lines
    go to `echo` (stdout); errors and the summary to `report.echo`. A fleet that cannot run says why
    at once. `options` are `brownout run`'s --set and cassette options, NAME=VALUE."""
    try:
        check_fleet(count, config, config_path=config_path, mode=mode, options=options)
        worker_options, endpoints = split_options(options)
        host, port = listen
        try:
            held = hold_port(host, port)
        except OSError as e:
            message = f"cannot listen on {host}:{port}: {e.strerror or e}; choose a free port with --listen"
            raise FleetSetupError(message) from e
        with held:
            ca = ensure_ca(confdir)  # once, here: workers creating it at once could read each other's half
            address = FleetAddress(host, held.getsockname()[1], [mode], ca)
            path = str(Path(config_path).resolve()) if config_path else None
            free = [f"{name}=127.0.0.1:0" for name in ENDPOINT_OPTIONS]  # the workers' own, read by the supervisor
            template = WorkerSpec(0, address.listen, mode, path, str(ca.confdir), [*worker_options, *free])
            logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="brownout: %(message)s")
            fleet = _Fleet(count, config, template, address)
            code = asyncio.run(fleet.serve(endpoints, report=report, echo=echo or _say))
    except FleetSetupError as e:
        report.echo(f"brownout: {e}")
        return 1
    (echo or _say)("brownout stopped.")
    return code


def _say(line: str) -> None:
    print(line, flush=True)  # a pipe too: whoever waits for the start-up lines gets them now


class _Fleet:
    """The supervisor's life: endpoints up, workers started, serve until a signal, stop, summarise."""

    def __init__(self, count: int, config: BrownoutConfig, template: WorkerSpec, address: FleetAddress) -> None:
        self.count, self.config, self.template, self.address = count, config, template, address
        self.metrics = FleetMetrics(self._workers)
        self.control = FleetControl(
            self._workers, token=config.control.resolve_token(), exchanges=self.metrics.exchanges_now
        )
        self.paused_at_start: dict[int, bool] = {}
        self.supervisor = Supervisor(
            count, self._spec_for, on_ready=self._on_ready, on_exit=lambda w: self.metrics.retire(w.pid or -1)
        )

    def _workers(self) -> tuple[WorkerState, ...]:
        return self.supervisor.workers()

    def _spec_for(self, index: int) -> WorkerSpec:
        # The kill switch as it stands now: a worker (re)started while the fleet is paused starts paused.
        paused = self.paused_at_start[index] = self.control.paused
        options = [*self.template.options, f"brownout_worker={index}", f"brownout_paused={str(paused).lower()}"]
        t = self.template
        return WorkerSpec(index, t.listen, t.mode, t.config_path, t.confdir, options)

    async def _on_ready(self, worker: WorkerState) -> None:
        # A pause or resume between this worker's start and now (see FleetControl.sync).
        await asyncio.to_thread(self.control.sync, worker, self.paused_at_start.get(worker.index, False))

    async def serve(self, endpoints: dict[str, str], *, report: StopReport, echo: Callable[[str], None]) -> int:
        loop = asyncio.get_running_loop()
        stop, force = asyncio.Event(), asyncio.Event()

        def on_signal() -> None:
            (force if stop.is_set() else stop).set()

        with serving(self.config, endpoints, self.control, self.metrics) as urls:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.add_signal_handler(sig, on_signal)
            try:
                if not await self._started(stop):
                    return 1
                for line in self._startup_lines(urls):
                    echo(line)
                await _first(stop.wait(), self.supervisor.all_gone.wait())
                await self.supervisor.stop(timeout_s=self.config.proxy.drain_timeout_s + _STOP_SLACK_S, force=force)
            finally:
                for sig in (signal.SIGINT, signal.SIGTERM):
                    loop.remove_signal_handler(sig)
        self._report(report)
        return self._exit_status()

    async def _started(self, stop: asyncio.Event) -> bool:
        """Whether every worker started (False: said why, and stopped the others)."""
        start = asyncio.create_task(self.supervisor.start())
        await _first(start, stop.wait())
        if not start.done():  # a signal while starting: stop what has started
            start.cancel()
            with contextlib.suppress(asyncio.CancelledError, WorkerStartError):
                await start
            await self.supervisor.stop(timeout_s=10.0)
            return False
        try:
            start.result()
        except WorkerStartError as e:
            log.error("%s; stopped the fleet", e)
            return False
        return True

    def _startup_lines(self, urls: dict[str, str]) -> list[str]:
        lines = listening_lines(self.address, endpoints=urls, where=fleet_destinations(self.config, self.count))
        pids = ", ".join(str(w.pid) for w in self.supervisor.workers())
        state = self.config.state.display_url()
        lines.insert(1, f"workers: {self.count} on one port (pids {pids}), state in {state}")
        return lines

    def _report(self, report: StopReport) -> None:
        where = fleet_destinations(self.config, self.count)
        report.report(merged(self.supervisor.counts, duration_s=report.elapsed_s(), where=where))
        died = sum(w.restarts for w in self.supervisor.workers())
        if died:
            report.echo(
                f"brownout: {died} worker process(es) died during the run: what they served is in /metrics "
                "(up to its last scrape) but not in this summary"
            )

    def _exit_status(self) -> int:
        """0 when every worker ran until the stop and drained; 1 (said why) otherwise."""
        if self.supervisor.all_gone.is_set():
            log.error("every worker died: the fleet stopped")
            return 1
        status = 0
        for index in range(self.count):
            code = self.supervisor.exit_codes.get(index)
            if code is None:
                log.error("worker %d was not running at the stop (it died and was not restarted)", index)
                status = 1
            elif code != 0:
                log.error("worker %d ended with exit code %d at the stop", index, code)
                status = 1
        return status


async def _first(*aws: Any) -> None:
    """Wait until one of `aws` is done; cancel the waits made here, never a task passed in."""
    futures = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for given, future in zip(aws, futures, strict=True):
            if future is not given:
                future.cancel()
