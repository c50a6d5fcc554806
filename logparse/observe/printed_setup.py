"""What an ordinary script prints about its own setup: package versions and config dumps, by shape.

`PrintedSetup.feed(stream, message)` takes every line of a run in order (`verl-logscan diff` feeds it
the lines it reads anyway; the environment tracker reads verl's own dump and key list where a scan
reads). The shapes (patterns/printed_setup.yaml):

- versions: `name==x.y.z`, `name x.y.z` (pip list), `name: x.y.z`, `name version x.y.z`,
  `name.__version__ = x.y.z`, collect_env's `[pip3] name==x.y.z` and `PyTorch version: x.y.z`;
- config: a dict printed on one line or pprinted over several, JSON, a YAML document (yaml.safe_dump,
  OmegaConf.to_yaml, a Hydra app's cfg), `argparse.Namespace(...)`, `key.sub=value` overrides. Every
  value is kept under its dotted path.

Bounds: a dump is read for at most MAX_DUMP_LINES lines and MAX_DUMP_CHARS characters; at most
MAX_VALUES config values and MAX_VERSIONS versions are kept (the first value of a key wins: a job
prints its config once, a later dict is more likely data); one dump open per stream, at most
MAX_STREAMS streams at once.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import yaml

from patterns.printed_setup import setup_wordings

MAX_DUMP_LINES = 2_000
MAX_DUMP_CHARS = 200_000
MAX_VALUES = 1_024
MAX_VERSIONS = 512
MAX_STREAMS = 64
MAX_LINE_CHARS = 20_000  # a longer one-line dict is data, not a config

Scalar = str | int | float | bool | None

_W = setup_wordings()


@dataclass
class _Open:
    kind: str  # dict | yaml
    lines: list[str] = field(default_factory=list)
    chars: int = 0
    depth: int = 0  # brackets still open (dict)


def _flat(value: object, prefix: str = "") -> Iterator[tuple[str, Scalar]]:
    """(dotted path, scalar) of every leaf; a list is one value (its items joined)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{prefix}{k}.")
    elif isinstance(value, (list, tuple)):
        if prefix and all(not isinstance(x, (dict, list, tuple)) for x in value):
            yield prefix[:-1], "[" + ", ".join(map(str, value)) + "]"
    elif prefix and (value is None or isinstance(value, (str, int, float, bool))):
        yield prefix[:-1], value


def _scalar(text: str) -> Scalar:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def _brackets(text: str) -> int:
    """Opening minus closing brackets of `text`, outside quoted strings (a rough count)."""
    depth, quote, escaped = 0, "", False
    for ch in text:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "{[(":
            depth += 1
        elif ch in "}])":
            depth -= 1
    return depth


def _parse_mapping(text: str) -> dict | None:
    for parse in (ast.literal_eval, json.loads):
        try:
            out = parse(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return out if isinstance(out, dict) else None
    return None


def version_of(message: str) -> tuple[str, str] | None:
    """(package key, version) of a line that prints one package's version, else None."""
    m = _W.version_line.match(message.strip())
    if m is None:
        return None
    name = m.group("name").lower().replace("-", "_")
    name = _W.aliases.get(name, name)
    if name in _W.not_names:
        return None
    ver, rest = m.group("ver"), m.group("rest")
    strong = bool(m.group("word") or m.group("attr") or "==" in m.group("sep"))
    if rest.strip() and not (m.group("word") and rest.startswith((" ", "\t"))):
        return None  # more words after the version: prose, unless `name version x.y.z (build ...)`
    if ver.count(".") < 2 and not strong and name not in _W.two_part_names:
        return None
    if name == "python":
        ver = ".".join(ver.split(".")[:2])
    return name, ver


class PrintedSetup:
    """Bounded reader of the versions and config values a run's lines print."""

    def __init__(self) -> None:
        self.versions: dict[str, str] = {}
        self.config: dict[str, Scalar] = {}
        self._open: dict[object, _Open] = {}

    def feed(self, stream: object, message: str) -> None:
        dump = self._open.get(stream)
        if dump is not None and self._continue(stream, dump, message):
            return
        text = message.rstrip()
        if not text or len(text) > MAX_LINE_CHARS:
            return
        if text.startswith(_W.dict_open):
            self._dict_start(stream, text)
        elif _W.namespace_open in text:
            self._namespace(text)
        elif _W.yaml_open.match(text):
            self._start(stream, _Open("yaml", [text]))
        else:
            self._one_line(text)

    def _one_line(self, text: str) -> None:
        if "=" in text and "." in text:
            for m in _W.override.finditer(text):
                self._value(m.group("key"), _scalar(m.group("value")))
        if len(self.versions) < MAX_VERSIONS and any(c.isdigit() for c in text):
            found = version_of(text)
            if found is not None:
                self.versions.setdefault(*found)

    def _start(self, stream: object, dump: _Open) -> None:
        if len(self._open) < MAX_STREAMS:
            dump.chars = sum(map(len, dump.lines))
            self._open[stream] = dump

    def _dict_start(self, stream: object, text: str) -> None:
        depth = _brackets(text)
        if depth <= 0:
            self._mapping(_parse_mapping(text))
        else:
            self._start(stream, _Open("dict", [text], depth=depth))

    def _continue(self, stream: object, dump: _Open, message: str) -> bool:
        """Feed a line of `stream`'s open dump; False when the line is not part of it (the dump ends)."""
        text = message.rstrip()
        if dump.kind == "yaml" and not (text and _W.yaml_line.match(text)):
            self._close(stream)
            return False
        dump.lines.append(text)
        dump.chars += len(text)
        if dump.kind == "dict":
            dump.depth += _brackets(text)
            if dump.depth <= 0:
                self._close(stream)
                return True
        if len(dump.lines) > MAX_DUMP_LINES or dump.chars > MAX_DUMP_CHARS:
            del self._open[stream]
        return True

    def _close(self, stream: object) -> None:
        dump = self._open.pop(stream)
        text = "\n".join(dump.lines)
        if dump.kind == "dict":
            self._mapping(_parse_mapping(text))
            return
        try:
            out = yaml.safe_load(text)
        except (yaml.YAMLError, ValueError, RecursionError, MemoryError):
            return
        # its first key opened it with nothing after the colon: a lone `Note:` is no dump
        if isinstance(out, dict) and out and isinstance(next(iter(out.values())), (dict, list)):
            self._mapping(out)

    def finish(self) -> None:
        """The end of the run: a dump still open is read as far as it goes."""
        for stream in list(self._open):
            self._close(stream)

    def _mapping(self, value: dict | None) -> None:
        if not value or any(str(k) in _W.progress_keys for k in value):
            return
        for key, leaf in _flat(value):
            self._value(key, leaf)

    def _namespace(self, text: str) -> None:
        start = text.find(_W.namespace_open)
        end = text.rfind(")")
        try:
            call = ast.parse(text[start : end + 1], mode="eval").body
        except (SyntaxError, ValueError, MemoryError, RecursionError):
            return
        if not isinstance(call, ast.Call):
            return
        for kw in call.keywords:
            if kw.arg is None:
                continue
            try:
                value = ast.literal_eval(kw.value)
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
            for key, leaf in _flat({kw.arg: value}):
                self._value(key, leaf)

    def _value(self, key: str, value: Scalar) -> None:
        if key not in self.config and len(self.config) < MAX_VALUES:
            self.config[key] = value
