"""What `brownout experiment run` and `experiment search` share on the command line: the experiment file, the
seed, the report directory, progress, the CA directory and the cassette flags (and the upstream they make)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from brownout.proxy.record.flags import cassette_flags

if TYPE_CHECKING:
    from brownout.proxy.experiment.upstream import UpstreamConfig

__all__ = ["experiment_options", "upstream_from_flags"]

F = TypeVar("F", bound=Callable[..., Any])


def experiment_options(default_out: str, progress_help: str) -> Callable[[F], F]:
    """EXP_FILE, --seed, --out (default `default_out`), --progress/--no-progress, --confdir, the cassette flags."""
    decorators = [
        click.argument("exp_file", type=click.Path(exists=True, dir_okay=False, path_type=Path)),
        click.option("--seed", type=int, default=None, help="Override the experiment's seed."),
        click.option(
            "--out",
            "out_dir",
            type=click.Path(file_okay=False, path_type=Path),
            default=Path(default_out),
            show_default=True,
            help="Directory for the reports.",
        ),
        click.option("--progress/--no-progress", default=None, help=progress_help),
        click.option(
            "--confdir", default=None, help="brownout's CA directory (default $BROWNOUT_CONFDIR or ~/.brownout)."
        ),
        cassette_flags,
    ]

    def wrap(fn: F) -> F:
        for decorator in reversed(decorators):  # as if stacked in this order above fn
            fn = decorator(fn)
        return fn

    return wrap


def upstream_from_flags(
    record_dir: str | None, replay_dir: str | None, replay_speed: float | None, replay_miss: str | None
) -> UpstreamConfig:
    """The cassette flags as the experiment's upstream, directories against the working directory."""
    from brownout.proxy.experiment.upstream import UpstreamConfig

    cwd = Path.cwd()
    return UpstreamConfig(
        record=str(cwd / record_dir) if record_dir else None,
        replay=str(cwd / replay_dir) if replay_dir else None,
        replay_speed=replay_speed,
        replay_miss=replay_miss,
    )
