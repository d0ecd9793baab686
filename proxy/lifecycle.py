"""The addon's lifecycle: options, configuration and hot reload, start-up and shutdown of its endpoints."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mitmproxy import ctx, exceptions
from mitmproxy.utils import human

from brownout.core.guard import Guard
from brownout.core.secrets import SecretHeaders
from brownout.faults.engine import CompiledRule, FaultEngine
from brownout.proxy import heap
from brownout.proxy.admission import Admission
from brownout.proxy.clientlimits import ClientLimits
from brownout.proxy.config import BrownoutConfig, with_listen_overrides
from brownout.proxy.configdiff import describe_reload
from brownout.proxy.configload import ConfigError, load_config
from brownout.proxy.control_link import start_control
from brownout.proxy.fleet import Fleet, start_fleet
from brownout.proxy.ignore import HostGlobs
from brownout.proxy.onloop import LoopRunner
from brownout.proxy.overlay import PhaseOverlay, start_overlay
from brownout.proxy.pipeline import Pipeline
from brownout.proxy.record import config as cassette_options
from brownout.proxy.record.cassette import CassetteError
from brownout.proxy.record.tape import Tape, TapeSetup
from brownout.proxy.record.writer import CassetteWriter
from brownout.proxy.relay import Relay
from brownout.proxy.tokenshield import TokenShield
from brownout.proxy.unreachable import Unreachable
from brownout.proxy.watch import ConfigWatcher
from brownout.proxy.workers.paths import with_worker_paths

__all__ = ["Lifecycle", "PreparedConfig"]

log = logging.getLogger(__name__)


@dataclass(slots=True)
class PreparedConfig:
    """A config with this proxy's command-line overrides, and the slow part of switching to it (its
    cassettes) done off the event loop; `apply_config` then switches at once."""

    config: BrownoutConfig
    tape: TapeSetup
    rules: list[CompiledRule] | None = None  # compiled off the loop (a reload), or None: compiled at the switch
    retired: CassetteWriter | None = None  # set by apply_config: the writer replaced, to close off the loop
    source: BrownoutConfig | None = None  # `config` before this proxy's overrides


class Lifecycle:
    """Mixed into the addon: mitmproxy's load/configure/running/done hooks and config switching."""

    config: BrownoutConfig
    # The config as loaded, before this proxy's overrides: they are applied to it again when an option
    # changes (a worker's log paths are derived from the written ones, so applying twice would not do).
    _source: BrownoutConfig | None = None
    guard: Guard
    engine: FaultEngine
    pipeline: Pipeline
    tape: Tape
    limits: ClientLimits
    admission: Admission
    unreachable: Unreachable
    on_loop: LoopRunner
    started: asyncio.Event
    start_error: str | None
    control: Any
    fleet: Fleet | None  # the shared state (config.state), built at start: see proxy/fleet.py
    overlay: PhaseOverlay | None  # a staging experiment's phase over the rules: see proxy/overlay.py
    relay: Relay | None
    watcher: ConfigWatcher | None
    _fixed: bool
    _loaded_path: str | None
    heap_owned: bool  # the process is brownout's own (`brownout run`): see proxy.heap
    _stream_above: int
    _buffer_max: int
    _ignored: HostGlobs
    _secret_headers: SecretHeaders
    _shield: TokenShield
    cut_in_flight: Callable[[], int]  # the addon's (proxy/addon.py): ends the exchanges still in flight

    options: Any  # this proxy's mitmproxy options (set in load); None outside mitmproxy
    _reloading: threading.Lock  # one reload at a time: the file watcher and the control API both reload

    def _option(self, name: str) -> str:
        """This proxy's value of a brownout option, or "" outside a running mitmproxy (e.g. in unit tests).

        Read from the proxy's own options, not `ctx.options`: on another thread (a reload from the control
        API or the watcher) that answers for whichever master was created last."""
        options = self.options
        try:
            return str(getattr(options if options is not None else ctx.options, name) or "")
        except (AttributeError, KeyError):
            return ""

    def load(self, loader: Any) -> None:
        self.options = loader.master.options
        loader.add_option("brownout_config", str, "", "Path of the brownout chaos config (YAML); empty: defaults.")
        loader.add_option(
            "brownout_reload_s", int, 1, "Seconds between checks of the config file for hot reload; 0: off."
        )
        loader.add_option(
            "brownout_metrics_listen", str, "", "Overrides exporters.prometheus.listen (host:port; port 0 picks one)."
        )
        loader.add_option("brownout_control_listen", str, "", "Overrides control.listen (host:port; port 0 picks one).")
        loader.add_option(
            "brownout_worker", str, "", "This process's index under `brownout run --workers`: its own JSONL files."
        )
        loader.add_option(
            "brownout_paused", bool, False, "Fault injection paused (the kill switch), from before the first request."
        )
        cassette_options.add_options(loader)

    def configure(self, updated: set[str]) -> None:
        path = ctx.options.brownout_config
        if "brownout_config" in updated and not self._fixed and path and path != self._loaded_path:
            try:
                self.apply_config(load_config(ctx.options.brownout_config))
            except (ConfigError, CassetteError, OSError, ValueError) as e:
                raise exceptions.OptionsError(str(e)) from e
        elif updated & {
            "brownout_metrics_listen",
            "brownout_control_listen",
            "brownout_worker",
            *cassette_options.OPTIONS,
        }:
            try:
                self.apply_config(self._source or self.config)
            except (CassetteError, OSError, ValueError) as e:
                raise exceptions.OptionsError(str(e)) from e
        if "brownout_paused" in updated and ctx.options.brownout_paused != self.engine.paused:
            # Options are set before the proxy listens: a worker the fleet restarts while paused never injects.
            (self.engine.pause if ctx.options.brownout_paused else self.engine.resume)()
        # mitmproxy's own limit applies to requests too: keep it high so a long-context or image
        # request is still buffered, recognised and faulted; responses stream from our threshold.
        if updated & {"stream_large_bodies", "brownout_config"} and ctx.options.stream_large_bodies is None:
            ctx.options.update(stream_large_bodies=self.config.proxy.buffer_max_bytes)

    async def running(self) -> None:
        self.on_loop.loop = asyncio.get_running_loop()
        try:
            self.relay = Relay(self.guard, verify=self._upstream_verify(), on_unreachable=self.unreachable.relay_failed)
            await self.relay.start()
            await self.tape.start()
            self.fleet = await start_fleet(self)
            self.pipeline.start(rules=self.engine.active_rules, link=self.fleet.link)
            await self.pipeline.start_receiver()
            self.overlay = start_overlay(self)
            self.pipeline.exporters.watch(
                client_connections=lambda: self.limits.open, client_connections_waiting=lambda: self.admission.waiting
            )
            self.control = start_control(self)
            self._shield.control_url = self.control.url if self.control is not None else ""
        except OSError as e:
            # An endpoint that was asked for and cannot bind: say which, and do not run without it.
            self.start_error = str(e)
            log.error("brownout cannot start: %s", e)
            ctx.master.shutdown()
            return
        finally:
            self.started.set()
        path = ctx.options.brownout_config
        if path and not self._fixed and ctx.options.brownout_reload_s > 0:
            self.watcher = ConfigWatcher(path, self.reload_from_file, interval_s=ctx.options.brownout_reload_s)
            self.watcher.start()

    async def done(self) -> None:
        self.cut_in_flight()  # recorded before the exporters close; their connections die with the loop
        if self.watcher is not None:
            self.watcher.stop()
        if self.control is not None:
            self.guard.call("control", self.control.stop)
        if self.overlay is not None:
            self.overlay.stop()
        if self.relay is not None:
            await self.relay.stop()
        await self.tape.stop()
        await self.pipeline.stop(3.0)  # shared-session checks still queued: before the fleet's link closes
        if self.fleet is not None:
            await self.guard.acall("engine", self.fleet.stop, context="leaving the fleet")
        await asyncio.get_running_loop().run_in_executor(None, self.tape.close, 3.0)
        # Bounded: an unreachable collector must not hold shutdown for the SDK's 30 s.
        await asyncio.get_running_loop().run_in_executor(None, self.pipeline.shutdown, 3.0)

    def prepare_config(self, config: BrownoutConfig, *, compile_rules: bool = False) -> PreparedConfig:
        """The slow part of switching to `config` (reading and indexing cassettes, opening a record
        directory; with `compile_rules`, compiling its rules too), done here: call it off the loop.
        Raises CassetteError, OSError or ValueError."""
        source = config
        config = with_listen_overrides(
            config, self._option("brownout_metrics_listen"), self._option("brownout_control_listen")
        )
        config = cassette_options.with_cassette_overrides(config, self._option)
        config = with_worker_paths(config, self._option("brownout_worker"))
        rules = self.engine.prepare(config.ruleset) if compile_rules else None
        tape = self.tape.prepare(config.record, config.replay, config.catalogue.wire)
        return PreparedConfig(config, tape, rules, source=source)

    def apply_config(self, config: BrownoutConfig | PreparedConfig) -> None:
        """Switch to a validated config; new exchanges use it. On the loop: a PreparedConfig switches at
        once (the writer it retires is left in `retired`, for the caller to close); a plain config is
        prepared here first (start-up, options, experiments)."""
        prepared = config if isinstance(config, PreparedConfig) else None
        if prepared is None:
            assert isinstance(config, BrownoutConfig)
            inline = self.prepare_config(config)  # raises before anything changes
            retired = self._switch(inline)
            if retired is not None:
                retired.close()
            return
        prepared.retired = self._switch(prepared)

    def _switch(self, prepared: PreparedConfig) -> CassetteWriter | None:
        config = prepared.config
        retired = self.tape.swap(prepared.tape)
        self.config, self._source = config, prepared.source
        self.engine.reload(config.ruleset, prepared.rules)
        if self.fleet is not None:
            self.fleet.on_config(config)
        self.pipeline.reload(config)
        self._stream_above = human.parse_size(config.proxy.stream_large_bodies) or 0
        self._buffer_max = human.parse_size(config.proxy.buffer_max_bytes) or 0
        self._ignored = HostGlobs(config.proxy.ignore_hosts)
        self._secret_headers = self.tape.secret_headers = SecretHeaders(config.proxy.secret_headers)
        self._shield = TokenShield(config.control.resolve_token(), self._shield.control_url)
        self.limits.settings = config.proxy
        self.admission.settings = config.proxy
        if (
            getattr(ctx, "master", None) is not None
            and ctx.options.stream_large_bodies != config.proxy.buffer_max_bytes
        ):
            ctx.options.update(stream_large_bodies=config.proxy.buffer_max_bytes)
        return retired

    def reload(self) -> tuple[bool, str]:
        """Reload this proxy's config file (its own `brownout_config`), as the control API's /reload does."""
        path = self._option("brownout_config")
        if not path:
            return False, "no config file to reload (brownout_config is empty)"
        return self.reload_from_file(path)

    def reload_from_file(self, path: str) -> tuple[bool, str]:
        """Parse and validate `path` here (call it off the loop: YAML, plugins, cassettes), then switch to
        it on the loop at once.

        A bad file keeps the last good config; the result says which happened. The rules are compiled
        here too (thousands of them swap in at once): only the switch itself happens on the loop."""
        with self._reloading:
            try:
                with heap.building(self.heap_owned):
                    prepared = self.prepare_config(load_config(path), compile_rules=True)
                    changes = describe_reload(self.config, prepared.config)
                    old = [*self.engine.rules, self.config]  # freed here, not all at once on the loop
                    try:
                        self.on_loop.call(self.apply_config, prepared)  # raises before anything changes
                    except BaseException:
                        prepared.tape.discard(self.tape)
                        raise
                    heap.let_go(old)
            except (ConfigError, CassetteError, OSError, ValueError) as e:
                log.error("brownout: config reload rejected, keeping the last good config: %s", e)
                self.pipeline.exporters.on_config_reload("rejected")
                return False, f"rejected, keeping the last good config: {e}"
            if prepared.retired is not None:
                prepared.retired.close()  # waits for its queue to be written: here, not on the loop
        self.pipeline.exporters.on_config_reload("applied")
        # A warning, so that it shows where brownout's warnings show (`brownout run` prints no info):
        # the chaos under way just changed.
        log.warning("brownout: config reloaded from %s: %s", path, changes)
        return True, f"reloaded {path}: {changes}"

    def _upstream_verify(self) -> Any:
        import ssl

        if ctx.options.ssl_insecure:
            return False
        ca = ctx.options.ssl_verify_upstream_trusted_ca
        return ssl.create_default_context(cafile=ca) if ca else True
