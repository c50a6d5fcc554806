"""A scan of a small log costs what start-up costs: what a command does not use is not imported.

Each case runs the CLI in a fresh interpreter (as the console script does) and lists the modules it
imported; no wall-clock time is asserted (benchmarks/bench_scan.py measures that)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from logparse import fleet_command
from tests.conftest import ROOT, SAMPLES

# what a scan that writes JSON (and prints the text summary) must not import
NOT_FOR_A_SCAN = (
    "logparse.fleet",
    "logparse.catalog_check",
    "multiprocessing",
    "jinja2",
    "pandas",
    "reports.layout",
    "logparse.console",
    "logparse.read.follow",
    "statistics",
    "logparse.decide.classify",  # a failure the catalog names needs no fallback rule
    "logparse.observe.names",  # --redact-hosts only
)


def _python(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """A fresh interpreter run with `args`."""
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=120, check=False
    )


def _env(tmp_path: Path) -> dict[str, str]:
    """The CLI's code on the path, its start-up cache in `tmp_path`."""
    return dict(os.environ, PYTHONPATH=str(ROOT), VERL_LOGSCAN_CACHE_DIR=str(tmp_path / "cache"))


def _modules_after(
    args: list[str], cwd: Path, cache: Path | None
) -> tuple[set[str], subprocess.CompletedProcess]:
    """The modules a CLI run imported; `cache`: the start-up cache folder (None: cache off)."""
    code = (
        "import sys\nfrom logparse.cli import main\nsys.argv = ['verl-logscan', *sys.argv[1:]]\n"
        "try:\n    main()\nexcept SystemExit as exc:\n    code = exc.code\n"
        "print('MODULES', ' '.join(sorted(sys.modules)), file=sys.stderr)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("VERL_LOGSCAN_CACHE", None)
    if cache is None:
        env["VERL_LOGSCAN_CACHE"] = "off"
    else:
        env["VERL_LOGSCAN_CACHE_DIR"] = str(cache)
    p = _python(["-c", code, *args], cwd, env)
    last = p.stderr.strip().splitlines()[-1]
    assert last.startswith("MODULES "), p.stderr
    return set(last.split()[1:]), p


@pytest.mark.slow
@pytest.mark.parametrize("cache", [True, False], ids=["cache", "no-cache"])
def test_a_json_scan_imports_no_fleet_checker_or_templates(tmp_path: Path, cache: bool) -> None:
    args = ["scan", str(SAMPLES / "ray-actor-exception.log"), "--format", "json", "-o", "r.json"]
    folder = tmp_path / "cache" if cache else None
    if folder is not None:
        _modules_after(args, tmp_path, folder)  # fills the cache
    modules, run = _modules_after(args, tmp_path, folder)
    assert run.stderr.startswith("FAILED  cuda-oom")  # the text summary was printed, from no template
    assert (tmp_path / "r.json").read_text().startswith("{")
    assert not modules & set(NOT_FOR_A_SCAN), sorted(modules & set(NOT_FOR_A_SCAN))
    if cache:  # the knowledge comes parsed from the cache: no YAML is read
        assert "yaml" not in modules and "patterns.yamlfile" not in modules


@pytest.mark.slow  # 5 s: a fresh interpreter per format
def test_the_formats_that_need_templates_still_load_them(tmp_path: Path) -> None:
    modules, _ = _modules_after(
        ["scan", str(SAMPLES / "ray-actor-exception.log"), "-o", "r.md"], tmp_path, tmp_path / "cache"
    )
    assert "jinja2" in modules and (tmp_path / "r.md").read_text().startswith("#")


def test_cli_constants_match_the_modules_it_no_longer_imports() -> None:
    from logparse.fleet import DEFAULT_JOB_TIMEOUT_S
    from reports.fleet import FLEET_FORMATS

    assert fleet_command.DEFAULT_JOB_TIMEOUT_S == DEFAULT_JOB_TIMEOUT_S
    assert fleet_command.FLEET_FORMATS == FLEET_FORMATS


# -- the end of the run (logparse.startup.exit_now) -------------------------------------------------
def _entry(tmp_path: Path, before: str, args: list[str]) -> subprocess.CompletedProcess:
    """The console script's entry (logparse.__main__.main) run after `before`, in a fresh interpreter."""
    code = f"import sys\n{before}\nsys.argv = ['verl-logscan', *sys.argv[1:]]\n"
    code += "from logparse.__main__ import main\nmain()\n"
    return _python(["-c", code, *args], tmp_path, _env(tmp_path))


@pytest.mark.slow  # 6 s: several fresh interpreters
def test_the_quick_exit_keeps_the_exit_code_the_output_and_the_atexit_functions(tmp_path: Path) -> None:
    sample = str(SAMPLES / "ray-actor-exception.log")
    before = "import atexit\natexit.register(lambda: print('atexit ran', file=sys.stderr))"
    p = _entry(tmp_path, before, ["scan", "--format", "json", sample])
    assert p.returncode == 1, p.stderr
    assert json.loads(p.stdout)["root_cause"]["category"] == "cuda-oom"  # (all of it, flushed)
    assert p.stderr.rstrip().endswith("atexit ran")
    bad = _entry(tmp_path, before, ["scan", str(tmp_path / "missing.log")])
    assert bad.returncode == 2 and "atexit ran" in bad.stderr
    assert _entry(tmp_path, before, ["--version"]).returncode == 0


@pytest.mark.slow  # 4 s: fresh interpreters with a thread and a profiler
def test_the_interpreter_exits_as_usual_for_a_thread_still_running_and_for_a_profiler(tmp_path: Path) -> None:
    sample = str(SAMPLES / "ray-actor-exception.log")
    # a thread that is no daemon: the interpreter waits for it before it ends the process (this one
    # waits for the main thread to end, as the interpreter's own exit marks it, then writes a file)
    done = tmp_path / "thread-done"
    before = (
        "import threading\n"
        "threading.Thread(target=lambda: (threading.main_thread().join(), "
        f"open({str(done)!r}, 'w').close())).start()"
    )
    p = _entry(tmp_path, before, ["scan", "-o", str(tmp_path / "r.md"), sample])
    assert p.returncode == 1 and done.exists(), p.stderr
    # cProfile writes its figures after the run returns (and takes the SystemExit: its own exit is 0)
    prof = tmp_path / "scan.prof"
    cmd = ["-m", "cProfile", "-o", str(prof), "-m", "logparse", "scan", "-o", "/dev/null", sample]
    p = _python(cmd, tmp_path, _env(tmp_path))
    assert p.returncode == 0 and prof.stat().st_size > 0, p.stderr
