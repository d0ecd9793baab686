"""An exchange's own objects are freed as it completes, never left for the cyclic collector.

mitmproxy's flows live in reference cycles, so whatever a flow holds is freed only by a collector pass,
and an exchange in flight at a young generation's pass is promoted and then freed only by a full one,
whose pause lands on the next request (proxy/heap.py). The response lets go of brownout's stream
callable when its last hook ran (proxy/responses.py); the span batch of a failed export is let go of by
the exporter thread (exporters/batch.py).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from mitmproxy import http

from tests.cyclicgarbage import saved_garbage
from tests.proxy import test_late_stream as late
from tests.proxy.test_faults_proxy import MSG, TOOLS, rule, rules
from tests.proxy.test_passthrough import collect, wait_for


@contextmanager
def cyclic_brownout_garbage() -> Iterator[Counter[str]]:
    """What the block leaves that only the cyclic collector would free, of brownout's own types."""
    found: Counter[str] = Counter()
    with saved_garbage() as garbage:
        yield found
    found.update(type(o).__qualname__ for o in garbage if _brownouts(o))


def _brownouts(o: object) -> bool:
    """Of brownout's types, apart from the flow's own response (proxy/lateswitch.py gives it a subclass)."""
    return type(o).__module__.startswith("brownout.") and not isinstance(o, http.Response)


def _warm(
    proxy_factory: Callable[..., Any], upstream: Any, openai_client: Any, config: str | None
) -> tuple[Any, list[Any]]:
    seen, on_exchange = collect()
    proxy = proxy_factory(config, upstream=upstream, on_exchange=on_exchange)
    client = openai_client(proxy, upstream)
    client.chat.completions.create(model="gpt-4o", messages=MSG)  # a first exchange warms every lazy cache
    wait_for(seen, 1)
    return client, seen


@pytest.mark.parametrize(
    "config",
    [None, rules(rule("bad-args", "{type: malformed_json, target: tool_arguments}", "{stream: true}"))],
    ids=["streamed", "streamed-with-stream-fault"],
)
def test_a_streamed_exchange_leaves_nothing_of_brownout_for_the_collector(
    upstream, brownout_proxy, openai_client, config
):
    client, seen = _warm(brownout_proxy, upstream, openai_client, config)
    with cyclic_brownout_garbage() as found:
        for _ in range(5):
            chunks = list(client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS, stream=True))
            assert chunks
        wait_for(seen, 6)
        time.sleep(0.2)  # the last exchange's analysis runs at the proxy loop's next idle moment
    assert seen[-1].streamed and seen[-1].tool_calls
    assert found == Counter(), found


def test_a_buffered_exchange_leaves_nothing_of_brownout_for_the_collector(upstream, brownout_proxy, openai_client):
    client, seen = _warm(brownout_proxy, upstream, openai_client, None)
    with cyclic_brownout_garbage() as found:
        for _ in range(5):
            assert client.chat.completions.create(model="gpt-4o", messages=MSG, tools=TOOLS).choices
        wait_for(seen, 6)
        time.sleep(0.2)
    assert not seen[-1].streamed
    assert found == Counter(), found


def test_a_chunked_body_buffered_for_a_fault_leaves_nothing_of_brownout_for_the_collector(brownout_proxy):
    # Of unknown size, it is watched for mitmproxy's switch to streaming (proxy/lateswitch.py), which
    # never comes for a body this small: the watch is dropped with the response's last hook.
    seen, on_exchange = collect()
    proxy = brownout_proxy(late.config("{type: malformed_json}"), on_exchange=on_exchange)
    up = late.chunked_upstream(b'{"items": [1, 2, 3]}')
    with up.running():
        assert late.fetch(proxy, up.url + "/api/x").status_code == 200
        wait_for(seen, 1)
        with cyclic_brownout_garbage() as found:
            for _ in range(3):
                r = late.fetch(proxy, up.url + "/api/x")
                assert r.headers["x-brownout-fault"] == "bad:malformed_json"
            wait_for(seen, 4)
            time.sleep(0.2)
    assert not seen[-1].streamed
    assert found == Counter(), found
