"""`brownout run --workers N`: N worker processes on one port, with one /metrics, one control API and
one summary, all served by the supervising process (this one).

The supervisor checks what would go wrong before anything starts (a config error names the field),
holds the port (proxy/reuseport.py), creates the CA once, serves /metrics (proxy/workers/metrics.py)
and the control API (proxy/workers/control.py) at the configured addresses, starts the workers
(proxy/workers/supervisor.py), prints the start-up lines once, and at SIGINT/SIGTERM drains every
worker as `brownout run` drains, then prints the fleet's summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from brownout.core.config import parse_listen
from brownout.proxy.certs import CAFiles, connect_host, ensure_ca, proxy_url
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.control import ControlServer
from brownout.proxy.record.config import with_cassette_overrides
from brownout.proxy.reuseport import hold_port, supported
from brownout.proxy.startup import StopReport, listening_lines
from brownout.proxy.summary import destinations
from brownout.proxy.workers.control import FleetControl
from brownout.proxy.workers.metrics import FleetMetrics
from brownout.proxy.workers.paths import with_worker_paths
from brownout.proxy.workers.spec import WorkerSpec
from brownout.proxy.workers.summaries import merged
from brownout.proxy.workers.supervisor import Supervisor, WorkerStartError, WorkerState

__all__ = ["FleetSetupError", "run_fleet"]

log = logging.getLogger(__name__)

_ENDPOINT_OPTIONS = ("brownout_metrics_listen", "brownout_control_listen")
_FREE = "127.0.0.1:0"
# Past the drain, a worker closes its exporters (bounded at a few seconds each) and its proxy.
_STOP_SLACK_S = 30.0


class FleetSetupError(ValueError):
    """Why this fleet cannot start (said before any process starts)."""


@dataclass
class _Fleet:
    """Where the fleet listens, for the start-up lines (what proxy/startup.py reads of a proxy)."""

    host: str
    port: int
    mode: list[str]
    ca: CAFiles
    url: str = field(init=False)

    def __post_init__(self) -> None:
        self.url = proxy_url(self.host, self.port)
        self.host = connect_host(self.host)

    @property
    def confdir(self) -> Path:
        return self.ca.confdir

    @property
    def ca_bundle_path(self) -> Path:
        return self.ca.bundle


def check_fleet(count: int, config: BrownoutConfig, *, config_path: str | None, mode: str) -> None:
    """FleetSetupError when `count` workers cannot run this config; nothing when they can."""
    where = f" in {config_path}" if config_path else " (no config file: pass one with -c)"
    if config.state.backend == "memory":
        raise FleetSetupError(
            f"--workers {count} needs state.backend: redis{where}. With state.backend memory each worker keeps "
            "its own rule counters, quota windows, sessions and switches: every schedule (first, after, every, "
            "max_injections, quotas) and every session invariant would count once per worker. Point the state: "
            "section at a Redis server (state: {backend: redis, url: redis://HOST:6379/0})."
        )
    if not supported():
        raise FleetSetupError(f"--workers {count} needs SO_REUSEPORT, which this platform lacks")
    if "@" in mode:
        raise FleetSetupError(f"--workers: give the listen address with --listen, not in the mode ({mode!r})")


def _split(set_options: list[str]) -> tuple[list[str], dict[str, str]]:
    """The workers' --set options, and the endpoint addresses meant for the supervisor."""
    rest, endpoints = [], {}
    for option in set_options:
        name, _, value = option.partition("=")
        if name in _ENDPOINT_OPTIONS:
            endpoints[name] = value
        else:
            rest.append(option)
    return rest, endpoints


def fleet_destinations(config: BrownoutConfig, count: int) -> dict[str, str]:
    """Where the fleet's logs and cassettes are: each worker's files, listed together."""
    per_worker = [destinations(with_worker_paths(config, str(i))) for i in range(count)]
    out: dict[str, str] = {}
    for key in per_worker[0]:
        paths = list(dict.fromkeys(d[key] for d in per_worker))
        out[key] = ", ".join(paths)
    return out


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
    go to `echo`; errors and the summary to `report.echo`. A fleet that cannot run says why at once."""
    echo = echo or _say
    try:
        code = _run_fleet(
            count,
            config,
            config_path=config_path,
            listen=listen,
            mode=mode,
            confdir=confdir,
            options=options,
            report=report,
            echo=echo,
        )
    except FleetSetupError as e:
        report.echo(f"brownout: {e}")
        return 1
    echo("brownout stopped.")
    return code


def _run_fleet(
    count: int,
    config: BrownoutConfig,
    *,
    config_path: str | None,
    listen: tuple[str, int],
    mode: str,
    confdir: str | None,
    options: list[str],
    report: StopReport,
    echo: Callable[[str], None],
) -> int:
    check_fleet(count, config, config_path=config_path, mode=mode)
    options, endpoints = _split(options)
    host, port = listen
    named = dict(o.partition("=")[::2] for o in options)
    if with_cassette_overrides(config, lambda name: named.get(name, "")).record.dir:
        raise FleetSetupError(
            f"--workers {count} cannot record cassettes: a session's cassette is one file, and its requests "
            "reach every worker; record with one process (no --workers)"
        )
    try:
        held = hold_port(host, port)
    except OSError as e:
        message = f"cannot listen on {host}:{port}: {e.strerror or e}; choose a free port with --listen"
        raise FleetSetupError(message) from e
    with held:
        port = held.getsockname()[1]
        ca = ensure_ca(confdir)  # once, here: workers creating it at once could read each other's half
        address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        worker_options = [*options, *(f"{name}={_FREE}" for name in _ENDPOINT_OPTIONS)]
        path = str(Path(config_path).resolve()) if config_path else None
        template = WorkerSpec(0, address, mode, path, str(ca.confdir), worker_options)
        _log_to_stderr()
        fleet = _Fleet(host, port, [mode], ca)
        return asyncio.run(_serve(count, config, template, endpoints, fleet, report=report, echo=echo))


def _say(line: str) -> None:
    print(line, flush=True)  # a pipe too: whoever waits for the start-up lines gets them now


def _log_to_stderr() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="brownout: %(message)s")


@contextlib.contextmanager
def _endpoints(
    config: BrownoutConfig, overrides: dict[str, str], supervisor: Supervisor
) -> Iterator[tuple[dict[str, str], FleetControl, FleetMetrics]]:
    """The supervisor's /metrics and control API, at the addresses the config (or --set) gives."""
    env: dict[str, str] = {}
    metrics = FleetMetrics(supervisor.workers)
    token = config.control.resolve_token()
    control = FleetControl(supervisor.workers, token=token, exchanges=metrics.exchanges_now)
    metrics_server: Any = None
    control_server: ControlServer | None = None
    try:
        if config.exporters.prometheus.enabled:
            listen = overrides.get("brownout_metrics_listen") or config.exporters.prometheus.listen
            registry = CollectorRegistry()
            registry.register(metrics)
            m_host, m_port = parse_listen(listen)
            try:
                metrics_server, _ = start_http_server(m_port, addr=m_host, registry=registry)
            except OSError as e:
                raise FleetSetupError(f"cannot serve /metrics on {listen}: {e.strerror or e}") from e
            env["BROWNOUT_METRICS_URL"] = f"http://{_url_host(m_host)}:{metrics_server.server_port}/metrics"
        if config.control.enabled:
            listen = overrides.get("brownout_control_listen") or config.control.listen
            control_server = ControlServer(control, listen=listen, token=token, token_env=config.control.token_env)
            try:
                control_server.start()
            except OSError as e:
                raise FleetSetupError(f"cannot serve the control API on {listen}: {e.strerror or e}") from e
            env["BROWNOUT_CONTROL_URL"] = control_server.url
        yield env, control, metrics
    finally:
        if control_server is not None:
            control_server.stop()
        if metrics_server is not None:
            metrics_server.shutdown()
            metrics_server.server_close()
        control.close()
        metrics.close()


def _url_host(host: str) -> str:
    host = connect_host(host)
    return f"[{host}]" if ":" in host else host


async def _serve(
    count: int,
    config: BrownoutConfig,
    template: WorkerSpec,
    overrides: dict[str, str],
    fleet: _Fleet,
    *,
    report: StopReport,
    echo: Callable[[str], None],
) -> int:
    paused_at_start: dict[int, bool] = {}
    control_ref: list[FleetControl] = []

    def spec_for(index: int) -> WorkerSpec:
        paused = bool(control_ref and control_ref[0].paused)
        paused_at_start[index] = paused
        options = [*template.options, f"brownout_worker={index}", f"brownout_paused={str(paused).lower()}"]
        return WorkerSpec(index, template.listen, template.mode, template.config_path, template.confdir, options)

    async def on_ready(worker: WorkerState) -> None:
        if control_ref:
            await asyncio.to_thread(control_ref[0].sync, worker, paused_at_start.get(worker.index, False))

    supervisor = Supervisor(count, spec_for, on_ready=on_ready, on_exit=lambda w: metrics.retire(w.pid or -1))
    with _endpoints(config, overrides, supervisor) as (env, control, metrics):
        control_ref.append(control)
        loop = asyncio.get_running_loop()
        stop, force = asyncio.Event(), asyncio.Event()

        def on_signal() -> None:
            (force if stop.is_set() else stop).set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        try:
            if not await _started(supervisor, stop):
                return 1
            lines = listening_lines(fleet, endpoints=env, where=fleet_destinations(config, count))
            pids = ", ".join(str(w.pid) for w in supervisor.workers())
            lines.insert(1, f"workers: {count} on one port (pids {pids}), state in {config.state.display_url()}")
            for line in lines:
                echo(line)
            await _first(stop.wait(), supervisor.all_gone.wait())
            await supervisor.stop(timeout_s=config.proxy.drain_timeout_s + _STOP_SLACK_S, force=force)
        finally:
            for sig in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(sig)
    where = fleet_destinations(config, count)
    report.report(merged(supervisor.counts, duration_s=report.elapsed_s(), where=where))
    return _exit_status(supervisor, count)


async def _started(supervisor: Supervisor, stop: asyncio.Event) -> bool:
    """Whether every worker started (False: said why, and stopped the others)."""
    start = asyncio.create_task(supervisor.start())
    await _first(start, stop.wait())
    if not start.done():  # a signal while starting: stop what has started
        start.cancel()
        with contextlib.suppress(asyncio.CancelledError, WorkerStartError):
            await start
        await supervisor.stop(timeout_s=10.0)
        return False
    try:
        start.result()
    except WorkerStartError as e:
        log.error("%s; stopped the fleet", e)
        return False
    return True


async def _first(*aws: Any) -> None:
    """Wait until one of `aws` is done; cancel the waits made here, never a task passed in."""
    futures = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for given, future in zip(aws, futures, strict=True):
            if future is not given:
                future.cancel()


def _exit_status(supervisor: Supervisor, count: int) -> int:
    """0 when every worker ran until the stop and drained; 1 (said why) otherwise."""
    if supervisor.all_gone.is_set():
        log.error("every worker died: the fleet stopped")
        return 1
    status = 0
    for index in range(count):
        code = supervisor.exit_codes.get(index)
        if code is None:
            log.error("worker %d was not running at the stop (it died and was not restarted)", index)
            status = 1
        elif code != 0:
            log.error("worker %d ended with exit code %d at the stop", index, code)
            status = 1
    return status
