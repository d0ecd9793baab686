"""`brownout demo`: mock upstream + embedded brownout + the demo agent, and a report of what happened."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.panel import Panel
from rich.table import Table

from brownout.proxy.demo.agent_steps import AgentSummary
from brownout.proxy.demo.upstream import MockUpstream

__all__ = ["DEMO_CONFIG", "run_demo"]

log = logging.getLogger(__name__)

DEMO_CONFIG = Path(__file__).with_name("chaos.yaml")
_AGENT_TIMEOUT_S = 180.0


class _Collector:
    """Keeps the exchanges brownout reports (called on the proxy's thread)."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._lock = threading.Lock()

    def __call__(self, exchange: Any) -> None:
        with self._lock:
            self.items.append(exchange)

    def wait_for(self, count: int, timeout_s: float = 2.0) -> None:
        # The last exchange may be reported a moment after the client already has its response.
        deadline = time.monotonic() + timeout_s
        while len(self.items) < count and time.monotonic() < deadline:
            time.sleep(0.02)


def _agent_env(proxy_env: dict[str, str]) -> dict[str, str]:
    env = {**os.environ, **proxy_env}
    env.pop("BROWNOUT_DEMO_UPSTREAM", None)
    return env


def _run_agent_subprocess(upstream_url: str, env: dict[str, str]) -> AgentSummary | str:
    """Run the agent as its own process, exactly as `brownout exec` would; return its summary or an error."""
    cmd = [sys.executable, "-m", "brownout.proxy.demo.agent", "--upstream", upstream_url, "--json"]
    try:
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=_AGENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return f"the agent did not finish within {_AGENT_TIMEOUT_S:.0f} s"
    try:
        return AgentSummary.from_dict(json.loads(out.stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError, TypeError):
        return f"the agent crashed (exit {out.returncode}): {out.stderr.strip()[-2000:]}"


def _fault_names(exchange: Any) -> str:
    return ", ".join(getattr(f, "fault", str(f)) for f in getattr(exchange, "faults", []) or []) or "-"


def _exchange_table(exchanges: list[Any]) -> Table:
    table = Table(title="Exchanges seen by brownout", title_justify="left")
    for col in ("#", "provider", "operation", "model", "status", "ms", "stream", "faults"):
        table.add_column(col, justify="right" if col in ("#", "status", "ms") else "left")
    for i, ex in enumerate(exchanges, 1):
        duration = ex.timings.duration_s if getattr(ex, "timings", None) else None
        status = ex.status if ex.status is not None else (ex.error_type or "error")
        table.add_row(
            str(i),
            ex.provider,
            ex.operation,
            ex.model or "-",
            f"[{'red' if ex.status is None or ex.status >= 400 else 'green'}]{status}[/]",
            "-" if duration is None else f"{duration * 1000:.1f}",
            "yes" if ex.stream else "no",
            f"[yellow]{_fault_names(ex)}[/]" if ex.faults else "-",
        )
    return table


def _steps_table(summary: AgentSummary) -> Table:
    table = Table(title="Agent steps", title_justify="left")
    for col in ("step", "api", "stream", "result", "attempts", "ms", "error"):
        table.add_column(col, justify="right" if col in ("attempts", "ms") else "left")
    for s in summary.steps:
        table.add_row(
            s.name,
            s.api,
            "yes" if s.stream else "no",
            "[green]ok[/]" if s.ok else "[red]failed[/]",
            str(s.attempts),
            f"{s.duration_ms:.1f}",
            s.error or "",
        )
    return table


def _violations_table(violations: list[Any]) -> Table:
    table = Table(title="Invariant violations", title_justify="left")
    for col in ("invariant", "severity", "session", "message"):
        table.add_column(col)
    colour = {"info": "blue", "warning": "yellow", "error": "red", "critical": "bold red"}
    for v in violations:
        table.add_row(
            v.invariant, f"[{colour.get(v.severity, 'white')}]{v.severity}[/]", str(v.session_id)[:20], v.message
        )
    return table


def run_demo(console: Console, *, config_path: str | None = None) -> int:
    """Run the demo end to end and print what happened; 0 when the agent ran through brownout."""
    from brownout.proxy.embed import running_proxy  # late: importing mitmproxy costs a second

    collector = _Collector()
    config = str(config_path or DEMO_CONFIG)
    console.print(f"[bold]brownout demo[/] chaos config: {config}")
    violations = _Collector()
    free = {"brownout_metrics_listen": "127.0.0.1:0", "brownout_control_listen": "127.0.0.1:0"}
    with (
        MockUpstream.run_in_thread() as upstream,
        running_proxy(config, on_exchange=collector, extra_options=free) as proxy,
    ):
        proxy.addon.pipeline.violation_listeners.append(violations)
        console.print(f"mock upstream {upstream.url}   brownout proxy {proxy.url}")
        console.print("running the demo agent (openai + anthropic SDKs, HTTP tool API) through the proxy...")
        result = _run_agent_subprocess(upstream.url, _agent_env(proxy.env))
        if isinstance(result, AgentSummary):
            collector.wait_for(result.http_attempts)
    exchanges = list(collector.items)
    console.print(_exchange_table(exchanges))
    if isinstance(result, str):
        console.print(f"[red]{result}[/]")
        return 1
    console.print(_steps_table(result))
    console.print(_violations_table(violations.items))
    faults = sum(len(getattr(ex, "faults", []) or []) for ex in exchanges)
    console.print(
        Panel.fit(
            f"calls made: {result.calls_made}   errors caught: {result.errors}   HTTP attempts: {result.http_attempts}\n"
            f"exchanges through brownout: {len(exchanges)}   faults injected: {faults}   "
            f"violations: {len(violations.items)}\n"
            f"final answer: {result.final_answer or '[red]none[/]'}",
            title="Agent summary",
        )
    )
    if not exchanges:
        console.print("[red]brownout saw no traffic: the agent bypassed the proxy[/]")
        return 1
    return 0
