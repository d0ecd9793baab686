"""`brownout exec`'s endpoints: free ports for /metrics and the control API, a token, and their addresses.

Fixed default ports would make a second `exec` (a parallel CI job) start without metrics or
control API; here every endpoint of an exec gets its own port unless the command line sets one, and
the control API gets a generated token unless the config or the environment gives one.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Sequence
from typing import Any

__all__ = ["endpoint_env", "exec_options"]


def exec_options(set_options: Sequence[str], config_path: str | None) -> list[str]:
    """The `--set` options for an exec: free ports where the user named none; sets up the token."""
    options = list(set_options)
    named = {s.partition("=")[0] for s in options}
    for option in ("brownout_metrics_listen", "brownout_control_listen"):
        if option not in named:
            options.append(f"{option}=127.0.0.1:0")
    _ensure_token(config_path)
    return options


def _ensure_token(config_path: str | None) -> None:
    from brownout.proxy.config import BrownoutConfig
    from brownout.proxy.configload import load_config

    control = (load_config(config_path) if config_path else BrownoutConfig()).control
    if control.enabled and control.resolve_token() is None:
        # The child inherits it: `brownout ctl` inside the command just works, and nobody else can.
        os.environ[control.token_env] = secrets.token_urlsafe(24)


def endpoint_env(handle: Any) -> dict[str, str]:
    """BROWNOUT_METRICS_URL, BROWNOUT_CONTROL_URL and BROWNOUT_TOKEN of a running exec proxy, where on."""
    env: dict[str, str] = {}
    addon = handle.addon
    port = addon.pipeline.exporters.metrics_port
    if port is not None:
        env["BROWNOUT_METRICS_URL"] = f"http://127.0.0.1:{port}/metrics"
    if addon.control is not None:
        env["BROWNOUT_CONTROL_URL"] = addon.control.url
        token = addon.config.control.resolve_token()
        if token:
            env["BROWNOUT_TOKEN"] = token
    return env
