"""Bad inputs and output safety: every case ends in a report (with a note about what was skipped) or in a
one-line error with exit code 2, never a Python traceback, within a memory bound.

Each case runs the real CLI (`logparse.cli.main`, as the console script does) in a subprocess, so the
bound is the process's own peak RSS, the VmHWM of the process read by an atexit hook. Not `ru_maxrss`
from wait4 or RUSAGE_CHILDREN: Linux keeps the high-water mark of the memory a child had before exec,
which for a child forked from a big pytest process is pytest's. No case asserts how long it took (the
test machine is shared and noisy): a process still running after HANG_GUARD_S is killed, which fails
the case as a hang; how long these cases take is measured by benchmarks/bench_hostile_inputs.py.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from logparse.process import EXIT_NO_INPUT
from logparse.read import sources as reader
from tests.conftest import ROOT, run_cli

HANG_GUARD_S = 300.0  # a process still running after this is killed: a hang, not a slow machine
RSS_LIMIT_MB = 300.0
OOM = (
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
    "capacity of 79.11 GiB of which 1.00 GiB is free."
)


# argv: HWM_FILE ARGS...; writes the process's peak RSS (kB) to HWM_FILE when it exits
LAUNCH = """\
import atexit, sys
def _hwm(path=sys.argv[1]):
    try:
        with open("/proc/self/status") as f:
            kb = next((line.split()[1] for line in f if line.startswith("VmHWM:")), None)
        if kb:
            with open(path, "w") as out:
                out.write(kb)
    except OSError:
        pass
atexit.register(_hwm)
sys.argv = ["verl-logscan", *sys.argv[2:]]
from logparse.cli import main
main()
"""


@dataclass
class Run:
    rc: int
    stdout: bytes
    stderr: str
    seconds: float
    rss_mb: float | None  # None where /proc is missing
    killed: bool = False  # still running after the hang guard

    def json(self) -> dict:
        return json.loads(self.stdout)

    def check_clean(self) -> None:
        """No Python traceback, no hang, inside the memory bound."""
        assert "Traceback" not in self.stderr, self.stderr
        assert not self.killed, f"still running after {HANG_GUARD_S:g} s: a hang"
        if Path("/proc/self/status").exists():
            assert self.rss_mb is not None, "the launcher did not report the peak RSS"
            assert self.rss_mb < RSS_LIMIT_MB, f"peak RSS {self.rss_mb:.0f} MB"


def run_process(
    args: list[str],
    cwd: Path,
    stdin: int | None = subprocess.DEVNULL,
    feed: Callable[[subprocess.Popen], None] | None = None,
    preexec: Callable[[], None] | None = None,
    prefix: list[str] | None = None,
    timeout: float = HANG_GUARD_S,
) -> Run:
    """Run `verl-logscan ARGS`; stdout and stderr go to files (no pipe to drain). `feed(proc)` runs in a
    thread (a writer to its stdin)."""
    out_path, err_path, hwm_path = cwd / ".run.stdout", cwd / ".run.stderr", cwd / ".run.hwm"
    hwm_path.unlink(missing_ok=True)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [
        *(prefix or []),
        sys.executable,
        "-c",
        LAUNCH,
        hwm_path.name,
        *args,
    ]  # relative: a setpriv run cannot reach the tmp root
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        start = time.monotonic()
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdin=stdin, stdout=out, stderr=err, env=env, preexec_fn=preexec
        )
        writer = threading.Thread(target=feed, args=(proc,), daemon=True) if feed else None
        if writer:
            writer.start()
        killed = False
        while True:
            pid, status = os.waitpid(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - start > timeout:  # the hang guard
                proc.kill()
                killed = True
                pid, status = os.waitpid(proc.pid, 0)
                break
            time.sleep(0.01)
        seconds = time.monotonic() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
    if writer:
        writer.join(5)
    hwm = hwm_path.read_text() if hwm_path.exists() else ""
    return Run(
        proc.returncode,
        out_path.read_bytes(),
        err_path.read_text(errors="replace"),
        seconds,
        int(hwm) / 1024 if hwm.isdigit() else None,
        killed,
    )


def scan_json(tmp_path: Path, *paths: str, **kw) -> Run:
    return run_process(["scan", "--format", "json", *paths], tmp_path, **kw)


def assert_one_line_error(run: Run, *words: str) -> None:
    assert run.rc == 2
    run.check_clean()
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("verl-logscan: error: "), run.stderr
    for w in words:
        assert w in lines[0]
    assert run.stdout == b""


def root_id(report: dict) -> str | None:
    return report["root_cause"]["id"] if report["root_cause"] else None


# -- the bad-input matrix ----------------------------------------------------------------------------


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    run = scan_json(tmp_path, "empty.log")
    assert run.rc == EXIT_NO_INPUT  # nothing to judge is not "healthy"
    run.check_clean()
    assert run.json()["inputs"] == [{"path": "empty.log", "lines": 0, "bytes": 0}]
    assert run.json()["status"] == "empty"


def test_only_whitespace(tmp_path: Path) -> None:
    (tmp_path / "ws.log").write_bytes(b"   \n\t\n\n  \r\n" * 1000)
    run = scan_json(tmp_path, "ws.log")
    assert run.rc == 0
    run.check_clean()
    assert run.json()["status"] == "healthy"


def core_dump(size: int = 2 << 20) -> bytes:
    """An ELF core file's look: header, NUL padding, register-like noise, and the strings of the
    process's memory (which hold log-like text: that must not become findings)."""
    rnd = random.Random(7)
    noise = bytes(rnd.getrandbits(8) for _ in range(64 << 10))
    body = (
        b"\x7fELF\x02\x01\x01\x00"
        + b"\x00" * 8
        + b"\x04\x00\x3e\x00"
        + noise
        + b"\x00" * 4096
        + OOM.encode()
        + b"\n"
        + b"\x00" * 4096
    )
    return (body * (size // len(body) + 1))[:size]


def test_binary_core_dump_named_log_is_skipped_with_a_note(tmp_path: Path) -> None:
    (tmp_path / "core.log").write_bytes(core_dump())
    run = scan_json(tmp_path, "core.log")
    assert run.rc == EXIT_NO_INPUT  # the only input was skipped: no log line was read
    run.check_clean()
    report = run.json()
    assert report["findings"] == [] and report["root_cause"] is None
    assert any("binary data, not a log" in n and "skipped" in n for n in report["notes"])


def test_binary_file_beside_a_real_log_in_a_folder(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "core.log").write_bytes(core_dump(256 << 10))
    (logs / "rank0.log").write_text("start\n" + OOM + "\n")
    run = scan_json(tmp_path, "logs")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom" and report["root_cause"]["error_line"]["source"] == "logs/rank0.log"
    assert any(n.startswith("logs/core.log: binary data") for n in report["notes"])


def test_log_with_a_run_of_nul_bytes_is_still_read(tmp_path: Path) -> None:
    # a log truncated (copytruncate) while its writer kept its offset starts with a hole of NUL bytes
    (tmp_path / "hole.log").write_bytes(b"\x00" * (200 << 10) + b"\nstep 1\n" + OOM.encode() + b"\n")
    run = scan_json(tmp_path, "hole.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom"
    assert any("NUL byte(s) dropped" in n for n in report["notes"])


def test_invalid_utf8(tmp_path: Path) -> None:
    (tmp_path / "bad.log").write_bytes(
        b"ok\n\xff\xfe\xfd bad \xc3\x28 \xed\xa0\x80\n" + OOM.encode() + b" \xff\n"
    )
    run = scan_json(tmp_path, "bad.log")
    assert run.rc == 1
    run.check_clean()
    assert root_id(run.json()) == "cuda-oom"


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_utf16_and_bom_logs_are_decoded(tmp_path: Path, encoding: str) -> None:
    # PowerShell's `>` writes UTF-16 with a byte-order mark; utf-16-le/be here have none
    text = "".join(f"INFO step {i}\n" for i in range(50)) + OOM + "\n"
    (tmp_path / "win.log").write_bytes(text.encode(encoding))
    run = scan_json(tmp_path, "win.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom"
    assert report["root_cause"]["error_line"]["line"] == 51
    assert report["root_cause"]["error_line"]["text"] == OOM
    if encoding != "utf-8-sig":
        assert any("read as UTF-16" in n for n in report["notes"])


def test_single_50mb_line(tmp_path: Path) -> None:
    with open(tmp_path / "long.log", "wb") as fh:
        fh.write(b"head\n")
        fh.write(b"x" * (50 << 20))
        fh.write(b"\n" + OOM.encode() + b"\n")
    run = scan_json(tmp_path, "long.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom" and report["root_cause"]["error_line"]["line"] == 3
    assert report["inputs"][0]["lines"] == 3
    assert any("cut to that length" in n for n in report["notes"])


LONG_TOKEN_LINES = {
    # one error line of a single 100 KB token (a base64 blob, a path without spaces): findings.mask's
    # `[\w.-]+@[\w.-]+` and redact's url-password scheme `[A-Za-z][A-Za-z0-9+.-]*://` retry at every start
    "error-line-token": OOM + " " + "y" * 100_000,
    # normalize.REPEATED: from each blank before the marker, `\s*$` runs over the blanks after it
    "repeated-between-blanks": OOM + " " * 50_000 + "[repeated 3x across cluster]" + " " * 50_000 + "end",
    # collectives.WORK_RE: `OpType=(?P<op>\w+)` backtracks into `.*?Timeout` one character at a time
    "watchdog-token": "[rank3]:[E808 04:21:41.190918398 ProcessGroupNCCL.cpp:655] [Rank 3] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLRED" + "y" * 100_000,
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LONG_TOKEN_LINES))
def test_over_long_line_reaching_the_trackers_is_scanned(tmp_path: Path, case: str) -> None:
    # (how long it takes is benchmarks/bench_hostile_inputs.py's: about 0.3 s, it once took minutes)
    (tmp_path / "long.log").write_text("start\n" + LONG_TOKEN_LINES[case] + "\n")
    run = scan_json(tmp_path, "long.log")
    assert run.rc in (0, 1)
    run.check_clean()
    report = run.json()
    assert report["complete"] is True and report["inputs"][0]["lines"] == 2


def test_crlf_line_endings(tmp_path: Path) -> None:
    (tmp_path / "crlf.log").write_bytes(("a\r\nb\r\n" + OOM + "\r\n").encode())
    run = scan_json(tmp_path, "crlf.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert report["root_cause"]["error_line"] == {"source": "crlf.log", "line": 3, "text": OOM}


def test_lone_cr_progress_bar_before_the_error(tmp_path: Path) -> None:
    bar = "".join(f"\rTraining Progress: {i}/100" for i in range(100))
    (tmp_path / "bar.log").write_bytes(("start\n" + bar + "\r" + OOM + "\n").encode())
    run = scan_json(tmp_path, "bar.log")
    assert run.rc == 1
    run.check_clean()
    assert run.json()["root_cause"]["error_line"]["line"] == 2


def test_lone_cr_line_endings_only(tmp_path: Path) -> None:
    (tmp_path / "mac.log").write_bytes(("a\rb\r" * 5000 + OOM + "\rtail\r").encode())
    run = scan_json(tmp_path, "mac.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert report["root_cause"]["error_line"]["line"] == 10001
    assert any("lone carriage return" in n for n in report["notes"])


def test_truncated_gz_gives_what_it_holds_and_a_note(tmp_path: Path) -> None:
    payload = (OOM + "\n").encode() + b"".join(
        f"INFO row {i} {random.random()}\n".encode() for i in range(50000)
    )
    data = gzip.compress(payload)
    (tmp_path / "cut.log.gz").write_bytes(data[: len(data) // 2])
    run = scan_json(tmp_path, "cut.log.gz")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom"
    assert any("ends early" in n for n in report["notes"])


def test_gz_that_is_not_gzip(tmp_path: Path) -> None:
    (tmp_path / "fake.log.gz").write_text(OOM + "\n")
    assert_one_line_error(scan_json(tmp_path, "fake.log.gz"), "fake.log.gz", "not gzip")


def test_path_that_does_not_exist(tmp_path: Path) -> None:
    assert_one_line_error(scan_json(tmp_path, "missing.log"), "missing.log", "no such file")


def test_permission_denied_in_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # as root, chmod 000 does not stop a read: make the open itself fail as it would for a user
    p = tmp_path / "secret.log"
    p.write_text(OOM + "\n")

    def denied(path, *args, **kwargs):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(reader, "open", denied, raising=False)
    result = run_cli(["scan", str(p)])
    assert result.exit_code == 2
    assert result.output.strip() == f"verl-logscan: error: {p}: permission denied"


def _as_nobody() -> list[str] | None:
    """A command prefix that drops root (setpriv), or None where that is not possible."""
    if os.geteuid() != 0:
        return []  # not root: chmod 000 is enough
    setpriv = shutil.which("setpriv")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"] if setpriv else None


@pytest.mark.slow  # a fresh interpreter with privileges dropped to nobody: about 1.4 s
def test_permission_denied_real(tmp_path: Path) -> None:
    prefix = _as_nobody()
    if prefix is None:
        pytest.skip("running as root without setpriv: cannot drop privileges")
    if (
        prefix
        and subprocess.run(
            [*prefix, sys.executable, "-c", "import logparse"],
            capture_output=True,
            cwd="/",
            check=False,
            env=dict(os.environ, PYTHONPATH=str(ROOT)),
        ).returncode
        != 0
    ):
        # e.g. a pyenv interpreter under /root whose libpython nobody may load
        pytest.skip("python (or the project) cannot be run by an unprivileged user here")
    tmp_path.chmod(0o777)
    (tmp_path / "secret.log").write_text(OOM + "\n")
    (tmp_path / "secret.log").chmod(0o000)
    folder = tmp_path / "locked"
    folder.mkdir(mode=0o000)
    folder.chmod(0o000)
    try:
        run = scan_json(tmp_path, "secret.log", prefix=prefix)
        if prefix and "Permission denied" in run.stderr and "python" in run.stderr.lower():
            pytest.skip("the interpreter itself is not readable by nobody")
        assert_one_line_error(run, "secret.log: permission denied")
        assert_one_line_error(scan_json(tmp_path, "locked", prefix=prefix), "locked: permission denied")
    finally:
        folder.chmod(0o755)


@pytest.mark.slow
def test_folder_of_10000_small_files(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    for d in range(10):
        (logs / f"node{d}").mkdir(parents=True)
        for i in range(1000):
            text = f"INFO worker {d}.{i} up\n" + (OOM + "\n" if (d, i) == (7, 500) else "")
            (logs / f"node{d}" / f"w{i:04d}.log").write_text(text)
    run = scan_json(tmp_path, "logs")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert len(report["inputs"]) == 10000
    assert report["root_cause"]["error_line"]["source"] == "logs/node7/w0500.log"


def test_fifo_with_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)

    def write() -> None:
        with open(fifo, "wb") as fh:  # blocks until the scanner opens the other end
            for i in range(2000):
                fh.write(f"INFO step {i}\n".encode())
            fh.write(OOM.encode() + b"\n")

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    run = scan_json(tmp_path, "job.log")
    writer.join(5)
    assert run.rc == 1
    run.check_clean()
    assert run.json()["root_cause"]["error_line"]["line"] == 2001


def test_stdin_closed_after_a_partial_line(tmp_path: Path) -> None:
    def feed(proc: subprocess.Popen) -> None:
        proc.stdin.write(b"INFO step 1\n" + OOM.encode()[:120])  # no newline: the writer died mid-line
        proc.stdin.close()

    run = scan_json(tmp_path, "-", stdin=subprocess.PIPE, feed=feed)
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert root_id(report) == "cuda-oom" and report["inputs"] == [
        {"path": "<stdin>", "lines": 2, "bytes": 132}
    ]


def test_stdin_that_is_closed_altogether(tmp_path: Path) -> None:
    run = scan_json(tmp_path, "-", preexec=lambda: os.close(0))
    assert_one_line_error(run, "standard input is closed")


@pytest.mark.slow  # 100,000 tracebacks
def test_100000_tracebacks(tmp_path: Path) -> None:
    block = (
        "[rank{r}]: Traceback (most recent call last):\n"
        '[rank{r}]:   File "/app/train.py", line {n}, in main\n'
        "[rank{r}]:     step(batch)\n"
        '[rank{r}]:   File "/app/model.py", line 88, in step\n'
        '[rank{r}]:     raise ValueError("bad batch {n}")\n'
        "[rank{r}]: ValueError: bad batch {n}\n"
    )
    with open(tmp_path / "tbs.log", "w") as fh:
        for n in range(100_000):
            fh.write(block.format(r=n % 8, n=n))
    run = scan_json(tmp_path, "tbs.log")
    assert run.rc == 1
    run.check_clean()
    report = run.json()
    assert report["root_cause"]["traceback"]["exception_type"] == "ValueError"
    assert report["inputs"][0]["lines"] == 600_000


@pytest.mark.slow
def test_traceback_that_never_ends(tmp_path: Path) -> None:
    with open(tmp_path / "endless.log", "w") as fh:
        fh.write("INFO start\n[rank0]: Traceback (most recent call last):\n")
        for i in range(300_000):
            fh.write(f'[rank0]:   File "/app/m{i}.py", line {i}, in f{i}\n[rank0]:     g{i}()\n')
    run = scan_json(tmp_path, "endless.log")
    assert run.rc in (0, 1)
    run.check_clean()
    assert run.json()["inputs"][0]["lines"] == 600_002


def test_stdout_closed_or_full(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_text(OOM + "\n")
    run = scan_json(tmp_path, "a.log", preexec=lambda: os.close(1))
    assert run.rc == 2 and "standard output is closed" in run.stderr
    run.check_clean()
    if Path("/dev/full").exists():
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with open("/dev/full", "wb") as full:
            proc = subprocess.run(
                [sys.executable, "-m", "logparse", "scan", "a.log"],
                cwd=tmp_path,
                env=env,
                stdout=full,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                timeout=60,
                check=False,
            )
        assert proc.returncode == 2
        err = proc.stderr.decode()
        assert "Traceback" not in err and "cannot write the report" in err


# -- output safety -----------------------------------------------------------------------------------


def test_output_refuses_to_overwrite_an_input(tmp_path: Path) -> None:
    log = tmp_path / "job.log"
    log.write_text(OOM + "\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "link.log").symlink_to(log)
    os.link(log, tmp_path / "hard.log")
    before = log.read_bytes()
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for out in ("job.log", "./sub/../job.log", str(log), "link.log", "hard.log"):
            result = run_cli(["scan", "job.log", "-o", out])
            assert result.exit_code == 2, out
            assert "is one of the inputs; refusing to overwrite it" in result.output
            assert log.read_bytes() == before
        result = run_cli(["scan", str(tmp_path), "-o", "job.log"])  # a folder input holds the file
        assert result.exit_code == 2 and log.read_bytes() == before
    finally:
        os.chdir(cwd)


def test_output_is_atomic_and_keeps_the_old_file_on_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "job.log"
    log.write_text(OOM + "\n")
    report = tmp_path / "report.json"
    report.write_text("previous report\n")
    report.chmod(0o640)
    # an input error: nothing is written
    assert run_cli(["scan", str(tmp_path / "missing.log"), "-o", str(report)]).exit_code == 2
    assert report.read_text() == "previous report\n"

    # a failing rename (disk full, a read-only folder): the old report stays, no temporary file is left
    def broken_replace(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", broken_replace)
    result = run_cli(["scan", str(log), "--format", "json", "-o", str(report)])
    assert result.exit_code == 2 and "cannot write" in result.output and "No space left" in result.output
    assert report.read_text() == "previous report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log", "report.json"]
    monkeypatch.undo()

    result = run_cli(["scan", str(log), "--format", "json", "-o", str(report)])
    assert result.exit_code == 1
    assert json.loads(report.read_text())["root_cause"]["id"] == "cuda-oom"
    assert report.stat().st_mode & 0o777 == 0o640  # the replaced file's mode is kept
    fresh = tmp_path / "fresh.json"
    umask = os.umask(0o022)
    try:
        assert run_cli(["scan", str(log), "--format", "json", "-o", str(fresh)]).exit_code == 1
    finally:
        os.umask(umask)
    assert fresh.stat().st_mode & 0o777 == 0o644  # not mkstemp's 0600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fresh.json", "job.log", "report.json"]


def test_output_into_a_missing_folder_gets_the_folder(tmp_path: Path) -> None:
    """`-o nope/r.md`: the folder is made before the scan (as `fleet --reports` makes its folder)."""
    (tmp_path / "a.log").write_text("x\n")
    result = run_cli(["scan", str(tmp_path / "a.log"), "-o", str(tmp_path / "nope" / "r.md")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "nope" / "r.md").read_text().startswith("## verl-logscan")


HOSTILE_BYTES = (
    b"\x00NUL at the start\n"
    b"lone escape \x1b and ESC c \x1bc and a bell \x07 and backspaces ab\x08\x08 and a C1 \xc2\x9b31m\n"
    b"\x1b]0;retitled\x07\x1b[2J\x1b[H cursor games\n"
    b"CESU surrogate \xed\xa0\x80\xed\xb0\x80 and overlong \xc0\xaf and U+2028 \xe2\x80\xa8 line sep\n"
    b"[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB \x00\x1b\x07\xff\n"
)


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "md", "html", "text"])
def test_control_bytes_and_surrogates_give_valid_output(tmp_path: Path, fmt: str) -> None:
    (tmp_path / "ctl.log").write_bytes(HOSTILE_BYTES)
    errdir = tmp_path / "rank1"
    errdir.mkdir()
    # JSON escapes in a torchrun error file decode to lone surrogates and control characters
    callstack = (
        'Traceback (most recent call last):\n  File "/a.py", line 1, in f\n    g()\n'
        "RuntimeError: CUDA error: an illegal memory access was encountered \ud800 \x00 \x1b]0;x\x07"
    )
    (errdir / "error.json").write_text(
        json.dumps({"message": {"message": "x", "extraInfo": {"py_callstack": callstack, "timestamp": "1"}}})
    )
    for path in ("ctl.log", "rank1/error.json"):
        run = run_process(["scan", "--format", fmt, "--no-color", path], tmp_path)
        assert run.rc == 1, run.stderr
        run.check_clean()
        text = run.stdout.decode("utf-8")  # strict: valid UTF-8, no surrogate escaped through
        if fmt == "json":
            report = json.loads(text)
            assert report["root_cause"] is not None
            assert json.loads(json.dumps(report, ensure_ascii=True)) == report
        if fmt == "text":
            assert not any(c in text for c in "\x00\x07\x08\x1b\r"), repr(text)


def test_text_summary_keeps_its_own_colours_only(tmp_path: Path) -> None:
    (tmp_path / "ctl.log").write_bytes(HOSTILE_BYTES)
    result = run_cli(["scan", str(tmp_path / "ctl.log"), "--color"])
    assert result.exit_code == 1
    import re

    leftover = re.sub(r"\x1b\[[0-9;]*m", "", result.output)
    assert "\x1b" not in leftover and "\x07" not in leftover and "\x00" not in leftover
    assert "\x1b[" in result.output  # coloured all the same


def test_sniff_decisions() -> None:
    assert reader.sniff(b"plain text\n") == "utf-8"
    assert reader.sniff(b"\xef\xbb\xbfbom\n") == "utf-8-sig"
    assert reader.sniff("hi\n".encode("utf-16")) == "utf-16"
    assert reader.sniff("hello world\n".encode("utf-16-le")) == "utf-16-le"
    assert reader.sniff("hello world\n".encode("utf-16-be")) == "utf-16-be"
    assert reader.sniff(core_dump(64 << 10)) == "binary"
    assert reader.sniff(b"\x00" * 4096) == "utf-8"  # a hole, not a verdict
    assert reader.sniff(b"latin-1 \xe9\xe8 text\n" * 100) == "utf-8"  # no NUL: text, decoded with U+FFFD
    assert reader.sniff(b"a\rb\rc\r") == "cr"
    assert reader.sniff(b"a\r\nb\r\n") == "utf-8"


def test_long_lines_of_repeated_keywords_do_not_make_regexes_backtrack_for_ever(tmp_path: Path) -> None:
    """Lines of 200 KB that repeat keywords and the start of patterns without their ends (`NCCL INFO
    ` without `Init`, `: ` without `reward_fn(`), and a traceback frame whose function is 200 KB of `: `: the
    regexes of the catalog, the stage markers and the frame rules would backtrack quadratically on
    them. The scan finishes (a guard against a hang, not a speed test) with a report."""
    frags = [
        "NCCL INFO ",
        "RuntimeError: ",
        "CUDA out of memory",
        "Traceback (most recent call last)",
        ": ",
        "rank0]: ",
        "Error ",
        'File "',
        "step:",
        "Saved model ",
        "ray::",
        "Timeout ",
        "ImportError ",
        "Watchdog caught collective operation timeout",
        "in <module>",
    ]
    lines = [f * (200_000 // len(f)) for f in frags]
    lines += [
        "Traceback (most recent call last):",
        '  File "/x.py", line 1, in ' + "rank0]: " * 25_000,
        "    compute(x)",
        "RuntimeError: " + ": x" * 50_000,
    ]
    log = tmp_path / "job.log"
    log.write_text("\n".join(lines) + "\n")
    run = scan_json(tmp_path, log.name)
    run.check_clean()
    assert run.rc in (0, 1)
    assert json.loads(run.stdout)["complete"] is True
