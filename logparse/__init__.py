"""Reading and understanding verl / torchrun / Ray logs: the engine and the `verl-logscan` CLI."""

__version__ = "0.1.0"
