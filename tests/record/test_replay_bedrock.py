"""boto3's Bedrock calls recorded through the real proxy, then replayed with the upstream gone: event streams
are kept message by message (binary, exact) and botocore reads the replay as it read the original."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brownout.core.wire.eventstream import Decoder
from tests.proxy.bedrock_support import client, converse, converse_stream, invoke_stream
from tests.record.support import load, mock_upstream, player, recorder, wait_recorded


def session(c: Any) -> dict[str, Any]:
    answer = converse(c)
    return {"converse": answer["output"], "stream": converse_stream(c), "invoke": invoke_stream(c)}


def test_boto3_bedrock_replays_what_it_recorded(brownout_proxy: Any, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes, mode="reverse", upstream=up)
        recorded = session(client(rec.url))
        wait_recorded(rec, 3)
    [cassette] = load(cassettes)
    streams = [r for r in cassette.exchanges if r.events]
    assert [r.url.rsplit("/", 1)[-1] for r in streams] == ["converse-stream", "invoke-with-response-stream"]
    for r in streams:  # one binary message per event, byte for byte
        assert r.events and all(len(Decoder().feed(e.data)) == 1 for e in r.events)
    play = player(brownout_proxy, cassettes, speed=0, mode="reverse", upstream=up)
    assert session(client(play.url)) == recorded
    assert play.addon.tape.counts["hit"] == 3 and play.addon.tape.counts["miss"] == 0
