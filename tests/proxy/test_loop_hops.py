"""Other threads change a running proxy only on its event loop (proxy/onloop.py): the handle's
`call`, and through it the control API's rule toggles and reloads."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import httpx
import pytest

TOKEN = "hop-t0ken"
CONFIG = f"""\
version: 1
rules:
  - {{name: slow, match: {{path: /tools/*}}, fault: {{type: latency, delay_ms: 1}}}}
control: {{token: {TOKEN}}}
"""


def spy(obj: Any, name: str, threads: list[int], monkeypatch: pytest.MonkeyPatch) -> None:
    """Record the thread each call of `obj.name` runs on."""
    original = getattr(obj, name)

    def recorded(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(obj, name, recorded)


def test_handle_call_runs_on_the_proxys_loop_and_raises_its_error_here(brownout_proxy: Any) -> None:
    proxy = brownout_proxy()
    loop_thread = proxy.call(threading.get_ident)
    assert loop_thread != threading.get_ident()
    assert proxy.call(asyncio.get_running_loop) is proxy.addon.on_loop.loop
    with pytest.raises(ZeroDivisionError):
        proxy.call(lambda: 1 / 0)


def test_the_control_api_changes_the_proxy_on_its_loop(
    brownout_proxy: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = brownout_proxy(CONFIG)
    loop_thread = proxy.call(threading.get_ident)
    toggles: list[int] = []
    applies: list[int] = []
    spy(proxy.addon.engine, "set_rule_enabled", toggles, monkeypatch)
    spy(proxy.addon, "apply_config", applies, monkeypatch)
    base = f"http://127.0.0.1:{proxy.addon.control.port}"
    auth = {"Authorization": f"Bearer {TOKEN}"}

    r = httpx.put(f"{base}/rules/slow", json={"enabled": False}, headers=auth)
    assert r.status_code == 200, r.text
    r = httpx.post(f"{base}/reload", headers=auth)
    assert r.status_code == 200 and r.json()["ok"], r.text

    assert toggles == [loop_thread] and applies == [loop_thread]
