"""The control API: a small HTTP server on its own thread for pausing chaos, reloading and toggling rules.

It binds to loopback by default and requires a bearer token (config `control.token` or the
variable named by `control.token_env`); without a token only GET /healthz answers, because
this API can switch chaos on and off in a shared environment.
"""

from __future__ import annotations

import hmac
import json
import logging
import re
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from brownout.core.config import parse_listen
from brownout.proxy.config import ControlConfig
from brownout.proxy.control_target import ControlTarget, EngineControl

__all__ = ["ControlServer", "ControlTarget", "EngineControl", "Route"]

log = logging.getLogger(__name__)
SHUTDOWN_POLL_S = 0.05  # how often the server thread checks for a stop request
IDLE_TIMEOUT_S = 10.0  # a connection that sends nothing for this long is closed (between requests too)
MAX_CONNECTIONS = 32  # open connections (a thread each); more are closed at once until some end
_MAX_BODY = 64 * 1024
_LENGTH = re.compile(r"[0-9]{1,19}")
_RULE_PATH = re.compile(r"^/rules/(?P<name>[^/]+)$")
_KNOWN = frozenset({"/status", "/faults/pause", "/faults/resume", "/reload", "/violations", "/exchanges"})

# An endpoint in a module of its own (proxy/control_experiment.py), called once the token is checked:
# (method, path, query, read the JSON body) -> (status, answer), or None for a path not its own.
Route = Callable[[str, str, Mapping[str, list[str]], Callable[[], Any]], tuple[int, Any] | None]


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "brownout-control"
    _unread = 0  # body bytes the client announced that no endpoint has read yet

    def setup(self) -> None:
        super().setup()
        # Each read waits at most this long: an idle client (before a request, or kept alive between
        # requests) is closed, and the handler's thread ends (handle_one_request treats the timeout).
        self.connection.settimeout(self.server.idle_timeout_s)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("control %s " + format, self.client_address[0], *args)

    def _refuse(self, status: int, error: str) -> None:
        """Answer and close: what is left of this request is never read."""
        self.close_connection = True
        self._send(status, {"error": error}, {"Connection": "close"})

    def _body_length(self) -> int | None:
        """The request's Content-Length; None once a bad one was refused (before anything else is done:
        no endpoint waits for bytes a client announced with a negative, absurd or doubled length)."""
        if "Transfer-Encoding" in self.headers:
            self._refuse(411, "send a body with Content-Length, not Transfer-Encoding")
            return None
        values = {v.strip() for v in self.headers.get_all("Content-Length") or ()}
        if not values:
            return 0
        if len(values) > 1 or not _LENGTH.fullmatch(next(iter(values))):
            self._refuse(400, "Content-Length must be one non-negative integer")
            return None
        length = int(values.pop())
        if length > _MAX_BODY:
            self._refuse(413, f"body too large: at most {_MAX_BODY} bytes")
            return None
        return length

    def _send(self, status: int, body: Mapping[str, Any] | list[Any], headers: Mapping[str, str] = {}) -> None:
        data = json.dumps(body, default=str).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        for k, v in headers.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _authorized(self) -> bool:
        token = self.server.token
        if token is None:
            hint = f"start brownout with {self.server.token_env} (or control.token) set"
            self._send(403, {"error": f"control API disabled: it has no token; {hint}"})
            return False
        got = self.headers.get("Authorization", "")
        scheme, _, value = got.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
            self._send(401, {"error": "missing or wrong bearer token"}, {"WWW-Authenticate": 'Bearer realm="brownout"'})
            return False
        return True

    def _body(self) -> Any:
        length, self._unread = self._unread, 0
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            raise ConnectionAbortedError("client left before sending the whole body")
        return json.loads(raw) if raw.strip() else {}

    def _dispatch(self, method: str) -> None:
        length = self._body_length()
        if length is None:
            return
        self._unread = length
        try:
            self._route(method)
        finally:
            if self._unread:
                self.close_connection = True  # a body nobody read would be parsed as the next request

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        path = url.path.rstrip("/") or "/"
        if method == "GET" and path == "/healthz":
            self._send(200, {"ok": True})
            return
        if not self._authorized():
            return
        target = self.server.target
        try:
            if path == "/status" and method == "GET":
                self._send(200, target.status())
            elif path == "/faults/pause" and method == "POST":
                self._send(200, {"paused": True, **(target.pause() or {})})
            elif path == "/faults/resume" and method == "POST":
                self._send(200, {"paused": False, **(target.resume() or {})})
            elif path == "/reload" and method == "POST":
                ok, message = target.reload()
                self._send(200 if ok else 422, {"ok": ok, "message": message})
            elif path == "/violations" and method == "GET":
                raw = parse_qs(url.query).get("since", [""])[0]
                since = float(raw) if raw else None
                self._send(200, {"violations": target.violations(since)})
            elif path == "/exchanges" and method == "GET":
                query = parse_qs(url.query)
                since_raw, limit_raw = query.get("since", [""])[0], query.get("limit", [""])[0]
                limit = int(limit_raw) if limit_raw else None
                if limit is not None and limit < 1:
                    raise ValueError("limit must be at least 1")
                records = target.exchanges(float(since_raw) if since_raw else None, limit)
                self._send(200, {"exchanges": records})
            elif (m := _RULE_PATH.match(path)) and method == "PUT":
                body = self._body()
                if not isinstance(body, dict) or not isinstance(body.get("enabled"), bool):
                    self._send(400, {"error": 'body must be {"enabled": true|false}'})
                    return
                name = unquote(m["name"])
                result = target.set_rule_enabled(name, body["enabled"])
                if result:
                    extra = result if isinstance(result, Mapping) else {}
                    self._send(200, {"rule": name, "enabled": body["enabled"], **extra})
                else:
                    self._send(404, {"error": f"no rule named {name!r}"})
            elif (answer := self._routed(method, path, url.query)) is not None:
                self._send(*answer)
            elif path in _KNOWN or _RULE_PATH.match(path):
                self._send(405, {"error": f"{method} not allowed on {path}"})
            else:
                self._send(404, {"error": f"no endpoint {path}"})
        except (ConnectionError, TimeoutError):
            raise  # the client left or went idle: nothing to answer (see _Server.handle_error)
        except ValueError as e:
            self._send(400, {"error": str(e)})
        except Exception as e:  # the target failed: report it, keep serving
            log.debug("control %s %s failed", method, path, exc_info=True)
            if self.server.on_error is not None:
                self.server.on_error(e)  # the proxy's guard: counted, and logged once
            else:
                log.exception("control %s %s failed", method, path)
            self._send(500, {"error": f"{type(e).__name__}: {e}"})

    def _routed(self, method: str, path: str, query: str) -> tuple[int, Any] | None:
        answers = (route(method, path, parse_qs(query), self._body) for route in self.server.routes)
        return next((a for a in answers if a is not None), None)

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")


class _Server(ThreadingHTTPServer):
    daemon_threads = True  # a stuck client must not block shutdown
    target: ControlTarget
    token: str | None
    token_env: str
    on_error: Callable[[BaseException], None] | None
    routes: tuple[Route, ...] = ()
    idle_timeout_s: float = IDLE_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._open = 0
        self._open_lock = threading.Lock()
        self._refusing = False

    def process_request(self, request: Any, client_address: Any) -> None:
        # One thread per connection: past the cap a new one is closed at once, so clients that connect
        # and hold (or trickle bytes) cannot pile up threads.
        with self._open_lock:
            full = self._open >= self.max_connections
            if not full:
                self._open += 1
            if full and not self._refusing:
                log.warning("control API: %d connections open, closing new ones until some end", self._open)
            self._refusing = full
        if full:
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._open_lock:
                self._open -= 1

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that leaves mid-request (reset, broken pipe, a short body) is an expected event,
        # not a failure: socketserver would print a traceback to stderr for it.
        exc = sys.exc_info()[1]
        if isinstance(exc, ConnectionError | TimeoutError):
            log.debug("control client %s left or went idle mid-request: %r", client_address[0], exc)
            return
        super().handle_error(request, client_address)


class _Server6(_Server):
    address_family = socket.AF_INET6


class ControlServer:
    """The control API on its own thread; `start()` binds, `stop()` closes (both idempotent)."""

    def __init__(
        self,
        target: ControlTarget,
        *,
        listen: str = "127.0.0.1:9465",
        token: str | None = None,
        token_env: str = "BROWNOUT_TOKEN",
        on_error: Callable[[BaseException], None] | None = None,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        max_connections: int = MAX_CONNECTIONS,
        routes: tuple[Route, ...] = (),
    ) -> None:
        if idle_timeout_s <= 0 or max_connections < 1:
            raise ValueError("idle_timeout_s must be > 0 and max_connections at least 1")
        self.idle_timeout_s, self.max_connections = idle_timeout_s, max_connections
        self.host, self.port = parse_listen(listen)
        self.target = target
        self.token = token or None
        self.token_env = token_env
        self.on_error = on_error
        self.routes = routes
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def from_config(
        cls, config: ControlConfig, target: ControlTarget, *, environ: Mapping[str, str] | None = None, **kw: Any
    ) -> ControlServer:
        token = config.resolve_token(environ)
        return cls(target, listen=config.listen, token=token, token_env=config.token_env, **kw)

    def start(self) -> ControlServer:
        if self._server is not None:
            return self
        server = (_Server6 if ":" in self.host else _Server)((self.host, self.port), _Handler)
        server.target, server.token, server.on_error = self.target, self.token, self.on_error
        server.token_env, server.routes = self.token_env, self.routes
        server.idle_timeout_s, server.max_connections = self.idle_timeout_s, self.max_connections
        self._server = server
        self.port = server.server_address[1]
        # serve_forever notices a shutdown only between polls: the default 0.5 s would add that much to
        # every stop of brownout (an exec, a test's proxy); a 50 ms poll costs nothing measurable idle.
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_S}, name="brownout-control", daemon=True
        )
        self._thread.start()
        if self.token is None:
            log.warning(
                "control API on %s has no token: only /healthz answers (set %s to use `brownout ctl`)",
                self.url,
                self.token_env,
            )
        else:
            log.info("control API on %s", self.url)
        return self

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2)
            self._thread = None
