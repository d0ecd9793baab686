"""The record/replay flags shared by `brownout run`, `brownout exec` and `brownout experiment run`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

__all__ = ["cassette_flags", "cassette_set_options"]


def cassette_flags[F: Callable[..., Any]](fn: F) -> F:
    """Adds --record DIR, --replay DIR, --replay-speed X and --replay-miss MODE."""
    options = [
        click.option(
            "--record",
            "record_dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Record every exchange, as upstream sent it, to cassettes in DIR (one file per session).",
        ),
        click.option(
            "--replay",
            "replay_dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Answer from the cassettes in DIR; the upstream is never contacted (see --replay-miss).",
        ),
        click.option(
            "--replay-speed",
            type=click.FloatRange(min=0),
            default=None,
            help="Playback speed of the recorded timing: 2 twice as fast, 0 at once [default: 1].",
        ),
        click.option(
            "--replay-miss",
            type=click.Choice(["error", "passthrough"]),
            default=None,
            help="A request with no recording: answer 404 naming it, or forward it upstream [default: error].",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def cassette_set_options(
    record_dir: str | None, replay_dir: str | None, replay_speed: float | None, replay_miss: str | None
) -> list[str]:
    """The flags as `--set` options of the proxy (absolute paths: the proxy may resolve them elsewhere)."""
    import os

    out: list[str] = []
    if record_dir:
        out.append(f"brownout_record={os.path.abspath(record_dir)}")
    if replay_dir:
        out.append(f"brownout_replay={os.path.abspath(replay_dir)}")
    if replay_speed is not None:
        out.append(f"brownout_replay_speed={replay_speed!r}")
    if replay_miss:
        out.append(f"brownout_replay_miss={replay_miss}")
    return out
