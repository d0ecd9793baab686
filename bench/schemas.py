"""Tool-argument schemas: python-jsonschema alone against jsonschema-rs first, CPU per checked call.

    .venv/bin/python bench/schemas.py      # bench/llm.py's three tool schemas, valid and invalid calls

`first_error` is what the `tool_arguments_json` and `mcp_tools` invariants call for every tool call
they hold to a declared schema. A valid call is answered by jsonschema-rs alone; an invalid one still
goes to python-jsonschema for its message, so it costs a little more than before.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cpu import interleaved
from bench.llm import _PARAMS
from brownout.invariants.schemas import Compiled, ValidatorCache, first_error

VALID = {
    "get_weather": {"city": "Paris", "unit": "celsius"},
    "search_docs": {"query": "taxi from the airport", "limit": 3},
    "create_ticket": {"summary": "Taxi refund", "priority": "low", "due": "2026-12-01"},
}


def main(calls: int = 5000) -> None:
    cache = ValidatorCache()
    compiled = {name: cache.get(schema) for name, schema in _PARAMS.items()}
    cases = []
    for name, c in compiled.items():
        assert c is not None and c.fast is not None, name
        valid = VALID[name]
        assert first_error(c, valid) is None, (name, first_error(c, valid))
        cases.append((c, valid, {**valid, "unexpected": 1}))
    picks = {"python-jsonschema": lambda c: Compiled(c.full, None), "jsonschema-rs first": lambda c: c}
    print(f"{calls} calls per schema, CPU us per call:")
    for kind, label in ((1, "valid"), (2, "invalid")):
        paths = {
            name: (lambda pick=pick, kind=kind: [first_error(pick(c[0]), c[kind]) for c in cases for _ in range(calls)])
            for name, pick in picks.items()
        }
        for cost in interleaved(paths, calls * len(cases)):
            fast, slow = cost["jsonschema-rs first"], cost["python-jsonschema"]
            print(f"  {label:7s}  python {slow:5.1f}  rs first {fast:5.1f}  ratio {slow / fast:4.1f}x")


if __name__ == "__main__":
    main()
