"""Secrets never reach a report (any format) unless --no-redact; --redact-hosts masks hosts with
stable placeholders. Redaction works on the Report, so evidence keeps its source:line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import pytest

from logparse.redact import Kind, RedactConfig, Redactor, redact_report
from reports import render
from tests.conftest import ROOT, SAMPLES, run_cli
from tests.reports.test_html import handmade_report

SCHEMA = json.loads((ROOT / "reports" / "schema.json").read_text())

SECRETS = {
    Kind.HF_TOKEN: "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789",
    Kind.WANDB_KEY: "0123456789abcdef0123456789abcdef01234567",
    Kind.OPENAI_KEY: "sk-proj-Q1w2E3r4T5y6U7i8O9p0AsDfGhJkL",
    Kind.AWS_ACCESS_KEY: "AKIAIOSFODNN7EXAMPLE",
    Kind.AWS_SECRET_KEY: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    Kind.GITHUB_TOKEN: "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789",
    Kind.BEARER_TOKEN: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjMifQ.c2lnbmF0dXJl",
    Kind.URL_PASSWORD: "s3cr3t-Pa55w0rd",
    Kind.EMAIL: "jane.doe+ci@mycorp.com",
}

# A job that crashes with secrets in the lines before the error (context evidence), in the traceback
# and in the error message itself, on a host with a private name and address.
_BODY = f"""\
TaskRunner hostname: gpu-node-17.cluster.local, PID: 4242
export HF_TOKEN={SECRETS[Kind.HF_TOKEN]}
WANDB_API_KEY={SECRETS[Kind.WANDB_KEY]} wandb login {SECRETS[Kind.WANDB_KEY]}
OPENAI_API_KEY={SECRETS[Kind.OPENAI_KEY]} aws_access_key_id={SECRETS[Kind.AWS_ACCESS_KEY]}
aws_secret_access_key={SECRETS[Kind.AWS_SECRET_KEY]} GITHUB_TOKEN={SECRETS[Kind.GITHUB_TOKEN]}
Traceback (most recent call last):
  File "/home/jdoe/verl/trainer/main_ppo.py", line 12, in fetch
    requests.get(url, headers={{"Authorization": "Bearer {SECRETS[Kind.BEARER_TOKEN]}"}})
RuntimeError: cannot reach https://jane:{SECRETS[Kind.URL_PASSWORD]}@db.mycorp.com:5432/runs as \
{SECRETS[Kind.EMAIL]} from gpu-node-17.cluster.local (10.20.30.40)
"""
LOG = "".join(f"(WorkerDict pid=812, ip=10.20.30.40) {line}\n" for line in _BODY.splitlines())


@pytest.fixture
def secret_log(tmp_path: Path) -> Path:
    path = tmp_path / "secret.log"
    path.write_text(LOG)
    return path


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_secrets_never_reach_a_report(secret_log: Path, fmt: str) -> None:
    result = run_cli(["scan", str(secret_log), "--format", fmt])
    assert result.exit_code == 1
    out = result.stdout
    for kind, secret in SECRETS.items():
        assert secret not in out, f"{kind} leaked into {fmt}"
    assert "[redacted:" in out
    # the report says what it masked, and how many
    said = {"text": "  redacted ", "md": "Redacted before writing: ", "html": "Redacted before writing: "}
    if fmt in said:
        line = next(line for line in out.splitlines() if said[fmt] in line)
        assert "1 hf-token" in line and "1 email" in line and "1 wandb-api-key" in line
    if fmt == "json":
        report = json.loads(out)
        jsonschema.validate(report, SCHEMA)
        assert set(report["redactions"]) == set(SECRETS)
        assert all(n >= 1 for n in report["redactions"].values())
        assert report["redactions"][Kind.WANDB_KEY] == 1  # distinct values, not mentions


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_no_redact_keeps_everything(secret_log: Path, fmt: str) -> None:
    out = run_cli(["scan", str(secret_log), "--format", fmt, "--no-redact"]).stdout
    assert "[redacted:" not in out
    if fmt == "json":
        report = json.loads(out)
        assert report["redactions"] == {}
        assert SECRETS[Kind.HF_TOKEN] in json.dumps(report)
        assert SECRETS[Kind.URL_PASSWORD] in report["root_cause"]["message"]
    elif fmt == "text":
        assert SECRETS[Kind.URL_PASSWORD] in out  # the error line
    else:
        for secret in (SECRETS[Kind.HF_TOKEN], SECRETS[Kind.URL_PASSWORD], SECRETS[Kind.AWS_ACCESS_KEY]):
            assert secret in out


def test_evidence_stays_line_accurate(secret_log: Path) -> None:
    plain = json.loads(run_cli(["scan", str(secret_log), "--format", "json", "--no-redact"]).stdout)
    masked = json.loads(run_cli(["scan", str(secret_log), "--format", "json"]).stdout)
    a, b = plain["root_cause"]["evidence"], masked["root_cause"]["evidence"]
    assert [(e["source"], e["line"]) for e in a] == [(e["source"], e["line"]) for e in b]
    lines = LOG.splitlines()
    for e in b:
        if "[redacted:" not in e["text"]:
            assert e["text"] == lines[e["line"] - 1]
    hf = next(e for e in b if e["line"] == 2)
    assert hf["text"] == f"(WorkerDict pid=812, ip=10.20.30.40) export HF_TOKEN=[redacted:{Kind.HF_TOKEN}]"


def test_hosts_stay_by_default_and_are_masked_on_request(secret_log: Path) -> None:
    default = run_cli(["scan", str(secret_log), "--format", "json"]).stdout
    assert "10.20.30.40" in default and "gpu-node-17.cluster.local" in default and "/home/jdoe/" in default
    for fmt in ("text", "md", "html", "json"):
        out = run_cli(["scan", str(secret_log), "--format", fmt, "--redact-hosts"]).stdout
        for value in ("10.20.30.40", "gpu-node-17", "jdoe", "db.mycorp.com", *SECRETS.values()):
            assert value not in out, f"{value} in {fmt}"
    report = json.loads(run_cli(["scan", str(secret_log), "--format", "json", "--redact-hosts"]).stdout)
    jsonschema.validate(report, SCHEMA)
    rc = report["root_cause"]
    assert rc["node"] == "ip-1"  # the same placeholder wherever the address appears
    assert "ip=ip-1)" in rc["evidence"][-1]["text"] and "(ip-1)" in rc["message"]
    assert "/home/user-1/verl/trainer/main_ppo.py" in json.dumps(rc["traceback"])
    host = re.search(r"TaskRunner hostname: (node-\d+),", rc["evidence"][0]["text"]).group(1)
    assert f"from {host} (ip-1)" in rc["message"]  # the same host, the same placeholder
    assert re.search(r"@node-\d+:5432/", rc["message"])  # the database host too, under its own
    assert {Kind.IP_ADDRESS, Kind.HOSTNAME, Kind.USER_NAME} <= set(report["redactions"])


def test_conflicting_options_are_a_usage_error(secret_log: Path) -> None:
    r = run_cli(["scan", str(secret_log), "--no-redact", "--redact-hosts"])
    assert r.exit_code == 2 and "contradict" in r.stderr


# -- the redactor on its own -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text,kind",
    [
        ("HF_TOKEN=hf_abcdefghijklmnopqrstuvwxyzABCDEF1234", Kind.HF_TOKEN),
        ("wandb login --relogin 0123456789abcdef0123456789abcdef0123456e", Kind.WANDB_KEY),
        ("'WANDB_API_KEY': '0123456789abcdef0123456789abcdef0123456e'", Kind.WANDB_KEY),
        ("key sk-abcdefghijklmnopqrstuvwx1234 end", Kind.OPENAI_KEY),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", Kind.AWS_SECRET_KEY),
        ("ASIAIOSFODNN7EXAMPLE", Kind.AWS_ACCESS_KEY),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", Kind.GITHUB_TOKEN),
        ("gho_abcdefghijklmnopqrstuvwxyz0123456789", Kind.GITHUB_TOKEN),
        ("ghs_abcdefghijklmnopqrstuvwxyz0123456789", Kind.GITHUB_TOKEN),
        ("authorization=Bearer abc.def-ghi_jkl", Kind.BEARER_TOKEN),
        ("redis://:hunter2pass@cache:6379/0", Kind.URL_PASSWORD),
        ("mail ops@lab.example.org now", Kind.EMAIL),
    ],
)
def test_each_secret_kind(text: str, kind: str) -> None:
    r = Redactor()
    out = r.text(text)
    assert f"[redacted:{kind}]" in out
    assert r.counts() == {kind: 1}


@pytest.mark.parametrize(
    "text",
    [
        "c10d::ProcessGroupNCCL::WorkNCCL c10d::add at 18:37:01.832 std::vector",
        "see https://docs.pytorch.org/docs/stable/notes/cuda.html and https://verl.readthedocs.io/en/latest/",
        "host = os.environ['MASTER_ADDR']; def f(host: str): threading.local",
        "torch 2.4.0+cu121 nccl 2.21.5 task-abcdefghijklmnopqrstuvwxyz sk-short",
        "git@github.com:volcengine/verl.git 127.0.0.1:29500 0.0.0.0 localhost",
        "actor/pg_loss:np.float64(-3.4e-05) - step:3 - timing_s/step:1.51",
    ],
)
def test_look_alikes_stay(text: str) -> None:
    r = Redactor(RedactConfig(hosts=True))
    r.learn(text)
    assert r.text(text) == text
    assert r.counts() == {}


def test_host_placeholders_are_stable_and_in_order() -> None:
    r = Redactor(RedactConfig(hosts=True))
    lines = [
        "gpu0301:842624:842624 [0] NCCL INFO Bootstrap",
        "  host      : trainer-7.corp.internal",
        "(WorkerDict pid=1, ip=10.0.0.2) x",
        "fe80::1ff:fe23:4567:890a and 2001:db8::7",
        "trainer-7 talks to gpu0301 at 10.0.0.2 from /Users/alice/x and /home/alice/y",
    ]
    for line in lines:
        r.learn(line)
    out = [r.text(line) for line in lines]
    assert out[0] == "node-1:842624:842624 [0] NCCL INFO Bootstrap"
    assert out[1] == "  host      : node-2"
    assert out[2] == "(WorkerDict pid=1, ip=ip-1) x"
    assert out[3] == "ip-2 and ip-3"
    assert out[4] == "node-3 talks to node-1 at ip-1 from /Users/user-1/x and /home/user-1/y"
    assert r.counts() == {Kind.HOSTNAME: 3, Kind.IP_ADDRESS: 3, Kind.USER_NAME: 1}


def test_every_string_field_is_redacted() -> None:
    token = "hf_ZyXwVuTsRqPoNmLkJiHgFeDcBa9876543210"
    report = handmade_report(evil=f" {token} ")
    masked = redact_report(report)
    assert masked.redactions == {Kind.HF_TOKEN: 1}
    for fmt in ("text", "md", "html", "json"):
        assert token not in render(masked, fmt)
        assert token in render(report, fmt)  # the handmade report carries it everywhere
    dumped = repr(masked)
    assert token not in dumped
    assert masked.root_cause is not None and masked.root_cause.evidence[0].line == 100
    data = json.loads(render(masked, "json"))
    assert data["redactions"] == {Kind.HF_TOKEN: 1}
    jsonschema.validate(data, SCHEMA)
    assert data["metrics"]["series"][0]["values"][4] == "nan"  # JSON has no NaN: a string stands in


# -- --redact-hosts: every place a log names a user or a machine ---------------------------------------
_SITE = """\
jdoe@gpu-node-17:~/verl$ USER=jdoe LOGNAME=jdoe SLURM_JOB_USER=jdoe bash run.sh
SLURMD_NODENAME=gpu-node-17 data under /scratch/jdoe/data and /data/users/jdoe/ckpt and /mnt/lustre/home/jdoe/x
EC2 ip-10-1-2-3 aka ip-10-1-2-3.ec2.internal, peer ip-172-31-9-9.us-west-2.compute.internal
rollout server http://node17.cluster.local:8000/v1 and redis://cache-7:6379/0, NIC 0c:42:a1:7b:9e:10
Traceback (most recent call last):
  File "/scratch/jdoe/verl/verl/trainer/main_ppo.py", line 12, in run_jdoe_job
    fetch()
RuntimeError: job of jdoe failed on ip-10-1-2-3 (MAC 0c:42:a1:7b:9e:10) talking to node17.cluster.local
"""
SITE_VALUES = (
    "jdoe",
    "gpu-node-17",
    "ip-10-1-2-3",
    "ip-172-31-9-9",
    "node17",
    "cache-7",
    "0c:42:a1:7b:9e:10",
)


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_redact_hosts_covers_users_prompts_ec2_urls_and_macs(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "site.log"
    path.write_text("".join(f"[rank0]: {line}\n" for line in _SITE.splitlines()))
    out = run_cli(["scan", str(path), "--format", fmt, "--redact-hosts"]).stdout
    for value in SITE_VALUES:
        assert value not in out, f"{value} in {fmt}"
    if fmt == "json":
        report = json.loads(out)
        rc = report["root_cause"]
        # one user, one placeholder: in the prompt, USER=, the paths, the frame and the bare mention
        assert {Kind.USER_NAME, Kind.HOSTNAME, Kind.MAC_ADDRESS} <= set(report["redactions"])
        assert report["redactions"][Kind.USER_NAME] == 1
        assert "job of user-1 failed" in rc["message"]
        assert rc["traceback"]["frames"][-1]["file"] == "/scratch/user-1/verl/verl/trainer/main_ppo.py"
        assert rc["traceback"]["frames"][-1]["function"] == "run_user-1_job"  # inside a name too
        first = rc["evidence"][0]["text"]
        assert re.search(r"user-1@node-\d+:~/verl\$ USER=user-1 LOGNAME=user-1 SLURM_JOB_USER=user-1", first)
        assert "mac-1" in rc["message"] and re.search(r"mac-1$", rc["evidence"][3]["text"])


def test_generic_accounts_and_short_names_are_not_masked_everywhere() -> None:
    r = Redactor(RedactConfig(hosts=True))
    lines = [
        "/home/root/x USER=ubuntu /scratch/al/y",
        "root cause: ubuntu image; al is a word; Al",
        "[bob@login-3 verl]$ ls",
        "bob's job on login-3",
    ]
    for line in lines:
        r.learn(line)
    assert [r.text(line) for line in lines] == [
        "/home/root/x USER=ubuntu /scratch/user-1/y",
        lines[1],
        "[user-2@node-1 verl]$ ls",
        "user-2's job on node-1",
    ]


def test_a_line_of_many_url_schemes_is_redacted_in_linear_time() -> None:
    # 20,000 `a://b:c` pieces with no `@`: an unbounded password group scanned the rest of the line from
    # every `://` (about 130 s for this line, found by the fuzz run); bounded, it is a fraction of a
    # second, and a real URL password among them is still masked
    line = "a://b:c" * 20_000 + " https://jane:pa/ss%21w0rd@db.example.com/x"
    out = Redactor(RedactConfig()).text(line)
    assert "pa/ss%21w0rd" not in out and "[redacted:url-password]" in out
    assert out.startswith("a://b:c" * 100)


# A job that names its master host and its user once, at the start (a launcher script's `set -x` echo
# and a shell prompt), then runs 300 steps, then fails with an error that names them again without
# saying that they are a host and a user, from an IPv4 peer written as an IPv4-mapped IPv6 address.
_EARLY_NAMES = (
    "+ export MASTER_ADDR=gpu-node-17\n"
    "+ export USER=jdoe\n"
    "[jdoe@login-3 job]$ bash run.sh\n"
    "USER: Solve the equation step by step\n"
    + "".join(f"(TaskRunner pid=11, ip=10.0.0.2) step:{i} - actor/loss:0.5\n" for i in range(1, 301))
    + "Traceback (most recent call last):\n"
    '  File "/workspace/job/train.py", line 10, in <module>\n'
    "    main()\n"
    "RuntimeError: Solve failed: connection to gpu-node-17 refused for jdoe "
    "from [::ffff:172.31.3.4]:29500 via login-3\n"
)


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_redact_hosts_learns_names_from_the_whole_log(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "job.log"
    path.write_text(_EARLY_NAMES)
    plain = run_cli(["scan", str(path), "--format", "json"]).stdout
    assert "gpu-node-17" in plain and "+ export USER=jdoe" not in plain  # the early lines are not shown
    out = run_cli(["scan", str(path), "--format", fmt, "--redact-hosts"]).stdout
    for value in ("gpu-node-17", "jdoe", "login-3", "172.31.3.4"):
        assert value not in out, f"{value} in {fmt}"
    # a chat turn (`USER: Solve ...`) names no user: the word stays in the error
    assert "Solve failed" in out
    if fmt == "json":
        message = json.loads(out)["root_cause"]["message"]
        assert re.fullmatch(
            r"RuntimeError: Solve failed: connection to node-1 refused for user-1 "
            r"from \[::ffff:ip-1\]:29500 via node-2",
            message,
        )


def test_fleet_redact_hosts_learns_names_from_the_whole_log(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "job-a"
    job.mkdir(parents=True)
    (job / "job.log").write_text(_EARLY_NAMES)
    out = run_cli(["fleet", str(tmp_path / "jobs"), "--format", "json", "--redact-hosts", "--jobs", "1"])
    for value in ("gpu-node-17", "jdoe", "login-3", "172.31.3.4"):
        assert value not in out.stdout


def test_alert_lines_mask_names_the_log_gave_before() -> None:
    log = _EARLY_NAMES.replace("RuntimeError: Solve failed", "torch.OutOfMemoryError: CUDA out of memory")
    result = run_cli(["scan", "--redact-hosts", "--format", "json"], input=log)
    alerts = [line for line in result.stderr.splitlines() if "ALERT" in line]
    assert alerts and "CUDA out of memory" in alerts[0]
    for value in ("gpu-node-17", "jdoe", "login-3", "172.31.3.4"):
        assert value not in alerts[0]
    assert "node-1" in alerts[0] and "user-1" in alerts[0] and "[::ffff:ip-1]:29500" in alerts[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("connect to [::ffff:172.31.3.4]:29500 failed", "connect to [::ffff:ip-1]:29500 failed"),
        ("peer ::ffff:172.31.3.4 and 172.31.3.4", "peer ::ffff:ip-1 and ip-1"),  # one address
        ("[::FFFF:10.1.2.3]", "[::FFFF:ip-1]"),
        ("::ffff:127.0.0.1 is loopback", "::ffff:127.0.0.1 is loopback"),
        ("64:ff9b::192.0.2.33", "ip-1"),  # another IPv6 with an IPv4 tail: masked whole
        ("at c10d::add 12:30:45", "at c10d::add 12:30:45"),  # no address
    ],
)
def test_ipv4_mapped_ipv6_addresses_are_masked_whole(text: str, expected: str) -> None:
    assert Redactor(RedactConfig(hosts=True)).text(text) == expected


# -- diff and fleet redact as scan does: one redactor, the names learnt from all their inputs ------------


@pytest.mark.parametrize("fmt", ["text", "md", "html", "json"])
def test_diff_redact_hosts_learns_names_from_both_whole_logs(tmp_path: Path, fmt: str) -> None:
    """`diff` learnt names only from its report's strings: a host and user named early leaked."""
    good = tmp_path / "good.log"
    good.write_text("+ export USER=asmith\n(TaskRunner pid=11, ip=10.0.0.2) step:1 - actor/loss:0.5\n")
    bad = tmp_path / "bad.log"
    bad.write_text(_EARLY_NAMES + "RuntimeError: asmith's copy also failed\n")
    out = run_cli(["diff", str(good), str(bad), "--format", fmt, "--redact-hosts"]).stdout
    for value in ("gpu-node-17", "jdoe", "login-3", "172.31.3.4", "asmith"):
        assert value not in out, f"{value} in {fmt}"
    assert "node-1" in out and "user-" in out


def test_fleet_rows_are_redacted_with_the_names_of_every_job(tmp_path: Path) -> None:
    """`fleet` showed `/home/jdoe/job-a` beside its own placeholder `/home/user-1/...`."""
    home = tmp_path / "home" / "jdoe"
    (home / "job-a").mkdir(parents=True)
    (home / "job-a" / "job.log").write_text(
        "+ cd /home/jdoe/job-a\n[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n"
    )
    other = tmp_path / "runs" / "job-b"
    other.mkdir(parents=True)
    (other / "job.log").write_text(_EARLY_NAMES)
    jobs = [str(home / "job-a"), str(other)]
    for fmt in ("text", "md", "html", "csv", "json"):
        out = run_cli(["fleet", *jobs, "--format", fmt, "--redact-hosts", "--jobs", "1"]).stdout
        for value in ("jdoe", "gpu-node-17", "login-3"):
            assert value not in out, f"{value} in {fmt}"
        assert "home/user-1/job-a" in out, fmt


def test_a_token_in_a_job_folder_name_is_masked_in_fleet(tmp_path: Path) -> None:
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    job = tmp_path / f"run-{token}"
    job.mkdir()
    (job / "job.log").write_text(
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n"
    )
    reports = tmp_path / "reports"
    for fmt in ("text", "md", "html", "csv", "json"):
        result = run_cli(["fleet", str(job), "--format", fmt, "--reports", str(reports)])
        assert token not in result.stdout + result.stderr, fmt
        assert "[redacted:hf-token]" in result.stdout or "redacted_hf-token" in result.stdout, fmt
    (page,) = reports.iterdir()
    assert "redacted_hf-token" in page.name and token not in page.read_text()
    missing = tmp_path / f"gone-{token}"
    result = run_cli(["fleet", str(missing), "--format", "json"])
    assert token not in result.stdout + result.stderr


@pytest.mark.parametrize(
    "line,host",
    [
        (
            "[W1206 socket.cpp:663] [c10d] The client socket has failed to connect to [gpu-node-17]:29500 "
            "(errno: 110 - Connection timed out).",
            "gpu-node-17",
        ),
        (
            "[E1206 socket.cpp:957] [c10d] The client socket has failed to connect to any network address "
            "of (gpu-node-19, 29500).",
            "gpu-node-19",
        ),
        ("+ ssh -o StrictHostKeyChecking=no jdoe@gpu-node-18 nvidia-smi", "gpu-node-18"),
    ],
)
def test_hosts_in_torch_rendezvous_messages_and_ssh_are_learnt(tmp_path: Path, line: str, host: str) -> None:
    log = tmp_path / "job.log"
    log.write_text(
        f"{line}\n"
        + "".join(f"(TaskRunner pid=11) step:{i} - actor/loss:0.5\n" for i in range(1, 50))
        + f"RuntimeError: lost {host} (rank 3)\n"
    )
    for command in (["scan", str(log)], ["diff", str(SAMPLES / "torchrun-healthy.log"), str(log)]):
        out = run_cli([*command, "--format", "json", "--redact-hosts"]).stdout
        assert host not in out and "node-1" in out, command
    if "ssh" in line:
        assert "jdoe" not in run_cli(["scan", str(log), "--format", "json", "--redact-hosts"]).stdout


def test_ssh_to_a_public_site_teaches_no_name() -> None:
    from logparse.redact import Names

    names = Names()
    names.learn("+ ssh -T git@github.com", strict=True)
    assert not names.hosts and not names.users


@pytest.mark.parametrize("redact", [[], ["--redact-hosts"]])
def test_metric_names_in_the_metrics_csv_are_masked_as_in_the_report(
    tmp_path: Path, redact: list[str]
) -> None:
    """The JSON report masked a token in a metric key; `--metrics-csv` wrote it as it was."""
    token = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"
    log = tmp_path / "job.log"
    log.write_text(
        "+ export USER=jdoe\n"
        f"step:1 - actor/loss:0.5 - judge/{token}/score:0.7 - jdoe/reward:1\n"
        f"step:2 - actor/loss:0.4 - judge/{token}/score:0.8 - jdoe/reward:1\n"
        "[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB.\n"
    )
    table = tmp_path / "metrics.csv"
    report = run_cli(["scan", str(log), "--format", "json", "--metrics-csv", str(table), *redact]).stdout
    written = table.read_text()
    assert token not in report and token not in written
    assert "judge/[redacted:hf-token]/score" in written.splitlines()[0]
    assert ("jdoe" in written) is not bool(redact)  # a user name goes with --redact-hosts only
    plain = tmp_path / "plain.csv"
    run_cli(["scan", str(log), "--format", "json", "--metrics-csv", str(plain), "--no-redact"])
    assert token in plain.read_text()


@pytest.mark.parametrize(
    "line",
    [
        "gpu_node_7:842624:842624 [0] NCCL INFO Bootstrap",  # (an underscore: missed before)
        "7gpu-b:842624:842624 [0] NCCL INFO Bootstrap",  # (a digit first: missed before)
        "(WorkerDict pid=1) gpu0301:842624:842624 [0] NCCL INFO Bootstrap",
    ],
)
def test_an_nccl_host_is_read_as_the_normaliser_reads_it(line: str) -> None:
    """One definition of NCCL's `host:pid:tid [dev]` (formats.yaml `nccl-host`): every host the
    normaliser takes from that prefix is masked."""
    from logparse.read.normalize import Normalizer
    from logparse.read.sources import Line

    host = Normalizer().normalize(Line("x", 1, line)).origin.node
    r = Redactor(RedactConfig(hosts=True))
    r.learn(line)
    assert host is not None and host in line and host not in r.text(line)
