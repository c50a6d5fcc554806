"""Renderers of a finished `logparse.model.Report`: JSON, Markdown, text (and their templates)."""

from reports.render import FORMATS, render

__all__ = ["FORMATS", "render"]
