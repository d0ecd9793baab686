"""Credentials never reach a cassette: planted keys in every place a client puts them are not in any file,
and replay still matches requests whose keys differ from the recorded ones."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from brownout.proxy.demo.httpserver import Request, Responder
from brownout.proxy.record.cassette import read_dir
from tests.proxy.test_relay import serving
from tests.record.support import mock_upstream, player, recorder, wait_recorded

PLANTED = {
    "authorization": "sk-proj-PLANTEDauthorization0123456789",
    "x-api-key": "sk-ant-PLANTEDxapikey0123456789",
    "api-key": "PLANTEDazureapikey0123456789",
    "x-goog-api-key": "AIzaPLANTEDgoogapikey0123456789abcdefg",
    "cookie": "session=PLANTEDcookie0123456789",
    "key": "PLANTEDquerykey0123456789",
    "access_token": "PLANTEDquerytoken0123456789",
}


def client_with_secrets(openai_client: Any, proxy: Any, url: str, suffix: str = "") -> Any:
    return openai_client(
        proxy,
        url,
        api_key=PLANTED["authorization"] + suffix,
        default_headers={
            "x-api-key": PLANTED["x-api-key"] + suffix,
            "api-key": PLANTED["api-key"] + suffix,
            "x-goog-api-key": PLANTED["x-goog-api-key"] + suffix,
            "cookie": PLANTED["cookie"] + suffix,
        },
        default_query={"key": PLANTED["key"] + suffix, "access_token": PLANTED["access_token"] + suffix},
    )


def test_no_planted_secret_is_written_and_replay_matches_other_keys(
    brownout_proxy, openai_client, tmp_path: Path
) -> None:
    cassettes = tmp_path / "cassettes"
    messages = [{"role": "user", "content": "What is the weather in Paris?"}]
    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        client = client_with_secrets(openai_client, rec, up.url)
        first = client.chat.completions.create(model="gpt-4o-mini", messages=messages)
        list(client.chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True))
        wait_recorded(rec, 2)
        seen = up.requests_seen[-1]
        url = up.url
    # The upstream did get them (brownout forwards credentials), so their absence below means something.
    assert seen.headers["x-api-key"] == PLANTED["x-api-key"] and PLANTED["key"] in seen.path

    text = "".join(p.read_text(encoding="utf-8") for p in cassettes.iterdir())
    for where, value in PLANTED.items():
        assert value not in text, f"the {where} value reached a cassette"
    [[get, _stream]] = [c.exchanges for c in read_dir(cassettes)]
    assert "key=REDACTED" in get.url and "access_token=REDACTED" in get.url
    names = {k.lower() for k, _ in get.request_headers}
    assert not names & {"authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "proxy-authorization"}

    play = player(brownout_proxy, cassettes)
    other = client_with_secrets(openai_client, play, url, suffix="-rotated")
    assert other.chat.completions.create(model="gpt-4o-mini", messages=messages).id == first.id


SET_COOKIE = "session=PLANTEDsetcookie0123456789; HttpOnly"


async def sets_a_cookie(req: Request, resp: Responder) -> None:
    resp.send(200, b'{"ok": true}', headers={"set-cookie": SET_COOKIE, "x-api-key": "PLANTEDechoedkey0123"})


def test_response_cookies_and_echoed_keys_are_not_written(brownout_proxy, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"
    with serving(sets_a_cookie) as url:
        rec = recorder(brownout_proxy, cassettes)
        with httpx.Client(proxy=rec.proxy_url("s"), timeout=10) as client:
            got = client.get(f"{url}/session")
        wait_recorded(rec, 1)
    assert got.headers["set-cookie"] == SET_COOKIE  # the client still gets it
    text = "".join(p.read_text(encoding="utf-8") for p in cassettes.iterdir())
    assert "PLANTEDsetcookie" not in text and "PLANTEDechoedkey" not in text
    [[exchange]] = [c.exchanges for c in read_dir(cassettes)]
    assert exchange.body == b'{"ok": true}' and "set-cookie" not in {k.lower() for k, _ in exchange.response_headers}


BODY_KEY = "sk-proj-PLANTEDinbody0123456789abcdef"  # a known key format, anywhere in a body
TOOL_SECRET = "PLANTEDtoolpassword0123"  # no known format: found by its field name


def test_secrets_in_request_bodies_are_not_written_and_replay_still_matches(brownout_proxy, tmp_path: Path) -> None:
    cassettes = tmp_path / "cassettes"

    def requests(client: httpx.Client, url: str, suffix: str) -> list[bytes]:
        chat = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": f"my key is {BODY_KEY}{suffix}"}]}
        tool = {"city": "Paris", "auth": {"password": TOOL_SECRET + suffix}, "code": "print(1)"}
        return [
            client.post(f"{url}/v1/chat/completions", json=chat).content,
            client.post(f"{url}/tools/weather?city=Paris", json=tool).content,
        ]

    with mock_upstream() as up:
        rec = recorder(brownout_proxy, cassettes)
        with httpx.Client(proxy=rec.proxy_url("s"), timeout=10) as client:
            recorded = requests(client, up.url, "")
        wait_recorded(rec, 2)
        assert TOOL_SECRET.encode() in up.requests_seen[-1].body  # forwarded as sent
        url = up.url

    text = "".join(p.read_text(encoding="utf-8") for p in cassettes.iterdir())
    assert BODY_KEY not in text and TOOL_SECRET not in text
    [[chat, tool]] = [c.exchanges for c in read_dir(cassettes)]
    assert b"my key is REDACTED" in chat.request_body
    assert b'"password":"REDACTED"' in tool.request_body and b'"code":"print(1)"' in tool.request_body

    play = player(brownout_proxy, cassettes, miss="error")
    with httpx.Client(proxy=play.proxy_url("s"), timeout=10) as client:
        assert requests(client, url, "-rotated") == recorded  # other secrets, the same recordings
    assert play.addon.tape.counts["hit"] == 2 and play.addon.tape.counts["miss"] == 0
