"""GET /exchanges on a running proxy: recent exchange summaries, bounded, token-protected."""

from __future__ import annotations

import time
from typing import Any

import httpx
from click.testing import CliRunner

from brownout.proxy.cli import main

TOKEN = "discover-token"
CONFIG = f"""
version: 1
control: {{token: {TOKEN}}}
exporters: {{recent_exchanges: 3}}
"""


def _get(proxy: Any, path: str, token: str | None = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.get(proxy.addon.control.url + path, headers=headers, trust_env=False, timeout=10)


def _wait(proxy: Any, n: int) -> list[dict[str, Any]]:
    deadline = time.monotonic() + 10
    while True:
        records: list[dict[str, Any]] = _get(proxy, "/exchanges").json()["exchanges"]
        if len(records) >= n or time.monotonic() > deadline:
            return records
        time.sleep(0.02)


def test_recent_exchanges_are_bounded_and_newest_last(brownout_proxy, upstream) -> None:
    proxy = brownout_proxy(CONFIG)
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
        for city in ("Oslo", "Lima", "Pune", "Baku", "Riga"):
            assert client.get(f"{upstream.url}/tools/weather", params={"city": city}).status_code == 200
            _wait(proxy, 1)
        time.sleep(0.2)  # the last exchange is summarised just after its answer is sent
    records = _wait(proxy, 3)
    assert len(records) == 3  # exporters.recent_exchanges
    assert [r["path"].rsplit("=", 1)[1] for r in records] == ["Pune", "Baku", "Riga"]
    assert all(r["tool"] == "weather" and r["tool_call_shapes"] == [] for r in records)
    assert [r["path"] for r in _get(proxy, "/exchanges?limit=1").json()["exchanges"]] == [records[-1]["path"]]
    since = records[1]["timestamp"]
    assert [r["path"] for r in _get(proxy, f"/exchanges?since={since}").json()["exchanges"]] == [records[2]["path"]]


def test_exchanges_need_the_token(brownout_proxy) -> None:
    proxy = brownout_proxy(CONFIG)
    assert _get(proxy, "/exchanges", token=None).status_code == 401
    assert _get(proxy, "/exchanges", token="wrong").status_code == 401
    assert _get(proxy, "/exchanges?limit=0").status_code == 400
    assert _get(proxy, "/exchanges?limit=x").status_code == 400
    assert (
        httpx.post(
            proxy.addon.control.url + "/exchanges", headers={"Authorization": f"Bearer {TOKEN}"}, trust_env=False
        ).status_code
        == 405
    )
    result = CliRunner().invoke(main, ["discover", proxy.addon.control.url], env={"BROWNOUT_TOKEN": ""})
    assert result.exit_code == 1 and "unauthorized" in result.output


def test_discover_reads_a_running_proxy(brownout_proxy, upstream) -> None:
    proxy = brownout_proxy(CONFIG.replace("recent_exchanges: 3", "recent_exchanges: 100"))
    with httpx.Client(proxy=proxy.url, trust_env=False, timeout=10) as client:
        client.post(f"{upstream.url}/tools/search", json={"query": "secret-query-text", "top_k": 3})
    _wait(proxy, 1)
    result = CliRunner().invoke(main, ["discover", proxy.addon.control.url, "--token", TOKEN])
    assert result.exit_code == 0, result.output
    assert "1 exchange in 1 session (control API" in result.output
    assert 'args {"query": "string", "top_k": "integer"}  x1' in result.output
    assert "secret-query-text" not in result.output
