"""A client that goes away mid-request on the control API is an expected event: no traceback, no
internal error, and the API keeps serving.
"""

from __future__ import annotations

import logging
import socket
import struct
from typing import Any

import httpx
import pytest

TOKEN = "control-token-for-the-drop-test"


def leave(port: int, sent: bytes, *, rst: bool) -> None:
    """Send `sent` to the control API and go away at once: FIN, or RST when `rst`."""
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(sent)
    if rst:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


@pytest.mark.timeout(60)
def test_clients_leaving_mid_request_are_quiet(brownout_proxy: Any, caplog: Any, capfd: Any) -> None:
    proxy = brownout_proxy(f"control: {{token: {TOKEN}}}\n")
    port = proxy.addon.control.port
    auth = f"Authorization: Bearer {TOKEN}\r\n".encode()
    cases = [
        b"GET /sta",  # mid request line
        b"GET /status HTTP/1.1\r\n" + auth[:20],  # mid headers
        b"GET /status HTTP/1.1\r\n" + auth + b"\r\n",  # the whole request: gone before the answer
        b"PUT /rules/r HTTP/1.1\r\n" + auth + b"Content-Length: 200\r\n\r\n" + b'{"enabled": ',  # mid body
        b"GET /violations HTTP/1.1\r\n" + auth + b"\r\n",
    ]
    with caplog.at_level(logging.DEBUG):
        for _ in range(3):
            for sent in cases:
                for rst in (False, True):
                    leave(port, sent, rst=rst)
        # Still serving, and every abandoned request has been handled by now.
        with httpx.Client(base_url=proxy.addon.control.url, trust_env=False) as client:
            for _ in range(3):
                r = client.get("/status", headers={"Authorization": f"Bearer {TOKEN}"})
                assert r.status_code == 200
    assert proxy.addon.guard.snapshot() == {}
    loud = [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("brownout.proxy.control")]
    assert loud == [], [r.getMessage() for r in loud]
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception occurred" not in err, err
