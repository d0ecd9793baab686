"""The control token is caught on the proxy port whatever the case of its scheme, and never forwarded."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mitmproxy.test import tflow

from brownout.proxy.tokenshield import MISDIRECTED, TokenShield

TOKEN = "s3cret-control-token"


@pytest.mark.parametrize("value", [f"Bearer {TOKEN}", f"bearer {TOKEN}", f"BEARER {TOKEN}", f"  beaRer   {TOKEN} "])
def test_the_bearer_scheme_is_recognised_in_any_case(value: str) -> None:
    flow = tflow.tflow()
    flow.request.headers["Authorization"] = value
    assert TokenShield(TOKEN).intercept(flow)
    assert "authorization" not in flow.request.headers and flow.metadata[MISDIRECTED]


@pytest.mark.parametrize(
    "value", [f"Basic {TOKEN}", TOKEN, "Bearer other-token", f"Bearer {TOKEN}x", "bearer", "Bearer s3cr\xe9t"]
)
def test_other_credentials_pass_untouched(value: str) -> None:
    flow = tflow.tflow()
    flow.request.headers["Authorization"] = value
    assert not TokenShield(TOKEN).intercept(flow)
    assert flow.request.headers["Authorization"] == value


def test_a_value_that_is_not_utf8_is_compared_without_failing() -> None:
    flow = tflow.tflow()
    flow.request.headers.fields = ((b"Authorization", b"Bearer \xff\xfe"),)
    assert not TokenShield(TOKEN).intercept(flow)
    flow.request.headers.fields = ((b"authorization", b"bearer " + TOKEN.encode()),)
    assert TokenShield(TOKEN).intercept(flow)


def test_a_lower_case_bearer_token_on_the_proxy_port_never_reaches_upstream(
    brownout_proxy: Any, upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BROWNOUT_TOKEN", TOKEN)
    proxy = brownout_proxy("version: 1\n")
    with httpx.Client(proxy=proxy.proxy_url(), trust_env=False) as client:
        misdirected = client.get(f"{upstream.url}/status", headers={"Authorization": f"bearer {TOKEN}"})
    assert misdirected.status_code == 421
    assert not any(TOKEN in str(r.headers) for r in upstream.requests_seen)
