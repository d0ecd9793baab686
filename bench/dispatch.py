"""mitmproxy hook dispatch per request, mitmproxy's dump master against brownout's master.

    .venv/bin/python bench/dispatch.py            # microseconds per flow hook, side by side

Each master gets one do-nothing addon and dispatches the four hooks of a request/response
(requestheaders, request, responseheaders, response) for the same test flow, the way mitmproxy's
proxy server does (`handle_lifecycle`, which also fires `update` for flows). The figure is the
cost of the dispatch alone, before any addon does any work.
"""

from __future__ import annotations

import asyncio
import time

from mitmproxy import ctx, options
from mitmproxy.proxy.layers.http import (
    HttpRequestHeadersHook,
    HttpRequestHook,
    HttpResponseHeadersHook,
    HttpResponseHook,
)
from mitmproxy.test import tflow
from mitmproxy.tools.dump import DumpMaster

from brownout.proxy.master import BrownoutMaster

HOOKS = (HttpRequestHeadersHook, HttpRequestHook, HttpResponseHeadersHook, HttpResponseHook)


class Noop:
    def request(self, flow: object) -> None:
        return None


async def _per_hook_us(master: object, rounds: int) -> dict[str, float]:
    # Addons read `mitmproxy.ctx`, which the last master created points at: point it at this one.
    ctx.master, ctx.options = master, master.options  # type: ignore[attr-defined]
    addons = master.addons  # type: ignore[attr-defined]
    out = {}
    for hook in HOOKS:
        events = [hook(tflow.tflow(resp=True)) for _ in range(rounds + 1)]  # a flow per request, as in traffic
        await addons.handle_lifecycle(events.pop())  # warm-up
        start = time.perf_counter()
        for event in events:
            await addons.handle_lifecycle(event)
        out[hook.name] = (time.perf_counter() - start) / rounds * 1e6
    return out


async def main(rounds: int = 1000) -> None:
    dump = DumpMaster(options.Options(), with_termlog=False, with_dumper=False)
    ours = BrownoutMaster(options.Options())
    for master in (dump, ours):
        master.addons.add(Noop())
    print(f"us per hook: mitmproxy DumpMaster ({len(dump.addons.chain)} addons) | BrownoutMaster "
          f"({len(ours.addons.chain)} addons)")  # fmt: skip
    for _ in range(3):  # interleaved, so a busy machine slows both alike
        a = await _per_hook_us(dump, rounds)
        b = await _per_hook_us(ours, rounds)
        row = "  ".join(f"{name} {a[name]:6.1f} | {b[name]:4.1f}" for name in a)
        print(f"{row}   request total {sum(a.values()):6.1f} | {sum(b.values()):5.1f} us")


if __name__ == "__main__":
    asyncio.run(main())
