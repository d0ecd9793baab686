"""The `brownout` command line: run, env, exec, validate, schema, demo."""

from __future__ import annotations

import asyncio
import importlib
import ipaddress
import logging
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import click

# proxy.embed (mitmproxy) and proxy.configload (every config model) load late: `--help` stays fast
from brownout.core.config import parse_listen
from brownout.proxy.certs import ensure_ca, proxy_env
from brownout.proxy.cli_config import check_config, fail, schema, validate
from brownout.proxy.record.flags import cassette_flags, cassette_set_options

if TYPE_CHECKING:
    from brownout.proxy.embed import ProxyHandle, ProxyStartError

__all__ = ["main"]

logger = logging.getLogger(__name__)

_config_opt = click.option(
    "-c", "--config", "config_path", type=click.Path(dir_okay=False), help="Chaos config (YAML)."
)
_set_opt = click.option(
    "--set",
    "set_options",
    multiple=True,
    metavar="OPTION=VALUE",
    help="An option of mitmproxy's proxy core, e.g. ssl_verify_upstream_trusted_ca=ca.pem (repeatable).",
)
_confdir_opt = click.option(
    "--confdir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where brownout keeps its CA (default: $BROWNOUT_CONFDIR or ~/.brownout).",
)
_session_opt = click.option("--session", default=None, help="Session name, sent as the proxy username.")
_quiet_opt = click.option("-q", "--quiet", is_flag=True, help="No summary when the proxy stops (warnings still print).")
_summary_json_opt = click.option(
    "--summary-json",
    type=click.Path(dir_okay=False),
    default=None,
    metavar="FILE",
    help="Write the stop summary as JSON to FILE (exchanges, faults, violations, files).",
)
_LISTEN_HELP = "HOST:PORT, or a bare PORT on 127.0.0.1."


def _listen(spec: str) -> tuple[str, int]:
    try:
        return parse_listen(spec, default_port=8080)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--listen") from e


def _mode(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from brownout.proxy.modes import check_mode

    try:
        return check_mode(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from e


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name: can't tell, so warn


class _LazyGroup(click.Group):
    """The feature groups (experiment, discover, ctl, ...) import when their command runs, not at start-up:
    `brownout ctl --help` takes 0.3 s instead of 1.0 s (a proxy start gains little: the proxy needs most of
    those modules anyway). `--help` still lists them all, with their help, as click's documented lazy-loading
    pattern does."""

    LAZY: ClassVar[dict[str, str]] = {
        "cassette": "brownout.proxy.record.cli:cassette",
        "ctl": "brownout.proxy.ctl:ctl",
        "discover": "brownout.proxy.discover.cli:discover",
        "experiment": "brownout.proxy.experiment.cli:experiment",
        "mcp-stdio": "brownout.proxy.mcpstdio.cli:mcp_stdio",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted([*super().list_commands(ctx), *self.LAZY])

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = self.LAZY.get(cmd_name)
        if target is None:
            return super().get_command(ctx, cmd_name)
        module, _, name = target.partition(":")
        command: click.Command = getattr(importlib.import_module(module), name)
        return command


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="brownout")
def main() -> None:
    """brownout: a chaos proxy for AI agents' HTTP traffic."""


@main.command()
@_config_opt
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT", help=_LISTEN_HELP)
@click.option(
    "--mode",
    default="regular",
    show_default=True,
    callback=_mode,
    help="regular, or reverse:http(s)://HOST[:PORT] for base-URL clients.",
)
@_set_opt
@_confdir_opt
@cassette_flags
@_quiet_opt
@_summary_json_opt
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Processes sharing the listening port (SO_REUSEPORT), one /metrics and one control API; "
    "more than 1 needs state.backend: redis.",
)
def run(
    config_path: str | None,
    listen: str,
    mode: str,
    set_options: tuple[str, ...],
    confdir: str | None,
    quiet: bool,
    summary_json: str | None,
    workers: int,
    **cassette: Any,
) -> None:
    """Run the proxy in the foreground until Ctrl-C or SIGTERM, then print a summary of what it did."""
    from brownout.proxy.leanimport import defer_mitmproxy_addons

    defer_mitmproxy_addons()  # this process is brownout's own: load only the addons it runs
    from brownout.proxy.embed import ProxyStartError
    from brownout.proxy.serve import serve_until_signal
    from brownout.proxy.startup import StopReport, startup_lines

    config = check_config(config_path)
    host, port = _listen(listen)
    names = {s.partition("=")[0] for s in set_options}
    if not _is_loopback(host) and not names & {"allow_hosts", "proxyauth"}:
        click.echo(
            f"brownout: warning: listening on {host}, not loopback, and without allow_hosts or proxyauth: "
            "anyone who can reach this port can use the proxy.",
            err=True,
        )

    report = StopReport(quiet=quiet, json_path=summary_json, expect_traffic=False, echo=_echo_err)
    if workers > 1:
        from brownout.proxy.workers.run import run_fleet

        options = [*cassette_set_options(**cassette), *set_options]
        sys.exit(run_fleet(workers, config, config_path, listen=(host, port), mode=mode, confdir=confdir,
                           options=options, report=report))  # fmt: skip
    served: list[ProxyHandle] = []

    def ready(handle: ProxyHandle) -> None:
        served.append(handle)
        for line in startup_lines(handle):
            click.echo(line)

    try:
        asyncio.run(
            serve_until_signal(
                ready,
                config_path=config_path,
                mode=mode,
                listen=f"[{host}]:{port}" if ":" in host else f"{host}:{port}",
                confdir=confdir,
                extra_options=[*cassette_set_options(**cassette), *set_options],
            )
        )
    except ProxyStartError as e:
        fail(_start_error(e))
    if served:
        report.stopped(served[0])
    click.echo("brownout stopped.")


def _start_error(e: ProxyStartError) -> str:
    if e.address_in_use:
        return f"cannot start the proxy: {e}; choose a free port with --listen HOST:PORT"
    return f"cannot start the proxy: {e}"


def _echo_err(line: str) -> None:
    click.echo(line, err=True)


@main.command()
@click.option(
    "--listen",
    default="127.0.0.1:8080",
    show_default=True,
    metavar="HOST:PORT",
    help=f"Where `brownout run` listens: {_LISTEN_HELP}",
)
@_session_opt
@_confdir_opt
@_config_opt
def env(listen: str, session: str | None, confdir: str | None, config_path: str | None) -> None:
    """Print the shell exports that route a client through brownout.

    With -c, and `agent_spans.receiver` on in that config, also the OTEL_EXPORTER_OTLP_* variables that
    send the agent's own spans to brownout's OTLP receiver. Use: eval "$(brownout env -c chaos.yaml)"
    """
    from brownout.proxy.endpoints import otlp_env

    host, port = _listen(listen)
    ca = ensure_ca(confdir)
    exports = proxy_env(host, port, ca.bundle, session, ca_cert_path=ca.ca_cert)
    receiver = check_config(config_path).agent_spans if config_path else None
    if receiver is not None and receiver.receiver is not None:
        rhost, rport = _listen(receiver.receiver.listen)
        if rport == 0:
            click.echo(
                "brownout: agent_spans.receiver listens on a free port: its OTEL_* variables are unknown", err=True
            )
        else:
            exports.update(otlp_env(f"http://{'127.0.0.1' if rhost in ('', '0.0.0.0') else rhost}:{rport}"))
    for name, value in exports.items():
        click.echo(f"export {name}={shlex.quote(value)}")


@main.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@_config_opt
@_session_opt
@click.option("--mode", default="regular", show_default=True, hidden=True, callback=_mode)
@_set_opt
@_confdir_opt
@cassette_flags
@_quiet_opt
@_summary_json_opt
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def exec(
    config_path: str | None,
    session: str | None,
    mode: str,
    set_options: tuple[str, ...],
    confdir: str | None,
    quiet: bool,
    summary_json: str | None,
    command: tuple[str, ...],
    **cassette: Any,
) -> None:
    """Run COMMAND through brownout and exit with its status; then print a summary of what brownout saw.

    The proxy, /metrics and the control API listen on free ports for the command's lifetime, so
    several execs can run at once; the command gets their addresses (BROWNOUT_METRICS_URL,
    BROWNOUT_CONTROL_URL) and the control API's token (BROWNOUT_TOKEN, generated unless set).
    When no request of the command reached brownout, a warning says so and names the usual causes.
    Example: brownout exec -c chaos.yaml -- python agent.py
    """
    from brownout.proxy.embed import ProxyStartError, running_proxy
    from brownout.proxy.endpoints import endpoint_env, ensure_control_token, free_endpoints
    from brownout.proxy.startup import StopReport

    config = check_config(config_path)
    ensure_control_token(config)
    options = [*cassette_set_options(**cassette), *set_options]
    options += [f"{k}={v}" for k, v in free_endpoints(config, set_options).items()]
    report = StopReport(quiet=quiet, json_path=summary_json, expect_traffic=True, echo=_echo_err)
    started = _setup_logging()
    try:
        with running_proxy(config_path, mode=mode, confdir=confdir, extra_options=options) as handle:
            started()
            endpoints = endpoint_env(handle)
            click.echo(
                f"brownout: {', '.join(f'{k}={v}' for k, v in endpoints.items() if k != 'BROWNOUT_TOKEN')}", err=True
            )
            code, ran = _run_child(list(command), {**os.environ, **handle.env_for(session), **endpoints})
    except ProxyStartError as e:
        fail(_start_error(e))
    report.stopped(handle, command_ran=ran)  # one that never started sent nothing, and that is no bypass
    sys.exit(code)


def _run_child(command: list[str], env: dict[str, str]) -> tuple[int, bool]:
    """The command's exit status, and whether it ran at all."""
    # Ctrl-C reaches the child (same process group); we wait for it, then stop the proxy cleanly.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        proc = subprocess.Popen(command, env=env)
    except OSError as e:
        signal.signal(signal.SIGINT, previous)
        click.echo(f"brownout: cannot run {command[0]!r}: {e.strerror or e}", err=True)
        return (127 if isinstance(e, FileNotFoundError) else 126), False
    try:
        forward = lambda signum, _frame: proc.send_signal(signum)
        signal.signal(signal.SIGTERM, forward)
        returncode = proc.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
    # a child killed by a signal: report it the way a shell does
    return (128 - returncode if returncode < 0 else returncode), True


@main.command()
def demo() -> None:
    """Run the built-in demo (no API keys, no network).

    Mock upstreams, a tool-using agent, brownout in between.
    """
    try:
        from brownout.proxy.demo.run import run_demo
    except ImportError as e:
        fail(f"the demo is not available: {e}")
    from rich.console import Console

    sys.exit(run_demo(Console()))


main.add_command(validate)
main.add_command(schema)


def _setup_logging() -> Callable[[], None]:
    """brownout's warnings on stderr (stdout belongs to the child command), without the proxy's start-up
    errors until it is up (a failed start says them once, as its error); returns what to call then."""
    from mitmproxy.log import MitmLogHandler

    from brownout.proxy.embed import StartErrors

    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="brownout: %(levelname)s %(name)s: %(message)s"
    )
    # Not mitmproxy's own handlers: its errorcheck must see start-up errors to report a failed start.
    handlers = [h for h in logging.getLogger().handlers if not isinstance(h, MitmLogHandler)]
    quiet = StartErrors()
    for handler in handlers:
        handler.addFilter(quiet)

    def started() -> None:
        for handler in handlers:
            handler.removeFilter(quiet)

    return started
