"""brownout benchmarks: `python bench/run.py`."""

__all__: list[str] = []
