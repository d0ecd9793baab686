"""brownout benchmarks; each entry point's docstring says how to run it, docs/benchmark.md what it measures.

- `python bench/run.py [--check] [--streams-case]`: throughput, latency and time to first chunk, side by side
  with mitmdump and direct; with --streams-case, then the concurrent-streams case.
- `python bench/streams.py [--streams N --events N --interval MS] [--check]`: 1,000 concurrent SSE streams.
- `python bench/bodies.py [--strict]`: big, compressed and hostile bodies.
- `python bench/slowclients.py`: slowloris and a connection burst.
- `python bench/latency.py [--check]`: the latency fault's accuracy.
- `python bench/soak.py --duration S --rate N`: long mixed traffic, watching for leaks.
"""

__all__: list[str] = []
