"""What counts as a credential on the wire: header names and query parameters never kept as sent."""

from __future__ import annotations

import re

__all__ = ["SECRET_FIELDS", "SECRET_HEADERS", "SECRET_PARAMS", "is_secret_param", "redact_query"]

# Never copied into the exchange: they would otherwise reach spans, logs, reports and cassettes.
SECRET_HEADERS = frozenset(
    {"authorization", "x-api-key", "api-key", "x-goog-api-key", "cookie", "set-cookie", "proxy-authorization"}
)
# Query parameters whose values are credentials (Gemini's `key`, signed URLs' `sig`, OAuth's
# `code` and tokens, S3 presigned URLs), blanked wherever a URL is kept. Compared case-insensitively.
SECRET_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "token",
        "access_token",
        "id_token",
        "refresh_token",
        "auth",
        "code",
        "secret",
        "client_secret",
        "password",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
    }
)
# JSON body fields whose values are credentials: the query names without the generic ones (a tool's
# `code`, a pagination `token`, a map's `key` are data). Compared case-insensitively.
SECRET_FIELDS = frozenset(
    {"api_key", "apikey", "api-key", "access_token", "id_token", "refresh_token", "client_secret", "password", "secret"}
)
_SECRET_QUERY = re.compile(rf"(?i)(?<=[?&])({'|'.join(map(re.escape, sorted(SECRET_PARAMS)))})=[^&#]*")


def is_secret_param(name: str) -> bool:
    return name.lower() in SECRET_PARAMS


def redact_query(path: str) -> str:
    """Blank the values of secret-looking query parameters (`?key=...` becomes `?key=REDACTED`)."""
    if "?" not in path:
        return path
    return _SECRET_QUERY.sub(lambda m: f"{m.group(1)}=REDACTED", path)
