"""One pass over the inputs: read -> normalise -> tracebacks -> match -> findings -> verdict."""

from __future__ import annotations

from dataclasses import dataclass

from logparse.findings import FindingCollector, Hit
from logparse.inference import infer
from logparse.matcher import Matcher
from logparse.model import InputInfo, Report
from logparse.normalize import Normalizer
from logparse.reader import InputStats, expand_inputs, read_input
from logparse.tracebacks import LineRole, TracebackAssembler
from patterns import Catalog


@dataclass(frozen=True)
class ScanConfig:
    """Knobs of one scan (frozen: the scanner's state lives apart, in Scanner)."""

    max_groups: int = 2000


class Scanner:
    """Holds the per-scan state; feed lines in order, then call `report()`."""

    def __init__(self, catalog: Catalog, config: ScanConfig | None = None):
        self.catalog = catalog
        self.config = config or ScanConfig()
        self.matcher = Matcher(catalog)
        self.normalizer = Normalizer()
        self.assembler = TracebackAssembler()
        self.collector = FindingCollector()
        self.inputs: list[InputStats] = []
        self.seq = 0

    def feed_input(self, path: str) -> None:
        stats = InputStats("-" if path == "-" else path)
        self.inputs.append(stats)
        for line in read_input(path, stats):
            self.feed_line(line)

    def feed_line(self, line) -> None:
        self.seq += 1
        rec = self.normalizer.normalize(line, self.seq)
        role = self.assembler.feed(rec)
        if role in (LineRole.FRAME, LineRole.START):
            return
        matches = self.matcher.match(rec.message)
        if not matches:
            return
        tb = self.assembler.current(rec.stream) if role in (LineRole.EXCEPTION, LineRole.MESSAGE) else None
        context = self.assembler.context_of(rec.stream) if tb is None else []
        if tb is None and context and context[-1] is rec:
            context = context[:-1]
        for m in matches:
            self.collector.add(Hit(m.entry, rec, m.groups, rec.seq, tb, context))

    def report(self) -> Report:
        self.assembler.close_all()
        root, symptoms, findings = infer(self.collector, self.assembler.kept(), self.catalog)
        notes = [n for s in self.inputs for n in s.notes]
        if self.collector.overflow:
            notes.append(f"{self.collector.overflow} further distinct finding(s) were counted but not listed "
                         f"(limit {self.config.max_groups})")
        if self.matcher.timeouts:
            notes.append(f"{self.matcher.timeouts} pattern search(es) hit the match timeout and were skipped")
        return Report(
            status="failed" if root is not None else "healthy",
            root_cause=root,
            symptoms=symptoms,
            findings=findings,
            inputs=tuple(InputInfo(s.path, s.lines, s.bytes) for s in self.inputs),
            notes=tuple(notes),
        )


def scan_paths(paths: list[str], catalog: Catalog, config: ScanConfig | None = None) -> Report:
    scanner = Scanner(catalog, config)
    for path in expand_inputs(paths or ["-"]):
        scanner.feed_input(path)
    return scanner.report()
