"""brownout's own endpoints when it runs for one command: free ports, a token, and their addresses.

`brownout exec`, `brownout demo`, experiments and the pytest fixture each run a proxy for one job.
Fixed default ports would make a second one (a parallel CI job, a `brownout run` in another
terminal) fail to bind; so /metrics and the control API get free ports unless the config file or
the command line names an address, and an exec's control API gets a generated token.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterable
from typing import Any

__all__ = ["endpoint_env", "ensure_control_token", "free_endpoints", "otlp_env"]

FREE = "127.0.0.1:0"


def free_endpoints(config: Any, set_options: Iterable[str] = ()) -> dict[str, str]:
    """`--set` options giving /metrics and the control API free ports, where neither the config
    (`listen` written in the file) nor `set_options` names one."""
    named = {s.partition("=")[0] for s in set_options}
    options: dict[str, str] = {}
    if "brownout_metrics_listen" not in named and "listen" not in config.exporters.prometheus.model_fields_set:
        options["brownout_metrics_listen"] = FREE
    if "brownout_control_listen" not in named and "listen" not in config.control.model_fields_set:
        options["brownout_control_listen"] = FREE
    return options


def ensure_control_token(config: Any) -> None:
    """Give the control API a generated token when the config and the environment have none.

    It goes into this process's environment (`control.token_env`), which the command inherits: a
    `brownout ctl` inside it just works, and nobody else can drive the proxy."""
    control = config.control
    if control.enabled and control.resolve_token() is None:
        os.environ[control.token_env] = secrets.token_urlsafe(24)


def otlp_env(endpoint: str) -> dict[str, str]:
    """The OTEL_* variables that point an agent's OTLP exporter at brownout's receiver (http://host:port)."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
        # A signal endpoint the agent set for itself would win over the base one: override it too.
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{endpoint}/v1/traces",
        "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }


def endpoint_env(handle: Any) -> dict[str, str]:
    """BROWNOUT_METRICS_URL, BROWNOUT_CONTROL_URL and BROWNOUT_TOKEN of a running proxy, where on; with the
    OTLP receiver on, the OTEL_* variables that point the agent's exporter at it."""
    env: dict[str, str] = {}
    addon = handle.addon
    join = addon.pipeline.join
    if join is not None and join.receiver is not None and join.receiver.endpoint is not None:
        env.update(otlp_env(join.receiver.endpoint))
    port = addon.pipeline.exporters.metrics_port
    if port is not None:
        env["BROWNOUT_METRICS_URL"] = f"http://127.0.0.1:{port}/metrics"
    if addon.control is not None:
        env["BROWNOUT_CONTROL_URL"] = addon.control.url
        token = addon.config.control.resolve_token()
        if token:
            env["BROWNOUT_TOKEN"] = token
    return env
