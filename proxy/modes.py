"""`--mode`: checked with mitmproxy's own parser before anything starts, stricter where brownout needs it.

mitmproxy reads `reverse:foo` as `https://foo:443`, and `reverse:tcp://...` as a raw tunnel that no
HTTP hook ever sees: both start and then fail, or bypass brownout, without a word. So brownout wants
the scheme written out, and HTTP(S), the only traffic it understands.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from mitmproxy.proxy import mode_specs

__all__ = ["REVERSE_FORM", "check_mode"]

REVERSE_FORM = "reverse:https://HOST[:PORT] or reverse:http://HOST[:PORT]"
_REVERSE_SCHEMES = ("http", "https")


def check_mode(spec: str) -> str:
    """`spec`, unchanged, if brownout can run it; else a ValueError that says what to write instead."""
    head = spec.rpartition("@")[0] or spec  # mitmproxy's rule: a listen address follows the last '@'
    name, _, data = head.partition(":")
    try:
        mode = mode_specs.ProxyMode.parse(spec)
    except ValueError as e:
        mode, problem = None, str(e)
        if name.lower() != "reverse":
            raise ValueError(
                f"{spec!r}: {e}; brownout runs as 'regular' (the default: clients set HTTP(S)_PROXY) or as "
                f"{REVERSE_FORM} (clients that take a base URL)"
            ) from e
    if name.lower() != "reverse":
        return spec
    if "://" not in data:
        guess = f"; did you mean reverse:https://{data} or reverse:http://{data}?" if data else ""
        raise ValueError(f"{spec!r}: the upstream URL needs its scheme: {REVERSE_FORM}{guess}")
    url = urlsplit(data) if _splits(data) else None
    if url is not None and url.path.strip("/"):
        # A base URL pasted whole (https://api.openai.com/v1): the path belongs to the client.
        raise ValueError(
            f"{spec!r}: the upstream is an origin, without a path (brownout forwards each request's own path); "
            f"write reverse:{url.scheme}://{url.netloc} and keep {url.path.rstrip('/')} in the client's base URL"
        )
    if isinstance(mode, mode_specs.ReverseMode) and mode.scheme not in _REVERSE_SCHEMES:
        problem = f"brownout sees HTTP only: a {mode.scheme}:// upstream would pass through it unseen"
    elif mode is not None:
        return spec
    raise ValueError(f"{spec!r}: {problem}; write {REVERSE_FORM}")


def _splits(url: str) -> bool:
    try:
        urlsplit(url)
    except ValueError:  # e.g. an unclosed IPv6 bracket: mitmproxy's message says more
        return False
    return True
