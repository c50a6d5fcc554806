"""Mask secrets (and, on request, hosts, IP addresses, MAC addresses and user names) in a finished
Report, or in one line (the live ALERT lines).

Redaction works on the Report, never on the raw log: every string field (evidence text, messages,
summaries, traceback frames, findings, notes, environment values, explanation, ...) goes through
the redactor, so evidence keeps its source:line and only the masked values change. The scan's hot
path never calls it: it costs per report string, not per log line.

Secrets are always masked (unless the caller skips redaction): the kinds, their regexes and examples
are the table patterns/secrets.yaml. Each value becomes `[redacted:KIND]`; the text that identified it
(`WANDB_API_KEY=`, `Authorization: Bearer `, `https://user:`) stays. Kinds apply in table order. A
value with an invisible character inside (ESC sequence, backspace, zero-width space or joiner, soft
hyphen, BOM) is found as if the character were not there and masked with it. A text cut inside a
token (the 1 MB line limit) is masked from the token's known prefix to its end. A PEM private key
that spans several lines (evidence) is masked on every line of its block.

With `hosts=True`, IPv4/IPv6 and MAC addresses, host names and user names are replaced by stable
placeholders (`ip-1`, `mac-1`, `node-1`, `user-1`): the same value gets the same placeholder
everywhere in the report, numbered in order of first appearance, so the report still shows which
lines came from the same machine. Host and user names are learnt from the whole report first (home
and scratch paths, `USER=`, shell prompts, `hostname:`, URLs, EC2 `ip-10-1-2-3` names, ...), then
masked wherever they appear. Loopback and unspecified addresses (`127.0.0.1`, `0.0.0.0`, `::1`,
`localhost`) and account names shared by everyone (`root`, `ubuntu`, ...) say nothing about a site
and stay.

`Report.redactions` counts, per kind, the distinct values masked (a token that appears in the
evidence, the message and the summary counts once).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import Enum

from logparse.model import Environment, Evidence, Report
from logparse.read.sources import MAX_LINE_BYTES
from patterns.formats import formats
from patterns.schema import LazyRe
from patterns.secrets import LINE_PREFIX_PATTERN, MIN_CONTINUATION, SecretKind, secret_kinds


class Kind:
    """Names of what was redacted, as they appear in `Report.redactions` (the secret kinds are the
    ids of patterns/secrets.yaml; these constants name the ones code refers to)."""

    HF_TOKEN = "hf-token"
    WANDB_KEY = "wandb-api-key"
    OPENAI_KEY = "openai-api-key"
    AWS_ACCESS_KEY = "aws-access-key-id"
    AWS_SECRET_KEY = "aws-secret-access-key"
    GITHUB_TOKEN = "github-token"
    BEARER_TOKEN = "bearer-token"
    URL_PASSWORD = "url-password"
    EMAIL = "email"
    PRIVATE_KEY = "private-key"
    CONFIG_SECRET = "config-secret"
    IP_ADDRESS = "ip-address"
    MAC_ADDRESS = "mac-address"
    HOSTNAME = "hostname"
    USER_NAME = "user-name"


@dataclass(frozen=True)
class RedactConfig:
    """What a redacted report masks beyond its secrets (`--redact-hosts`: hosts and users too)."""

    hosts: bool = False  # also mask IP and MAC addresses, host names and user names


MASK = "[redacted:{}]"
# (The regexes below but INVISIBLE are LazyRe, compiled on first use: the host and user ones serve only
# --redact-hosts, the others a cut line or a PEM block; compiling them all cost every scan 3 ms.)
# Characters a terminal or browser does not show, which a log can put inside a token (a colour code, a
# backspace, a zero-width space): matching skips them, masking covers them.
INVISIBLE = re.compile(
    r"\x1b\[[0-?]{0,64}[ -/]{0,8}[@-~]?|\x1b\][^\x07\x1b]{0,512}(?:\x07|\x1b\\)?|\x1b[\x20-\x7e]?"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u00ad\u034f\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
    r"\u2060-\u2064\u2066-\u2069\u3164\ufeff]"
)
# A line cut at MAX_LINE_BYTES holds at least this many characters (4 UTF-8 bytes at most per
# character, less a launcher prefix stripped from the message): a text this long may end inside a token.
CUT_MIN_CHARS = MAX_LINE_BYTES // 4 - 1024
# At the end of a cut text: a secret-named setting whose value the cut shortened
_CUT_SETTING = LazyRe(
    r"(?i)(?:key|token|secret|passw(?:or)?d|credentials?|authorization|bearer|sig)[\w.-]{0,40}['\"]?\s{0,3}[=:]"
    r"\s{0,3}['\"]?(?:(?:bearer|basic|token)\s+)?(?P<v>(?!\[redacted:)[^\s'\"]+)\Z"
)
# The launcher prefix of a line (`(WorkerDict pid=1, ip=...)`, `[rank3]:`), kept on a masked key line
LINE_PREFIX = LazyRe(LINE_PREFIX_PATTERN)
_BASE64_LINE = LazyRe(r"[A-Za-z0-9+/=]{4,}\s*")
# pprint's continuation of a long string: a line that is only a quoted string (its closing `,` `}` `)`
# `]` after it), and a masked value that runs to the end of its line
_QUOTED_LINE = LazyRe(
    r"""\s*(?P<q>['"])(?P<v>(?!\[redacted:)[^'"\n]{1,4096})(?P=q)(?P<end>\s*[,})\]]*)\s*$"""
)
_MASKED_AT_END = LazyRe(r"""\[redacted:(?P<kind>[a-z0-9-]+)\]['"]\s*$""")


def _visible(text: str) -> tuple[str, list[int]]:
    """`text` without its invisible characters, and for each character kept its index in `text`."""
    kept: list[str] = []
    index: list[int] = []
    last = 0
    for m in INVISIBLE.finditer(text):
        kept.append(text[last : m.start()])
        index.extend(range(last, m.start()))
        last = m.end()
    kept.append(text[last:])
    index.extend(range(last, len(text)))
    return "".join(kept), index


_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
IPV4 = rf"(?<![\w.]){_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)"
# IPv6 candidates; `valid_ipv6` then wants the full form (8 groups) or a compressed one (`::`) with at
# least 3 groups or a link-local `fe80::` prefix, so that `c10d::add` or a `hh:mm:ss` time is no address.
# An IPv4-mapped or -compatible address (`::ffff:172.31.3.4`, as a dual-stack socket names an IPv4 peer)
# ends in a dotted quad: it is taken whole, so the IPv4 inside is never left behind.
IPV6 = (
    r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}"
    rf"(?:{_OCTET}(?:\.{_OCTET}){{3}}(?![\w]|\.\d)|[0-9A-Fa-f]{{0,4}}(?![\w:]))"
)
# A user's own folder: /home/<user> (also under /mnt/<fs>/home/), /Users/, /scratch/<user>,
# /data/users/<user>, /u/<user>, C:\\Users\\<user>
HOME_USER = (
    r"(?P<home>/home/|/homes/|/Users/|/users/|/scratch/|/u/|[A-Za-z]:\\Users\\)"
    r"(?P<user>[A-Za-z0-9._-]{1,64})(?=[/\\]|\b)"
)
MAC = (
    r"(?<![0-9A-Fa-f:-])[0-9A-Fa-f]{2}(?P<macsep>[:-])[0-9A-Fa-f]{2}"
    r"(?:(?P=macsep)[0-9A-Fa-f]{2}){4}(?![:-]?\w)"
)
# Where a log names a user: `USER=jdoe`, `SLURM_JOB_USER=jdoe`, a shell prompt `jdoe@gpu-7:~$` /
# `[jdoe@gpu-7 verl]$` (which names the host too), and the folders of HOME_USER.
USER_CONTEXTS = LazyRe(
    r"(?<![\w-])(?:USER|LOGNAME|USERNAME|SUDO_USER|SLURM_JOB_USER|PBS_O_LOGNAME|LSB_USER|JUPYTERHUB_USER)"
    r"\s*[=:]\s*['\"]?(?P<user>[A-Za-z0-9._-]{1,64})(?![\w.-])"
)
SHELL_PROMPT = LazyRe(
    r"(?:^|[\s\[(])(?P<user>[a-z_][a-z0-9_.-]{0,31})@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252})"
    r"(?::[^\s$#]{0,256}|\s[^\s\]]{0,256}\])?[$#](?=\s|$)"
)
# Account names every machine has, and folder names under /scratch or /u that are no user
NOT_USERS = frozenset(
    {
        "root",
        "ubuntu",
        "admin",
        "user",
        "users",
        "ec2-user",
        "runner",
        "ray",
        "git",
        "nobody",
        "jovyan",
        "tmp",
        "temp",
        "data",
        "shared",
        "share",
        "public",
        "home",
        "work",
        "scratch",
        "local",
        "default",
        "guest",
        "centos",
        "debian",
        "azureuser",
        "opc",
        "cloud-user",
        "shared-data",
        "datasets",
        "models",
        "cache",
        "checkpoints",
        "projects",
        "project",
        "group",
        "groups",
        "apps",
        "software",
    }
)
# EC2's default host names: `ip-10-1-2-3` (alone or in `ip-10-1-2-3.ec2.internal`)
EC2_HOST = LazyRe(r"(?<![\w.-])(?P<host>ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3})(?![\w-])")
# The host of a URL (`http://node17.cluster.local:8000/`, `redis://cache-7:6379`)
URL_HOST = LazyRe(
    r"\b[A-Za-z][A-Za-z0-9+.-]{0,30}://(?:[^\s/@'\"]{0,256}@)?(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252})"
)
# Where a log names a host. Strong contexts name one whatever it looks like; after a bare `host:` or
# `node=` the value must look like a host name (a digit, '-' or '.') and end where a name ends, so
# code such as `host = os.environ[...]` or `host: str` teaches nothing.
_HOST_VALUE = r"['\"]?(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?=$|[\s,;)'\"\]>]|:\d)"
STRONG_HOST_CONTEXTS = LazyRe(
    # (the lookahead lets the engine skip positions where no context can start: 2.5x faster)
    r"(?=[TtHhIiMmWwSs\s-])(?:TaskRunner hostname:\s*|\bhostname\s*[:=]\s*|^\s*host\s+:\s*|\bip="
    r"|\bMASTER_ADDR\s*[:=]\s*"
    r"|--master[_-]addr(?:\s+|=)|\bmaster_addr\s*[:=]\s*|Worker IP address:\s*|Memory on the node \(IP:\s*"
    r"|\bSLURMD_NODENAME=|\bSLURM_SUBMIT_HOST=|\bSLURM_LAUNCH_NODE_IPADDR=)" + _HOST_VALUE,
    re.IGNORECASE,
)
# torch's c10d rendezvous (socket.cpp): `... has failed to connect to [gpu-node-17]:29500 (errno: ...)`
# and `... to any network address of (gpu-node-17, 29500)`; `ssh user@host` (and scp, rsync, sftp)
RENDEZVOUS_HOST = LazyRe(
    r"\bconnect to (?:any network address of )?(?:\[(?P<bracketed>[A-Za-z0-9][A-Za-z0-9.-]{0,252})\]:\d{1,5}"
    r"|\((?P<paired>[A-Za-z0-9][A-Za-z0-9.-]{0,252}), \d{1,5}\))"
)
REMOTE_LOGIN = LazyRe(
    r"\b(?:ssh|scp|sftp|rsync|mosh)\b[^\n|;&@]{0,200}?(?<![\w.-])(?P<user>[a-z_][a-z0-9_.-]{0,31})@"
    r"(?P<host>[A-Za-z0-9][A-Za-z0-9.-]{0,252})(?![\w.-]*@)"
)
WEAK_HOST_CONTEXTS = LazyRe(
    r"\b(?:host|node|node_ip_address|node_name)\s*[:=]\s*" + _HOST_VALUE, re.IGNORECASE
)
# NCCL's `host:pid:tid [dev]` prefix (patterns/formats.yaml `nccl-host`, the normaliser's own), at the
# start of the line or after a launcher prefix
NCCL_HOST = LazyRe(r"(?:^|[\s\])])" + formats().regex("nccl-host"), engine="regex")
# Fully qualified names (`gpu-07.cluster.local`, `db.mycorp.com`, `ip-10-0-0-1.ec2.internal`). The TLD
# must be a private / cloud-internal one or a common public one (not `.py`, `.info`, ... which end module
# and attribute names); a one-label name on a private TLD (`threading.local`) counts only if it looks
# like a host (`gpu-07.local`); the public sites that log messages link to (docs) stay.
FQDN = LazyRe(
    r"(?<![\w.-])(?P<host>(?P<first>[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)"
    r"(?P<more>(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)"
    r"\.(?P<tld>internal|local|localdomain|lan|corp|intra|intranet|com|net|org|io|ai|co|edu|gov|dev|cloud|cn))"
    r"(?![\w-]|\.\w)",
    re.IGNORECASE,
)
PRIVATE_TLDS = frozenset({"internal", "local", "localdomain", "lan", "corp", "intra", "intranet"})
PUBLIC_SITES = (
    "pytorch.org",
    "github.com",
    "github.io",
    "githubusercontent.com",
    "huggingface.co",
    "hf.co",
    "readthedocs.io",
    "python.org",
    "pypi.org",
    "nvidia.com",
    "ray.io",
    "anyscale.com",
    "vllm.ai",
    "sglang.ai",
    "wandb.ai",
    "wandb.me",
    "nccl.dev",
    "tensorflow.org",
    "numpy.org",
    "stackoverflow.com",
    "google.com",
    "microsoft.com",
)
NOT_HOSTS = frozenset(
    {
        "localhost",
        "none",
        "null",
        "unknown",
        "true",
        "false",
        "0.0.0.0",
        "127.0.0.1",
        "::1",
        "localhost.localdomain",
    }
)
KEEP_ADDRESSES = frozenset({"0.0.0.0", "127.0.0.1", "::", "::1", "255.255.255.255"})


# The literals (lower-cased) without which the named-host contexts cannot match a line, the private
# domains' and the home folders' (Names.learn looks for each context only where its literal is)
_STRONG_HOST_HINTS = ("hostname", "host ", "master", "ip address", "(ip:", "slurm")
_WEAK_HOST_GATE = re.compile(r"(?:host|node)\w{0,12}\s*[:=]")
MAX_NCCL_PREFIXES = 4096  # NCCL line prefixes (one per process and device) remembered as looked at
_PRIVATE_TLD_HINTS = (".internal", ".local", ".lan", ".corp", ".intra")
_HOME_HINTS = ("/home/", "/homes/", "/Users/", "/users/", "/scratch/", "/u/", ":\\Users\\")
MAX_NAMES = 512  # host names, and user names, one report masks by name at most
# Where a line names a host or user in so many words: the scan reads every line that holds one of
# these (logparse.observe.names), not only the lines the report shows, and learns from it. Contexts
# that are common in bulk (a host in every NCCL INFO prefix, `node`, a home folder in every frame) are
# learnt from the lines the scan reads anyway; adding them here would make each such line a record.
# (Not `ip=`: every Ray prefix has it, with an address, which is masked as an address anyway.)
NAME_KEYWORDS = (
    "hostname",
    "Hostname",
    "HOSTNAME",
    "MASTER_ADDR",
    "master_addr",
    "master-addr",
    "Worker IP address",
    "(IP:",
    "SLURM",
    "USER",
    "LOGNAME",
    "ip-",
    "@",
    "connect to",
    "://",
    ".internal",
    ".local",
    ".lan",
    ".corp",
    ".intra",
)
# What Names.learn looks for in a log line before it tries the contexts: NAME_KEYWORDS and the bulk ones
NAME_HINTS = (*NAME_KEYWORDS, "host", "Host", "HOST", "node", "Node", "NODE", "NCCL", *_HOME_HINTS)


class Names:
    """The host and user names to mask, learnt where a text names one as such: home and scratch paths,
    `USER=`, shell prompts, `hostname:`, `MASTER_ADDR=`, URLs, NCCL's `host:pid:tid`, EC2 `ip-10-1-2-3`
    names, qualified names. A scan fills one from every line of the log that holds such a context
    (NAME_KEYWORDS; logparse.observe.names), so a host named only on an early line is masked in the
    error that follows; the report's own strings are learnt from too. At most MAX_NAMES of each."""

    def __init__(self) -> None:
        self.hosts: set[str] = set()
        self.users: set[str] = set()
        self.version = 0  # counts the names learnt (a redactor remakes its patterns when it moves)
        self._merged: dict[int, int] = {}  # id of a book merged -> its version then
        self._nccl_prefixes: set[str] = set()

    def merge(self, other: Names) -> None:
        if self._merged.get(id(other)) == other.version:
            return  # (a live scan's book, adopted before each ALERT line, seldom grows)
        self._merged[id(other)] = other.version
        for host in sorted(other.hosts):
            self.learn_host(host)
        for user in sorted(other.users):
            self.learn_user(user)

    def learn(self, text: str, strict: bool = False) -> None:
        """Learn the host and user names `text` names as such (see the module docstring). `strict`: a
        line of the log rather than of the report: each context is looked for only where its literal
        is (a log has millions of lines; a report, a few hundred strings), and `USER:` names a user
        only as an assignment (`USER=jdoe`) or a quoted value (`'USER': 'jdoe'`), since on a log line
        it may be a chat turn (`USER: Solve ...`)."""
        lowered = text.lower() if strict else ""
        self._learn_hosts(text, strict, lowered)
        if "ip-" in text:
            for m in EC2_HOST.finditer(text):
                self.learn_host(m.group("host"))
        if "@" in text:
            for m in SHELL_PROMPT.finditer(text):
                self.learn_user(m.group("user"))
                self.learn_host(m.group("host"))
            for m in REMOTE_LOGIN.finditer(text):
                host = m.group("host").lower()
                if not any(host == site or host.endswith("." + site) for site in PUBLIC_SITES):
                    self.learn_user(m.group("user"))  # (`ssh git@github.com` names no site's machine)
                    self.learn_host(m.group("host"))
        if "connect to" in text:
            for m in RENDEZVOUS_HOST.finditer(text):
                self.learn_host(m.group("bracketed") or m.group("paired"))
        self._learn_users(text, strict)

    def _learn_hosts(self, text: str, strict: bool, lowered: str) -> None:
        """Hosts named as such: `hostname:`, `host :`, `ip=`, MASTER_ADDR, `node=`, SLURM's names,
        NCCL's `host:pid:tid` prefix, a URL's host, qualified names."""
        if not strict or any(h in lowered for h in _STRONG_HOST_HINTS):
            for m in STRONG_HOST_CONTEXTS.finditer(text):
                self.learn_host(m.group("host"))
        if not strict or _WEAK_HOST_GATE.search(lowered):
            for m in WEAK_HOST_CONTEXTS.finditer(text):
                if re.search(r"[\d.-]", m.group("host")):
                    self.learn_host(m.group("host"))
        if ":" in text and (not strict or "NCCL" in text) and self._new_nccl_prefix(text, strict):
            for m in NCCL_HOST.finditer(text):
                self.learn_host(m.group("host"))
        if "://" in text:
            self._learn_url_hosts(text)
        if "." in text and (not strict or "://" in text or any(t in lowered for t in _PRIVATE_TLD_HINTS)):
            self._learn_qualified_names(text)

    def _learn_users(self, text: str, strict: bool) -> None:
        if "USER" in text or "LOGNAME" in text:
            for m in USER_CONTEXTS.finditer(text):
                if not strict or "=" in m.group(0) or m.group(0)[-len(m.group("user")) - 1] in "'\"":
                    self.learn_user(m.group("user"))
        if ("/" in text or "\\" in text) and (not strict or any(h in text for h in _HOME_HINTS)):
            for m in re.finditer(HOME_USER, text):
                self.learn_user(m.group("user"))

    def _new_nccl_prefix(self, text: str, strict: bool) -> bool:
        """Is what precedes NCCL's word on this log line new? (With NCCL_DEBUG=INFO every line of a
        process repeats its `host:pid:tid [dev]` prefix: one look per process.)"""
        if not strict:
            return True
        prefix = text[: text.find("NCCL")]
        if prefix in self._nccl_prefixes:
            return False
        if len(self._nccl_prefixes) < MAX_NCCL_PREFIXES:
            self._nccl_prefixes.add(prefix)
        return True

    def _learn_url_hosts(self, text: str) -> None:
        for m in URL_HOST.finditer(text):
            host = m.group("host").strip(".")
            # a dotted name is judged as a qualified name below; a one-label one must look
            # like a machine (`node17`, `cache-7`), not a word (`judge`, `proxy`)
            if "." not in host and re.search(r"[\d-]", host):
                self.learn_host(host)

    def _learn_qualified_names(self, text: str) -> None:
        """Qualified names on private domains (that look like machines) and on public ones (but for
        documentation and package sites)."""
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
        if (
            not host
            or host.lower() in NOT_HOSTS
            or re.fullmatch(r"[\d.]+|[0-9A-Fa-f:]+", host)
            or len(host) > 253
            or host in self.hosts
            or len(self.hosts) >= MAX_NAMES
        ):
            return
        self.hosts.add(host)
        self.version += 1
        short = host.split(".", 1)[0]
        if short != host and len(short) >= 3 and re.search(r"[\d-]", short):
            self.hosts.add(short)  # `gpu-07.cluster.local` is also mentioned as `gpu-07`

    def learn_user(self, user: str) -> None:
        """Remember a user name, to mask wherever it appears as a word, also within a name such as
        `run_jdoe_job` (delimited by anything but a letter or digit). A name every machine has
        (`root`) says nothing; one of one or two letters stays masked only in the places that name a
        user (masking it everywhere would eat words)."""
        if user.lower() in NOT_USERS or len(user) < 3 or user in self.users or len(self.users) >= MAX_NAMES:
            return
        self.users.add(user)
        self.version += 1


class Redactor:
    """One report's redaction state: placeholders given so far and distinct values per kind."""

    def __init__(self, config: RedactConfig | None = None, kinds: tuple[SecretKind, ...] | None = None):
        self.config = config or RedactConfig()
        self.kinds = kinds if kinds is not None else secret_kinds()
        self.seen: dict[str, set[str]] = {}
        self.placeholders: dict[tuple[str, str], str] = {}  # (kind, value) -> placeholder
        self.names = Names()  # the hosts and users to mask
        self._names_version = 0  # the book's version the patterns and memo were made with
        self._hosts_re: re.Pattern[str] | None = None
        self._hosts_re_v4: re.Pattern[str] | None = None
        prefixes = sorted(((p, k.id) for k in self.kinds for p in k.prefixes), key=lambda pk: -len(pk[0]))
        self._prefix_kind = dict(prefixes)
        self._cut_token_re: re.Pattern[str] | None = None  # compiled when a cut text first needs it
        self._blocks = [(k.id, k.block) for k in self.kinds if k.block is not None]
        self._wrapping = [k for k in self.kinds if k.wraps]  # kinds whose tokens a line end may split
        self._line_end_token_re: re.Pattern[str] | None = None  # compiled when first needed
        # hint -> the kinds (bits of their index) it lets through; the kinds without hints always run
        hint_bits: dict[str, int] = {}
        for i, kind in enumerate(self.kinds):
            for hint in kind.hints:
                hint_bits[hint] = hint_bits.get(hint, 0) | 1 << i
        self._hints = tuple(hint_bits.items())
        self._unhinted = [k for k in self.kinds if not k.hints]
        self._unhinted_mask = sum(1 << i for i, k in enumerate(self.kinds) if not k.hints)
        # a report repeats strings (an error line is evidence, message and a finding's first line):
        # each distinct one is redacted once. Cleared when a new host or user is learnt.
        self._memo: dict[tuple[str, bool | None], str] = {}

    # -- hosts and users: learnt from the whole log and report first, so every mention gets one placeholder
    @property
    def known_hosts(self) -> set[str]:
        return self.names.hosts

    @property
    def known_users(self) -> set[str]:
        return self.names.users

    def learn(self, text: str) -> None:
        """Learn the host and user names `text` names as such (see Names.learn)."""
        self.names.learn(text)

    def learn_host(self, host: str) -> None:
        self.names.learn_host(host)

    def learn_user(self, user: str) -> None:
        self.names.learn_user(user)

    def adopt(self, names: Names) -> None:
        """Mask the names another book learnt too (those the scan saw in the whole log)."""
        self.names.merge(names)

    def _names_changed(self) -> None:
        """A name learnt since the patterns were made: make them again, and forget what was masked."""
        self._names_version = self.names.version
        self._hosts_re = None
        self._memo.clear()

    def _host_pattern(self, ipv6: bool = True) -> re.Pattern[str]:
        if self._names_version != self.names.version:
            self._names_changed()
        if self._hosts_re is None:
            alternatives = [
                rf"(?P<mac>{MAC})",
                rf"(?P<ipv4>{IPV4})",
                HOME_USER,
                USER_CONTEXTS.pattern.replace("(?P<user>", "(?P<ctxuser>"),
            ]
            if self.known_hosts:
                names = "|".join(re.escape(h) for h in sorted(self.known_hosts, key=lambda h: (-len(h), h)))
                alternatives.append(rf"(?<![\w.-])(?P<name>{names})(?![\w-]|\.\w)")
            if self.known_users:
                users = "|".join(re.escape(u) for u in sorted(self.known_users, key=lambda u: (-len(u), u)))
                # inside names too (`run_jdoe_job`, `jdoe-exp-3`): `_`, `-` and `.` separate words here
                alternatives.append(rf"(?<![A-Za-z0-9])(?P<uname>{users})(?![A-Za-z0-9])")
            self._hosts_re = re.compile("|".join([alternatives[0], rf"(?P<ipv6>{IPV6})", *alternatives[1:]]))
            self._hosts_re_v4 = re.compile("|".join(alternatives))
        return self._hosts_re if ipv6 else self._hosts_re_v4

    @property
    def _cut_token(self) -> re.Pattern[str] | None:
        """A token with a known prefix at the very end of a text (a text cut inside it)."""
        if self._cut_token_re is None and self._prefix_kind:
            self._cut_token_re = re.compile(
                r"(?<![A-Za-z0-9_-])(?P<v>(?:"
                + "|".join(re.escape(p) for p in self._prefix_kind)
                + r")[A-Za-z0-9_.+/=-]*)\Z"
            )
        return self._cut_token_re

    @property
    def _line_end_token(self) -> re.Pattern[str] | None:
        """The head of a token that may go on in the next line (a kind with `wraps`, by its prefix) at
        the end of a line: a line seen alone (an ALERT) cannot tell, so it is masked as far as it goes."""
        prefixes = [p for k in self._wrapping for p in k.prefixes]
        if self._line_end_token_re is None and prefixes:
            self._line_end_token_re = re.compile(
                r"(?m)(?<![A-Za-z0-9_-])(?P<v>(?:"
                + "|".join(re.escape(p) for p in prefixes)
                + rf")[A-Za-z0-9_.+/=-]{{{MIN_CONTINUATION},}})$"
            )
        return self._line_end_token_re

    # -- masking ---------------------------------------------------------------------------------
    def _count(self, kind: str, value: str) -> None:
        self.seen.setdefault(kind, set()).add(value)

    def _placeholder(self, kind: str, prefix: str, value: str) -> str:
        key = (kind, value.lower() if kind in (Kind.HOSTNAME, Kind.MAC_ADDRESS) else value)
        if key not in self.placeholders:
            n = sum(1 for k in self.placeholders if k[0] == kind) + 1
            self.placeholders[key] = f"{prefix}-{n}"
        self._count(kind, key[1])
        return self.placeholders[key]

    def _mask_host(self, m: re.Match[str]) -> str:
        if m.group("mac") is not None:
            return self._placeholder(Kind.MAC_ADDRESS, "mac", m.group("mac"))
        if m.group("user") is not None:
            return m.group("home") + self._user(m.group("user"))
        if m.group("ctxuser") is not None:
            whole, user = m.group(0), m.group("ctxuser")
            return whole[: m.start("ctxuser") - m.start()] + self._user(user)
        groups = m.groupdict()
        if groups.get("uname") is not None:
            return self._user(groups["uname"])
        if m.group("ipv6") is not None and not valid_ipv6(m.group("ipv6")):
            return self._host_pattern(ipv6=False).sub(self._mask_host, m.group(0))
        address = m.group("ipv6") or m.group("ipv4")
        if address is not None:
            inner = mapped_ipv4(address)
            if inner is not None:  # the IPv4 peer of a dual-stack socket: the same placeholder as alone
                return address[: len(address) - len(inner)] + self._address(inner)
            return self._address(address)
        return self._placeholder(Kind.HOSTNAME, "node", m.group("name"))

    def _address(self, address: str) -> str:
        if address in KEEP_ADDRESSES or address.startswith("127."):
            return address
        return self._placeholder(Kind.IP_ADDRESS, "ip", address.lower())

    def _user(self, user: str) -> str:
        if user.lower() in NOT_USERS:
            return user
        return self._placeholder(Kind.USER_NAME, "user", user)

    def _mask_spans(self, kind: str, text: str, spans: list[tuple[int, int]]) -> str:
        """`text` with the (sorted, disjoint) spans replaced by kind's mask, each value counted."""
        out: list[str] = []
        last = 0
        for start, end in spans:
            if start < last:
                continue
            self._count(kind, INVISIBLE.sub("", text[start:end]))
            out += [text[last:start], MASK.format(kind)]
            last = end
        out.append(text[last:])
        return "".join(out)

    def _apply(self, kind: str, pattern: re.Pattern[str], text: str, hidden: bool) -> tuple[str, bool]:
        """`text` with the values `pattern` finds masked; `hidden`: the text has invisible characters,
        so the pattern runs on the visible text and each value is mapped back (invisibles and all)."""
        if not hidden:
            spans = [m.span("v") for m in pattern.finditer(text) if m.end("v") > m.start("v")]
            return (self._mask_spans(kind, text, spans), hidden) if spans else (text, hidden)
        visible, index = _visible(text)
        spans = [
            (index[m.start("v")], index[m.end("v") - 1] + 1)
            for m in pattern.finditer(visible)
            if m.end("v") > m.start("v")
        ]
        if not spans:
            return text, hidden
        text = self._mask_spans(kind, text, spans)
        return text, INVISIBLE.search(text) is not None

    def _hinted(self, lowered: str) -> list[SecretKind]:
        """The kinds that may occur in a text (given lower-cased), in table order: each distinct hint is
        looked for once (asking each kind for its hints cost more than the regexes of a text with none)."""
        present = [bits for hint, bits in self._hints if hint in lowered]
        if not present:
            return self._unhinted
        mask = self._unhinted_mask
        for bits in present:
            mask |= bits
        return [kind for i, kind in enumerate(self.kinds) if mask >> i & 1]

    def secrets(self, value: str, cut: bool | None = None) -> str:
        """`value` with every secret masked. `cut`: the text was cut short (a 1 MB line; an alert's
        window), so a token or setting at its very end is masked even though it is incomplete
        (default: a text as long as a cut line counts as cut)."""
        if cut is None:
            cut = len(value) >= CUT_MIN_CHARS
        if "\n" in value and self._wrapping:  # (before the kinds that would see the head alone)
            value = "\n".join(self._wrapped(value.split("\n")))
        hidden = INVISIBLE.search(value) is not None
        lowered = (_visible(value)[0] if hidden else value).lower()
        for kind in self._hinted(lowered):
            for pattern in kind.patterns:
                value, hidden = self._apply(kind.id, pattern, value, hidden)
        if self._wrapping and self._line_end_token is not None:
            m = self._line_end_token.search(_visible(value)[0] if hidden else value)
            if m:
                kind = next(k.id for k in self._wrapping if m.group("v").startswith(k.prefixes))
                value, hidden = self._apply(kind, self._line_end_token, value, hidden)
        if cut:
            if self._cut_token is not None:
                m = self._cut_token.search(_visible(value)[0] if hidden else value)
                if m:
                    kind = next(k for p, k in self._prefix_kind.items() if m.group("v").startswith(p))
                    value, hidden = self._apply(kind, self._cut_token, value, hidden)
            value, hidden = self._apply(Kind.CONFIG_SECRET, _CUT_SETTING, value, hidden)
        return value

    def text(self, value: str, cut: bool | None = None) -> str:
        """`value` with its secrets masked (and, with `config.hosts`, its hosts and users)."""
        if self._names_version != self.names.version:
            self._names_changed()
        key = (value, cut)
        done = self._memo.get(key)
        if done is None:
            done = self.secrets(value, cut)
            if self.config.hosts:
                done = self._host_pattern().sub(self._mask_host, done)
            self._memo[key] = done
        return done

    def counts(self) -> dict[str, int]:
        return {kind: len(values) for kind, values in sorted(self.seen.items())}

    # -- secrets that span lines -----------------------------------------------------------------
    def lines(self, texts: list[str]) -> list[str]:
        """Consecutive lines (evidence) with every line inside a multi-line secret block (a PEM key
        between its BEGIN and END lines) masked whole but for its launcher prefix. The BEGIN line
        itself is left to the kind's own pattern. A block cut by the end of the list runs to it; an
        END without its BEGIN (the list starts inside the block) masks the key-like lines before it."""
        out = list(texts)
        for kind, (begin, end) in self._blocks:
            inside = False
            body: list[str] = []
            for i, text in enumerate(out):
                if inside:
                    m = end.search(text)
                    stop = m.start() if m else len(text)
                    out[i] = self._mask_line(kind, text, stop, body)
                    if m:
                        inside = False
                        self._count(kind, "\n".join(body))
                        body = []
                    continue
                b = begin.search(text)
                if b and not end.search(text, b.end()):
                    inside = True
                    continue
                m = end.search(text)
                if m and not b:  # the block began before the first line: mask the key-like lines before
                    out[i] = self._mask_line(kind, text, m.start(), body)
                    j = i - 1
                    while j >= 0 and _BASE64_LINE.fullmatch(out[j][LINE_PREFIX.match(out[j]).end() :]):
                        out[j] = self._mask_line(kind, out[j], len(out[j]), body)
                        j -= 1
                    self._count(kind, "\n".join(body))
                    body = []
            if inside and body:
                self._count(kind, "\n".join(body))
        self._continued(out)
        return self._wrapped(out)

    def _wrapped(self, out: list[str]) -> list[str]:
        """Consecutive lines with each token that one ends and the next continues (a JWT a log wrapped:
        the kinds with `wraps`) masked on both, the next line's launcher prefix kept."""
        for kind in self._wrapping:
            for i in range(len(out) - 1):
                head, tail = out[i], out[i + 1]
                if not head or not tail or not kind.hinted((head[-4096:] + tail[:4096]).lower()):
                    continue
                span = kind.wrapped(head, tail)
                if span is None:
                    continue
                start, body, end = span
                self._count(kind.id, INVISIBLE.sub("", head[start:] + tail[body:end]))
                out[i] = head[:start] + MASK.format(kind.id)
                out[i + 1] = tail[:body] + MASK.format(kind.id) + tail[end:]
        return out

    def _continued(self, out: list[str]) -> None:
        """A secret value that pprint wrapped: a line ending in a quoted value that masks to its end
        (`'api_key': 'sk-abc...'`), then lines that are only a quoted string (`'def...',`), which
        Python joins to it. Each such line is masked as the value's kind (counted with it)."""
        for i in range(len(out) - 1):
            text = out[i]
            if not text.rstrip().endswith(("'", '"')) or not self._quoted_line(out[i + 1]):
                continue
            m = _MASKED_AT_END.search(self.secrets(text))
            if m is None:
                continue
            j = i + 1
            while j < len(out) and (q := self._quoted_line(out[j])) is not None:
                out[j] = out[j][: q.start("v")] + MASK.format(m.group("kind")) + out[j][q.end("v") :]
                if q.group("end").strip():  # `,` `}` `)`: the value ends here
                    break
                j += 1

    @staticmethod
    def _quoted_line(text: str) -> re.Match[str] | None:
        """The string of a line that is only a quoted string (after its launcher prefix and indent)."""
        return _QUOTED_LINE.match(text, LINE_PREFIX.match(text).end())

    def _mask_line(self, kind: str, text: str, stop: int, body: list[str]) -> str:
        start = LINE_PREFIX.match(text).end()
        if stop <= start or not text[start:stop].strip():
            return text
        body.append(text[start:stop])
        return text[:start] + MASK.format(kind) + text[stop:]

    # -- walking the report ----------------------------------------------------------------------
    def value(self, value: object) -> object:
        """`value` with every string inside (dataclass fields, tuples, lists, dict values) redacted."""
        if type(value) in _PLAIN or isinstance(value, Enum):  # (a closed vocabulary, not log text)
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Environment):  # (its values redacted; its names are the tracker's own)
            return Environment(tuple((k, self.value(v)) for k, v in value.items()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            changes = {
                f.name: self.value(getattr(value, f.name))
                for f in dataclasses.fields(value)
                if f.name != "redactions"
            }
            return dataclasses.replace(value, **changes)
        if isinstance(value, (tuple, list)):
            if _PLAIN.issuperset(map(type, value)):  # (a chart's steps and values: nothing to redact)
                return tuple(value) if isinstance(value, tuple) else list(value)
            items = self._sequence(list(value))
            return tuple(items) if isinstance(value, tuple) else items
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def _sequence(self, items: list) -> list:
        """A sequence's items redacted; a run of lines (str or Evidence) first has its multi-line
        secrets masked."""
        if self._blocks and len(items) > 1 and all(isinstance(i, (str, Evidence)) for i in items):
            texts = [i if isinstance(i, str) else i.text for i in items]
            masked = self.lines(texts)
            items = [
                m if isinstance(i, str) else (i if m == i.text else dataclasses.replace(i, text=m))
                for i, m in zip(items, masked, strict=True)
            ]
        return [self.value(v) for v in items]


_PLAIN = frozenset({int, float, bool, type(None)})  # values without a string inside (not their subclasses)


def valid_ipv6(text: str) -> bool:
    if text.count("::") > 1 or ":::" in text:
        return False
    groups = [g for g in text.split(":") if g]
    width = len(groups)
    if groups and "." in groups[-1]:  # an IPv4 tail holds two groups' bits
        groups.pop()
        width += 1
    if any(len(g) > 4 for g in groups):
        return False
    if "::" not in text:
        return width == 8
    return width >= 3 or (bool(groups) and groups[0].lower() == "fe80")


def mapped_ipv4(address: str) -> str | None:
    """The IPv4 address inside an IPv4-mapped IPv6 one (`::ffff:10.0.0.7` -> `10.0.0.7`), else None."""
    head, _, tail = address.rpartition(":")
    return tail if "." in tail and head.lower() in ("::ffff", "::", "0:0:0:0:0:ffff") else None


def strings(value: object) -> Iterator[str]:
    """Every string inside `value`, in field order (the order placeholders are numbered in)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Environment):
        for v in value.values():
            yield from strings(v)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name != "redactions":
                yield from strings(getattr(value, f.name))
    elif isinstance(value, (tuple, list)):
        if not _PLAIN.issuperset(map(type, value)):
            for v in value:
                yield from strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)


def redactor_for(
    values: Iterable[object], config: RedactConfig | None = None, names: Iterable[Names | None] = ()
) -> Redactor:
    """One redactor for everything a command prints: with `config.hosts`, it masks the names every book
    of `names` learnt (each input's whole log: logparse.observe.names) and those every string of
    `values` names (a report's root-cause node, finding nodes and environment hosts too), so that one
    value has one placeholder throughout (scan, each side of a diff, every job of a fleet)."""
    redactor = Redactor(config)
    if not redactor.config.hosts:
        return redactor
    for book in names:
        if book is not None:
            redactor.adopt(book)
    for value in values:
        for text in strings(value):
            redactor.learn(text)
        if isinstance(value, Report):
            _learn_report_hosts(redactor, value)
    return redactor


def _learn_report_hosts(redactor: Redactor, report: Report) -> None:
    """The hosts a report names as such (where, not in a context a string shows)."""
    if report.root_cause is not None and report.root_cause.node:
        redactor.learn_host(report.root_cause.node)
    for f in (*report.symptoms, *report.findings):
        for node in f.nodes:
            redactor.learn_host(node)
    hosts = report.environment.get("hosts")
    if isinstance(hosts, (list, tuple)):
        for h in hosts:
            if isinstance(h, str):
                redactor.learn_host(h)


def redact_report(report: Report, config: RedactConfig | None = None, names: Names | None = None) -> Report:
    """A copy of `report` with secrets (and, with `config.hosts`, hosts and users) masked in every
    string, and `redactions` set to {kind: distinct values masked}. `names`: the hosts and users the
    scan learnt from the whole log (logparse.observe.names), masked with those the report names."""
    redactor = redactor_for([report], config, [names])
    redacted = redactor.value(report)
    assert isinstance(redacted, Report)
    return dataclasses.replace(redacted, redactions=redactor.counts())
