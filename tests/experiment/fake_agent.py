"""A fast stdlib agent for experiment tests: one chat call and one tool call through the proxy.

Env: DEMO_UPSTREAM (required), FAKE_SLEEP_S (sleep first), FAKE_EXIT (exit with this code at once),
FAKE_TRACEPARENT=1 (forward TRACEPARENT instead of x-brownout-session), FAKE_DIRECT=1 (ignore
HTTP_PROXY, as a client that goes around brownout does), FAKE_TIMEOUT_S (the client's timeout per
request, default 10), FAKE_RETRIES (attempts after an error answer or a timeout, per request; default 0).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request


def main() -> int:
    if os.environ.get("FAKE_EXIT"):
        return int(os.environ["FAKE_EXIT"])
    time.sleep(float(os.environ.get("FAKE_SLEEP_S", "0")))
    up = os.environ["DEMO_UPSTREAM"]
    # urllib sends no Proxy-Authorization for a username without password: name the session in a header.
    headers = {"content-type": "application/json"}
    if os.environ.get("FAKE_TRACEPARENT"):
        headers["traceparent"] = os.environ["TRACEPARENT"]
    else:
        headers["x-brownout-session"] = os.environ["BROWNOUT_SESSION"]
    body = json.dumps({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]}).encode()
    proxies = {} if os.environ.get("FAKE_DIRECT") else None  # {}: no proxy, whatever the environment says
    opener = urllib.request.build_opener(urllib.request.ProxyHandler(proxies))
    timeout_s = float(os.environ.get("FAKE_TIMEOUT_S", "10"))
    for url, data in ((f"{up}/v1/chat/completions", body), (f"{up}/tools/weather?city=Paris", None)):
        attempts = int(os.environ.get("FAKE_RETRIES", "0")) + 1
        for _ in range(attempts):
            try:
                opener.open(urllib.request.Request(url, data, headers), timeout=timeout_s).read()
                break
            except (urllib.error.URLError, OSError) as e:  # HTTPError (an error answer) is a URLError
                error = e
        else:
            print(f"error after {attempts} attempts: {error}", file=sys.stderr)
            return 1
    print(f"ANSWER: ok {sys.argv[1:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
