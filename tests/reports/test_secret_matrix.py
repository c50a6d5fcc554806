"""Every secret kind of patterns/secrets.yaml x every output (md, html, json, text, the live ALERT line):
0 leaks of the secret's distinctive part, through the CLI.

Each match example of the table is put in a job log twice: as a context line (evidence) and inside the
error line (the root cause's message, which the terminal summary and the ALERT line print). A kind
whose example is masked only as a line of its own (a PEM body line) is checked in evidence only."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from logparse.read.sources import MAX_LINE_BYTES
from logparse.redact import LINE_PREFIX, Redactor
from patterns.secrets import SecretExample, secret_kinds
from tests.conftest import run_cli

ERROR = "torch.OutOfMemoryError: CUDA out of memory. "
SHOWN = 200  # characters of the error message that the summary and the ALERT line show
FORMATS = ("md", "html", "json", "text", "alert")
CASES = [(k.id, ex) for k in secret_kinds() for ex in k.match]


def inline(ex: SecretExample) -> bool:
    """Is the example still masked when it sits inside an error message?"""
    return ex.secret not in Redactor().text(ERROR + ex.line)


def job_log(ex: SecretExample) -> str:
    """Three lines of one stream: the example's own launcher prefix when it has one (evidence is taken
    from the error line's stream), else `[rank0]:`."""
    own = LINE_PREFIX.match(ex.line).group(0)
    prefix, line = (own, ex.line[len(own) :]) if own.strip() else ("[rank0]: ", ex.line)
    lines = [f"{prefix}loading the model", prefix + line]
    lines.append(f"{prefix}{ERROR}{ex.line if inline(ex) else 'Tried to allocate 2.00 GiB.'}")
    return "\n".join(lines) + "\n"


def test_every_kind_reaches_the_error_line_with_some_example() -> None:
    for kind in secret_kinds():
        assert any(inline(ex) for ex in kind.match) or kind.block is not None, kind.id


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind,ex", CASES, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CASES)])
def test_no_secret_leaks(tmp_path: Path, kind: str, ex: SecretExample, fmt: str) -> None:
    log = job_log(ex)
    if fmt == "alert":  # a live scan (stdin): the ALERT line goes to stderr as the line is read
        result = run_cli(["scan", "-", "--format", "json"], input=log)
        out = "\n".join(line for line in result.stderr.splitlines() if "ALERT" in line)
        assert out, result.stderr
    else:
        path = tmp_path / "job.log"
        path.write_text(log)
        result = run_cli(["scan", str(path), "--format", fmt])
        out = result.stdout
    assert result.exit_code == 1, result.output
    assert ex.secret not in out, f"{kind} leaked into {fmt}"
    if fmt in ("md", "html", "json"):  # the evidence holds both lines
        assert f"[redacted:{kind}]" in out
    elif inline(ex) and len(ERROR) + ex.line.index(ex.secret) < SHOWN - 20:
        assert "[redacted:" in out  # the part of the message shown held the secret, masked
    if fmt == "json":
        report = json.loads(out)
        assert report["root_cause"]["id"] == "cuda-oom"
        assert report["redactions"].get(kind, 0) >= 1


PEM_BODY = [
    "-----BEGIN ENCRYPTED PRIVATE KEY-----",
    "MIIFHzBJBgkqhkiG9w0BBQ0wPDAbBgkqhkiG9w0BBQwwDgQIq8gm0RLyVzICAggA",
    "MB0GCWCGSAFlAwQBKgQQ7bS9Nx2L1PvA0pmP1u3lKwSCBNBq9Vf2kfJcYH0Qpq4c",
    "Zq9Yk1s=",
    "-----END ENCRYPTED PRIVATE KEY-----",
]


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
@pytest.mark.parametrize("start", [0, 2])
def test_pem_block_spanning_lines_is_masked_on_every_line(tmp_path: Path, fmt: str, start: int) -> None:
    """The evidence holds the whole block (start 0), or begins inside it (start 2: no BEGIN line seen)."""
    lines = [f"(WorkerDict pid=812) {line}" for line in PEM_BODY[start:]]
    lines.append(f"(WorkerDict pid=812) {ERROR}Tried to allocate 2.00 GiB.")
    path = tmp_path / "job.log"
    path.write_text("\n".join(lines) + "\n")
    out = run_cli(["scan", str(path), "--format", fmt]).stdout
    for body in PEM_BODY[1:4]:
        assert body not in out and body[:24] not in out
    assert "[redacted:private-key]" in out
    if fmt == "json":
        evidence = [e["text"] for e in json.loads(out)["root_cause"]["evidence"]]
        masked = [t for t in evidence if t.endswith("[redacted:private-key]")]
        assert all(t.startswith("(WorkerDict pid=812) ") for t in masked)  # the launcher prefix stays
        assert len(masked) == len(PEM_BODY[max(start, 1) : 4])


@pytest.mark.parametrize("invisible", ["\x1b[0m", "\x08", "\u200b", "\u200d", "\u00ad", "\ufeff", "\x1b"])
@pytest.mark.parametrize("fmt", ["md", "json", "alert"])
def test_invisible_character_inside_a_token(tmp_path: Path, invisible: str, fmt: str) -> None:
    token = "hf_AbCdEfGhIjKlMnOp" + invisible + "QrStUvWxYz0123456789"
    log = f"[rank0]: export HF_TOKEN={token}\n[rank0]: {ERROR}token {token} rejected\n"
    if fmt == "alert":
        out = run_cli(["scan", "-", "--format", "json"], input=log).stderr
    else:
        path = tmp_path / "job.log"
        path.write_bytes(log.encode("utf-8"))
        out = run_cli(["scan", str(path), "--format", fmt]).stdout
    if fmt == "json":
        out = json.loads(out)["root_cause"]["message"] + json.dumps(json.loads(out), ensure_ascii=False)
    for part in ("AbCdEfGhIjKlMnOp", "QrStUvWxYz0123456789"):
        assert part not in out, fmt
    assert "[redacted:hf-token]" in out


@pytest.mark.parametrize(
    "prefix", ["hf_abc", "ghp_aB3", "sk-proj-Q1", "glpat-x", "xoxb-12", "AKIAIOSF", "eyJhbGci"]
)
def test_a_token_cut_at_the_line_limit_is_masked(tmp_path: Path, prefix: str) -> None:
    """A line longer than MAX_LINE_BYTES is cut; the cut lands inside a token, whose start is left."""
    head = f"[rank0]: {ERROR}payload "
    filler = "x" * (MAX_LINE_BYTES - len(head) - len(prefix) - 1) + " "
    line = head + filler + prefix + "Zz9Yy8Xx7Ww6Vv5Uu4Tt3Ss2Rr1Qq0PpOoNnMm"  # the rest lies past the cut
    path = tmp_path / "job.log"
    path.write_text(line + "\n")
    out = run_cli(["scan", str(path), "--format", "json"]).stdout
    report = json.loads(out)
    assert prefix not in out
    assert re.search(r" \[redacted:[a-z0-9-]+\]$", report["root_cause"]["message"])  # where the token was
    assert sum(report["redactions"].values()) == 1
