"""The processes an experiment starts for itself: launched in order, each waited for, stopped in reverse.

Each service runs in its own session (process group), so stopping it reaches its children too and a
Ctrl-C in the terminal reaches brownout alone, which then stops the services itself. Output goes to
`service-NAME.log` in the log directory (the report's directory).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from brownout.proxy.experiment.agentproc import format_command
from brownout.proxy.experiment.config import ReadyCheck, ServiceConfig
from brownout.proxy.freeport import free_port

__all__ = ["ServiceError", "ServiceRecord", "Services", "command_text", "free_port", "log_name", "outcome"]

logger = logging.getLogger(__name__)

TAIL_LINES = 20
TAIL_CHARS = 2000


class ServiceError(RuntimeError):
    """A service did not start or did not become ready; the message names it and quotes its log."""


@dataclass(slots=True)
class ServiceRecord:
    """What a service did, for the report."""

    name: str
    command: str | list[str]
    log: str  # file name inside the log directory
    port: int | None = None
    pid: int | None = None
    ready_after_s: float | None = None
    exit_code: int | None = None  # negative: ended by that signal, as subprocess reports it
    stopped_by: str | None = None  # "SIGTERM", "SIGKILL", or None when it exited on its own
    exited_early: bool = False  # ended before brownout stopped it
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def log_name(name: str) -> str:
    return f"service-{name}.log"


def outcome(record: dict[str, Any]) -> str:
    """How a service (a ServiceRecord as a report dict) ended, in words."""
    code = record.get("exit_code")
    if record.get("error") and record.get("ready_after_s") is None:
        return "never ready" + (f", exit code {code}" if code is not None else "")
    if record.get("exited_early"):
        return f"exited on its own during the experiment, exit code {code}"
    if record.get("stopped_by") == "SIGKILL":
        return f"killed (SIGKILL after the SIGTERM grace period), exit code {code}"
    if record.get("stopped_by"):
        return f"stopped ({record['stopped_by']}), exit code {code}"
    return "not stopped"


def command_text(command: str | list[str]) -> str:
    return command if isinstance(command, str) else shlex.join(command)


def _fill(text: str, port: int | None) -> str:
    return text if port is None else text.replace("{port}", str(port))


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return ""
    return "\n".join(lines[-TAIL_LINES:])[-TAIL_CHARS:]


def _probe(check: ReadyCheck, port: int | None, timeout_s: float) -> str | None:
    """None when the service is ready, else what the probe saw."""
    if check.tcp is not None:
        host, _, port_text = _fill(check.tcp, port).rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port_text)), timeout=timeout_s).close()
        except OSError as e:
            return f"tcp {host}:{port_text}: {e.strerror or e}"
        return None
    url = _fill(check.http or "", port)
    # Straight to the service: the environment's HTTP(S)_PROXY is not the way to it.
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if url.startswith("https:"):
        # A probe only asks whether something answers; local services often use self-signed certificates.
        ctx = ssl.create_default_context()
        ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    try:
        with urllib.request.build_opener(*handlers).open(url, timeout=timeout_s) as resp:
            status = resp.status
    except urllib.error.HTTPError as e:
        return f"{url} answered {e.code}"
    except (OSError, ValueError) as e:  # URLError is an OSError; ValueError: a malformed URL
        reason = getattr(e, "reason", e)
        return f"{url}: {getattr(reason, 'strerror', None) or reason}"
    return None if status < 400 else f"{url} answered {status}"


class Services:
    """Start `configs` on enter (raising ServiceError if one is not ready) and stop them all on exit.

    Logs go to `log_dir` (default: a new temporary directory). `exports` holds the variables the
    started services export, for the processes that use them.
    """

    def __init__(
        self,
        configs: Iterable[ServiceConfig],
        *,
        base_dir: Path,
        log_dir: Path | None = None,
    ) -> None:
        self.configs = list(configs)
        self.base_dir = base_dir
        self.log_dir = log_dir
        self.exports: dict[str, str] = {}
        self.records: list[ServiceRecord] = []
        self._procs: list[tuple[subprocess.Popen[bytes], ServiceRecord, ServiceConfig, IO[bytes]]] = []

    def __enter__(self) -> Services:
        try:
            self.start()
        except BaseException:  # a failed service or Ctrl-C while waiting: stop what already runs
            self.stop()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        if not self.configs:
            return
        if self.log_dir is None:
            self.log_dir = Path(tempfile.mkdtemp(prefix="brownout-services-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for cfg in self.configs:
            self._start_one(cfg, self.log_dir)

    def _start_one(self, cfg: ServiceConfig, log_dir: Path) -> None:
        port = free_port() if cfg.uses_port else None
        command, shell = format_command(cfg.command, {"python": sys.executable, "port": str(port)})
        record = ServiceRecord(name=cfg.name, command=command, log=log_name(cfg.name), port=port)
        self.records.append(record)
        log_path = log_dir / record.log
        env = {**os.environ, **self.exports, **{k: _fill(v, port) for k, v in cfg.env.items()}}
        cwd = self.base_dir / cfg.cwd if cfg.cwd else self.base_dir
        log = log_path.open("wb")
        try:
            proc = subprocess.Popen(
                command,
                shell=shell,
                env=env,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except OSError as e:
            log.close()
            record.error = f"service {cfg.name!r} could not start: {e}"
            raise ServiceError(record.error) from e
        record.pid = proc.pid
        self._procs.append((proc, record, cfg, log))
        logger.info("service %s started (pid %d%s)", cfg.name, proc.pid, f", port {port}" if port else "")
        self._wait_ready(proc, record, cfg, log_path)
        self.exports.update({k: _fill(v, port) for k, v in cfg.export.items()})

    def _wait_ready(self, proc: subprocess.Popen[bytes], record: ServiceRecord, cfg: ServiceConfig, log: Path) -> None:
        check = cfg.ready
        started = time.monotonic()
        deadline = started + check.timeout_s
        seen = "no probe yet"
        while True:
            code = proc.poll()
            if code is not None:
                record.exit_code, record.exited_early = code, True
                why = f"exited with code {code} before it was ready"
                break
            seen = _probe(check, record.port, timeout_s=max(0.05, min(1.0, deadline - time.monotonic()))) or ""
            if not seen:
                record.ready_after_s = round(time.monotonic() - started, 3)
                logger.info("service %s ready after %.2f s", cfg.name, record.ready_after_s)
                return
            if time.monotonic() >= deadline:
                why = f"did not become ready within {check.timeout_s:g} s (last probe: {seen})"
                break
            time.sleep(check.interval_s)
        tail = _tail(log)
        record.error = f"service {cfg.name!r} {why}"
        body = "\n".join(f"  | {line}" for line in tail.splitlines()) if tail else "  (empty)"
        raise ServiceError(f"{record.error}; last lines of {log}:\n{body}")

    def stop(self) -> None:
        """SIGTERM every service still running (last started first), SIGKILL after its grace period."""
        while self._procs:
            proc, record, cfg, log = self._procs.pop()
            try:
                self._stop_one(proc, record, cfg)
            finally:
                log.close()

    def _stop_one(self, proc: subprocess.Popen[bytes], record: ServiceRecord, cfg: ServiceConfig) -> None:
        code = proc.poll()
        if code is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)  # children it left behind, if any
            if record.exit_code is None:
                record.exit_code, record.exited_early = code, True
                logger.warning("service %s had exited with code %s before the experiment ended", cfg.name, code)
            return
        for sig, wait_s in ((signal.SIGTERM, cfg.stop_timeout_s), (signal.SIGKILL, 10.0)):
            with contextlib.suppress(ProcessLookupError, PermissionError):  # already gone
                os.killpg(proc.pid, sig)
            record.stopped_by = sig.name
            try:
                record.exit_code = proc.wait(timeout=wait_s)
                return
            except subprocess.TimeoutExpired:
                continue
        logger.error("service %s (pid %d) did not exit after SIGKILL", cfg.name, proc.pid)
