"""Which agent session an exchange belongs to, without any change to the agent."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

__all__ = ["proxy_auth_user", "resolve_session", "trace_id_of"]


def trace_id_of(traceparent: str | None) -> str | None:
    """The 32-hex trace id of a W3C traceparent, or None when absent or malformed."""
    if not traceparent:
        return None
    parts = traceparent.strip().split("-")
    if len(parts) < 4 or len(parts[1]) != 32 or parts[1] == "0" * 32:
        return None
    try:
        int(parts[1], 16)
    except ValueError:
        return None
    return parts[1].lower()


def proxy_auth_user(value: str | None) -> str | None:
    """The username of a `Proxy-Authorization: Basic ...` header (`HTTP_PROXY=http://run-17@host:port`)."""
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        user = base64.b64decode(token.strip(), validate=True).decode("utf-8", "replace").partition(":")[0]
    except (binascii.Error, ValueError):
        return None
    return user or None


def resolve_session(headers: Mapping[str, str], proxy_user: str | None, client_ip: str) -> str:
    """First present of: traceparent trace id, x-brownout-session, proxy username, client address."""
    trace_id = trace_id_of(headers.get("traceparent"))
    if trace_id:
        return trace_id
    explicit = headers.get("x-brownout-session")
    if explicit:
        # Header bytes that are no UTF-8 arrive as lone surrogates, which no log or file could write.
        return explicit.encode("utf-8", "surrogateescape").decode("utf-8", "replace").strip()[:128]
    if proxy_user:
        return proxy_user[:128]
    return f"client:{client_ip}"
