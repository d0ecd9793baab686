"""The control API's token never leaves brownout, whatever port a request was sent to.

A client that sends its control request to the proxy port instead (a mixed-up port, a base URL
pointing at brownout in reverse mode) would otherwise have it forwarded upstream with the token in
`Authorization`. Such a request is answered here, with the token dropped before anything else sees it.
"""

from __future__ import annotations

import hmac
import json

from mitmproxy import http

__all__ = ["MISDIRECTED", "TokenShield"]

MISDIRECTED = "brownout.misdirected"  # flow.metadata key


class TokenShield:
    """Spots requests that carry the control API's bearer token; answers them with 421."""

    __slots__ = ("_expected", "control_url")

    def __init__(self, token: str | None, control_url: str = "") -> None:
        self._expected = f"Bearer {token}".encode() if token else None
        self.control_url = control_url

    def intercept(self, flow: http.HTTPFlow) -> bool:
        """In requestheaders: True (and the token removed) when the request carries the control token."""
        if self._expected is None:
            return False
        sent = flow.request.headers.get("authorization")
        # mitmproxy decodes header bytes as UTF-8 with surrogateescape: this gives back the bytes
        # sent, even when they are no UTF-8 (a latin-1 value is a wrong token, not an error).
        if sent is None or not hmac.compare_digest(sent.encode("utf-8", "surrogateescape"), self._expected):
            return False
        flow.request.headers.pop("authorization")
        flow.metadata[MISDIRECTED] = True
        return True

    def answer(self, flow: http.HTTPFlow) -> None:
        """In request: answer locally; upstream never sees the request."""
        where = f" ({self.control_url})" if self.control_url else ""
        body = {
            "error": f"this is brownout's proxy port, not its control API{where}; "
            "a request carrying the control token is never forwarded"
        }
        flow.response = http.Response.make(421, json.dumps(body).encode(), {"content-type": "application/json"})
