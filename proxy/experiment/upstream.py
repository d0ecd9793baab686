"""The experiment file's `upstream:` and `reproducibility:` sections: cassettes instead of a live upstream,
and repeated passes for the reproducibility metric."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from brownout.core.config import Model
from brownout.proxy.record.flags import cassette_set_options

__all__ = ["ReproducibilityConfig", "UpstreamConfig", "proxy_options"]


class UpstreamConfig(Model):
    """Where the agents' answers come from: the live upstream (default) or recorded cassettes."""

    replay: str | None = Field(
        None, description="Cassette directory every phase is answered from (relative to the experiment file)."
    )
    record: str | None = Field(None, description="Record every phase's exchanges, as upstream sent them, here.")
    replay_speed: float | None = Field(None, ge=0, description="Playback speed (default 1; 0: at once).")
    replay_miss: Literal["error", "passthrough"] | None = Field(None, description="A request never recorded.")


class ReproducibilityConfig(Model):
    """Run the experiment's phases this many times (each in a fresh proxy) and report how many runs repeat."""

    repeats: int = Field(1, ge=1, le=20, description="Passes over every phase; 1: no reproducibility metric.")


def proxy_options(upstream: UpstreamConfig, base_dir: Path) -> list[str]:
    """The proxy's `--set` options for the section, directories resolved against the experiment file."""
    return cassette_set_options(
        str(base_dir / upstream.record) if upstream.record else None,
        str(base_dir / upstream.replay) if upstream.replay else None,
        upstream.replay_speed,
        upstream.replay_miss,
    )
