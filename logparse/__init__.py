"""Reading and understanding verl / torchrun / Ray logs: the engine and the `verl-logscan` CLI.

The Python API (logparse/api.py): `from logparse import analyse`; `analyse(paths)` returns a `Report`
with `to_json()`, `to_markdown()`, `to_html()` and `to_text()`, the reports `scan` writes."""

__version__ = "0.1.0"

__all__ = ["AnalysisError", "Report", "analyse"]


def __getattr__(name: str):
    # (imported on first use: `verl-logscan` starts without the pipeline until it needs it)
    if name in __all__:
        from logparse import api

        return getattr(api, name)
    raise AttributeError(f"module 'logparse' has no attribute {name!r}")
