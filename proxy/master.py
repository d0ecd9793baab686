"""brownout's mitmproxy master: the proxy core only, and hooks dispatched from a per-hook list.

mitmproxy's dump master loads about 35 addons and, for every event of every flow, walks all of
them (and their sub-addons) looking for a method of the event's name, in a fresh coroutine and
context manager per addon, then does it again for the `update` event nobody here handles. At a
few hundred requests a second that walk costs more than everything brownout itself does per
exchange (measured: bench/profile.py, docs/performance.md). So brownout's master

- loads only the addons a chaos proxy uses: option handling and commands, the proxy servers and
  their modes, TLS, proxy authentication, upstream authentication, host blocking, h2c and Alt-Svc
  handling, DNS, and start-up error checks. mitmproxy's flow-editing and recording tools
  (scripts, map local/remote, modify headers/body, client/server replay, save, sticky cookies,
  anticache, onboarding) are not loaded: brownout has its own faults, mutation and cassettes, and
  they stay available by running brownout as a script inside mitmdump (proxy/mitm_script.py).
- dispatches each event to the addons that implement it, listed on the event's first use and
  listed again whenever an addon is added or removed. Order, error
  containment (an exception in one top-level addon is logged and the next one still runs) and
  `AddonHalt` behave as in mitmproxy.
"""

from __future__ import annotations

import inspect
from typing import Any

from mitmproxy import addonmanager, exceptions, hooks, options
from mitmproxy.addons import (
    block,
    core,
    disable_h2c,
    dns_resolver,
    errorcheck,
    next_layer,
    proxyauth,
    proxyserver,
    strip_dns_https_records,
    termlog,
    tlsconfig,
    update_alt_svc,
    upstream_auth,
)
from mitmproxy.master import Master

from brownout.proxy import bodyreads, messagecheck

__all__ = ["PROXY_CORE", "BrownoutMaster", "HookCache"]

# mitmproxy's default addons that brownout keeps, in mitmproxy's own order.
PROXY_CORE: tuple[type, ...] = (
    core.Core,
    block.Block,
    strip_dns_https_records.StripDnsHttpsRecords,
    disable_h2c.DisableH2C,
    proxyauth.ProxyAuth,
    proxyserver.Proxyserver,
    dns_resolver.DnsResolver,
    next_layer.NextLayer,
    tlsconfig.TlsConfig,
    upstream_auth.UpstreamAuth,
    update_alt_svc.UpdateAltSvc,
)

Handlers = list[list[Any]]  # per top-level addon: the addons in its tree that handle the event


class HookCache(addonmanager.AddonManager):
    """An AddonManager whose async dispatch looks each event's handlers up once, not per event."""

    def __init__(self, master: Master) -> None:
        super().__init__(master)
        self._handlers: dict[str, Handlers] = {}

    def register(self, addon: Any) -> Any:
        self._handlers.clear()
        return super().register(addon)

    def add(self, *new: Any) -> None:
        super().add(*new)
        self._handlers.clear()  # the chain grew after register(): rebuild on next use

    def remove(self, addon: Any) -> None:
        self._handlers.clear()
        super().remove(addon)

    def clear(self) -> None:
        self._handlers.clear()
        super().clear()

    def _lookup(self, event: hooks.Hook) -> Handlers:
        found: Handlers = []
        for top in self.chain:
            handlers = [addon for addon, _ in self._iter_hooks(top, event)]
            if handlers:
                found.append(handlers)
        self._handlers[event.name] = found
        return found

    async def trigger_event(self, event: hooks.Hook) -> None:
        handlers = self._handlers.get(event.name)
        if handlers is None:
            handlers = self._lookup(event)
        if not handlers:
            return
        name, args = event.name, event.args()
        for addons_ in handlers:
            try:
                with addonmanager.safecall():
                    for addon in addons_:
                        func = getattr(addon, name, None)  # per call, as mitmproxy: an addon may rebind it
                        if func is None:
                            continue
                        res = func(*args)
                        if res is not None and inspect.isawaitable(res):
                            await res
            except exceptions.AddonHalt:
                return


class BrownoutMaster(Master):
    """mitmproxy's proxy core with brownout's hook dispatch; `with_termlog` logs to the terminal."""

    def __init__(self, opts: options.Options, *, with_termlog: bool = False) -> None:
        bodyreads.install()  # brownout's connections join the chunks of one read (proxy/bodyreads.py)
        messagecheck.install()  # mitmproxy's message type check, without its reference cycles
        super().__init__(opts, with_termlog=False)
        self.options.changed.disconnect(self.addons._configure_all)
        self.addons = HookCache(self)
        if with_termlog:
            self._termlog_addon = termlog.TermLog()
            self.addons.add(self._termlog_addon)
        self.addons.add(*(cls() for cls in PROXY_CORE))
        self.addons.add(errorcheck.ErrorCheck())
