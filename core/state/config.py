"""The `state:` config section: which backend keeps the state replicas and workers share."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, Self
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, model_validator

from brownout.core.config import Model

__all__ = ["REDIS_SCHEMES", "StateConfig"]

REDIS_SCHEMES = ("redis", "rediss", "unix")


class StateConfig(Model):
    """The `state:` section: `memory` (one process, nothing to install) or `redis` (a fleet shares it)."""

    backend: Literal["memory", "redis"] = Field(
        "memory", description="memory: this process only. redis: replicas and workers share counters and switches."
    )
    url: str | None = Field(
        None, description="redis://[:PASSWORD@]HOST[:PORT][/DB], rediss:// for TLS, unix:///PATH; else url_env."
    )
    url_env: str = Field("BROWNOUT_REDIS_URL", description="Environment variable holding the URL when url is unset.")
    key_prefix: str = Field(
        "brownout:", min_length=1, max_length=64, description="Prefix of every key: fleets that share one Redis."
    )
    timeout_ms: float = Field(50.0, gt=0, le=10_000, description="Budget of each call; a slower call counts as failed.")
    connect_timeout_ms: float = Field(
        500.0, gt=0, le=60_000, description="Budget of opening a connection (off the request path where it can be)."
    )
    max_connections: int = Field(
        32, ge=1, le=1_000, description="Connections a process opens to Redis at most; a call waits for a free one."
    )
    poll_interval_ms: float = Field(
        250.0, ge=10, le=1_000, description="How often a process reads the fleet's switches (pause, rule toggles)."
    )
    lease_ttl_s: float = Field(
        30.0, gt=0, le=3_600, description="A max_concurrent slot a dead process held is freed after this long."
    )

    @model_validator(mode="after")
    def _redis_needs_a_url(self) -> Self:
        if self.backend != "redis":
            return self
        url = self.resolve_url()
        if url is None:
            raise ValueError(f"backend redis needs a url: set state.url or the environment variable {self.url_env}")
        scheme = urlsplit(url).scheme
        if scheme not in REDIS_SCHEMES:
            raise ValueError(
                f"state.url must start with {', '.join(s + '://' for s in REDIS_SCHEMES)}; got {scheme or 'no'} scheme"
            )
        return self

    def resolve_url(self, environ: Mapping[str, str] | None = None) -> str | None:
        """The configured URL, else the one in `url_env`; None when neither is set."""
        env = os.environ if environ is None else environ
        return self.url or env.get(self.url_env) or None

    def display_url(self, environ: Mapping[str, str] | None = None) -> str:
        """The URL with any password blanked: for logs, start-up lines and /status."""
        url = self.resolve_url(environ)
        if url is None:
            return ""
        parts = urlsplit(url)
        if parts.password is None and not parts.username:
            return url
        host = parts.hostname or ""
        netloc = f"{host}:{parts.port}" if parts.port else host
        return urlunsplit((parts.scheme, f"***@{netloc}", parts.path, parts.query, parts.fragment))
