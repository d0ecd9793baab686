from __future__ import annotations

import asyncio

from brownout.faults.base import Respond
from brownout.faults.empty import EmptyFault, EmptyParams


def test_empty_answers_with_the_wire_formats_empty_completion(make_ctx) -> None:
    fault = EmptyFault(EmptyParams(type="empty"))
    res = asyncio.run(fault.before_upstream(make_ctx()))
    assert res == Respond(200, {"content-type": "application/json"}, b'{"empty": true}')


def test_openai_sdk_parses_the_empty_completion(make_ctx) -> None:
    from brownout.core.wire import by_provider
    from tests.faults.samples import openai_sdk

    res = asyncio.run(
        EmptyFault(EmptyParams(type="empty")).before_upstream(
            make_ctx(wire=by_provider("openai"), provider="openai", operation="chat")
        )
    )
    msg = (
        openai_sdk(res.status, res.headers, res.body).chat.completions.create(model="m", messages=[]).choices[0].message
    )
    assert not msg.content and not msg.tool_calls
