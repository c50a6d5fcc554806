"""Tracebacks of more than 100 frames keep their innermost frames and say what was
cut; hostile catalogs (a 5,000-character keyword, YAML aliases that refer to themselves, a regex that
times out on every line) and a 1,000-level error.json end in a report or a clean exit 2; logs dense in
errors are handled without comparing every candidate with every other (the verdict is the pairwise
rule's, checked against it here). No timing here: benchmarks/bench_dense_errors.py and
bench_hostile_inputs.py measure."""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from logparse.decide.candidates import Choice, EchoIndex, explains_in_time
from logparse.observe.matcher import ENTRY_BUDGET_S, MATCH_TIMEOUT_S
from logparse.observe.tracebacks import MAX_FRAMES, TracebackAssembler
from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND, EXIT_HEALTHY
from logparse.read.normalize import Normalizer
from logparse.read.prefilter import compile_keywords, trie_regex
from logparse.read.sources import Line
from patterns import CatalogError, load_catalog
from patterns.inference import inference_rules
from tests.conftest import run_cli
from tests.patterns.test_loader import GOOD

# -- tracebacks of more than MAX_FRAMES frames --------------------------------------------------------

MUTUAL = """\
import sys
sys.setrecursionlimit(600)
def ping(n):
    return pong(n + 1)
def pong(n):
    if n > 520:
        return {}["missing"]
    return ping(n + 1)
ping(0)
"""
DIRECT = """\
def dive(n):
    return dive(n + 1)
dive(0)
"""


def python_traceback(tmp_path: Path, source: str, prefix: str = "[rank2]: ") -> str:
    """The traceback Python itself prints for `source`, each line with a launcher prefix."""
    script = tmp_path / "job.py"
    script.write_text(source)
    err = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False).stderr
    assert err.startswith("Traceback (most recent call last):"), err[:500]
    return "INFO start\n" + "".join(prefix + line + "\n" for line in err.splitlines())


def test_a_deep_recursion_keeps_its_innermost_frames_and_says_how_many_were_cut(tmp_path: Path) -> None:
    """Mutual recursion is not folded by Python: 522 frames printed, the KeyError in the innermost."""
    log = tmp_path / "deep.log"
    log.write_text(python_traceback(tmp_path, MUTUAL))
    printed = log.read_text().count('  File "')
    assert printed > 500
    result = run_cli(["scan", str(log), "--format", "json"])
    assert result.exit_code == EXIT_FAILURE_FOUND
    tb = json.loads(result.stdout)["root_cause"]["traceback"]
    assert tb["exception_type"] == "KeyError"
    assert len(tb["frames"]) == MAX_FRAMES and tb["frames_cut"] == printed - MAX_FRAMES
    assert tb["frames"][0]["function"] == "<module>"  # the outermost frames stay
    assert tb["frames"][-1] == {
        "file": str(tmp_path / "job.py"),
        "line": 7,
        "function": "pong",
    }  # the innermost
    assert tb["innermost_user_frame"]["line"] == 7

    md = run_cli(["scan", str(log), "--format", "md"]).stdout
    assert f"Traceback: KeyError, {printed} frame(s)" in md
    assert f"... {printed - MAX_FRAMES} frame(s) left out ..." in md
    html = run_cli(["scan", str(log), "--format", "html"]).stdout
    assert f"{printed} frame(s)" in html and f"{printed - MAX_FRAMES} frame(s) left out" in html


def test_pythons_own_folding_of_a_recursion_is_read(tmp_path: Path) -> None:
    """Direct recursion: Python prints three frames and `[Previous line repeated 996 more times]`."""
    log = tmp_path / "rec.log"
    log.write_text(python_traceback(tmp_path, DIRECT))
    assert re.search(r"\[Previous line repeated \d+ more times\]", log.read_text())
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    rc = report["root_cause"]
    assert rc["traceback"]["exception_type"] == "RecursionError"
    assert rc["traceback"]["frames_cut"] == 0
    assert rc["traceback"]["frames"][-1]["function"] == "dive"
    assert any("[Previous line repeated" in e["text"] for e in rc["evidence"])


def test_a_thousand_identical_frames_keep_the_first_and_the_last() -> None:
    """A printer that does not fold (1,000 identical frames, then a different innermost one)."""
    normalizer = Normalizer()
    assembler = TracebackAssembler()
    lines = ["Traceback (most recent call last):", '  File "/app/main.py", line 1, in <module>']
    for _ in range(1000):
        lines += ['  File "/app/walk.py", line 5, in walk', "    return walk(node.child)"]
    lines += [
        '  File "/app/walk.py", line 9, in leaf',
        "    raise RecursionError('maximum recursion depth')",
        "RecursionError: maximum recursion depth",
    ]
    for i, text in enumerate(lines, 1):
        assembler.feed(normalizer.normalize(Line("x.log", i, text)))
    assembler.close_all()
    (tb,) = assembler.kept()
    assert len(tb.frames) == MAX_FRAMES and tb.frames_cut == 1002 - MAX_FRAMES
    assert tb.frames[0].function == "<module>" and tb.frames[-1].function == "leaf"
    assert tb.frames[-1].code == "raise RecursionError('maximum recursion depth')"


# -- hostile catalogs ---------------------------------------------------------------------------------


def write_catalog(tmp_path: Path, text: str, name: str = "mine.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("length", [500, 1200, 5000])
def test_a_very_long_keyword_is_no_crash(tmp_path: Path, length: int) -> None:
    keyword = "K" * (length - 1) + "Z"
    cat = write_catalog(
        tmp_path, GOOD.replace("keywords: ['MyDataError']", f"keywords: ['MyDataError', '{keyword}']")
    )
    log = tmp_path / "job.log"
    log.write_text(f"INFO {keyword} seen\n[rank1]: MyDataError: bad row 7\n")
    result = run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert json.loads(result.stdout)["root_cause"]["id"] == "my-failure"


@pytest.mark.slow
def test_keywords_that_branch_at_every_character_still_compile() -> None:
    # b, ab, aab, ..., a*999 b: a trie nested 1,000 groups deep, past what `re` can parse
    words = ["a" * i + "b" for i in range(1000)]
    pattern = compile_keywords(words)
    assert pattern.search("x" + "a" * 998 + "b") and not pattern.search("a" * 2000)
    assert compile_keywords(words, as_bytes=True).search(b"aab")


def _trie_reference(words: list[str]) -> str:
    """The recursive trie of before (for short keywords): the iterative one must build the same regex."""
    trie: dict = {}
    for w in words:
        node = trie
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict) -> str:
        if "" in node:
            return ""
        branches = [re.escape(ch) + build(node[ch]) for ch in sorted(node)]
        return branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"

    return build(trie)


def test_the_iterative_trie_is_the_recursive_one() -> None:
    rnd = random.Random(13)
    for _ in range(200):
        words = [
            "".join(rnd.choice("ab.c") for _ in range(rnd.randint(1, 6))) for _ in range(rnd.randint(1, 12))
        ]
        assert trie_regex(words) == _trie_reference(words), words
    catalog_words = [k for e in load_catalog().entries for k in e.keywords]
    assert trie_regex(catalog_words) == _trie_reference(catalog_words)


def test_a_yaml_alias_inside_its_own_value_is_refused(tmp_path: Path) -> None:
    text = GOOD.replace("  title: My failure", "  title: My failure\n  loop: &loop [1, *loop]")
    with pytest.raises(CatalogError) as info:
        load_catalog([str(write_catalog(tmp_path, text))])
    assert "mine.yaml:3: refused: an alias refers to a value that holds it" in str(info.value)


def test_aliases_that_expand_past_the_limit_are_exit_2_with_file_and_line(tmp_path: Path) -> None:
    lines = ["  xa: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for prev, name in zip("abcdefg", "bcdefgh", strict=True):
        lines.append(f"  x{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
    cat = write_catalog(
        tmp_path, GOOD.replace("  title: My failure", "  title: My failure\n" + "\n".join(lines))
    )
    log = tmp_path / "job.log"
    log.write_text("[rank1]: MyDataError: bad row 7\n")
    result = run_cli(["scan", str(log), "--catalog", str(cat)])
    assert result.exit_code == EXIT_ERROR
    assert "mine.yaml:7: refused: YAML aliases expand this value to 111,111 values" in result.output
    # a few aliases that stay small are fine
    small = GOOD.replace("  title: My failure", "  title: My failure").replace(
        "    fix: ['Fix the data.']", "    fix: &fix ['Fix the data.']\n    references: *fix"
    )
    assert load_catalog([str(write_catalog(tmp_path, small, "small.yaml"))]).get("my-failure") is not None


def test_a_catalog_of_many_entries_loads_entry_by_entry(tmp_path: Path) -> None:
    text = "".join(
        GOOD.replace("my-failure", f"my-failure-{i}").replace("MyDataError", f"MyDataError{i}x")
        for i in range(300)
    )
    catalog = load_catalog([str(write_catalog(tmp_path, text))])
    entries = [e for e in catalog.entries if e.id.startswith("my-failure-")]
    size = GOOD.count("\n")
    assert len(entries) == 300 and [e.line for e in entries[:3]] == [1, 1 + size, 1 + 2 * size]
    assert not any(e.builtin for e in entries) and all(e.builtin for e in catalog.entries if e not in entries)
    e = entries[7]
    assert e.patterns[0].group_names == {"what"} and e.patterns[0].search("MyDataError7x: row 3")


@pytest.mark.slow
def test_a_regex_that_times_out_on_every_line_is_disabled_with_a_note(tmp_path: Path) -> None:
    slow = (
        GOOD.replace("my-failure", "my-slow-failure")
        .replace("'MyDataError: (?P<what>.+)'", "'MyDataError: (?:[a-z]|[a-y])*!$'")
        .replace("'data broke: {what}'", "'data broke'")
        .replace("MyDataError: bad row 7", "MyDataError: abc!")
    )
    cat = write_catalog(tmp_path, slow)
    lines = 400
    log = tmp_path / "job.log"
    # every line backtracks for the whole timeout: without the budget, 400 x 50 ms
    log.write_text("".join(f"[rank{i % 8}]: MyDataError: {'a' * 30}!b {i}\n" for i in range(lines)))
    result = run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"])
    # the lines read as errors all the same (bare failure lines, patterns/fallback.yaml), but no entry
    # of the slow catalog is among the findings
    assert result.exit_code == EXIT_FAILURE_FOUND
    report = json.loads(result.stdout)
    assert not any(f["id"].startswith("my-slow-failure") for f in report["findings"])
    notes = report["notes"]
    (note,) = [n for n in notes if "my-slow-failure" in n]
    assert f"({cat}:1) was disabled at {log}:" in note and "later lines were not matched against it" in note
    timed_out = int(re.search(r"\((\d+) timed out", note).group(1))
    # disabled once its timeouts passed the budget: a few dozen searches, not one per line. (Each
    # timeout counts the time it took, at least MATCH_TIMEOUT_S: on a busy machine fewer reach the
    # budget, so only the upper bound is fixed)
    assert 1 <= timed_out <= ENTRY_BUDGET_S / MATCH_TIMEOUT_S + 2
    line = int(note.split(f"{log}:")[1].split(":")[0])
    assert line < lines // 4


@pytest.mark.slow  # a dense log hit on every line: about 2 s
def test_a_fast_user_entry_that_matches_every_line_is_never_disabled(tmp_path: Path) -> None:
    cat = write_catalog(tmp_path, GOOD)
    log = tmp_path / "job.log"
    log.write_text("".join(f"[rank{i % 8}]: MyDataError: bad row {i}\n" for i in range(20_000)))
    result = run_cli(["scan", str(log), "--catalog", str(cat), "--format", "json"])
    assert result.exit_code == EXIT_FAILURE_FOUND
    report = json.loads(result.stdout)
    assert not any("disabled" in n for n in report["notes"])
    assert report["findings"][0]["count"] == 20_000


# -- error.json nested 1,000 levels -------------------------------------------------------------------


def nested_error_json(depth: int) -> str:
    return '{"message": ' + '{"a": ' * depth + '"x"' + "}" * depth + "}"


def test_a_deeply_nested_error_json_is_read_as_text(tmp_path: Path) -> None:
    job = tmp_path / "run" / "attempt_0" / "0"
    job.mkdir(parents=True)
    (job / "error.json").write_text(nested_error_json(1000))
    result = run_cli(["scan", str(tmp_path / "run"), "--format", "json"])
    assert result.exit_code == EXIT_HEALTHY, result.output
    notes = json.loads(result.stdout)["notes"]
    assert any("JSON nested more than 64 levels deep; read as plain text" in n for n in notes)


def test_a_deeply_nested_error_json_does_not_end_a_fleet(tmp_path: Path) -> None:
    bad = tmp_path / "bad" / "attempt_0" / "0"
    bad.mkdir(parents=True)
    (bad / "error.json").write_text(nested_error_json(5000))
    good = tmp_path / "good.log"
    good.write_text("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n")
    result = run_cli(["fleet", str(tmp_path / "bad"), str(good), "--format", "json"])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    rows = json.loads(result.stdout)["jobs"]
    assert [r["status"] for r in rows] == ["healthy", "failed"]


# -- dense error logs -----------------------------------------------------------------------------------


def test_identical_error_lines_over_64_ranks_are_one_finding(tmp_path: Path) -> None:
    log = tmp_path / "dense.log"
    line = "[rank{r}]: RuntimeError: CUDA error: an illegal memory access was encountered\n"
    log.write_text("[rank0]: INFO start\n" + "".join(line.format(r=i % 64) for i in range(20_000)))
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    rc = report["root_cause"]
    assert rc["error_line"]["line"] == 2 and rc["rank"] == 0
    (finding,) = [f for f in report["findings"] if f["id"] == rc["id"]]
    assert finding["count"] == 20_000 and finding["ranks"] == list(range(64))
    assert [e["line"] for e in rc["evidence"]] == [1, 2]  # the first hit's context: read for it alone


def test_twenty_thousand_ray_workers_are_not_twenty_thousand_remembered_streams(tmp_path: Path) -> None:
    from logparse.observe.tracebacks import MAX_IDLE_STREAMS as MAX_STREAMS
    from logparse.pipeline import Analysis

    log = tmp_path / "workers.log"
    with open(log, "w") as fh:
        for n in range(3 * MAX_STREAMS):
            p = f"(WorkerDict pid={100000 + n}, ip=10.0.0.1) "
            fh.write(
                f'{p}Traceback (most recent call last):\n{p}  File "/app/m.py", line 3, in f\n'
                f"{p}    g()\n{p}ValueError: bad batch {n}\n"
            )
    scanner = Analysis(load_catalog())
    scanner.feed_inputs([str(log)])
    report = scanner.report()
    assembler = scanner.assembler
    assert len(assembler._active) + len(assembler._idle) <= MAX_STREAMS
    assert scanner.assembler.total == 3 * MAX_STREAMS  # every traceback was read to its end all the same
    assert report.root_cause.traceback.exception_type == "ValueError" and report.root_cause.pid == 100000


def test_hits_that_wait_for_their_traceback_are_decided_as_it_closes(tmp_path: Path) -> None:
    block = (
        "[rank{r}]: Traceback (most recent call last):\n"
        '[rank{r}]:   File "/workspace/job/data.py", line 22, in __getitem__\n'
        '[rank{r}]:     prompt = row["question"]\n'
        "[rank{r}]: KeyError: 'question'\n"
    )
    log = tmp_path / "tbs.log"
    log.write_text("".join(block.format(r=n % 8) for n in range(500)))
    report = json.loads(run_cli(["scan", str(log), "--format", "json"]).stdout)
    assert report["root_cause"]["id"] == "key-error-in-data-pipeline"
    (finding,) = [f for f in report["findings"] if f["id"] == "key-error-in-data-pipeline"]
    assert finding["count"] == 500


def _explains(self: Choice, other: Choice, rules) -> bool:
    """Choice.explains as it was written before EchoIndex (copied here as the reference)."""
    if other is self or other.kind in ("wrapper", "symptom"):
        return other is not self and self.kind in ("cause", "unknown")
    if self.kind == "cause":
        listed = self.hit.entry.explains
        ok = other.category in listed or other.entry_id in listed
    elif self.kind == "unknown":
        ok = other.category in rules.unknown_exception_explains and other.kind == "cause"
    else:
        return False
    if not ok:
        return False
    if self.time is not None and other.time is not None:
        return self.time <= other.time + rules.chronology_tolerance_s
    return True


def _pairwise(live: list[Choice], rules) -> list[Choice | None]:
    """choose()'s rule as it was: the first candidate that explains `c` and that `c` does not explain."""
    out = []
    for c in live:
        out.append(
            next(
                (o for o in live if o is not c and _explains(o, c, rules) and not _explains(c, o, rules)),
                None,
            )
        )
    return out


class _Entry:
    def __init__(self, entry_id: str, category: str, explains: tuple[str, ...]):
        self.id, self.category, self.explains = entry_id, category, explains

    def category_for(self, groups: dict) -> str:
        return self.category


class _Hit:
    def __init__(self, entry: _Entry):
        self.entry = entry

    @property
    def category(self) -> str:
        return self.entry.category


def test_the_echo_index_is_the_pairwise_rule() -> None:
    """Random candidates (causes that explain each other, themselves or nothing, unrecognised
    exceptions, with and without timestamps close and far apart): EchoIndex finds the same explainer
    for every candidate as comparing each with every other."""
    rules = inference_rules()
    kinds = [
        ("cuda-oom", "cuda-oom", ("collective-timeout", "nccl-error")),
        ("nccl-timeout", "collective-timeout", ()),
        ("nccl-error", "nccl-error", ("nccl-error",)),  # explains its own category
        ("host-oom", "host-oom", ("cuda-oom", "collective-timeout")),
        ("loops", "data-error", ("host-oom",)),
    ]
    entries = [_Entry(*k) for k in kinds]
    rnd = random.Random(13)
    for _ in range(300):
        live = []
        for seq in range(rnd.randint(1, 40)):
            time = rnd.choice([None, rnd.uniform(0, 30)])
            if rnd.random() < 0.2:
                live.append(Choice("unknown", 10, seq, time))
            else:
                live.append(Choice("cause", 50, seq, time, hit=_Hit(rnd.choice(entries))))
        index = EchoIndex(live, rules)
        assert [index.explained_by(i) for i in range(len(live))] == _pairwise(live, rules)


def test_explains_in_time_is_choices_time_rule() -> None:
    assert explains_in_time(None, 5.0, 5.0) and explains_in_time(5.0, None, 5.0)
    assert explains_in_time(10.0, 5.0, 5.0) and not explains_in_time(10.1, 5.0, 5.0)
