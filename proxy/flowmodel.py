"""The one module that turns mitmproxy flows into `Exchange` objects."""

from __future__ import annotations

import logging

from mitmproxy import http

from brownout.core.exchange import Exchange
from brownout.core.secret_paths import redact_target
from brownout.core.secrets import SecretHeaders
from brownout.core.wire.base import RequestInfo
from brownout.proxy.sessions import resolve_session

__all__ = ["new_exchange", "request_info", "response_headers", "retry_count"]

log = logging.getLogger(__name__)


def _lower_headers(headers: http.Headers) -> dict[str, str]:
    # Duplicate headers collapse to the last one: enough for recognition and policy.
    return {k.lower(): v for k, v in headers.items(multi=True)}


def request_info(flow: http.HTTPFlow, headers: dict[str, str], body: bytes, *, host: str | None = None) -> RequestInfo:
    """What wire-format recognition may see of a request; `host`: its `pretty_host`, when already worked out."""
    path, _, query = flow.request.path.partition("?")
    host = flow.request.pretty_host if host is None else host
    return RequestInfo(method=flow.request.method, host=host, path=path, query=query, headers=headers, body=body)


def new_exchange(
    flow: http.HTTPFlow,
    proxy_user: str | None,
    capture_max_bytes: int,
    body: bytes,
    secret: SecretHeaders,
    *,
    host: str | None = None,
) -> tuple[Exchange, bytes, dict[str, str]]:
    """A fresh exchange for a request with its (already decoded) body; also the lower-cased headers.
    `host`: the request's `pretty_host`, when the caller has it (working it out parses the authority).

    Nothing secret is copied: neither `secret` headers nor secrets in the path or query."""
    req = flow.request
    headers = _lower_headers(req.headers)
    client_ip = flow.client_conn.peername[0] if flow.client_conn.peername else "unknown"
    ex = Exchange(
        id=flow.id,
        session=resolve_session(headers, proxy_user, client_ip),
        method=req.method,
        scheme=req.scheme,
        host=req.pretty_host if host is None else host,
        port=req.port,
        path=redact_target(req.path),
        client=f"{client_ip}:{flow.client_conn.peername[1]}" if flow.client_conn.peername else client_ip,
        request_headers=secret.without(headers),
        traceparent=headers.get("traceparent"),
        tracestate=headers.get("tracestate"),
        retry_count=retry_count(headers),
        request_bytes=len(body),
        capture_max_bytes=capture_max_bytes,
    )
    ex.timings.start = req.timestamp_start
    return ex, body, headers


def retry_count(headers: dict[str, str]) -> int | None:
    """Which retry this request is: the openai and anthropic SDKs' `x-stainless-retry-count`, or the AWS
    SDKs' `amz-sdk-request: attempt=N; max=M` (attempt 1 is the first try)."""
    retry = headers.get("x-stainless-retry-count")
    if retry is not None:
        return int(retry) if retry.isdigit() else None
    for part in headers.get("amz-sdk-request", "").split(";"):
        name, _, value = part.strip().partition("=")
        if name == "attempt" and value.isdigit() and int(value) > 0:
            return int(value) - 1
    return None


def response_headers(flow: http.HTTPFlow, secret: SecretHeaders) -> dict[str, str]:
    """The response headers, lower-cased, `secret` ones dropped."""
    assert flow.response is not None
    return secret.without(_lower_headers(flow.response.headers))
