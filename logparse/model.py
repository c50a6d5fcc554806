"""The finished report: plain typed values that every renderer reads (renderers decide nothing)."""

from __future__ import annotations

from dataclasses import dataclass, field

SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Evidence:
    source: str
    line: int
    text: str


@dataclass(frozen=True)
class Fix:
    summary: str
    why: str
    fix: tuple[str, ...]
    references: tuple[str, ...]


@dataclass(frozen=True)
class TracebackView:
    exception_type: str
    exception_message: str
    frames: tuple[tuple[str, int, str], ...]  # (file, line, function)
    innermost_user_frame: tuple[str, int, str] | None
    task: str | None
    chain: tuple[str, ...]  # earlier exceptions of a chain, "Type: message"


@dataclass(frozen=True)
class Candidate:
    """A cause that was considered and lost (or won): for the explanation."""

    id: str
    category: str
    reason: str
    first: Evidence


@dataclass(frozen=True)
class RootCause:
    id: str
    category: str
    title: str
    summary: str
    message: str
    evidence: tuple[Evidence, ...]
    rank: int | None
    local_rank: int | None
    pid: int | None
    actor: str | None
    node: str | None
    stage: str | None
    confidence: float
    remediation: Fix
    error_line: Evidence | None = None  # where the error line itself is (also within `evidence`)
    traceback: TracebackView | None = None
    explanation: tuple[str, ...] = ()
    candidates: tuple[Candidate, ...] = ()
    similar: tuple[str, ...] = ()


@dataclass(frozen=True)
class FindingView:
    id: str
    category: str
    title: str
    role: str
    count: int
    ranks: tuple[int, ...]
    nodes: tuple[str, ...]
    first: Evidence
    explained_by: str | None = None  # the cause this finding is an echo of, when known


@dataclass(frozen=True)
class InputInfo:
    path: str
    lines: int
    bytes: int


@dataclass(frozen=True)
class Report:
    status: str  # failed | healthy
    root_cause: RootCause | None
    symptoms: tuple[FindingView, ...]
    findings: tuple[FindingView, ...]
    inputs: tuple[InputInfo, ...]
    notes: tuple[str, ...] = ()
    schema_version: int = SCHEMA_VERSION
    extra: dict = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status == "failed"
