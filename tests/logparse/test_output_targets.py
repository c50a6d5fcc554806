"""`-o`, `--metrics-csv` and `fleet -o` write into what the path names, through the real CLI: a regular
file is replaced atomically; a symbolic link is followed and the file it points to replaced (the link
stays a link, a dangling one gets its file); a character device, a FIFO and /dev/stdout are written
into, never renamed over; a folder, a socket and a block device are refused (exit 2, one line) and
left as they were."""

from __future__ import annotations

import csv
import io
import json
import os
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from logparse.process import EXIT_ERROR, EXIT_FAILURE_FOUND
from tests.conftest import ROOT, SAMPLES, run_cli

SAMPLE = SAMPLES / "ray-actor-exception.log"  # a CUDA OOM after three step lines


def job(tmp_path: Path) -> Path:
    log = tmp_path / "job.log"
    log.write_bytes(SAMPLE.read_bytes())
    return log


def csv_steps(data: bytes) -> list[str]:
    return [row["step"] for row in csv.DictReader(io.StringIO(data.decode()))]


def char_device(path: Path) -> Path:
    """A character device like /dev/null (1, 3), made with mknod (root only)."""
    try:
        os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


def read_fifo(path: Path) -> tuple[threading.Thread, list[bytes]]:
    got: list[bytes] = []

    def reader() -> None:
        with open(path, "rb") as fh:
            got.append(fh.read())

    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    return thread, got


def test_a_regular_file_is_replaced_and_keeps_its_mode(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    out.write_text("old report\n")
    out.chmod(0o640)
    result = run_cli(["scan", str(job(tmp_path)), "-o", str(out)])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert json.loads(out.read_text())["root_cause"]["id"] == "cuda-oom"
    assert out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log", "r.json"]  # no temporary file


@pytest.mark.parametrize("option", ["-o", "--metrics-csv"])
def test_a_symlink_stays_a_link_and_its_target_is_replaced(tmp_path: Path, option: str) -> None:
    (tmp_path / "reports").mkdir()
    target = tmp_path / "reports" / "real.out"
    target.write_text("old\n")
    target.chmod(0o600)
    link = tmp_path / "link.json"
    link.symlink_to("reports/real.out")
    result = run_cli(["scan", str(job(tmp_path)), option, str(link), "--format", "json"])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert link.is_symlink() and os.readlink(link) == "reports/real.out"
    text = target.read_text()
    assert ("cuda-oom" in text) if option == "-o" else csv_steps(text.encode()) == ["1", "2", "3"]
    assert target.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["real.out"]


def test_a_dangling_symlink_gets_its_file_and_stays_a_link(tmp_path: Path) -> None:
    link = tmp_path / "r.md"
    link.symlink_to(tmp_path / "made.md")
    result = run_cli(["scan", str(job(tmp_path)), "-o", str(link)])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert link.is_symlink() and (tmp_path / "made.md").is_file()
    assert "cuda-oom" in (tmp_path / "made.md").read_text()


@pytest.mark.parametrize("option", ["-o", "--metrics-csv"])
def test_a_character_device_is_written_into_not_replaced(tmp_path: Path, option: str) -> None:
    device = char_device(tmp_path / "mynull")
    before = device.stat()
    result = run_cli(["scan", str(job(tmp_path)), option, str(device), "--format", "json"])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    after = device.stat()
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev and after.st_ino == before.st_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.log", "mynull"]


def test_a_symlink_to_a_character_device_is_written_into(tmp_path: Path) -> None:
    device = char_device(tmp_path / "mynull")
    (tmp_path / "out.md").symlink_to(device)
    result = run_cli(["scan", str(job(tmp_path)), "-o", str(tmp_path / "out.md")])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert stat.S_ISCHR(device.stat().st_mode) and (tmp_path / "out.md").is_symlink()


@pytest.mark.parametrize("option", ["-o", "--metrics-csv"])
def test_a_fifo_is_written_into_for_its_reader(tmp_path: Path, option: str) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    thread, got = read_fifo(fifo)
    result = run_cli(["scan", str(job(tmp_path)), option, str(fifo), "--format", "json"])
    thread.join(timeout=60)
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    if option == "-o":
        assert json.loads(got[0])["root_cause"]["id"] == "cuda-oom"
    else:
        assert csv_steps(got[0]) == ["1", "2", "3"]


@pytest.mark.slow
def test_dev_stdout_is_the_standard_output(tmp_path: Path) -> None:
    log = job(tmp_path)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    result = subprocess.run(
        [sys.executable, "-m", "logparse", "scan", str(log), "-o", "/dev/stdout", "--format", "json"],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == EXIT_FAILURE_FOUND, result.stderr
    assert json.loads(result.stdout)["root_cause"]["id"] == "cuda-oom"
    assert b"Traceback" not in result.stderr
    assert os.path.islink("/dev/stdout")
    # the same through a link of one's own, and for fleet
    (tmp_path / "out").symlink_to("/dev/stdout")
    result = subprocess.run(
        [sys.executable, "-m", "logparse", "fleet", str(log), "-o", str(tmp_path / "out"), "--format", "csv"],
        capture_output=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == EXIT_FAILURE_FOUND, result.stderr
    assert b"cuda-oom" in result.stdout and (tmp_path / "out").is_symlink()


def make_socket(path: Path) -> Path:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()
    return path


def make_block_device(path: Path) -> Path:
    try:
        os.mknod(path, 0o600 | stat.S_IFBLK, os.makedev(7, 0))
    except PermissionError:
        pytest.skip("mknod needs root")
    return path


@pytest.mark.parametrize(
    "kind,make,why",
    [
        ("socket", make_socket, "is a socket"),
        ("block", make_block_device, "is a block device"),
    ],
)
@pytest.mark.parametrize("option", ["-o", "--metrics-csv", "fleet"])
def test_a_socket_or_block_device_is_refused_and_left_alone(
    tmp_path: Path, kind: str, make, why: str, option: str
) -> None:
    target = make(tmp_path / kind)
    before = target.lstat()
    log = job(tmp_path)
    args = (
        ["fleet", str(log), "-o", str(target)]
        if option == "fleet"
        else ["scan", str(log), option, str(target)]
    )
    result = run_cli(args)
    assert result.exit_code == EXIT_ERROR
    assert result.stderr.splitlines()[-1].startswith(f"verl-logscan: error: cannot write {target}: {why}")
    assert "Traceback" not in result.output
    after = target.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)


@pytest.mark.parametrize("option", ["-o", "--metrics-csv"])
def test_a_symlink_to_a_folder_is_refused(tmp_path: Path, option: str) -> None:
    (tmp_path / "reports").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "reports")
    result = run_cli(["scan", str(job(tmp_path)), option, str(tmp_path / "link")])
    assert result.exit_code == EXIT_ERROR and "Traceback" not in result.output
    assert (tmp_path / "link").is_symlink() and list((tmp_path / "reports").iterdir()) == []


def test_a_symlink_loop_is_refused(tmp_path: Path) -> None:
    (tmp_path / "a.json").symlink_to(tmp_path / "b.json")
    (tmp_path / "b.json").symlink_to(tmp_path / "a.json")
    result = run_cli(["scan", str(job(tmp_path)), "-o", str(tmp_path / "a.json")])
    assert result.exit_code == EXIT_ERROR
    assert "cannot write" in result.stderr and "Traceback" not in result.output
    assert (tmp_path / "a.json").is_symlink() and (tmp_path / "b.json").is_symlink()


@pytest.mark.parametrize("option", ["-o", "--metrics-csv", "fleet"])
def test_an_output_name_too_long_for_the_file_system_is_a_clear_error(tmp_path: Path, option: str) -> None:
    name = str(tmp_path / ("r" * 300 + ".json"))
    log = job(tmp_path)
    args = ["fleet", str(log), "-o", name] if option == "fleet" else ["scan", str(log), option, name]
    result = run_cli(args)
    assert result.exit_code == EXIT_ERROR
    assert ": File name too long" in result.stderr.splitlines()[-1], result.stderr
    assert "Traceback" not in result.output


def test_a_long_but_valid_name_gets_its_report(tmp_path: Path) -> None:
    """A name of 250 characters is allowed; its temporary file's name must be too."""
    out = tmp_path / ("r" * 245 + ".json")
    result = run_cli(["scan", str(job(tmp_path)), "-o", str(out)])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert json.loads(out.read_text())["root_cause"]["id"] == "cuda-oom"


# -- a link someone else planted in a shared sticky folder (/tmp) ---------------------------------------

OTHER_UID = 4242  # a user who is neither this process's nor the folder's


def shared_folder(tmp_path: Path) -> Path:
    """A folder like /tmp: world-writable and sticky."""
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o1777)
    return folder


def planted_link(folder: Path, name: str, target: Path, uid: int) -> Path:
    link = folder / name
    link.symlink_to(target)
    try:
        os.lchown(link, uid, uid)
    except PermissionError:
        pytest.skip("giving a link to another user needs root")
    return link


@pytest.mark.parametrize("option", ["-o", "--metrics-csv", "fleet", "fleet --reports"])
def test_a_link_planted_by_another_user_in_a_sticky_folder_is_not_followed(
    tmp_path: Path, option: str
) -> None:
    """As root, `-o /tmp/r.md` where r.md is another user's link to a file replaced that file: the tool
    resolved the link itself and renamed onto the target, sidestepping fs.protected_symlinks."""
    log = job(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    folder = shared_folder(tmp_path)
    name = "job.html" if option == "fleet --reports" else "r.md"
    link = planted_link(folder, name, victim, OTHER_UID)
    if option == "fleet --reports":
        args = ["fleet", str(log), "--reports", str(folder)]
    elif option == "fleet":
        args = ["fleet", str(log), "-o", str(link)]
    else:
        args = ["scan", str(log), option, str(link)] + (
            ["-o", str(tmp_path / "r.json")] if "csv" in option else []
        )
    result = run_cli(args)
    assert victim.read_text() == "precious\n" and link.is_symlink(), result.output
    if option == "fleet --reports":
        assert "could not write the report" in result.stderr
    else:
        assert result.exit_code == EXIT_ERROR, result.output
        error = [line for line in result.stderr.splitlines() if line.startswith("verl-logscan: error:")]
        assert len(error) == 1 and "belongs to another user" in error[0], result.stderr
        assert "fs.protected_symlinks" in error[0] and "Traceback" not in result.stderr


@pytest.mark.parametrize("owner", ["me", "folder owner"])
def test_a_link_of_my_own_or_the_folders_owner_in_a_sticky_folder_still_gets_the_report(
    tmp_path: Path, owner: str
) -> None:
    log = job(tmp_path)
    mine = tmp_path / "mine.md"
    folder = shared_folder(tmp_path)
    uid = os.geteuid()
    if owner == "folder owner":
        try:
            os.chown(folder, OTHER_UID, OTHER_UID)
        except PermissionError:
            pytest.skip("giving a folder to another user needs root")
        uid = OTHER_UID
    link = folder / "r.md"
    link.symlink_to(mine)
    if uid != os.geteuid():
        os.lchown(link, uid, uid)
    result = run_cli(["scan", str(log), "-o", str(link)])
    assert result.exit_code == EXIT_FAILURE_FOUND, result.output
    assert link.is_symlink() and "cuda-oom" in mine.read_text()


def test_a_planted_link_in_a_folder_above_is_refused_too(tmp_path: Path) -> None:
    """`-o /tmp/dir-link/r.md` where dir-link is another user's link to a folder of yours."""
    log = job(tmp_path)
    target_dir = tmp_path / "private"
    target_dir.mkdir()
    folder = shared_folder(tmp_path)
    link = planted_link(folder, "reports", target_dir, OTHER_UID)
    result = run_cli(["scan", str(log), "-o", str(link / "r.md")])
    assert result.exit_code == EXIT_ERROR and "belongs to another user" in result.stderr
    assert not (target_dir / "r.md").exists()
