"""`brownout run` freezes its start-up heap (the price table included) out of the collector's reach, and
moves the collector's passes to the loop's idle moments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = """
import asyncio, gc, os, signal, sys
from brownout.proxy.serve import serve_until_signal

tasks = []
threshold = gc.get_threshold()[0]

def ready(handle):
    async def check():
        while gc.get_freeze_count() == 0:
            await asyncio.sleep(0.02)
        import genai_prices.data as data
        live = {id(o) for o in gc.get_objects()}
        print("price table frozen:", id(data.providers) not in live, flush=True)
        print("collections wait for idle moments:", gc.get_threshold()[0] == 4 * threshold, flush=True)
        os.kill(os.getpid(), signal.SIGTERM)
    tasks.append(asyncio.get_running_loop().create_task(check()))

options = ["brownout_metrics_listen=127.0.0.1:0", "brownout_control_listen=127.0.0.1:0"]
asyncio.run(serve_until_signal(ready, listen="127.0.0.1:0", confdir=sys.argv[1], extra_options=options))
"""


@pytest.mark.timeout(60)
def test_the_price_table_loaded_at_start_is_frozen_with_the_rest(confdir: Path) -> None:
    # Loaded on a thread at start; frozen after it, a full collection would walk it again and again.
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(confdir)], capture_output=True, text=True, timeout=50, check=False
    )
    assert "price table frozen: True" in done.stdout, done.stdout + done.stderr
    # The collector's own threshold is only a backstop: passes wait for the loop's idle moments (proxy/heap.py).
    assert "collections wait for idle moments: True" in done.stdout, done.stdout + done.stderr
