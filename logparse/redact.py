"""Mask secrets (and, on request, hosts, IP addresses and user names) in a finished Report.

Redaction works on the Report, never on the raw log: every string field (evidence text, messages,
summaries, traceback frames, findings, notes, environment values, explanation, ...) goes through
the redactor, so evidence keeps its source:line and only the masked values change.

Secrets are always masked (unless the caller skips redaction): each becomes `[redacted:KIND]`, with
the prefix that identified it (`WANDB_API_KEY=`, `Authorization: Bearer `, `https://user:`) kept.
With `hosts=True`, IPv4/IPv6 addresses, host names and the user names in home paths are replaced by
stable placeholders (`ip-1`, `node-1`, `user-1`): the same value gets the same placeholder everywhere
in the report, numbered in order of first appearance, so the report still shows which lines came
from the same machine. Loopback and unspecified addresses (`127.0.0.1`, `0.0.0.0`, `::1`,
`localhost`) say nothing about a site and stay.

`Report.redactions` counts, per kind, the distinct values masked (a token that appears in the
evidence, the message and the summary counts once).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from dataclasses import dataclass

from logparse.model import Report


class Kind:
    """Names of what was redacted, as they appear in `Report.redactions`."""

    HF_TOKEN = "hf-token"
    WANDB_KEY = "wandb-api-key"
    OPENAI_KEY = "openai-api-key"
    AWS_ACCESS_KEY = "aws-access-key-id"
    AWS_SECRET_KEY = "aws-secret-access-key"
    GITHUB_TOKEN = "github-token"
    BEARER_TOKEN = "bearer-token"
    URL_PASSWORD = "url-password"
    EMAIL = "email"
    IP_ADDRESS = "ip-address"
    HOSTNAME = "hostname"
    USER_NAME = "user-name"


@dataclass(frozen=True)
class RedactConfig:
    hosts: bool = False  # also mask IP addresses, host names and user names in home paths


# (kind, pattern): the value to mask is group "v"; text around it (a group "keep" before it) stays.
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (Kind.URL_PASSWORD, re.compile(r"(?P<keep>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@'\"]*:)(?P<v>[^\s@/'\"]+)(?=@)")),
    (Kind.WANDB_KEY, re.compile(
        r"(?P<keep>(?i:WANDB_API_KEY)['\"]?\s*[=:]\s*['\"]?|\bwandb\s+login\s+(?:--?[\w-]+(?:=\S+)?\s+)*)"
        r"(?P<v>[0-9a-f]{40})(?![0-9A-Za-z])")),
    (Kind.AWS_SECRET_KEY, re.compile(
        r"(?P<keep>(?i:aws_secret_access_key)['\"]?\s*[=:]\s*['\"]?)(?P<v>[A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])")),
    (Kind.BEARER_TOKEN, re.compile(
        r"(?P<keep>(?i:\bauthorization)['\"]?\s*[:=]\s*['\"]?(?i:bearer)\s+|(?i:\bbearer)\s+(?=[A-Za-z0-9._~+/-]{16}))"
        r"(?P<v>[A-Za-z0-9._~+/-]+=*)")),
    (Kind.HF_TOKEN, re.compile(r"(?<![A-Za-z0-9_])(?P<v>hf_[A-Za-z0-9]{30,})(?![A-Za-z0-9])")),
    (Kind.OPENAI_KEY, re.compile(
        r"(?<![A-Za-z0-9_-])(?P<v>sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,})(?![A-Za-z0-9_-])")),
    (Kind.AWS_ACCESS_KEY, re.compile(r"(?<![A-Za-z0-9])(?P<v>(?:AKIA|ASIA)[0-9A-Z]{16})(?![A-Za-z0-9])")),
    (Kind.GITHUB_TOKEN, re.compile(
        r"(?<![A-Za-z0-9_])(?P<v>(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}))(?![A-Za-z0-9_])")),
    (Kind.EMAIL, re.compile(
        r"(?<![\w.%+-])(?!git@)(?P<v>[A-Za-z0-9][A-Za-z0-9._%+-]*@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
        r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*\.[A-Za-z]{2,})(?![\w-])")),
)

_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)"
# IPv6 candidates; `valid_ipv6` then wants the full form (8 groups) or a compressed one (`::`) with at
# least 3 groups or a link-local `fe80::` prefix, so that `c10d::add` or a `hh:mm:ss` time is no address.
IPV6 = r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])"
HOME_USER = r"(?P<home>/home/|/Users/|[A-Za-z]:\\Users\\)(?P<user>[A-Za-z0-9._-]+)(?=[/\\]|\b)"
# Where a log names a host. Strong contexts name one whatever it looks like; after a bare `host:` or
# `node=` the value must look like a host name (a digit, '-' or '.') and end where a name ends, so
# code such as `host = os.environ[...]` or `host: str` teaches nothing.
_HOST_VALUE = r"['\"]?(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?=$|[\s,;)'\"\]>]|:\d)"
STRONG_HOST_CONTEXTS = re.compile(
    r"(?:TaskRunner hostname:\s*|\bhostname\s*[:=]\s*|^\s*host\s+:\s*|\bip=|\bMASTER_ADDR\s*[:=]\s*"
    r"|--master[_-]addr(?:\s+|=)|\bmaster_addr\s*[:=]\s*|Worker IP address:\s*|Memory on the node \(IP:\s*)"
    + _HOST_VALUE,
    re.IGNORECASE,
)
WEAK_HOST_CONTEXTS = re.compile(r"\b(?:host|node|node_ip_address|node_name)\s*[:=]\s*" + _HOST_VALUE, re.IGNORECASE)
# NCCL's `host:pid:tid [dev]` prefix, at the start of the message or after a launcher prefix.
NCCL_HOST = re.compile(r"(?:^|[\s\])])(?P<host>[A-Za-z][A-Za-z0-9.-]*):\d+:\d+ \[\d+\]")
# Fully qualified names (`gpu-07.cluster.local`, `db.mycorp.com`, `ip-10-0-0-1.ec2.internal`). The TLD
# must be a private / cloud-internal one or a common public one (not `.py`, `.info`, ... which end module
# and attribute names); a one-label name on a private TLD (`threading.local`) counts only if it looks
# like a host (`gpu-07.local`); the public sites that log messages link to (docs) stay.
FQDN = re.compile(
    r"(?<![\w.-])(?P<host>(?P<first>[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)"
    r"(?P<more>(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)"
    r"\.(?P<tld>internal|local|localdomain|lan|corp|intra|intranet|com|net|org|io|ai|co|edu|gov|dev|cloud|cn))"
    r"(?![\w-]|\.\w)",
    re.IGNORECASE,
)
PRIVATE_TLDS = frozenset({"internal", "local", "localdomain", "lan", "corp", "intra", "intranet"})
PUBLIC_SITES = ("pytorch.org", "github.com", "github.io", "githubusercontent.com", "huggingface.co", "hf.co",
                "readthedocs.io", "python.org", "pypi.org", "nvidia.com", "ray.io", "anyscale.com", "vllm.ai",
                "sglang.ai", "wandb.ai", "wandb.me", "nccl.dev",
                "tensorflow.org", "numpy.org", "stackoverflow.com", "google.com", "microsoft.com")
NOT_HOSTS = frozenset({"localhost", "none", "null", "unknown", "true", "false", "0.0.0.0", "127.0.0.1", "::1",
                       "localhost.localdomain"})
KEEP_ADDRESSES = frozenset({"0.0.0.0", "127.0.0.1", "::", "::1", "255.255.255.255"})


class Redactor:
    """One report's redaction state: placeholders given so far and distinct values per kind."""

    def __init__(self, config: RedactConfig | None = None):
        self.config = config or RedactConfig()
        self.seen: dict[str, set[str]] = {}
        self.placeholders: dict[tuple[str, str], str] = {}  # (kind, value) -> placeholder
        self.known_hosts: set[str] = set()
        self._hosts_re: re.Pattern[str] | None = None
        self._hosts_re_v4: re.Pattern[str] | None = None

    # -- hosts: learnt from the whole report first, so every mention gets the same placeholder ------
    def learn(self, text: str) -> None:
        for m in STRONG_HOST_CONTEXTS.finditer(text):
            self.learn_host(m.group("host"))
        for m in WEAK_HOST_CONTEXTS.finditer(text):
            if re.search(r"[\d.-]", m.group("host")):
                self.learn_host(m.group("host"))
        if ":" in text:
            for m in NCCL_HOST.finditer(text):
                self.learn_host(m.group("host"))
        if "." in text:
            for m in FQDN.finditer(text):
                host = m.group("host").lower()
                if m.group("tld").lower() in PRIVATE_TLDS:
                    if m.group("more") or re.search(r"[\d-]", m.group("first")):
                        self.learn_host(m.group("host"))
                elif not any(host == site or host.endswith("." + site) for site in PUBLIC_SITES):
                    self.learn_host(m.group("host"))

    def learn_host(self, host: str) -> None:
        """Remember a host name, to mask wherever it appears (addresses are masked as addresses)."""
        host = host.strip(".")
        if not host or host.lower() in NOT_HOSTS or re.fullmatch(r"[\d.]+|[0-9A-Fa-f:]+", host) or len(host) > 253:
            return
        self.known_hosts.add(host)
        self._hosts_re = None
        short = host.split(".", 1)[0]
        if short != host and len(short) >= 3 and re.search(r"[\d-]", short):
            self.known_hosts.add(short)  # `gpu-07.cluster.local` is also mentioned as `gpu-07`

    def _host_pattern(self, ipv6: bool = True) -> re.Pattern[str]:
        if self._hosts_re is None:
            alternatives = [rf"(?P<ipv4>{IPV4})", HOME_USER]
            if self.known_hosts:
                names = "|".join(re.escape(h) for h in sorted(self.known_hosts, key=lambda h: (-len(h), h)))
                alternatives.append(rf"(?<![\w.-])(?P<name>{names})(?![\w-]|\.\w)")
            self._hosts_re = re.compile("|".join([rf"(?P<ipv6>{IPV6})", *alternatives]))
            self._hosts_re_v4 = re.compile("|".join(alternatives))
        return self._hosts_re if ipv6 else self._hosts_re_v4

    # -- masking ---------------------------------------------------------------------------------
    def _count(self, kind: str, value: str) -> None:
        self.seen.setdefault(kind, set()).add(value)

    def _placeholder(self, kind: str, prefix: str, value: str) -> str:
        key = (kind, value.lower() if kind == Kind.HOSTNAME else value)
        if key not in self.placeholders:
            n = sum(1 for k in self.placeholders if k[0] == kind) + 1
            self.placeholders[key] = f"{prefix}-{n}"
        self._count(kind, key[1])
        return self.placeholders[key]

    def _mask_host(self, m: re.Match[str]) -> str:
        if m.group("user") is not None:
            return m.group("home") + self._placeholder(Kind.USER_NAME, "user", m.group("user"))
        if m.group("ipv6") is not None and not valid_ipv6(m.group("ipv6")):
            return self._host_pattern(ipv6=False).sub(self._mask_host, m.group(0))
        address = m.group("ipv6") or m.group("ipv4")
        if address is not None:
            if address in KEEP_ADDRESSES or address.startswith("127."):
                return address
            return self._placeholder(Kind.IP_ADDRESS, "ip", address.lower())
        return self._placeholder(Kind.HOSTNAME, "node", m.group("name"))

    def text(self, value: str) -> str:
        for kind, pattern in SECRET_PATTERNS:
            if kind == Kind.URL_PASSWORD and "://" not in value:
                continue  # (its scheme part would be tried at every position of a long value)
            if kind == Kind.EMAIL and "@" not in value:
                continue
            value = pattern.sub(lambda m, kind=kind: self._mask_secret(kind, m), value)
        if self.config.hosts:
            value = self._host_pattern().sub(self._mask_host, value)
        return value

    def _mask_secret(self, kind: str, m: re.Match[str]) -> str:
        self._count(kind, m.group("v"))
        keep = m.groupdict().get("keep") or ""
        return f"{keep}[redacted:{kind}]"

    def counts(self) -> dict[str, int]:
        return {kind: len(values) for kind, values in sorted(self.seen.items())}

    # -- walking the report ----------------------------------------------------------------------
    def value(self, value: object) -> object:
        """`value` with every string inside (dataclass fields, tuples, lists, dict values) redacted."""
        if isinstance(value, str):
            return self.text(value)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {f.name: self.value(getattr(value, f.name)) for f in dataclasses.fields(value)
                       if f.name != "redactions"}
            return dataclasses.replace(value, **changes)
        if isinstance(value, tuple):
            return tuple(self.value(v) for v in value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value


def valid_ipv6(text: str) -> bool:
    if text.count("::") > 1 or ":::" in text:
        return False
    groups = [g for g in text.split(":") if g]
    if any(len(g) > 4 for g in groups):
        return False
    if "::" not in text:
        return len(groups) == 8
    return len(groups) >= 3 or (bool(groups) and groups[0].lower() == "fe80")


def strings(value: object) -> Iterator[str]:
    """Every string inside `value`, in field order (the order placeholders are numbered in)."""
    if isinstance(value, str):
        yield value
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name != "redactions":
                yield from strings(getattr(value, f.name))
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)


def redact_report(report: Report, config: RedactConfig | None = None) -> Report:
    """A copy of `report` with secrets (and, with `config.hosts`, hosts) masked in every string, and
    `redactions` set to {kind: distinct values masked}."""
    redactor = Redactor(config)
    if redactor.config.hosts:
        for text in strings(report):
            redactor.learn(text)
        if report.root_cause is not None and report.root_cause.node:
            redactor.learn_host(report.root_cause.node)
        for f in (*report.symptoms, *report.findings):
            for node in f.nodes:
                redactor.learn_host(node)
        hosts = report.environment.get("hosts") if isinstance(report.environment, dict) else None
        if isinstance(hosts, (list, tuple)):
            for h in hosts:
                if isinstance(h, str):
                    redactor.learn_host(h)
    redacted = redactor.value(report)
    assert isinstance(redacted, Report)
    return dataclasses.replace(redacted, redactions=redactor.counts())
