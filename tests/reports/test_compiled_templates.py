"""The Markdown and HTML templates are kept compiled beside the package's bytecode
(reports.common.compiled_templates): a run that finds them compiled renders the same text without
compiling them, and a damaged file or a folder that cannot be written only means compiling again."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from reports import render
from reports.common import compiled_templates, jinja_env
from tests.reports.test_html import handmade_report

FORMATS = {"md": False, "html": True}  # format -> its environment's autoescape


def _use_folder(monkeypatch: pytest.MonkeyPatch, folder: Path) -> None:
    """Both environments keep their compiled templates in `folder`, and forget those in memory."""
    for autoescape in FORMATS.values():
        env = jinja_env(autoescape)
        monkeypatch.setattr(env, "bytecode_cache", compiled_templates(env, str(folder)))
        env.cache.clear()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)


@pytest.fixture(autouse=True)
def _forget_templates():
    yield
    for autoescape in FORMATS.values():
        jinja_env(autoescape).cache.clear()


def test_a_template_compiled_once_is_read_back_and_renders_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = handmade_report()
    _use_folder(monkeypatch, tmp_path)
    first = {fmt: render(report, fmt) for fmt in FORMATS}
    assert len(list(tmp_path.glob("jinja2-*.cache"))) == 2
    for autoescape in FORMATS.values():
        env = jinja_env(autoescape)
        env.cache.clear()

        def compile_again(*args, **kwargs):
            raise AssertionError("a template was compiled again")

        monkeypatch.setattr(env, "compile", compile_again)
    assert {fmt: render(report, fmt) for fmt in FORMATS} == first


def test_a_damaged_file_is_compiled_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    report = handmade_report()
    _use_folder(monkeypatch, tmp_path)
    first = {fmt: render(report, fmt) for fmt in FORMATS}
    for path in tmp_path.glob("jinja2-*.cache"):
        path.write_bytes(path.read_bytes()[:40])
    for autoescape in FORMATS.values():
        jinja_env(autoescape).cache.clear()
    assert {fmt: render(report, fmt) for fmt in FORMATS} == first


def test_nothing_is_written_without_bytecode_or_where_the_folder_cannot_be_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    report = handmade_report()
    _use_folder(monkeypatch, tmp_path)
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    first = {fmt: render(report, fmt) for fmt in FORMATS}
    assert not list(tmp_path.iterdir())
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    _use_folder(monkeypatch, blocked / "sub")
    assert {fmt: render(report, fmt) for fmt in FORMATS} == first
