"""Callables for the custom invariant tests (imported by `tests.invariants.custom_checks:...`)."""

from __future__ import annotations


def no_gpt3(span, session):
    if span.attributes.get("gen_ai.request.model", "").startswith("gpt-3"):
        return [{"message": "gpt-3 is retired", "severity": "warning", "details": {"model": "gpt-3"}}]
    return []


def max_session_calls(span, session, params):
    return f"more than {params['n']} calls" if session.calls > params["n"] else None


def broken(span, session):
    raise RuntimeError("bug in user code")
