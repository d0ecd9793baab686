"""What `brownout run --workers N` decides before any process starts: whether the fleet can run, which
options go to the workers and which to the supervisor, where the fleet listens and writes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from brownout.proxy.certs import CAFiles, connect_host, proxy_url
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.record.config import with_cassette_overrides
from brownout.proxy.reuseport import supported
from brownout.proxy.summary import destinations
from brownout.proxy.workers.paths import with_worker_paths

__all__ = ["ENDPOINT_OPTIONS", "FleetAddress", "FleetSetupError", "check_fleet", "fleet_destinations", "split_options"]

# The --set options that place /metrics and the control API: the supervisor's (workers get free ports).
ENDPOINT_OPTIONS = ("brownout_metrics_listen", "brownout_control_listen")


class FleetSetupError(ValueError):
    """Why this fleet cannot start (said before any process starts)."""


def check_fleet(count: int, config: BrownoutConfig, *, config_path: str | None, mode: str, options: list[str]) -> None:
    """FleetSetupError when `count` workers cannot run this config with these options."""
    where = f" in {config_path}" if config_path else " (no config file: pass one with -c)"
    if config.state.backend == "memory":
        raise FleetSetupError(
            f"--workers {count} needs state.backend: redis{where}. With state.backend memory each worker keeps "
            "its own rule counters, quota windows, sessions and switches: every schedule (first, after, every, "
            "max_injections, quotas) and every session invariant would count once per worker. Point the state: "
            "section at a Redis server (state: {backend: redis, url: redis://HOST:6379/0})."
        )
    if not supported():
        raise FleetSetupError(f"--workers {count} needs SO_REUSEPORT, which this platform lacks")
    if "@" in mode:
        raise FleetSetupError(f"--workers: give the listen address with --listen, not in the mode ({mode!r})")
    named = dict(o.partition("=")[::2] for o in options)
    if with_cassette_overrides(config, _getter(named)).record.dir:
        raise FleetSetupError(
            f"--workers {count} cannot record cassettes: a session's cassette is one file, and its requests "
            "reach every worker; record with one process (no --workers)"
        )


def _getter(named: dict[str, str]) -> Callable[[str], str]:
    return lambda name: named.get(name, "")


def split_options(options: list[str]) -> tuple[list[str], dict[str, str]]:
    """The workers' options, and the endpoint addresses meant for the supervisor."""
    rest, endpoints = [], {}
    for option in options:
        name, _, value = option.partition("=")
        if name in ENDPOINT_OPTIONS:
            endpoints[name] = value
        else:
            rest.append(option)
    return rest, endpoints


def fleet_destinations(config: BrownoutConfig, count: int) -> dict[str, str]:
    """Where the fleet's logs and cassettes are: each worker's own files, listed together."""
    per_worker = [destinations(with_worker_paths(config, str(i))) for i in range(count)]
    return {key: ", ".join(dict.fromkeys(d[key] for d in per_worker)) for key in per_worker[0]}


@dataclass(frozen=True)
class FleetAddress:
    """Where the fleet listens and its CA: what the start-up lines (proxy/startup.py) read of a proxy."""

    listen_host: str
    port: int
    mode: list[str]
    ca: CAFiles

    @property
    def host(self) -> str:
        return connect_host(self.listen_host)

    @property
    def url(self) -> str:
        return proxy_url(self.listen_host, self.port)

    @property
    def listen(self) -> str:
        """HOST:PORT as a worker's listen option."""
        return f"[{self.listen_host}]:{self.port}" if ":" in self.listen_host else f"{self.listen_host}:{self.port}"

    @property
    def confdir(self) -> Path:
        return self.ca.confdir

    @property
    def ca_bundle_path(self) -> Path:
        return self.ca.bundle
