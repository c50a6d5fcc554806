from __future__ import annotations

import re

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from logparse.read.normalize import Normalizer
from logparse.read.sources import Line, strip_ansi
from patterns.formats import builtin_line_formats, engine_of


def norm(text: str):
    return Normalizer().normalize(Line("x", 1, strip_ansi(text)))


@pytest.mark.parametrize(
    ("raw", "message", "fields"),
    [
        (
            "\x1b[36m(TaskRunner pid=1888103)\x1b[0m \rTraining Progress:   2%|▏ | 1/45 [01:02<46:08, 62.92s/it]",
            "Training Progress:   2%|▏ | 1/45 [01:02<46:08, 62.92s/it]",
            {"actor": "TaskRunner", "pid": 1888103},
        ),
        (
            "(WorkerDict pid=26110, ip=10.0.0.7) [rank7]:[W1120 01:13:20.886560089 TCPStore.cpp:125] [c10d] "
            "recvValue failed",
            "[c10d] recvValue failed",
            {"actor": "WorkerDict", "pid": 26110, "node": "10.0.0.7", "rank": 7, "level": "W"},
        ),
        (
            "[default0]:[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
            "torch.OutOfMemoryError: CUDA out of memory.",
            {"local_rank": 0, "rank": 0},
        ),
        (
            "W0731 10:50:07.575000 3247964 /opt/venv/lib/python3.10/site-packages/torch/distributed/elastic/"
            "multiprocessing/api.py:897] Sending process 3248029 closing signal SIGTERM",
            "Sending process 3248029 closing signal SIGTERM",
            {"pid": 3247964, "level": "W"},
        ),
        (
            "(vLLMHttpServer pid=4064, ip=10.0.0.4) (EngineCore_DP0 pid=4761) ERROR 05-22 14:41:15 [core.py:1102] "
            "EngineCore encountered a fatal error.",
            "EngineCore encountered a fatal error.",
            {"actor": "EngineCore_DP0", "pid": 4761, "node": "10.0.0.4", "level": "ERROR"},
        ),
        (
            "2025-04-30 20:59:12,200\tINFO worker.py:1832 -- Started a local Ray instance.",
            "Started a local Ray instance.",
            {"level": "INFO"},
        ),
        (
            "(WorkerDict pid=3588) INFO:2025-08-22 23:08:37,898:[Rank 0] Saved model to /ckpt/x.pt",
            "[Rank 0] Saved model to /ckpt/x.pt",
            {"rank": 0, "pid": 3588},
        ),
        (
            "node-1:842624:842624 [0] NCCL INFO cudaDriverVersion 12060",
            "NCCL INFO cudaDriverVersion 12060",
            {"node": "node-1", "pid": 842624},
        ),
        (
            "[2025-06-12 16:57:52] node-1:842624:842643 [0] misc/nvmlwrap.cc:74 NCCL WARN Failed to open x",
            "misc/nvmlwrap.cc:74 NCCL WARN Failed to open x",
            {"node": "node-1", "pid": 842624},
        ),
        (
            "(WorkerDict pid=490866) after load model cls [repeated 31x across cluster]",
            "after load model cls",
            {"repeat": 32},
        ),
        (
            "(pid=490876) WARNING 04-02 21:05:19 cuda.py:22] You are using a deprecated `pynvml` package. "
            "[repeated 8x across cluster] (Ray deduplicates logs by default. Set RAY_DEDUP_LOGS=0 to disable log "
            "deduplication.)",
            "You are using a deprecated `pynvml` package.",
            {"repeat": 9, "pid": 490876},
        ),
        (
            "(WorkerDict pid=26107) [2025-11-20 01:13:05 TP0] Init torch distributed begin.",
            "Init torch distributed begin.",
            {"pid": 26107},
        ),
        (
            "(raylet, ip=10.0.0.3) A worker died or was killed",
            "A worker died or was killed",
            {"actor": "raylet", "node": "10.0.0.3"},
        ),
        (
            "[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective",
            "[Rank 1] Watchdog caught collective",
            {"rank": 1, "level": "E"},
        ),
        (
            '  File "/workspace/job/train.py", line 3, in <module>',
            '  File "/workspace/job/train.py", line 3, in <module>',
            {},
        ),
        (
            '[rank2]:   File "/workspace/job/train.py", line 3, in <module>',
            '  File "/workspace/job/train.py", line 3, in <module>',
            {"rank": 2},
        ),
        ("step:3 - actor/pg_loss:np.float64(0.1)", "step:3 - actor/pg_loss:np.float64(0.1)", {}),
    ],
)
def test_prefixes_are_stripped_and_kept(raw: str, message: str, fields: dict) -> None:
    rec = norm(raw)
    assert rec.message == message
    for key, value in fields.items():
        assert getattr(rec.origin, key) == value, key


def test_timestamps_glog_takes_year_of_last_full_date() -> None:
    n = Normalizer()
    a = n.normalize(Line("x", 1, "2025-10-03 18:00:00,000\tINFO worker.py:1 -- start"))
    b = n.normalize(Line("x", 2, "[rank1]:[E1003 18:37:01.832146912 ProcessGroupNCCL.cpp:607] boom"))
    assert a.origin.time is not None and b.origin.time is not None
    assert b.origin.time - a.origin.time == 37 * 60 + 1


def test_stream_keys_separate_ranks_and_workers() -> None:
    a = norm("[rank0]: Traceback (most recent call last):")
    b = norm("[rank1]: Traceback (most recent call last):")
    c = norm("(WorkerDict pid=5, ip=10.0.0.1) x")
    d = norm("(WorkerDict pid=5, ip=10.0.0.2) x")
    assert len({a.stream, b.stream, c.stream, d.stream}) == 4


# the line formats the reader compiles with `re` (patterns.formats.engine_of; the rest with `regex`)
RE_FORMATS = {f.id: f.regex for f in builtin_line_formats() if f.engine == "re"}
# classes on which the engines differ (`re`: str.isspace / str.isalnum; `regex`: Unicode properties)
ENGINE_SENSITIVE = re.compile(r"\\[sSwWbB]|[*+?}]\+")


def test_the_formats_compiled_by_re_are_those_it_reads_fast() -> None:
    assert set(RE_FORMATS) == {"ray-daemon", "rank", "tee", "python-logging", "message-rank"}


@pytest.mark.parametrize("name", sorted(RE_FORMATS))
def test_prefixes_compiled_by_re_use_nothing_the_engines_read_differently(name: str) -> None:
    """A wording edited to use \\s, \\w, \\b or a possessive quantifier must go back to `regex`."""
    assert not ENGINE_SENSITIVE.search(RE_FORMATS[name]), RE_FORMATS[name]


@pytest.mark.parametrize("wording", [r"\s+", r"a\w", r"\bx", r"a++", r"(?>a)", r"\p{L}", r"[[:alpha:]]"])
def test_a_regex_that_needs_the_regex_module_gets_it(wording: str) -> None:
    assert engine_of(wording) == "regex"


PREFIX_TEXT = st.text(
    alphabet=st.sampled_from(
        list("[]():-,= 0123456789rRankdefault_INFOWARNERRORDEBUGletpid.") + ["\u0663", "\xb2", "\x1c", "\xa0"]
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(RE_FORMATS)), PREFIX_TEXT, st.integers(0, 5))
def test_prefixes_compiled_by_re_match_as_regex_does(name: str, text: str, pos: int) -> None:
    wording = RE_FORMATS[name]
    a, b = re.compile(wording).match(text, pos), regex.compile(wording).match(text, pos)
    assert (a and (a.span(), a.groupdict())) == (b and (b.span(), b.groupdict()))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("python-logging", "INFO:2025-08-22 23:08:02,898:[Rank 0] Saved model to /ckpt/model.pt"),
        ("message-rank", "[Rank 3] Saved optim"),
        ("tee", "[default1]:ok"),
        ("rank", "[rank2]: boom"),
        ("ray-daemon", "(raylet, ip=10.0.0.3) A worker died"),
    ],
)
def test_prefixes_compiled_by_re_read_their_real_wording(name: str, text: str) -> None:
    wording = RE_FORMATS[name]
    assert re.compile(wording).match(text).span() == regex.compile(wording).match(text).span()
