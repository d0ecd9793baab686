"""Replay misses forwarded upstream (and recorded next to the cassettes they missed), replay behind an
upstream proxy, config sections, and what a bad replay setting does at start."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from brownout.proxy.configload import parse_config
from brownout.proxy.embed import ProxyStartError
from brownout.proxy.record.cassette import read_dir
from tests.record.support import mock_upstream, player, recorder, wait_recorded


def ask(client: Any, text: str) -> str:
    return client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": text}]).id


def test_passthrough_forwards_misses_and_records_them_after_the_old(
    brownout_proxy, openai_client, tmp_path: Path
) -> None:
    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        first = ask(openai_client(rec, up, session="s"), "one")
        wait_recorded(rec, 1)
        both = player(brownout_proxy, cassettes, miss="passthrough", extra_options={"brownout_record": str(cassettes)})
        client = openai_client(both, up, session="s")
        assert ask(client, "one") == first  # a hit: not forwarded, not recorded again
        seen = len(up.requests_seen)
        second = ask(client, "two")  # a miss: forwarded, recorded
        assert len(up.requests_seen) == seen + 1
        wait_recorded(both, 1)
    assert both.addon.tape.counts == {"hit": 1, "miss": 0, "passthrough": 1, "repeated": 0}
    [cassette] = read_dir(cassettes)
    assert [r.seq for r in cassette.exchanges] == [1, 2]
    play = player(brownout_proxy, cassettes)
    client = openai_client(play, up.url, session="s")
    assert [ask(client, "one"), ask(client, "two")] == [first, second]


def test_the_sections_validate_and_a_missing_cassette_directory_stops_the_start(brownout_proxy, tmp_path: Path) -> None:
    config = parse_config("record: {dir: out}\nreplay: {dir: in, speed: 0, miss: passthrough}\n")
    assert (config.record.dir, config.replay.speed, config.replay.miss) == ("out", 0.0, "passthrough")
    with pytest.raises(Exception, match=r"replay\.speed"):
        parse_config("replay: {speed: -1}\n")
    with pytest.raises(ProxyStartError, match="no such cassette directory"):
        player(brownout_proxy, tmp_path / "nothing-here")
    with pytest.raises(ProxyStartError, match="replay speed must be a number"):
        player(brownout_proxy, tmp_path, extra_options={"brownout_replay_speed": "fast"})


def test_replay_in_upstream_mode_answers_whole_without_the_upstream_proxy(
    brownout_proxy, openai_client, tmp_path: Path
) -> None:
    """The relay cannot be reached through an upstream proxy: hits are answered whole, at once, and
    nothing is forwarded (the guard, checked at teardown, contained nothing)."""
    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        client = openai_client(rec, up, session="s")
        first = ask(client, "one")
        streamed = "".join(
            c.choices[0].delta.content or ""
            for c in client.chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "two"}], stream=True
            )
            if c.choices
        )
        wait_recorded(rec, 2)
        url = up.url
    forwarded: list[Any] = []
    chained = brownout_proxy(on_exchange=forwarded.append)
    play = player(brownout_proxy, cassettes, mode=f"upstream:{chained.url}")
    client = openai_client(play, url, session="s")
    assert ask(client, "one") == first
    again = client.chat.completions.create(
        model="gpt-4o-mini", messages=[{"role": "user", "content": "two"}], stream=True
    )
    assert "".join(c.choices[0].delta.content or "" for c in again if c.choices) == streamed
    assert play.addon.tape.counts["hit"] == 2 and forwarded == []
