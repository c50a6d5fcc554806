"""What the Markdown, HTML and text reports share: how a location, a number, a step, the environment
and the redaction count read, the marker of left-out lines, and the Jinja2 environment of the templates.

Every format module imports this one and none imports another format module, so there is no circle:
reports/render.py dispatches to them.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import math
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING

from logparse.model import FindingView, Fix, Report, compact_ranks
from reports.escape import fence, md_cell_code, md_code, md_html, md_inline, md_text

if TYPE_CHECKING:
    import jinja2


def where(rc) -> str:
    parts = []
    if rc.rank is not None:
        parts.append(f"rank {rc.rank}")
    if rc.local_rank is not None:
        parts.append(f"local rank {rc.local_rank}")
    if rc.actor:
        parts.append(rc.actor)
    if rc.pid is not None:
        parts.append(f"pid {rc.pid}")
    if rc.node:
        parts.append(f"node {rc.node}")
    return ", ".join(parts)


def clip(text: object, limit: int) -> str:
    """`text` on one line, at most about `limit` characters, saying how much was cut."""
    text = str(text).replace("\r", " ").replace("\n", " ")
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def number(value: float | None) -> str:
    """A metric value for people: 4 significant digits, nan/inf as such."""
    if value is None:
        return "-"
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return f"{value:.4g}"
    return str(value)


def redaction_line(report: Report) -> str:
    """'2 hf-token, 1 email' (what was masked before the report was written), or '' when nothing."""
    return ", ".join(f"{n} {kind}" for kind, n in sorted(report.redactions.items()))


def step_text(report: Report) -> str:
    """'in step 5 of 10 (after step 4)' for a failure in a known step, else 'step 4 of 10' from the
    progress, or ''."""
    p = report.progress
    rc = report.root_cause
    if rc is not None and rc.step is not None:
        total = f" of {p.total_steps}" if p is not None and p.total_steps else ""
        shown = p is not None and p.failure_step is not None and p.failure_step != rc.step
        after = f" (after step {p.failure_step})" if shown else ""
        return f"in step {rc.step}{total}{after}"
    if p is None or p.last_step is None:
        return ""
    text = f"step {p.last_step}" + (f" of {p.total_steps}" if p.total_steps else "")
    if report.failed and p.failure_step is not None and p.failure_step != p.last_step:
        text += f" (failure after step {p.failure_step})"
    return text


def env_value(value: object) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={env_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(env_value(v) for v in value)
    if isinstance(value, float):
        return number(value)
    return str(value)


def anomaly_text(report: Report) -> str:
    """The metric anomalies in one line, as the summary and the HTML banner show them: how many, and
    the first (`2: grad-norm-spike: actor/grad_norm jumped to 40 at step 9, ...`); '' when there are
    none."""
    anomalies = report.metrics.anomalies if report.metrics else ()
    if not anomalies:
        return ""
    a = anomalies[0]
    if a.detail.startswith(a.key):  # a sentence that names the key and the step: each said once
        return f"{len(anomalies)}: {a.kind}: {a.detail.rstrip('.')}"
    return f"{len(anomalies)}: step {a.step} {a.kind} ({a.key}: {a.detail})"


VERDICT_WORDS = {
    "matches": "matches",
    "may-match": "may match",
    "fixed-in-your-version": "fixed in your version",
}


def lines_read(report: Report) -> int:
    return sum(i.lines for i in report.inputs)


def plural(n: int, word: str) -> str:
    """`1 line`, `38 lines`."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def partial_words(report: Report) -> str:
    """`INTERRUPTED after 38 lines (partial)` for a scan that was interrupted (as pytest's last line
    says `Interrupted`), '' for a complete one."""
    return "" if report.complete else f"INTERRUPTED after {plural(lines_read(report), 'line')} (partial)"


def verdict_words(verdict: str) -> str:
    """A known issue's verdict as a report says it (`may match`, `fixed in your version`)."""
    return VERDICT_WORDS.get(verdict, verdict)


def known_issues_line(report: Report) -> str:
    """The known upstream issues in one line, as the text summary shows them: the first (matches come
    first) with its verdict, thread and fix or what to check, then how many more of each verdict."""
    issues = report.known_issues
    if not issues:
        return ""
    k = issues[0]
    head = f"{verdict_words(k.verdict)}: {k.title} ({k.url})"
    if k.verdict == "matches":
        head += f"; fixed in: {k.fixed_in}; workaround: {k.workaround}"
    else:
        head += f"; {k.reason}"
    rest = issues[1:]
    if rest:
        counts: dict[str, int] = {}
        for r in rest:
            counts[verdict_words(r.verdict)] = counts.get(verdict_words(r.verdict), 0) + 1
        head += " (+" + ", ".join(f"{n} {w}" for w, n in counts.items()) + "; full report lists them)"
    return head


def finding_kind(f: FindingView) -> str:
    """What a finding's category column says. A symptom or wrapper of no category of its own says
    what it is (`echo of cuda-oom`, `wrapper on rank 3`): `unknown` there reads as 'could not
    classify'. A cause keeps its category, `unknown` included."""
    if f.category != "unknown" or f.role not in ("symptom", "wrapper"):
        return f.category
    kind = "echo" if f.role == "symptom" else "wrapper"
    if f.explained_by:  # `cuda-oom at job.log:88`: the id says which
        return f"{kind} of {f.explained_by.split(' at ')[0]}"
    if f.ranks:
        kind += f" on rank{'s' if len(f.ranks) > 1 else ''} {compact_ranks(f.ranks)}"
    return kind


ASIDE_TAGS = {
    "survived": "survived",
    "recurring": "survived",
    "caught": "caught",
    "teardown": "teardown",
    "interrupted": "after the stop",
}


def finding_label(f: FindingView) -> str:
    """A finding's name in a line: its entry id, or for an error no entry names, its exception type."""
    if f.id != "unknown" or not f.title:
        return f.id
    return f.title.split(":", 1)[0].rsplit(".", 1)[-1][:60] or f.id


def finding_steps(f: FindingView) -> str:
    """The steps a finding came in (`step 6`, `steps 1-8`), '' where none is shown."""
    if f.first_step is None:
        return f"before step 1 to step {f.last_step}" if f.last_step is not None else ""
    if f.last_step is None or f.last_step == f.first_step:
        return f"step {f.first_step}"
    return f"steps {f.first_step}-{f.last_step}"


def finding_aside(f: FindingView) -> str:
    """Why the run's story says a finding is not the run's failure, as a short tag ('' if it does not)."""
    return ASIDE_TAGS.get(f.set_aside_kind or "", "")


def env_summary(rows: list[tuple[str, str]], shown: int = 3) -> str:
    """The folded environment's one line: how many values, and the first few (`verl_era >=0.6, ...`)."""
    first = [f"{name} {value}" for name, value in rows if not name.endswith("_evidence")][:shown]
    more = ", …" if len(rows) > shown else ""
    return f"{len(rows)} value(s): " + ", ".join(first) + more


def env_rows(report: Report) -> list[tuple[str, str]]:
    """(name, value) rows of the environment; a dict value (e.g. config) becomes one row per key."""
    rows = []
    for name, value in report.environment.items():
        if isinstance(value, dict):
            rows.extend((f"{name}.{k}", env_value(v)) for k, v in value.items())
        else:
            rows.append((str(name), env_value(value)))
    return rows


BASIS_WORDS = {
    "phrase": "its wording",
    "weak-phrase": "its wording",
    "type": "its exception type",
    "weak-type": "its exception type",
    "frame": "its frames",
    "marker": "the marker after it",
    "nearest": "the nearest entry",
    "stall": "where the job waited",
}


def basis_text(rc) -> str:
    """`entry cuda-oom`, or for a failure no entry names, what its category came from."""
    b = rc.basis
    if b is None or b.kind in ("entry", "none") or b.kind not in BASIS_WORDS:
        return f"entry {rc.id}"
    return f"no entry; category from {BASIS_WORDS[b.kind]} ({b.rule})"


def safe_url(url: str) -> str | None:
    """`url` when it is a plain http(s) address a report may link (no space, quote, angle bracket,
    backtick or control character: nothing that could close the link), else None."""
    import re

    return url if re.fullmatch(r"https?://[^\s\"'<>`\\\x00-\x1f\x7f]+", url) else None


@dataclass
class Gap:
    """Stands where lines were left out of a list (rendered as '... N lines left out ...')."""

    count: int


def job_values(fix: Fix) -> str | None:
    """The fix line that quotes the job's own settings: 'This job sets `leaf=value` (`dotted.key`), ...'
    (each a code span its own backticks cannot close: the values are the log's), or None."""
    if not fix.cited:
        return None
    quoted = ", ".join(f"{md_code(c.leaf + '=' + c.value)} ({md_code(c.key)})" for c in fix.cited)
    return f"This job sets {quoted}."


def compiled_templates(env: jinja2.Environment, folder: str | None = None) -> jinja2.BytecodeCache | None:
    """Where the templates are kept compiled: beside this package's compiled modules (its __pycache__,
    as Python finds it), as Python keeps its own there, never in the user's cache folder (whose files
    hand no code to the process: patterns/cache.py). Compiling report.md.j2 took some 65 ms and
    report.html.j2 80 ms of every run that wrote them. A file is used only for the same template
    source, Jinja2 and Python versions and environment options (the checksum); it is written as Python
    writes bytecode (not with PYTHONDONTWRITEBYTECODE), and a folder that cannot be written, a file
    that cannot be read back, mean compiling as before. `folder`: elsewhere (tests)."""
    import jinja2

    options = (
        jinja2.__version__,
        env.block_start_string,
        env.block_end_string,
        env.variable_start_string,
        env.variable_end_string,
        env.comment_start_string,
        env.comment_end_string,
        env.line_statement_prefix,
        env.line_comment_prefix,
        env.trim_blocks,
        env.lstrip_blocks,
        env.newline_sequence,
        env.keep_trailing_newline,
        env.autoescape,
        env.optimized,
        env.finalize is not None,
        sorted(env.extensions),
    )

    class Cache(jinja2.FileSystemBytecodeCache):
        def get_source_checksum(self, source: str) -> str:
            return hashlib.sha256(repr((options, source)).encode()).hexdigest()

        def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            try:
                super().load_bytecode(bucket)
            except Exception:  # (a cut or damaged file: compiled again)
                bucket.reset()

        def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
            if sys.dont_write_bytecode:
                return
            try:
                os.makedirs(self.directory, exist_ok=True)
                super().dump_bytecode(bucket)
            except OSError:
                pass

    if folder is None:
        try:
            folder = os.path.dirname(importlib.util.cache_from_source(__file__))
        except NotImplementedError:  # (an interpreter that keeps no bytecode: none)
            return None
    return Cache(folder, "jinja2-%s.cache")


@functools.lru_cache(maxsize=4)
def jinja_env(autoescape: bool) -> jinja2.Environment:
    """The templates' environment (autoescape: HTML), with the filters and globals they format with."""
    import jinja2  # here: JSON and the text summary need no templates (jinja2 takes ~15 ms to import)

    from reports.layout import FoldedFrames  # (so is the layout of Markdown and HTML: ~4 ms)

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("reports", "templates"),
        autoescape=autoescape,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
    )
    env.bytecode_cache = compiled_templates(env)
    env.filters.update(
        md_text=md_text,
        md_code=md_code,
        md_cell_code=md_cell_code,
        md_inline=md_inline,
        md_html=md_html,
        compact_ranks=compact_ranks,
        clip=clip,
        number=number,
    )
    env.globals.update(
        fence=fence,
        where=where,
        basis_text=basis_text,
        job_values=job_values,
        finding_kind=finding_kind,
        finding_steps=finding_steps,
        verdict_words=verdict_words,
        partial_words=partial_words,
        safe_url=safe_url,
        env_summary=env_summary,
    )
    env.tests["gap"] = lambda value: isinstance(value, Gap)
    env.tests["folded"] = lambda value: isinstance(value, FoldedFrames)
    return env


def cut_words(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, at a word's end when one is near, with `…`."""
    if len(text) <= limit:
        return text
    head = text[: max(limit - 1, 0)]
    space = head.rfind(" ")
    if space >= limit * 3 // 4:
        head = head[:space]
    return head.rstrip() + "…"
