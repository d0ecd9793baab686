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
        self._expected = token.encode() if token else None
        self.control_url = control_url

    def intercept(self, flow: http.HTTPFlow) -> bool:
        """In requestheaders: True (and the token removed) when the request carries the control token."""
        if self._expected is None:
            return False
        # The raw bytes: a value that is not UTF-8 is compared too, never decoded (nor a reason to fail).
        if not any(
            name.lower() == b"authorization" and self._carries(value) for name, value in flow.request.headers.fields
        ):
            return False
        flow.request.headers.pop("authorization")
        flow.metadata[MISDIRECTED] = True
        return True

    def _carries(self, value: bytes) -> bool:
        # The scheme is case-insensitive (RFC 9110): `bearer`, `BEARER` and `Bearer` all carry the token.
        scheme, _, credential = value.strip().partition(b" ")
        assert self._expected is not None
        return scheme.lower() == b"bearer" and hmac.compare_digest(credential.strip(), self._expected)

    def answer(self, flow: http.HTTPFlow) -> None:
        """In request: answer locally; upstream never sees the request."""
        where = f" ({self.control_url})" if self.control_url else ""
        body = {
            "error": f"this is brownout's proxy port, not its control API{where}; "
            "a request carrying the control token is never forwarded"
        }
        flow.response = http.Response.make(421, json.dumps(body).encode(), {"content-type": "application/json"})
