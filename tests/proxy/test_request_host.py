"""brownout works out a request's host once: mitmproxy's `pretty_host` parses the authority on every read."""

from __future__ import annotations

import sys
from typing import Any

from mitmproxy import http

from tests.proxy.test_passthrough import collect, wait_for


def test_the_host_is_worked_out_once_per_request(upstream, brownout_proxy, openai_client, monkeypatch):
    reads: list[str] = []
    pretty_host = http.Request.pretty_host

    def counted(self: http.Request) -> Any:
        caller = sys._getframe(1).f_globals.get("__name__", "")
        if caller.startswith("brownout."):  # mitmproxy's own reads are not brownout's to save
            reads.append(caller)
        return pretty_host.fget(self)  # type: ignore[attr-defined]

    monkeypatch.setattr(http.Request, "pretty_host", property(counted))
    seen, on_exchange = collect()
    proxy = brownout_proxy(upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream)
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    wait_for(seen, 1)
    assert seen[0].host == "127.0.0.1" and seen[0].provider == "openai"
    assert reads == ["brownout.proxy.addon"]
