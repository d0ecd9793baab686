"""The `record:` and `replay:` config sections, and the command-line overrides of them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from pydantic import Field

from brownout.core.config import ConfigPath, Model

__all__ = ["OPTIONS", "RecordConfig", "ReplayConfig", "add_options", "with_cassette_overrides"]


class RecordConfig(Model):
    """The `record:` section: write every exchange brownout proxies to cassettes, as upstream sent it."""

    dir: ConfigPath | None = Field(
        None, description="Directory for the cassettes, one JSON Lines file per session; unset: no recording."
    )
    max_body_bytes: int = Field(
        33_554_432,
        ge=0,
        description="Body bytes kept per response (and request); a longer one is kept cut, marked. Each streamed "
        "event counts 96 bytes more (what holding it costs).",
    )
    max_pending_bytes: int = Field(
        67_108_864,
        ge=1,
        description="Bytes of exchanges waiting for the writer thread; beyond it exchanges are dropped and counted.",
    )


class ReplayConfig(Model):
    """The `replay:` section: answer from cassettes instead of the upstream."""

    dir: ConfigPath | None = Field(None, description="Directory of the cassettes to answer from; unset: no replay.")
    speed: float = Field(
        1.0, ge=0, description="Playback speed of the recorded timing: 2 is twice as fast, 0 sends at once."
    )
    miss: Literal["error", "passthrough"] = Field(
        "error",
        description="A request with no recorded answer: 'error' answers 404 naming the miss; 'passthrough' "
        "forwards it upstream (and records it when recording).",
    )
    exhausted: Literal["repeat", "miss"] = Field(
        "repeat",
        description="A request seen more often than it was recorded (a retry after a fault): 'repeat' answers "
        "its last recording again; 'miss' treats it as a miss.",
    )
    ignore_params: list[str] = Field(
        default_factory=list, description="Query parameters left out of matching (as mitmproxy's server replay)."
    )


# mitmproxy options that override the sections (the CLI's --record, --replay, ...). Floats travel as
# strings: mitmproxy's --set cannot parse a float option.
OPTIONS: dict[str, str] = {
    "brownout_record": "Overrides record.dir: record every exchange to cassettes in this directory.",
    "brownout_replay": "Overrides replay.dir: answer from the cassettes in this directory.",
    "brownout_replay_speed": "Overrides replay.speed (a number; 0: at once).",
    "brownout_replay_miss": "Overrides replay.miss: error or passthrough.",
}


def add_options(loader: Any) -> None:
    for name, help_text in OPTIONS.items():
        loader.add_option(name, str, "", help_text)


def with_cassette_overrides(config: Any, option: Callable[[str], str]) -> Any:
    """`config` with its record/replay sections overridden by the non-empty options; ValueError for bad values."""
    record, replay = config.record, config.replay
    if path := option("brownout_record"):
        record = record.model_copy(update={"dir": path})
    update: dict[str, Any] = {}
    if path := option("brownout_replay"):
        update["dir"] = path
    if speed := option("brownout_replay_speed"):
        try:
            update["speed"] = float(speed)
        except ValueError:
            raise ValueError(f"replay speed must be a number, got {speed!r}") from None
        if not update["speed"] >= 0:  # NaN too: it would turn every recorded wait into no wait at all
            raise ValueError(f"replay speed must be 0 or more, got {speed!r}")
    if miss := option("brownout_replay_miss"):
        if miss not in ("error", "passthrough"):
            raise ValueError(f"replay miss must be error or passthrough, got {miss!r}")
        update["miss"] = miss
    if update:
        replay = replay.model_copy(update=update)
    if record is config.record and replay is config.replay:
        return config
    return config.model_copy(update={"record": record, "replay": replay})
