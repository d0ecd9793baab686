"""What `brownout run` and `brownout exec` say around the proxy's life: where everything is at
start-up, and at the stop what happened (proxy/summary.py), the bypass warning and `--summary-json`."""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from brownout.proxy.endpoints import endpoint_env
from brownout.proxy.summary import WHERE_LABELS, Summary, bypass_warning, destinations, summarize, write_json

__all__ = ["StopReport", "env_hint", "listening_lines", "startup_lines"]


def env_hint(handle: Any) -> str:
    """`brownout env ...` with every option that makes its exports match this proxy."""
    args = ["brownout", "env", "--listen", f"{handle.host}:{handle.port}"]
    # Any confdir but the default of a shell without $BROWNOUT_CONFDIR: the agent's shell may not have it.
    if Path(handle.confdir).expanduser().resolve() != Path("~/.brownout").expanduser().resolve():
        args += ["--confdir", str(handle.confdir)]
    return shlex.join(args)


def startup_lines(handle: Any) -> list[str]:
    """The listen address, CA bundle, /metrics and control URLs, logs and cassettes, and how to point an agent."""
    return listening_lines(handle, endpoints=endpoint_env(handle), where=destinations(handle.addon.config))


def listening_lines(handle: Any, *, endpoints: dict[str, str], where: dict[str, str]) -> list[str]:
    """`startup_lines` of a proxy whose endpoints and files are given: `handle` needs only its address
    (host, port, url, mode) and CA (confdir, ca_bundle_path); `brownout run --workers` has no addon."""
    lines = [
        f"brownout proxy listening on {handle.url} (mode {', '.join(handle.mode)})",
        f"CA bundle: {handle.ca_bundle_path}",
    ]
    if "BROWNOUT_METRICS_URL" in endpoints:
        lines.append(f"metrics: {endpoints['BROWNOUT_METRICS_URL']}")
    if "BROWNOUT_CONTROL_URL" in endpoints:
        lines.append(f"control API: {endpoints['BROWNOUT_CONTROL_URL']}")
    for key, path in where.items():
        lines.append(f"{WHERE_LABELS[key]}: {path}")
    if handle.mode == ["regular"]:
        lines.append(f'Point an agent at it: eval "$({env_hint(handle)})"')
    else:
        lines.append(f"Point a client's base URL at {handle.url}")
    return lines


class StopReport:
    """Times a proxy's life and, when it has stopped, says what it did (stderr) and writes `--summary-json`.

    `quiet` drops the summary, never the bypass warning of a command that was expected to send
    traffic (`expect_traffic`): that one is why the summary exists."""

    def __init__(
        self,
        *,
        quiet: bool,
        json_path: str | None,
        expect_traffic: bool,
        echo: Callable[[str], None],
    ) -> None:
        self.quiet = quiet
        # The working directory's, as every path on the command line.
        self.json_path = os.path.abspath(json_path) if json_path else None
        self.expect_traffic = expect_traffic
        self.echo = echo
        self.started = time.monotonic()

    def stopped(self, handle: Any, *, command_ran: bool = True) -> None:
        """Say what the proxy did; `command_ran` False (exec's command could not start): no bypass warning."""
        self.report(summarize(handle.addon, duration_s=self.elapsed_s()), command_ran=command_ran)

    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    def report(self, summary: Summary, *, command_ran: bool = True) -> None:
        """Say what `summary` says (of one proxy, or of a fleet's workers together)."""
        if self.json_path is not None:
            try:
                write_json(self.json_path, summary)
            except OSError as e:
                self.echo(f"brownout: cannot write the summary to {self.json_path}: {e.strerror or e}")
        warning = bypass_warning(summary) if command_ran else None
        if not self.quiet:
            for line in summary.lines():
                self.echo(line)
        if warning is not None and (self.expect_traffic or not self.quiet):
            self.echo(f"brownout: warning: {warning}")
