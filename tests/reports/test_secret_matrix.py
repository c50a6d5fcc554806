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
@pytest.mark.slow
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


# -- every syntax a log writes a secret-named setting in, in every place a report takes text from --------

# (kind, line, secret): each form of the issue "Safe to paste, round three" (the table holds each as an
# example too); each is placed in the traceback message, a config dump, an environment listing and a
# Ray-prefixed line, and checked in every output
FORMS = [
    (
        "hydra-override-secret",
        "Error executing job with overrides: ['+reward_model.api_key=rk-9f8e7d6c5b4a']",
        "rk-9f8e7d6c5b4a",
    ),
    (
        "hydra-override-secret",
        "Error executing job with overrides: ['++judge.token=jt-4a5b6c7d8e']",
        "jt-4a5b6c7d8e",
    ),
    ("hydra-override-secret", "Error executing job with overrides: ['~db.password=hunter2pw']", "hunter2pw"),
    (
        "hydra-override-secret",
        "python3 -m verl.trainer.main_ppo reward_model.hf_token=tkq7R8s9T0u1",
        "tkq7R8s9T0u1",
    ),
    (
        "url-query-secret",
        "HTTPError: 401 for url: https://judge.internal/v1/score?model=rm&api_key=ak_77f0c1d2e3&token=tk9Qw8Er",
        "ak_77f0c1d2e3",
    ),
    (
        "url-query-secret",
        "HTTPError: 401 for url: https://judge.internal/v1/score?model=rm&api_key=ak_77f0c1d2e3&token=tk9Qw8Er",
        "tk9Qw8Er",
    ),
    ("assignment-secret", "slack notifier: channel=#alerts token=Zx81qqTk", "Zx81qqTk"),
    ("assignment-secret", "webhook registered with secret=Qw8Er6Ty4U", "Qw8Er6Ty4U"),
    ("env-secret", "PGPASSWORD=Pg9pw-77 psql -h db.internal -U verl", "Pg9pw-77"),
    ("env-secret", "env: DB_PASS=Dbp4ss-99", "Dbp4ss-99"),
    ("assignment-secret", "export db_password=hunter2pw", "hunter2pw"),
    ("wandb-api-key", 'wandb.login(key="wk-9f8e7d6c5b4a39281706")', "wk-9f8e7d6c5b4a39281706"),
    (
        "subscript-secret",
        'os.environ["WANDB_API_KEY"] = "0123456789abcdef0123456789abcdef0123"',
        "0123456789abcdef0123456789abcdef0123",
    ),
    ("assignment-secret", 'API_KEY = "ak-77f0c1d2e3f4"', "ak-77f0c1d2e3f4"),
    (
        "header-secret",
        "curl -s -H 'X-API-Key: xk_9f8e7d6c5b4a3928' https://judge.internal/v1/score",
        "xk_9f8e7d6c5b4a3928",
    ),
    ("config-secret", "personal_access_token: glx-9f8e7d6c5b4a3928", "glx-9f8e7d6c5b4a3928"),
    (
        "npm-token",
        "//registry.npmjs.org/:_authToken=9f8e7d6c-5b4a-3928-1706-a5b4c3d2e1f0",
        "9f8e7d6c-5b4a-3928-1706-a5b4c3d2e1f0",
    ),
    (
        "docker-auth",
        '{"auths": {"ghcr.io": {"auth": "amRvZTpnaHBfc2VjcmV0dmFsdWU="}}}',
        "amRvZTpnaHBfc2VjcmV0dmFsdWU=",
    ),
    ("cli-secret-flag", "mysqldump -h db.internal -u verl -pHunter2Pw rollouts", "Hunter2Pw"),
    (
        "cookie",
        "curl -H 'Cookie: session=9a8b7c6d5e4f; csrftoken=Zx81qq' https://judge.internal/v1/score",
        "9a8b7c6d5e4f",
    ),
    ("cookie", "Set-Cookie: sid=s%3AXbT9k2.Qw8; Path=/; HttpOnly", "s%3AXbT9k2.Qw8"),
    (
        "config-secret",
        "'ssh': {'key_passphrase': 'correct horse battery', 'user': 'verl'},",
        "correct horse battery",
    ),
    (
        "private-key",
        "client-key-data: LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB",
        "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFb3dJQkFBS0NBUUVB",
    ),
    (
        "basic-auth-password",
        "resp = requests.get(url, auth=('svc-reward', 'Rw9!pq-77xz'), timeout=30)",
        "Rw9!pq-77xz",
    ),
    (
        "stripe-key",
        "payment webhook failed with key sk_live_4eC39HqLyjWDarjtT1zdp7dc",
        "4eC39HqLyjWDarjtT1zdp7dc",
    ),
    (
        "npm-token",
        "npm notice using token npm_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
        "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    ),
    (
        "pypi-token",
        "twine upload -u __token__ -p pypi-AgEIcHlwaS5vcmcCJDk0ZWQ3YTNjLWFhMzItNDE5ZS1iNmY1LTE1YzQ3ZDNhN2E1YQ",
        "AgEIcHlwaS5vcmcCJDk0ZWQ3YTNjLWFhMzItNDE5ZS1iNmY1LTE1YzQ3ZDNhN2E1YQ",
    ),
    # round four (issue "Safe to paste, round four"): YAML values in quotes, more tools and services, a
    # .netrc block and a JWT over two lines (a form of several lines is placed one line after another)
    ("config-secret", 'api_key: "rk-live-5Y7u9I1o3PQQ"', "rk-live-5Y7u9I1o3PQQ"),
    ("config-secret", "password: 'Pw-7h9k2m4n'", "Pw-7h9k2m4n"),
    ("config-secret", 'hf_token: "tkq7R8s9T0u1V2w3"', "tkq7R8s9T0u1V2w3"),
    (
        "url-query-secret",
        "gsutil: 403 for https://storage.googleapis.com/ckpts/step_80.pt?X-Goog-Algorithm=GOOG4-RSA-SHA256"
        "&X-Goog-Date=20250101T000000Z&X-Goog-Signature=5f2a9c0d1e3b4a6f7c8d9e0f1a2b3c4d5e6f7a8b",
        "5f2a9c0d1e3b4a6f7c8d9e0f1a2b3c4d5e6f7a8b",
    ),
    (
        "cli-secret-flag",
        "python3 train.py --wandb_key 0a1b2c3d4e5f60718293a4b5c6d7e8f901234567 --project verl",
        "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567",
    ),
    (
        "cli-secret-flag",
        "az storage blob upload --account-name ckpts --account-key Zm9vYmFyYmF6cXV4MTIz== -f step_80.pt",
        "Zm9vYmFyYmF6cXV4MTIz==",
    ),
    ("cli-secret-flag", "sshpass -p Sup3r-ssh-99 rsync -a ckpts/ node-2:/ckpts/", "Sup3r-ssh-99"),
    ("cli-secret-flag", "redis-cli -h cache -p 6379 -a R3dis-Pw-42 ping", "R3dis-Pw-42"),
    ("cli-secret-flag", "az login -u 0f1e2d3c-aaaa-bbbb-cccc-0123456789ab -p Az-Sp-Pw-77", "Az-Sp-Pw-77"),
    (
        "discord-webhook",
        "notifier: POST https://discord.com/api/webhooks/1234567890123456789/Xy9-Ab8_Cd7Ef6Gh5Ij4Kl3Mn2Op1Qr0St",
        "Xy9-Ab8_Cd7Ef6Gh5Ij4Kl3Mn2Op1Qr0St",
    ),
    (
        "netrc-password",
        "machine api.wandb.ai\n  login verl-bot\n  password 7e2a0ffee7e2a0ffee7e2a0ffee7e2a0ffee5678",
        "7e2a0ffee7e2a0ffee7e2a0ffee7e2a0ffee5678",
    ),
    (
        "groq-api-key",
        "reward judge: GROQ_API_KEY=gsk_8Hd2kLq9ZxV3mN7pR1tY5wB0cF6gJ4sA2eU8iO3",
        "8Hd2kLq9ZxV3mN7pR1tY5wB0cF6gJ4sA2eU8iO3",
    ),
    (
        "jwt",
        "judge auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2ZXJs\nIiwiZXhwIjoxNzAwMDAwMDAwfQ.c2lnbmF0dXJlLXBhcnQtb25l",
        "IiwiZXhwIjoxNzAwMDAwMDAwfQ.c2lnbmF0dXJlLXBhcnQtb25l",
    ),
    (
        "jwt",
        "judge auth eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ2ZXJs\nIiwiZXhwIjoxNzAwMDAwMDAwfQ.c2lnbmF0dXJlLXBhcnQtb25l",
        "eyJzdWIiOiJ2ZXJs",
    ),
]
RAY = "(WorkerDict pid=4187, ip=10.0.0.2) "
DUMP = "(TaskRunner pid=1888103) "
PLACEMENTS = {
    # the exception message of the root cause's traceback (also its error line and the ALERT line); a
    # form of several lines goes on in the lines after it
    "traceback-message": lambda lines: [
        "[rank0]: Traceback (most recent call last):",
        '[rank0]:   File "/app/train.py", line 3, in main',
        "[rank0]:     step()",
        f"[rank0]: {ERROR}{lines[0]}",
        *(f"[rank0]: {line}" for line in lines[1:]),
    ],
    # a line of the pprinted config dump before the failure
    "config-dump": lambda lines: [
        f"{DUMP}{{'actor_rollout_ref': {{'actor': {{'strategy': 'fsdp'}}}},",
        *(f"{DUMP} {line}" for line in lines),
        f"{DUMP} 'trainer': {{'n_gpus_per_node': 8}}}}",
        f"{DUMP}{ERROR}Tried to allocate 2.00 GiB.",
    ],
    # an environment listing (`env`, `set -x`) before the failure
    "environment-line": lambda lines: ["+ env", *lines, f"{ERROR}Tried to allocate 2.00 GiB."],
    # a Ray worker's line before its failure
    "ray-prefixed": lambda lines: [
        f"{RAY}loading the reward model",
        *(f"{RAY}{line}" for line in lines),
        f"{RAY}{ERROR}Tried to allocate 2.00 GiB.",
    ],
}
# beyond the formats of one scan: `fleet` (its summary and the job's own report, --reports) and `diff`
# (the log as BAD against a healthy GOOD, in JSON and Markdown)
MATRIX_OUTPUTS = (*FORMATS, "fleet", "diff")
HEALTHY = "[rank0]: loading the model\n[rank0]: step:1 - loss:0.5\n"


def outputs_of(tmp_path: Path, log: str, fmt: str) -> tuple[int, str]:
    """The exit code and every text a user gets from `fmt` for the job log `log`."""
    path = tmp_path / "job.log"
    path.write_text(log)
    if fmt == "alert":  # a live scan (stdin): the ALERT line goes to stderr as the line is read
        result = run_cli(["scan", "-", "--format", "json"], input=log)
        out = "\n".join(text for text in result.stderr.splitlines() if "ALERT" in text)
        assert out, result.stderr
        return result.exit_code, out
    if fmt == "fleet":
        reports = tmp_path / "reports"
        result = run_cli(["fleet", str(path), "--format", "json", "--reports", str(reports)])
        pages = "".join(p.read_text() for p in sorted(reports.glob("*.html")))
        assert pages, result.output
        return result.exit_code, result.stdout + result.stderr + pages
    if fmt == "diff":
        good = tmp_path / "good.log"
        good.write_text(HEALTHY)
        outs = [run_cli(["diff", str(good), str(path), "--format", f]) for f in ("json", "md")]
        return outs[0].exit_code, "".join(r.stdout + r.stderr for r in outs)
    result = run_cli(["scan", str(path), "--format", fmt])
    return result.exit_code, result.stdout


ROUND_THREE_FORMS = 27  # the forms before round four's: their fleet and diff cases are in the slow run


def _matrix_cases() -> list:
    """(kind, line, secret, fmt) of every form and output; the round-three forms' fleet and diff cases
    (216 runs that fork workers) marked slow, so the quick run keeps to its two minutes."""
    cases = []
    for i, (kind, line, secret) in enumerate(FORMS):
        for fmt in MATRIX_OUTPUTS:
            slow = i < ROUND_THREE_FORMS and fmt in ("fleet", "diff")
            marks = (pytest.mark.slow,) if slow else ()
            cases.append(pytest.param(kind, line, secret, fmt, marks=marks, id=f"{kind}-{i}-{fmt}"))
    return cases


@pytest.mark.parametrize("placement", PLACEMENTS)
@pytest.mark.parametrize("kind,line,secret,fmt", _matrix_cases())
def test_no_form_of_a_secret_leaks_from_any_place(
    tmp_path: Path, kind: str, line: str, secret: str, placement: str, fmt: str
) -> None:
    lines = line.split("\n")
    log = "\n".join(PLACEMENTS[placement](lines)) + "\n"
    code, out = outputs_of(tmp_path, log, fmt)
    assert code == 1, out
    assert secret not in out, f"{kind} leaked into {fmt} from the {placement}"
    first = lines[0]
    shown = (
        placement == "traceback-message" and secret in first and len(ERROR) + first.index(secret) < SHOWN - 20
    )
    if fmt in ("md", "html", "json", "fleet") or (shown and fmt != "diff"):  # the evidence holds the line
        assert f"[redacted:{kind}]" in out
    if fmt == "json":
        report = json.loads(out)
        assert report["root_cause"]["id"] == "cuda-oom"
        assert report["redactions"].get(kind, 0) >= 1


def test_each_form_is_masked_as_its_kind_and_by_no_other() -> None:
    for kind, line, secret in FORMS:
        redactor = Redactor()
        out = redactor.text(line)
        assert secret not in out and f"[redacted:{kind}]" in out, (kind, out)
        assert set(redactor.counts()) == {kind}, (line, redactor.counts())


# pprint splits a long string at its spaces into adjacent literals, one a line (width=60 here)
PPRINT = [
    f"{DUMP}{{'actor_rollout_ref': {{'actor': {{'strategy': 'fsdp'}}}},",
    f"{DUMP} 'trainer': {{'project_name': 'verl demo nightly run with a '",
    f"{DUMP}                             'long project name'}},",
    f"{DUMP} 'reward_model': {{'api_key': 'rk-live correct horse '",
    f"{DUMP}                             'battery staple '",
    f"{DUMP}                             'Qw8Er6Ty4Ui2Op0AsDf9Gh8Jk7Lz '",
    f"{DUMP}                             'Mn3Bv5Cx7Za9',",
    f"{DUMP}                  'enable': True}}}}",
]


@pytest.mark.parametrize("fmt", ["md", "html", "json"])
def test_a_secret_value_pprint_wraps_over_lines_is_masked_on_each(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "job.log"
    path.write_text("\n".join([*PPRINT, f"{DUMP}{ERROR}Tried to allocate 2.00 GiB."]) + "\n")
    out = run_cli(["scan", str(path), "--format", fmt]).stdout
    for part in ("correct horse", "battery staple", "Qw8Er6Ty4Ui2Op0AsDf9Gh8Jk7Lz", "Mn3Bv5Cx7Za9"):
        assert part not in out, fmt
    assert "enable" in out  # the next setting stays
    if fmt == "json":
        evidence = [e["text"] for e in json.loads(out)["root_cause"]["evidence"]]
        assert sum(t.endswith("'[redacted:config-secret]'") for t in evidence) == 3
        assert any(t.endswith("'[redacted:config-secret]',") for t in evidence)
