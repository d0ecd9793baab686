"""Secrets in URL paths, in headers outside the fixed list and in response bodies never reach a cassette;
replay blanks a live request's URL as recording did, so a webhook call still meets its recording."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.record.cassette import Event, Recorded, read_dir
from brownout.proxy.record.redact import scrub
from tests.proxy.test_relay import serving
from tests.record.support import player, recorder, wait_recorded

WEBHOOK = "/services/T0123ABCD/B0456EFGH/"
PLANTED = {
    "webhook path": "pLaNtEdWebHookSecret0a1b2c",
    "configured header": "PLANTEDtenantPass0123",
    "x-auth-token": "PLANTEDxAuthToken0123",
    "response header": "PLANTEDsessionToken0123",
    "response body": "PLANTEDissuedToken0123456789",
    "stream event": "ghp_PLANTEDstreamKey0123456789abcdefghijkl",
}
CONFIG = "seed: 1\nproxy: {secret_headers: [X-Tenant-Pass]}\n"


async def tools(req: Request, resp: Responder) -> None:
    if req.path.startswith(WEBHOOK):
        resp.send(200, b"ok", headers={"x-session-token": PLANTED["response header"], "x-request-id": "r-1"})
    elif req.path == "/oauth/token":
        resp.send(200, json.dumps({"access_token": PLANTED["response body"], "token_type": "bearer"}).encode())
    else:
        await resp.start_stream(200, "text/event-stream")
        await resp.chunk(f'data: {{"note": "use {PLANTED["stream event"]}"}}\n\n'.encode())
        await resp.chunk(b"data: [DONE]\n\n")
        await resp.end()


def _calls(client: httpx.Client, url: str, webhook_secret: str) -> list[bytes]:
    headers = {"x-tenant-pass": PLANTED["configured header"], "x-auth-token": PLANTED["x-auth-token"]}
    return [
        client.post(f"{url}{WEBHOOK}{webhook_secret}", json={"text": "deploy done"}, headers=headers).content,
        client.post(f"{url}/oauth/token", data={"grant_type": "client_credentials"}).content,
        client.get(f"{url}/events").content,
    ]


def test_secrets_in_urls_headers_and_response_bodies_are_not_written_and_replay_matches(
    brownout_proxy: Any, tmp_path: Path
) -> None:
    cassettes = tmp_path / "cassettes"
    with serving(tools) as url:
        rec = recorder(brownout_proxy, cassettes, CONFIG)
        with httpx.Client(proxy=rec.proxy_url("s"), timeout=10) as client:
            live = _calls(client, url, PLANTED["webhook path"])
        wait_recorded(rec, 3)
    assert PLANTED["response body"].encode() in live[1] and PLANTED["stream event"].encode() in live[2]  # as sent

    text = "".join(p.read_text(encoding="utf-8") for p in cassettes.iterdir())
    assert [where for where, value in PLANTED.items() if value in text] == []
    [[webhook, token, events]] = [c.exchanges for c in read_dir(cassettes)]
    assert webhook.url.endswith(f"{WEBHOOK}REDACTED")  # readable: the layout stays, the secret goes
    assert ("x-request-id", "r-1") in webhook.response_headers  # other headers stay
    assert json.loads(token.body or b"") == {"access_token": "REDACTED", "token_type": "bearer"}
    assert events.events is not None and b"use REDACTED" in events.events[0].data

    play = player(brownout_proxy, cassettes, CONFIG, miss="error")
    with httpx.Client(proxy=play.proxy_url("s"), timeout=10) as client:
        again = _calls(client, url, PLANTED["webhook path"])
        rotated = _calls(client, url, "an0therRotatedSecret9x8y7z")
    assert again[0] == rotated[0] == b"ok"
    assert play.addon.tape.counts == {"hit": 6, "miss": 0, "passthrough": 0, "repeated": 3}


def test_a_body_kept_compressed_as_sent_is_left_as_it_is() -> None:
    gzipped = b"\x1f\x8b\x08\x00sk-proj-abcdefghijklmnopqrstuvwxyz0123"  # not text: its bytes must not change
    rec = Recorded(
        session="s",
        seq=1,
        method="POST",
        url="http://x/y",
        request_headers=[("Content-Encoding", "gzip")],
        request_body=gzipped,
        status=200,
        response_headers=[("content-encoding", "br")],
        body=gzipped,
    )
    scrub(rec)
    assert rec.request_body == gzipped and rec.body == gzipped
    key = b"data: sk-proj-abcdefghijklmnopqrstuvwxyz0123\n\n"
    plain = Recorded("s", 1, "GET", "http://x/y", [], b"", status=200, events=[Event(0.0, key)])
    scrub(plain)  # decoded when recorded: text, blanked
    assert plain.events == [Event(0.0, b"data: REDACTED\n\n")]
