from __future__ import annotations

import asyncio

from faults.base import Respond
from faults.empty import EmptyFault, EmptyParams


def test_empty_answers_with_the_wire_formats_empty_completion(make_ctx) -> None:
    fault = EmptyFault(EmptyParams(type="empty"))
    res = asyncio.run(fault.before_upstream(make_ctx()))
    assert res == Respond(200, {"content-type": "application/json"}, b'{"empty": true}')
