"""The start-up cache: built once and read back, keyed by content, written atomically, safe against a
damaged or planted file, quiet where it cannot write, off on request; and what it gives back is what
parsing gives."""

from __future__ import annotations

import hashlib
import os
import pickle
from pathlib import Path

import pytest

from patterns import cache
from patterns.cache import MAGIC, MAX_FILES, cache_dir, cached
from patterns.inference import InferenceRules


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    return tmp_path / "cache"


class Builder:
    def __init__(self, value: object) -> None:
        self.value = value
        self.calls = 0

    def __call__(self) -> object:
        self.calls += 1
        return self.value


RULES = InferenceRules(frozenset({"cuda-oom"}), 5.0, (25, 50, 75))


def get(
    build: Builder, parts: list[bytes] | None = None, check=lambda v: isinstance(v, InferenceRules)
) -> object:
    return cached("test", parts or [b"one"], build, (InferenceRules,), check)


def only_file(folder: Path) -> Path:
    (path,) = [p for p in folder.iterdir() if p.suffix == ".bin"]
    return path


def test_built_once_then_read_back(folder: Path) -> None:
    build = Builder(RULES)
    assert get(build) == RULES and get(build) == RULES
    assert build.calls == 1
    assert [p.name for p in folder.iterdir()] == [only_file(folder).name]  # no temporary file left


def test_other_contents_are_another_key(folder: Path) -> None:
    build = Builder(RULES)
    get(build, [b"one"])
    get(build, [b"two"])
    get(build, [b"on", b"etwo"])  # (parts are length-prefixed: no two splits give one key)
    assert build.calls == 3


@pytest.mark.parametrize("damage", ["flip", "cut", "empty", "other-key"])
def test_a_damaged_file_is_ignored_and_rebuilt(folder: Path, damage: str) -> None:
    build = Builder(RULES)
    get(build)
    path = only_file(folder)
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[-10] ^= 0xFF
    elif damage == "cut":
        data = data[: len(data) // 2]
    elif damage == "empty":
        data = bytearray()
    else:
        data[len(MAGIC)] ^= 1  # the key inside no longer the file's
    path.write_bytes(bytes(data))
    assert get(build) == RULES and build.calls == 2
    assert get(build) == RULES and build.calls == 2  # rebuilt and written again


class _Planted:
    def __reduce__(self):
        return (os.system, ("echo planted > planted.txt",))


def test_a_planted_pickle_runs_nothing(folder: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A file with the right header and checksum whose payload names a global it should not (what a
    pickle needs to run code) is refused, and rebuilt."""
    monkeypatch.chdir(tmp_path)
    build = Builder(RULES)
    get(build)
    path = only_file(folder)
    payload = pickle.dumps(_Planted())
    head = path.read_bytes()[: len(MAGIC) + 64]
    path.write_bytes(head + hashlib.sha256(payload).digest() + payload)
    assert get(build) == RULES and build.calls == 2
    assert not (tmp_path / "planted.txt").exists()


def test_an_object_of_the_wrong_shape_is_rebuilt(folder: Path) -> None:
    build = Builder(RULES)
    get(build)
    assert get(build, check=lambda v: False) == RULES and build.calls == 2


def test_a_read_only_folder_means_no_cache(folder: Path) -> None:
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as a user who can write anywhere")
        build = Builder(RULES)
        assert get(build) == RULES and get(build) == RULES
        assert build.calls == 2 and not list(folder.iterdir())
    finally:
        folder.chmod(0o700)


def test_a_folder_that_cannot_be_made_means_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """(Also as root, whom a read-only mode does not stop: a file where the folder would be.)"""
    (tmp_path / "file").write_text("x")
    monkeypatch.setenv(cache.CACHE_DIR_ENV, str(tmp_path / "file" / "cache"))
    build = Builder(RULES)
    assert get(build) == RULES and get(build) == RULES
    assert build.calls == 2


def test_off_reads_and_writes_nothing(folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache.CACHE_ENV, "off")
    build = Builder(RULES)
    get(build)
    get(build)
    assert build.calls == 2 and not folder.exists()


def test_where_it_lives(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(cache.CACHE_DIR_ENV, raising=False)
    monkeypatch.delenv(cache.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "verl-logscan"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # the XDG spec: ignored
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "verl-logscan"


def test_at_most_max_files_are_kept(folder: Path) -> None:
    build = Builder(RULES)
    for i in range(MAX_FILES + 5):
        get(build, [str(i).encode()])
    assert len(list(folder.iterdir())) == MAX_FILES


def test_what_the_cache_gives_is_what_parsing_gives(folder: Path) -> None:
    """The built-in catalog, stage markers, fallback and inference rules, and the prefilter: read back
    from the cache, equal to their parse (and the cache files are there)."""
    from logparse.read.prefilter import Prefilter
    from patterns import fallback, inference, load_builtin_catalog, stages

    def fresh() -> tuple:
        for f in (stages.builtin_stage_markers, fallback.fallback_rules, inference.inference_rules):
            f.cache_clear()
        return (
            load_builtin_catalog(),
            stages.builtin_stage_markers(),
            fallback.fallback_rules(),
            inference.inference_rules(),
        )

    built = fresh()
    kinds = {p.name.split("-")[0] for p in folder.iterdir()}
    assert {"catalog", "stage", "fallback", "inference"} <= kinds
    assert fresh() == built
    words = [k for e in built[0].entries for k in e.keywords] + [
        "step:",
        "Training Progress",
        "Training Progress:",
    ]
    block = Path(__file__).resolve().parents[2].joinpath("samples", "ray-actor-exception.log").read_bytes()
    first = Prefilter(words)
    assert any(p.name.startswith("prefilter-") for p in folder.iterdir())
    assert Prefilter(words).lines(block) == first.lines(block) == Prefilter(words, "re").lines(block)


def test_a_key_holds_the_source_of_a_module_not_imported_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    # patterns.yamlfile is imported only to parse: the key of what it parsed must still change with it
    import sys

    from patterns import yamlfile

    monkeypatch.delitem(sys.modules, "patterns.yamlfile")
    assert cache.source_of("patterns.yamlfile") == [Path(yamlfile.__file__).read_bytes()]
    assert "patterns.yamlfile" not in sys.modules
