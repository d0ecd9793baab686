"""Secrets inside URLs: webhook and bot layouts, key-shaped and high-entropy path segments, query values.

A webhook URL is its own credential (Slack, Discord, Teams, Zapier), a Telegram bot's token is a path
segment, a key is sometimes sent as one. `redact_target` blanks those segments and keeps the rest of
the path readable (`/services/T000/B000/REDACTED`), then blanks secret query parameters and keys of
known formats anywhere in the query. Ids stay: UUIDs, numbers, ObjectIds, prefixed resource ids
(`resp_...`, `msg_...`, `file-...`) and model names (`gpt-4o-2024-08-06`) are not secrets, and a path
keeps them so logs and matches still tell requests apart. The result depends on the text alone and a
redacted target is its own redaction, so a recording and the live request it answers blank alike.
"""

from __future__ import annotations

import re

from brownout.core.secrets import MARK, redact_keys, redact_query

__all__ = ["redact_target", "redact_url", "secret_segment"]

# Layouts whose secret is a path segment; each regex runs on the path alone and its groups are blanked.
_LAYOUTS = (
    # Slack incoming webhooks: /services/T<team>/B<app>/<secret>
    re.compile(r"^/services/T[A-Z0-9]+/B[A-Z0-9]+/([^/]+)"),
    # Slack workflow webhooks and triggers: the last segment
    re.compile(r"^/(?:workflows|triggers)/T[A-Z0-9]+/(?:[^/]+/)*([^/]+)/?$"),
    # Discord (discord.com and discordapp.com): /api[/v10]/webhooks/<id>/<token>
    re.compile(r"^/api(?:/v\d+)?/webhooks/\d+/([^/]+)"),
    # Telegram bot API: /bot<id>:<secret>/<method>, /file/bot<id>:<secret>/<path>
    re.compile(r"^(?:/file)?/bot(\d+(?::|%3[Aa])[^/]+)"),
    # Microsoft Teams and Office 365 connectors: everything after IncomingWebhook
    re.compile(r"/IncomingWebhook/([^/]+)(?:/([^/]+))?(?:/([^/]+))?"),
    # Zapier catch hooks: /hooks/catch/<account>/<secret>
    re.compile(r"^/hooks/catch/\d+/([^/]+)"),
)
# Where any layout could apply: one cheap test before the layouts run.
_LAYOUT_PREFIXES = ("/services/", "/workflows/", "/triggers/", "/api/", "/bot", "/file/bot", "/hooks/catch/")
# Segments named so carry their secret in the next segment, even when it is UUID-shaped (n8n and many
# other services put a UUID there as the webhook's only credential).
_WEBHOOK = frozenset({"hook", "hooks", "webhook", "webhooks"})
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
# A lowercase word, a separator and letters and digits: a resource id with its type (resp_..., msg_...,
# file-...), never a secret by its shape. Keys with such prefixes are KEY_FORMATS.
_PREFIXED_ID = re.compile(r"[a-z]{2,12}[_-][A-Za-z0-9]+")
_RUN = re.compile(r"[A-Za-z0-9]{20,}")
_HEX = re.compile(r"[0-9a-fA-F]+")
_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_MIN_WORD_CHARS = 3.0
_HEX_SECRET_MIN = 32  # shorter hex runs are ids (24-digit ObjectIds, short hashes)
_LONG_SEGMENT = re.compile(r"[^/]{15,}")  # nothing shorter is a key format or a high-entropy run
# A base64url token's dashes and underscores break it into short runs: 32+ characters with capitals
# and digits, a dash or underscore about every 32 characters, falling into short words all along, are
# random data all the same. Model names have a dash every few characters, and words.
_TOKEN = re.compile(r"[A-Za-z0-9_\-]{32,}")
_TOKEN_PART_CHARS = 8


def secret_segment(segment: str, previous: str = "") -> bool:
    """Whether a path segment is a secret by its shape: a UUID after a webhook segment, or a long run
    of letters and digits that reads like random data (a 32+ digit hex string, a base64-like token)."""
    if segment == MARK or _PREFIXED_ID.fullmatch(segment):
        return False
    if previous.lower() in _WEBHOOK and _UUID.fullmatch(segment):
        return True
    if any(_random_run(m.group()) for m in _RUN.finditer(segment)):
        return True
    return _TOKEN.fullmatch(segment) is not None and _random_token(segment)


def _random_run(run: str) -> bool:
    if _HEX.fullmatch(run):
        return len(run) >= _HEX_SECRET_MIN
    if any(c.isupper() for c in run) and any(c.islower() for c in run):
        # Split as camelCase and at digits: a name is long words (Mistral7BInstructV02: 3.3 letters a
        # word), random text falls into one- and two-letter pieces all along.
        return len(run) < _MIN_WORD_CHARS * len(_WORD.findall(run))
    digits = sum(c.isdigit() for c in run)
    return 2 <= digits < len(run)  # one case, letters and digits mixed: words rarely hold two digits


def _random_token(segment: str) -> bool:
    if not (any(c.isupper() for c in segment) and any(c.isdigit() for c in segment)):
        return False
    separators = segment.count("-") + segment.count("_")
    if separators * _TOKEN_PART_CHARS > len(segment):
        return False  # many parts: a name (Qwen2-VL-72B-Instruct-GPTQ-Int4-AWQ), not random bytes
    return len(segment) - separators < _MIN_WORD_CHARS * len(_WORD.findall(segment))


def _redact_path(path: str) -> str:
    for layout in _LAYOUTS if path.startswith(_LAYOUT_PREFIXES) or "/IncomingWebhook/" in path else ():
        m = layout.search(path)
        if m is not None:
            for i in range(m.lastindex or 0, 0, -1):
                if m.group(i) is not None:
                    path = path[: m.start(i)] + MARK + path[m.end(i) :]
    if _LONG_SEGMENT.search(path) is None:
        return path
    path = redact_keys(path)
    segments = path.split("/")
    for i, segment in enumerate(segments):
        if len(segment) >= 20 and secret_segment(segment, segments[i - 1] if i else ""):
            segments[i] = MARK
    return "/".join(segments)


def redact_target(target: str) -> str:
    """A request target (path and query) as brownout keeps it, secrets blanked (see the module's doc)."""
    path, sep, query = target.partition("?")
    path = _redact_path(path)
    if not sep:
        return path
    return path + sep + redact_keys(redact_query(sep + query)[1:])


def redact_url(url: str) -> str:
    """A full URL (`scheme://host/path?query`) as brownout keeps it."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return redact_target(url)
    slash = rest.find("/")
    query = rest.find("?")
    cut = min(i for i in (slash, query, len(rest)) if i >= 0)
    return f"{scheme}://{rest[:cut]}{redact_target(rest[cut:])}"
