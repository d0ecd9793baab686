import base64

from brownout.proxy.sessions import proxy_auth_user, resolve_session, trace_id_of

TP = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def basic(user: str, password: str = "") -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_traceparent_wins_over_everything():
    headers = {"traceparent": TP, "x-brownout-session": "s1"}
    assert resolve_session(headers, "run-17", "10.0.0.1") == "0af7651916cd43dd8448eb211c80319c"


def test_explicit_header_then_proxy_user_then_client():
    assert resolve_session({"x-brownout-session": "s1"}, "run-17", "10.0.0.1") == "s1"
    assert resolve_session({}, "run-17", "10.0.0.1") == "run-17"
    assert resolve_session({}, None, "10.0.0.1") == "client:10.0.0.1"


def test_malformed_traceparent_is_ignored():
    assert trace_id_of("00-" + "0" * 32 + "-b7ad6b7169203331-01") is None
    assert trace_id_of("00-xyz-b7ad6b7169203331-01") is None
    assert trace_id_of("garbage") is None
    assert resolve_session({"traceparent": "garbage"}, None, "1.2.3.4") == "client:1.2.3.4"


def test_proxy_auth_user_parses_basic_username_only():
    assert proxy_auth_user(basic("run-17")) == "run-17"
    assert proxy_auth_user(basic("run-17", "secret")) == "run-17"
    assert proxy_auth_user("Bearer abc") is None
    assert proxy_auth_user("Basic !!!notbase64") is None
    assert proxy_auth_user(None) is None
