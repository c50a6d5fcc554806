"""Exception lines of several processes written at once (logparse.read.interleave)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from logparse.observe.tracebacks import parse_exception_line
from logparse.read.interleave import unweave
from logparse.read.normalize import Normalizer
from logparse.read.sources import Line

KEY = "'input_ids_j'"


@pytest.mark.parametrize(
    ("line", "fixed"),
    [
        # four `python3 race.py` processes on one stderr, raising the same KeyError at the same moment
        (f"KeyErrorKeyError: : {KEY}{KEY}", f"KeyError: {KEY}"),
        (f"KeyErrorKeyError: : {KEY}", f"KeyError: {KEY}"),  # the other copy went to the next line
        (f"KeyError: KeyError{KEY}: ", f"KeyError: {KEY}"),
        (f"KeyError: {KEY}KeyError", f"KeyError: {KEY}"),
        (f"~~~^^^^KeyError^^: ^{KEY}^", f"KeyError: {KEY}"),  # a caret line written one character at a time
        # a dotted type, a message with `: ` inside, three processes
        (
            "torch.OutOfMemoryErrortorch.OutOfMemoryError: : CUDA out of memory.CUDA out of memory.",
            "torch.OutOfMemoryError: CUDA out of memory.",
        ),
        (
            "RuntimeErrorRuntimeError: : CUDA error: out of memoryCUDA error: out of memory",
            "RuntimeError: CUDA error: out of memory",
        ),
        ("ValueErrorValueErrorValueError: : : bad batch: bad batch: bad batch", "ValueError: bad batch"),
        # four ranks under torchrun (tests/fixtures/torchrun/shared-stderr-keyerror.log and reruns): another
        # rank's caret line, a character at a time, between the pieces
        (f"    KeyError :  {KEY} ", f"KeyError: {KEY}"),
        (f"     KeyError  :  {KEY} ", f"KeyError: {KEY}"),
        (f"     KeyError : ~{KEY}^", f"KeyError: {KEY}"),
        (f"    ~KeyError^: ^{KEY}^", f"KeyError: {KEY}"),
        (f"^^^^^KeyError^: ^{KEY}^", f"KeyError: {KEY}"),
    ],
)
def test_interleaved_lines_read_as_one_process_wrote_them(line, fixed):
    assert unweave(line) == fixed


@pytest.mark.parametrize(
    "line",
    [
        f"KeyError: {KEY}",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
        "AssertionError: expected no AssertionError",  # its own type at the end, as a word
        "ValueError: ValueError raised by the reward function",  # ... and at the start of the message
        "INFO: step 3 done",
        "Errors: 3 of 10",
        "step:3 - loss:0.5 - grad_norm:1.2",
        "^^^^^^^^^^^^",
        "~~~~^^^^",
        "~/data: not found",
        f"    KeyError: {KEY}",  # indented and whole: a quoted or nested exception line
        '  File "/workspace/job/train.py", line 3, in main',
        '    batch = {"input_ids": ids}',
        "    label : str = 'x'",
        "aError: bError: ",
        "",
    ],
)
def test_lines_one_process_wrote_stay(line):
    assert unweave(line) is None


def _interleavings(pieces: list[str], k: int):
    """Every line (up to the first newline) that k processes each writing `pieces` then a newline
    can leave, piece by piece."""
    seqs = [pieces + ["\n"]] * k
    seen = set()

    def walk(pos: tuple[int, ...], out: str):
        for p in range(k):
            if pos[p] < len(seqs[p]):
                piece = seqs[p][pos[p]]
                if piece == "\n":
                    if out not in seen:
                        seen.add(out)
                        yield out
                    continue
                yield from walk(pos[:p] + (pos[p] + 1,) + pos[p + 1 :], out + piece)

    yield from walk((0,) * k, "")


@pytest.mark.parametrize("k", [2, 3])
def test_every_interleaving_keeps_the_type(k):
    """Whatever order the writes of k processes take, the line's exception type is the one raised
    (before the fix, `KeyErrorKeyError` whenever two types came first)."""
    lines = list(_interleavings(["KeyError", ": ", KEY], k))
    assert len(lines) > 5
    for line in lines:
        parsed = parse_exception_line(unweave(line) or line)
        assert parsed is not None and parsed[0] == "KeyError", line
        if "KeyError'" not in line:
            # ... and its message, unless another process's type ran straight into the message (`: KeyError'k'`
            # is read as it stands: a message may begin with a type name)
            assert parsed[1] == KEY, line


def test_long_runs_of_pieces_are_read_in_one_pass():
    """400,000 separators, a 800,000-character caret run, a 200,000-character message written twice:
    the results (the separators once stripped a slice a step, 5.8 s for such a line)."""
    assert unweave("KeyError: " + ": " * 400_000 + "KeyError") == "KeyError"
    assert unweave("^~" * 400_000 + f"KeyError: {KEY}") == f"KeyError: {KEY}"
    message = "".join(random.Random(5).choices("abcdefgh ", k=200_000))
    assert unweave(f"KeyErrorKeyError: : {message}{message}") == f"KeyError: {message}"


def test_lockstep_interleavings_keep_the_message():
    """Processes that write each piece in turn (the common case: the same code, the same moment)."""
    for k in (2, 3, 4):
        line = "KeyError" * k + ": " * k + KEY * k
        assert unweave(line) == f"KeyError: {KEY}"
        assert unweave("KeyError" * k + ": " * k + KEY) == f"KeyError: {KEY}"


def test_the_normaliser_reads_them_apart_after_the_prefixes_and_counts_them():
    norm = Normalizer()
    rec = norm.normalize(Line("x.log", 7, f"[rank1]: KeyErrorKeyError: : {KEY}{KEY}"))
    assert rec.message == f"KeyError: {KEY}"
    assert (
        rec.line.text == f"[rank1]: KeyErrorKeyError: : {KEY}{KEY}"
    )  # the evidence keeps the line as logged
    assert rec.origin.rank == 1
    norm.normalize(Line("x.log", 8, f"KeyError: {KEY}"))
    assert (norm.unwoven, norm.first_unwoven.number) == (1, 7)


def test_a_torchrun_log_of_ranks_failing_at_once_names_the_data_error():
    """Four ranks raise the same KeyError at once into torchrun's stderr (a real capture): the report
    names the data pipeline's KeyError from the first rank's interleaved exception line, shown as logged."""
    from logparse.pipeline import Analysis
    from patterns import load_catalog

    path = Path(__file__).parents[2] / "fixtures" / "torchrun" / "shared-stderr-keyerror.log"
    scanner = Analysis(load_catalog())
    scanner.feed_inputs([str(path)])
    report = scanner.report()
    rc = report.root_cause
    assert (rc.category, rc.id) == ("data-error", "key-error-in-data-pipeline")
    assert rc.error_line.line == 30 and rc.error_line.text == f"    KeyError :  {KEY} "
    assert (rc.summary, rc.message) == (f"KeyError {KEY} while reading a data sample", f"KeyError: {KEY}")
    assert any(
        n.startswith("2 exception line(s) written by several processes at once were read apart")
        for n in report.notes
    )
