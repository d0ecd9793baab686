"""`brownout ctl ...`: the control API from the command line (status, pause, resume, reload, rules, violations)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any
from urllib.parse import quote

import click
import httpx

__all__ = ["ctl"]

_DEFAULT_URL = "http://127.0.0.1:9465"


class _Client:
    """A thin httpx client that turns API errors into click errors (exit code 1)."""

    def __init__(self, url: str, token: str | None, timeout_s: float) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        # trust_env=False: a HTTP_PROXY pointing at brownout itself must not capture ctl's calls.
        self.http = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout_s, trust_env=False)

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.HTTPError as e:
            raise click.ClickException(f"cannot reach the control API at {self.http.base_url}: {e}") from e
        try:
            body = response.json()
        except ValueError:
            body = {"error": response.text}
        if response.status_code == 401:
            raise click.ClickException("unauthorized: pass --token or set BROWNOUT_TOKEN")
        if response.status_code >= 400:
            message = body.get("error") or body.get("message") or response.text if isinstance(body, dict) else body
            raise click.ClickException(f"{method} {path}: HTTP {response.status_code}: {message}")
        return body


def _done(body: Any, what: str) -> None:
    """Say what happened, and where: this process, the whole fleet, or this replica only (store away)."""
    fleet = body.get("fleet") if isinstance(body, dict) else None
    if fleet is True:
        click.echo(f"{what} on every replica of the fleet")
    elif fleet is False:
        click.echo(f"{what} on this replica only", err=False)
        click.echo(f"brownout: warning: {body.get('warning') or 'the fleet could not be reached'}", err=True)
    else:
        click.echo(what)


def _echo(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


@click.group()
@click.option(
    "--url", default=_DEFAULT_URL, show_default=True, envvar="BROWNOUT_CONTROL_URL", help="Control API base URL."
)
@click.option("--token", envvar="BROWNOUT_TOKEN", help="Bearer token (default: $BROWNOUT_TOKEN).")
@click.option("--timeout", "timeout_s", default=10.0, show_default=True, help="Request timeout in seconds.")
@click.pass_context
def ctl(ctx: click.Context, url: str, token: str | None, timeout_s: float) -> None:
    """Drive a running brownout through its control API."""
    ctx.obj = _Client(url, token, timeout_s)


@ctl.command()
@click.pass_obj
def status(client: _Client) -> None:
    """Rules, schedule state, counters and sessions."""
    _echo(client.call("GET", "/status"))


@ctl.command()
@click.pass_obj
def pause(client: _Client) -> None:
    """Kill switch: stop all fault injection from the next exchange on (with a fleet: on every replica)."""
    _done(client.call("POST", "/faults/pause"), "faults paused")


@ctl.command()
@click.pass_obj
def resume(client: _Client) -> None:
    """Resume fault injection (with a fleet: on every replica)."""
    _done(client.call("POST", "/faults/resume"), "faults resumed")


@ctl.command()
@click.pass_obj
def reload(client: _Client) -> None:
    """Reload the config file; a bad config keeps the last good one."""
    try:
        body = client.call("POST", "/reload")
    except click.ClickException as e:
        raise click.ClickException(f"reload rejected, previous config kept: {e.message}") from e
    click.echo(body.get("message") or "reloaded")


@ctl.command()
@click.argument("name")
@click.option("--enable/--disable", "enabled", required=True, help="Turn the rule on or off.")
@click.pass_obj
def rule(client: _Client, name: str, enabled: bool) -> None:
    """Enable or disable the rule NAME (with a fleet: on every replica)."""
    body = client.call("PUT", f"/rules/{quote(name, safe='')}", json={"enabled": enabled})
    _done(body, f"rule {name} {'enabled' if enabled else 'disabled'}")


def _since(value: str | None) -> float | None:
    """A unix timestamp, or a duration back from now: 30s, 5m, 2h."""
    if not value:
        return None
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    if value[-1] in units and value[:-1].replace(".", "", 1).isdigit():
        return time.time() - float(value[:-1]) * units[value[-1]]
    try:
        return float(value)
    except ValueError:
        raise click.BadParameter("a unix timestamp or a duration like 30s, 5m, 2h", param_hint="--since") from None


@ctl.command()
@click.option("--since", help="Unix timestamp, or a duration back from now (30s, 5m, 2h).")
@click.option("--json", "as_json", is_flag=True, help="One JSON record per line instead of a table.")
@click.pass_obj
def violations(client: _Client, since: str | None, as_json: bool) -> None:
    """List recent invariant violations."""
    t = _since(since)
    records = client.call("GET", "/violations", params={} if t is None else {"since": f"{t:.3f}"})["violations"]
    for r in records:
        if as_json:
            click.echo(json.dumps(r, sort_keys=True, default=str))
        else:
            when = time.strftime("%H:%M:%S", time.localtime(float(r.get("timestamp") or 0)))
            click.echo(
                f"{when}  {r.get('severity', ''):8}  {r.get('invariant', '')}  {r.get('message', '')}"
                f"  session={r.get('session_id', '')} trace={r.get('trace_id') or '-'}"
            )
    if not records and not as_json:
        click.echo("no violations", err=sys.stderr.isatty())
