"""The supervisor's /metrics and control API, served at the addresses the config (or --set) gives them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server

from brownout.core.config import parse_listen
from brownout.proxy.certs import connect_host
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.control import ControlServer
from brownout.proxy.workers.control import FleetControl
from brownout.proxy.workers.metrics import FleetMetrics
from brownout.proxy.workers.plan import FleetSetupError

__all__ = ["serving"]


@contextlib.contextmanager
def serving(
    config: BrownoutConfig, overrides: dict[str, str], control: FleetControl, metrics: FleetMetrics
) -> Iterator[dict[str, str]]:
    """Serve both while the block runs; yields BROWNOUT_METRICS_URL / BROWNOUT_CONTROL_URL where on.
    FleetSetupError naming the address that cannot be bound (nothing is served then)."""
    env: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        stack.callback(metrics.close)
        stack.callback(control.close)
        if config.exporters.prometheus.enabled:
            listen = overrides.get("brownout_metrics_listen") or config.exporters.prometheus.listen
            registry = CollectorRegistry()
            registry.register(metrics)
            host, port = parse_listen(listen)
            try:
                server, _ = start_http_server(port, addr=host, registry=registry)
            except OSError as e:
                raise FleetSetupError(f"cannot serve /metrics on {listen}: {e.strerror or e}") from e
            stack.callback(_close, server)
            env["BROWNOUT_METRICS_URL"] = f"http://{_url_host(host)}:{server.server_port}/metrics"
        if config.control.enabled:
            listen = overrides.get("brownout_control_listen") or config.control.listen
            token = config.control.resolve_token()
            api = ControlServer(control, listen=listen, token=token, token_env=config.control.token_env)
            try:
                api.start()
            except OSError as e:
                raise FleetSetupError(f"cannot serve the control API on {listen}: {e.strerror or e}") from e
            stack.callback(api.stop)
            env["BROWNOUT_CONTROL_URL"] = api.url
        yield env


def _close(server: Any) -> None:
    server.shutdown()
    server.server_close()


def _url_host(host: str) -> str:
    host = connect_host(host)
    return f"[{host}]" if ":" in host else host
