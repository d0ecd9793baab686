"""Run mitmproxy with the Brownout addon inside this process: in a background thread or on the caller's loop.

Each proxy from `running_proxy` runs on a thread and event loop of its own, and mitmproxy's
process-global `ctx` is made per loop (brownout.proxy.mitmctx), so several proxies in one process
each handle their own connections with their own config and plugins. Two `running_proxy_async`
blocks on one loop would share mitmproxy's master; starting the second warns.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import re
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from mitmproxy import options as mitm_options

from brownout.core.config import parse_listen
from brownout.proxy.certs import CAFiles, connect_host, ensure_ca, proxy_env, proxy_url
from brownout.proxy.config import BrownoutConfig
from brownout.proxy.configload import load_config
from brownout.proxy.master import BrownoutMaster
from brownout.proxy.mitmctx import install as per_loop_mitmproxy_ctx
from brownout.proxy.mitmctx import running_master
from brownout.proxy.modes import check_mode
from brownout.proxy.reuseport import share_port

__all__ = [
    "ProxyHandle",
    "ProxyStartError",
    "StartErrors",
    "running_proxy",
    "running_proxy_async",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

STARTUP_TIMEOUT_S = 15.0
# Defaults for an embedded brownout; callers override any of them with extra_options / --set.
BASE_OPTIONS: dict[str, Any] = {
    "flow_detail": 0,  # no per-flow printing (only exists when a dumper is loaded)
    # lazy: connect upstream only when a request needs it, so a fault that answers on its own
    # (error response, reset) never touches the upstream, and reverse mode does not dial it per
    # client connection. mitmproxy then mints certificates from the client's SNI, which every
    # modern client sends.
    "connection_strategy": "lazy",
}


class ProxyStartError(RuntimeError):
    """The proxy could not start (port in use, bad option, bad config); `address_in_use` names the
    listen address another program holds, when that is why."""

    def __init__(self, message: str, *, address_in_use: str | None = None) -> None:
        super().__init__(message)
        self.address_in_use = address_in_use


class StartErrors(logging.Filter):
    """Drops the proxy's own error records while it starts: a failed start raises ProxyStartError
    carrying them, and whoever catches it says it once (the terminal would print it twice)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR or record.name.split(".", 1)[0] not in _PROXY_LOGGERS


@dataclass
class ProxyHandle:
    """A running brownout proxy: where it listens and how to point a client at it."""

    host: str  # the address clients dial (a wildcard listen address becomes loopback)
    port: int
    url: str  # http://host:port, for HTTP(S)_PROXY or, in reverse mode, as the base URL
    ca: CAFiles
    addon: Any  # the proxy.addon.Brownout instance
    master: BrownoutMaster
    mode: list[str] = field(default_factory=lambda: ["regular"])

    @property
    def ca_bundle_path(self) -> Path:
        return self.ca.bundle

    @property
    def ca_cert_path(self) -> Path:
        return self.ca.ca_cert

    @property
    def confdir(self) -> Path:
        return self.ca.confdir

    @property
    def env(self) -> dict[str, str]:
        """Environment for a client (HTTP(S)_PROXY, SSL_CERT_FILE, ...); see `proxy.certs.proxy_env`."""
        return self.env_for()

    def env_for(self, session: str | None = None) -> dict[str, str]:
        """Like `env`, with `session` as the proxy username so brownout can tell this client apart."""
        return proxy_env(self.host, self.port, self.ca.bundle, session, ca_cert_path=self.ca.ca_cert)

    def proxy_url(self, session: str | None = None) -> str:
        return proxy_url(self.host, self.port, session)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """fn(*args) on the proxy's event loop, from any thread; returns its result (or raises its error).

        Everything that changes the running proxy from another thread (a new config, a listener,
        pause/resume) goes through here."""
        result: T = self.addon.on_loop.call(fn, *args)
        return result


def _make_addon(config: BrownoutConfig | None, path: str | None, on_exchange: Callable[[Any], None] | None) -> Any:
    from brownout.proxy.addon import Brownout  # late: the addon pulls in faults/invariants/exporters

    return Brownout(config=config, config_path=path, on_exchange=on_exchange)


def _apply_options(opts: mitm_options.Options, values: Mapping[str, Any] | Sequence[str]) -> None:
    """Apply `{"name": value}` or `["name=value"]`; strings go through mitmproxy's own `--set` parser."""
    items = values.items() if isinstance(values, Mapping) else (s.partition("=")[::2] for s in values)
    for name, value in items:
        if name not in opts:
            raise ProxyStartError(
                f"unknown mitmproxy option {name!r} (brownout runs mitmproxy's proxy core without its "
                "flow-editing addons; to combine them, run brownout inside mitmdump: docs/performance.md)"
            )
        try:
            if isinstance(value, str):
                opts.set(f"{name}={value}")
            else:
                opts.update(**{name: value})
        except Exception as e:  # OptionsError, or a TypeError from a wrong value type
            raise ProxyStartError(f"option {name}: {e}") from e


@contextlib.asynccontextmanager
async def running_proxy_async(
    config_path: str | os.PathLike[str] | None = None,
    *,
    config: BrownoutConfig | None = None,
    mode: str | Sequence[str] = "regular",
    listen: str = "127.0.0.1:0",
    confdir: str | os.PathLike[str] | None = None,
    extra_options: Mapping[str, Any] | Sequence[str] | None = None,
    on_exchange: Callable[[Any], None] | None = None,
    with_termlog: bool = False,
    reuse_port: bool = False,
) -> AsyncIterator[ProxyHandle]:
    """Run brownout on the current event loop until the block exits (or `handle.master.shutdown()`).

    `reuse_port`: listen with SO_REUSEPORT, so that other processes can listen on the same port and
    the kernel spreads connections over them (`brownout run --workers N`, see proxy/reuseport.py)."""
    if config_path is not None and config is not None:
        raise ValueError("pass config_path or config, not both")
    path = str(Path(config_path).resolve()) if config_path is not None else None
    if path is not None:
        # Parsed off the event loop (YAML, validation, plugin imports); a ConfigError names field and line.
        config = await asyncio.to_thread(load_config, path, model=BrownoutConfig)
    host, port = parse_listen(listen, default_port=0)
    ca = await asyncio.to_thread(ensure_ca, confdir)
    modes = [mode] if isinstance(mode, str) else list(mode)
    try:
        modes = [check_mode(m) for m in modes]
    except ValueError as e:
        raise ProxyStartError(f"mode {e}") from e
    opts = mitm_options.Options(listen_host=host, listen_port=port, mode=modes, confdir=str(ca.confdir))
    per_loop_mitmproxy_ctx()
    if running_master(asyncio.get_running_loop()) is not None:
        logger.warning(
            "another mitmproxy master runs on this event loop: mitmproxy hands the connections of both to the "
            "proxy starting now (its config and plugins); run each proxy on a loop of its own (running_proxy)"
        )
    master = BrownoutMaster(opts, with_termlog=with_termlog)
    if reuse_port:
        share_port(master)
    errorcheck = _raise_instead_of_exit(master)
    termlog = master.addons.get("termlog")
    quiet_start = StartErrors()
    if termlog is not None:
        termlog.logger.addFilter(quiet_start)
    try:
        opts.update(**{k: v for k, v in BASE_OPTIONS.items() if k in opts})
        if with_termlog:
            opts.update(termlog_verbosity="warn")
        addon = _make_addon(config, path, on_exchange)
        master.addons.add(addon)
        if path is not None:
            _apply_options(opts, {"brownout_config": path})
        _apply_options(opts, extra_options or {})
    except BaseException:
        errorcheck.logger.uninstall()
        await master.done()
        raise
    task = asyncio.create_task(master.run(), name="brownout-master")
    started = False
    try:
        bound = await _wait_bound(master, task)
        await _wait_running(addon, task)
        _deepen_backlog(master)
        started = True
        if termlog is not None:
            termlog.logger.removeFilter(quiet_start)
        handle = ProxyHandle(
            host=connect_host(bound[0]),
            port=bound[1],
            url=proxy_url(bound[0], bound[1]),
            ca=ca,
            addon=addon,
            master=master,
            mode=modes,
        )
        logger.info("brownout listening on %s (%s)", handle.url, ", ".join(modes))
        yield handle
    finally:
        master.shutdown()
        await asyncio.wait([task], timeout=10)
        # mitmproxy never closes its listeners (mitmdump just exits); free the port for the next proxy
        with contextlib.suppress(Exception):
            await master.addons.get("proxyserver").servers.update([])
        if task.done() and not task.cancelled() and task.exception() and started:
            logger.error("brownout proxy stopped with an error", exc_info=task.exception())
        errorcheck.logger.uninstall()  # installed on the root logger; mitmproxy leaks it on failed startup


def _deepen_backlog(master: BrownoutMaster) -> None:
    """Listen with the system's maximum backlog instead of asyncio's default of 100.

    mitmproxy's `asyncio.start_server` keeps the default: a thousand agents connecting at once
    overflow it, and the overflow shows up as SYN retries (1 s, 3 s stalls) and resets. Calling
    listen() again on a listening socket only changes the backlog (Linux, macOS). Reaches into
    mitmproxy internals (pinned version); a miss leaves the default in place.
    """
    import socket

    instances = getattr(master.addons.get("proxyserver").servers, "_instances", {})
    for instance in instances.values():
        for server in getattr(instance, "_servers", ()):
            for tsock in getattr(server, "sockets", None) or ():
                try:
                    with socket.socket(fileno=os.dup(tsock.fileno())) as dup:
                        dup.listen(socket.SOMAXCONN)
                except (OSError, AttributeError, ValueError) as e:
                    logger.debug("could not raise the listen backlog: %r", e)


async def _wait_running(addon: Any, task: asyncio.Task[None]) -> None:
    """Wait for the addon's own endpoints (metrics, control API); ProxyStartError naming one that cannot bind."""
    started = asyncio.create_task(addon.started.wait())
    await asyncio.wait([started, task], timeout=STARTUP_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED)
    started.cancel()
    if addon.start_error:
        raise ProxyStartError(addon.start_error)
    if not addon.started.is_set():
        raise ProxyStartError("proxy stopped during startup" if task.done() else "brownout did not start in time")


async def _wait_bound(master: BrownoutMaster, task: asyncio.Task[None]) -> tuple[str, int]:
    proxyserver = master.addons.get("proxyserver")
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STARTUP_TIMEOUT_S
    while not task.done():
        addrs = proxyserver.listen_addrs()
        if addrs:
            return (addrs[0][0], addrs[0][1])
        if loop.time() > deadline:
            raise ProxyStartError(f"proxy did not bind within {STARTUP_TIMEOUT_S:.0f} s")
        await asyncio.sleep(0.005)
    exc = task.exception() if not task.cancelled() else None
    if isinstance(exc, ProxyStartError):
        raise exc
    raise ProxyStartError(repr(exc) if exc else "proxy stopped during startup") from exc


_PROXY_LOGGERS = frozenset({"mitmproxy", "brownout"})


def _raise_instead_of_exit(master: BrownoutMaster) -> Any:
    """Make a failed startup raise ProxyStartError with mitmproxy's logged errors, not call sys.exit(1).

    mitmproxy's errorcheck addon exits the process when errors were logged during startup (port in
    use, bad option); embedded in a test run or an experiment that would kill the host process.
    """
    errorcheck = master.addons.get("errorcheck")

    async def raise_if_errored() -> None:
        await asyncio.sleep(0)  # as errorcheck does: let pending log records arrive
        # errorcheck hears every ERROR record in the process; embedded, other code shares the
        # process (a test's server, an agent), so only the proxy's own records mean a failed start.
        ours = [r for r in errorcheck.logger.has_errored if r.name.split(".", 1)[0] in _PROXY_LOGGERS]
        if ours:
            messages = [r.getMessage() for r in ours]
            in_use = next((m for m in map(_address_in_use, messages) if m), None)
            if in_use is not None:
                raise ProxyStartError(f"cannot listen on {in_use}: address already in use", address_in_use=in_use)
            raise ProxyStartError("; ".join(messages))

    errorcheck.shutdown_if_errored = raise_if_errored
    return errorcheck


# mitmproxy's own words for a listen address in use: "[Errno 98] HTTP(S) proxy failed to listen
# on HOST:PORT with ...", followed by advice about its own `--mode` option that brownout has not.
_LISTEN_FAILED = re.compile(r"^\[Errno (\d+)\] .*? failed to listen on (\S+) with ")


def _address_in_use(message: str) -> str | None:
    match = _LISTEN_FAILED.match(message)
    return match.group(2) if match and int(match.group(1)) == errno.EADDRINUSE else None


@contextlib.contextmanager
def running_proxy(
    config_path: str | os.PathLike[str] | None = None,
    *,
    config: BrownoutConfig | None = None,
    mode: str | Sequence[str] = "regular",
    listen: str = "127.0.0.1:0",
    confdir: str | os.PathLike[str] | None = None,
    extra_options: Mapping[str, Any] | Sequence[str] | None = None,
    on_exchange: Callable[[Any], None] | None = None,
    reuse_port: bool = False,
) -> Iterator[ProxyHandle]:
    """Run brownout in a background thread with its own event loop; yield once the socket is bound.

    `on_exchange` is called on the proxy's thread; `reuse_port` as in `running_proxy_async`.
    """
    ready = threading.Event()
    result: dict[str, Any] = {}
    stop: list[Callable[[], object]] = []

    async def main() -> None:
        async with running_proxy_async(
            config_path,
            config=config,
            mode=mode,
            listen=listen,
            confdir=confdir,
            extra_options=extra_options,
            on_exchange=on_exchange,
            reuse_port=reuse_port,
        ) as handle:
            stopped = asyncio.Event()
            loop = asyncio.get_running_loop()
            stop.append(lambda: loop.call_soon_threadsafe(stopped.set))
            result["handle"] = handle
            ready.set()
            await stopped.wait()

    def target() -> None:
        try:
            asyncio.run(main())
        except BaseException as e:  # never let the thread die silently
            result["error"] = e
            if not ready.is_set():
                ready.set()
            else:
                logger.error("brownout proxy thread failed", exc_info=e)

    thread = threading.Thread(target=target, name="brownout-proxy", daemon=True)
    thread.start()
    ready.wait()
    if "handle" not in result:
        thread.join()
        raise result["error"]
    try:
        yield result["handle"]
    finally:
        stop[0]()
        thread.join(timeout=15)
        if thread.is_alive():
            logger.warning("brownout proxy thread did not stop within 15 s")
