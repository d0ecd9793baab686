"""The two eras of MCP, and which one a request speaks.

- The handshake era (protocol versions 2024-11-05 to 2025-11-25): `initialize` negotiates a version,
  streamable HTTP hands out an `Mcp-Session-Id` that every later request carries (with
  `MCP-Protocol-Version` since 2025-06-18), and the server talks back on a GET stream.
- The 2026-07-28 revision ("modern"): no handshake and no session. Every request carries its envelope
  in `params._meta` (protocol version, client capabilities, client info), streamable HTTP requests
  repeat the method and the name they act on in `Mcp-Method` / `Mcp-Name`, `server/discover` replaces
  `initialize`, and change notifications come only on a `subscriptions/listen` stream.

A request's version is its `_meta` envelope's or its `MCP-Protocol-Version` header's (else the one its
session negotiated, which the caller knows); its era follows from the version, or from what only one
era has (an envelope, a session id, `initialize`).
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Any

__all__ = [
    "CLIENT_CAPABILITIES_KEY",
    "ERAS",
    "HANDSHAKE",
    "HANDSHAKE_VERSIONS",
    "METHOD_ERAS",
    "MODERN",
    "MODERN_VERSIONS",
    "PROTOCOL_VERSION_KEY",
    "SUBSCRIPTION_ID_KEY",
    "decode_header_value",
    "envelope_version",
    "era_of",
    "listened_lists",
]

HANDSHAKE = "handshake"
MODERN = "modern"
ERAS = (HANDSHAKE, MODERN)

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS = ("2026-07-28",)

# The 2026-07-28 envelope and stream keys, as the spec spells them.
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
SUBSCRIPTION_ID_KEY = "io.modelcontextprotocol/subscriptionId"

# Client methods only one era has (2026-07-28 removed the lifecycle, ping, logging and the subscribe pair).
METHOD_ERAS: dict[str, str] = {
    "initialize": HANDSHAKE,
    "notifications/initialized": HANDSHAKE,
    "ping": HANDSHAKE,
    "logging/setLevel": HANDSHAKE,
    "resources/subscribe": HANDSHAKE,
    "resources/unsubscribe": HANDSHAKE,
    "notifications/roots/list_changed": HANDSHAKE,
    "server/discover": MODERN,
    "subscriptions/listen": MODERN,
}

# What a subscriptions/listen filter flag asks for, by the list it announces.
_LISTEN_FLAGS = {"toolsListChanged": "tools", "promptsListChanged": "prompts", "resourcesListChanged": "resources"}
_B64 = re.compile(r"^=\?base64\?(?P<payload>.*)\?=$")


def envelope_version(params: Any) -> str | None:
    """The protocol version of a 2026-07-28 request's `_meta` envelope, else None."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    version = meta.get(PROTOCOL_VERSION_KEY) if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def era_of(
    version: str | None, method: str | None = None, *, envelope: bool = False, in_session: bool = False
) -> str | None:
    """The era a request speaks: by a method only one era has, by its version when that is a known one,
    else by what only one era carries (a `_meta` envelope, a session id); None when nothing tells.
    Versions are compared as names, never as dates: an unknown one says nothing by itself."""
    if method in METHOD_ERAS:
        return METHOD_ERAS[method]
    if version in MODERN_VERSIONS:
        return MODERN
    if version in HANDSHAKE_VERSIONS:
        return HANDSHAKE
    if envelope:
        return MODERN
    return HANDSHAKE if in_session else None


def listened_lists(params: Any) -> list[str]:
    """The lists whose changes a subscriptions/listen request asks to hear of (tools, prompts, resources)."""
    wanted = params.get("notifications") if isinstance(params, dict) else None
    if not isinstance(wanted, dict):
        return []
    return [which for flag, which in _LISTEN_FLAGS.items() if wanted.get(flag) is True]


def decode_header_value(value: str) -> str | None:
    """An `Mcp-Name` (or `Mcp-Param-*`) header value: verbatim, or the UTF-8 in its `=?base64?...?=` wrapper
    (which clients use for names an HTTP header cannot carry); None for a malformed wrapper."""
    found = _B64.fullmatch(value)
    if found is None:
        return value
    try:
        return base64.b64decode(found["payload"], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
