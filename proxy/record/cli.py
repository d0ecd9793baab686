"""`brownout cassette ls|show|redact|har DIR`: look into recordings, clean them up, export them."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from brownout.proxy.record.cassette import CassetteError, CassetteFile, scan_dir

__all__ = ["cassette"]

_dir_arg = click.argument("directory", type=click.Path(exists=True, file_okay=False, path_type=Path))


@contextmanager
def _readable() -> Iterator[None]:
    """A cassette that cannot be read or written (a bad line, a link out of the directory) ends the command, named."""
    try:
        yield
    except (CassetteError, OSError) as e:
        click.echo(f"brownout: {e}", err=True)
        sys.exit(2)


def _load(directory: Path) -> list[CassetteFile]:
    """The directory's cassettes, headers checked; their exchanges are read one at a time, when iterated."""
    with _readable():
        return scan_dir(directory)


def _size(n: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if n < 1024:
            return f"{n} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n:.1f} GiB"


@click.group("cassette")
def cassette() -> None:
    """Inspect, redact and export record/replay cassettes."""


@cassette.command("ls")
@_dir_arg
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON.")
def ls_cmd(directory: Path, as_json: bool) -> None:
    """Sessions in DIRECTORY, and its exchanges per provider, model and tool."""
    from brownout.proxy.record.inspect import describe, session_summary, totals

    cassettes = _load(directory)
    with _readable():
        views = {c.path.name: [describe(r) for r in c.exchanges()] for c in cassettes}
    sessions = [session_summary(c, views[c.path.name]) for c in cassettes]
    per = totals([v for vs in views.values() for v in vs])
    if as_json:
        click.echo(json.dumps({"directory": str(directory), "sessions": sessions, "totals": per}, indent=2))
        return
    console = Console()
    table = Table(title=f"{directory}: {len(sessions)} sessions, {sum(s['exchanges'] for s in sessions)} exchanges")
    for col in ("file", "session", "exchanges", "size", "providers"):
        table.add_column(col)
    for s in sessions:
        providers = ", ".join(f"{p} {n}" for p, n in sorted(s["providers"].items()))
        table.add_row(escape(s["file"]), escape(s["session"]), str(s["exchanges"]), _size(s["bytes"]), providers)
    console.print(table)
    table = Table(title="exchanges per provider, model and tool")
    for col in ("provider", "model", "tool", "exchanges"):
        table.add_column(col)
    for row in per:
        table.add_row(escape(row["provider"]), escape(row["model"]), escape(row["tool"]), str(row["exchanges"]))
    console.print(table)


@cassette.command("show")
@_dir_arg
@click.argument("session", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print each exchange's summary as a JSON line.")
def show_cmd(directory: Path, session: str | None, as_json: bool) -> None:
    """The exchanges of every session in DIRECTORY (or of SESSION, a session name or file name)."""
    from brownout.proxy.record.inspect import describe

    cassettes = [c for c in _load(directory) if session in (None, c.session, c.path.name, c.path.stem)]
    if session is not None and not cassettes:
        click.echo(f"brownout: no session {session!r} in {directory}", err=True)
        sys.exit(2)
    console = Console()
    for c in cassettes:
        with _readable():
            views = [describe(r) for r in c.exchanges()]
        if as_json:
            for v in views:
                click.echo(json.dumps({"session": c.session, **v.to_dict()}))
            continue
        table = Table(title=f"{c.session} ({c.path.name}, recorded {c.created} by brownout {c.brownout})")
        for col in ("#", "request", "status", "provider", "model", "tool", "events", "bytes", "s"):
            table.add_column(col)
        for v in views:
            tool = v.tool or ", ".join(f"-> {t}" for t in v.tool_calls)
            status = str(v.status) if v.status is not None else f"[red]{escape(v.error or 'no answer')}[/]"
            if v.error and v.status is not None:
                status += " [red](cut)[/]"
            table.add_row(
                str(v.seq),
                escape(f"{v.method} {v.url}"),
                status,
                escape(f"{v.provider} {v.operation}"),
                escape(v.model or ""),
                escape(tool),
                "" if v.events is None else str(v.events),
                f"{v.request_bytes}/{v.response_bytes}" + ("+" if v.truncated else ""),
                f"{v.duration_s:.2f}",
            )
        console.print(table)


@cassette.command("redact")
@_dir_arg
@click.option("--header", "headers", multiple=True, metavar="NAME", help="Drop this header (repeatable).")
@click.option("--param", "params", multiple=True, metavar="NAME", help="Blank this query parameter (repeatable).")
@click.option("--pattern", "patterns", multiple=True, metavar="REGEX", help="Replace matches in URLs, headers, bodies.")
@click.option(
    "--pii/--no-pii", default=False, help="Also replace emails, phone, card and IBAN numbers (the no_pii detectors)."
)
def redact_cmd(
    directory: Path, headers: tuple[str, ...], params: tuple[str, ...], patterns: tuple[str, ...], pii: bool
) -> None:
    """Rewrite the cassettes in DIRECTORY without the given values, and without API keys found in bodies.

    Values become REDACTED. A request body changed here no longer matches the live request on replay.
    """
    from brownout.proxy.record.redact import Redaction, redact_file

    try:
        compiled = [re.compile(p) for p in patterns]
    except re.error as e:
        raise click.BadParameter(str(e), param_hint="--pattern") from e
    kinds = {"secret", "email", "phone", "card", "iban"} if pii else {"secret"}
    redaction = Redaction(
        headers=frozenset(headers), params=frozenset(params), patterns=compiled, kinds=frozenset(kinds)
    )
    cassettes = _load(directory)
    with _readable():
        for c in cassettes:  # every file must be readable before any is rewritten (an exchange at a time)
            for _ in c.exchanges():
                pass
        # A link inside the directory: the file it leads to is redacted (once), not the link replaced.
        for path in dict.fromkeys(c.path.resolve() for c in cassettes):
            n = redact_file(path, redaction)
            click.echo(f"{path.name}: {n} value(s) redacted")


@cassette.command("har")
@_dir_arg
@click.option("-o", "--out", "out", type=click.Path(dir_okay=False, path_type=Path), required=True)
def har_cmd(directory: Path, out: Path) -> None:
    """Export DIRECTORY's exchanges as one HAR 1.2 file (streamed answers as whole bodies)."""
    from brownout.proxy.record.har import write_har

    cassettes = _load(directory)
    with _readable(), out.open("w", encoding="utf-8") as f:
        entries = write_har(cassettes, f)
    click.echo(f"{out}: {entries} entries")
