"""unsupported_version: the 2026-07-28 UNSUPPORTED_PROTOCOL_VERSION answer, with the versions a server serves."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from brownout.faults.base import NotApplicable, Respond
from brownout.faults.config import RuleConfig
from brownout.faults.unsupported_version import UnsupportedVersionFault, UnsupportedVersionParams
from tests.faults.engine_support import run
from tests.faults.test_header_mismatch import request


def answer(make_ctx, ex, **params: object) -> Respond:
    fault = UnsupportedVersionFault(UnsupportedVersionParams.model_validate({"type": "unsupported_version", **params}))
    ctx = make_ctx()
    ctx.exchange = ex
    result = run(fault.before_upstream(ctx))
    assert isinstance(result, Respond)
    return result


def test_the_sdk_servers_answer_over_http_and_on_a_pipe(make_ctx) -> None:
    got = answer(make_ctx, request("server/discover", {}))
    assert got.status == 400
    assert json.loads(got.body) == {
        "jsonrpc": "2.0",
        "id": 7,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2025-11-25"], "requested": "2026-07-28"},
        },
    }
    piped = answer(make_ctx, request("tools/list", {}, transport="stdio"), supported=["2027-01-01"])
    assert json.loads(piped.body)["error"]["data"]["supported"] == ["2027-01-01"]


def test_where_it_cannot_apply(make_ctx) -> None:
    with pytest.raises(NotApplicable, match="one `supported` names"):
        answer(make_ctx, request("tools/list", {}), supported=["2026-07-28"])
    with pytest.raises(NotApplicable, match="names its version in an envelope"):
        answer(make_ctx, request("tools/list", {}, envelope=False))
    with pytest.raises(ValidationError):
        UnsupportedVersionParams.model_validate({"type": "unsupported_version", "supported": []})
    with pytest.raises(ValidationError, match="the handshake era agrees on a version in initialize"):
        RuleConfig.model_validate(
            {"name": "x", "match": {"mcp_era": "handshake"}, "fault": {"type": "unsupported_version"}}
        )
