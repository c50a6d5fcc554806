"""What a log tells about its environment: versions, GPUs, topology, the verl era, key config values.

`EnvironmentTracker.feed(rec)` is called for every record but a traceback's frames (`frame(rec)` reads
their Python path); one `re` alternation of literal keywords rejects almost every line, and only the
lines it accepts are examined (plus two attribute reads per record: the Ray actor name, for the era,
and the node of the prefix, for `hosts`).

Sources (reference §9): `NCCL version 2.21.5+cuda12.4`; `NCCL INFO cudaDriverVersion 12080`;
`Initializing a V1 LLM engine (v0.8.5)`; `"transformers_version": "4.51.1"`; `/lib/python3.11/
site-packages` in traceback paths; torch OOM `GPU 0 has a total capacity of 79.11 GiB` and verl's
`device memory used/total (GB): 0.51/79.33`; pasted nvidia-smi / `torch.utils.collect_env` / `pip
freeze` / `pip list` lines; Ray `ip=` and NCCL `host:pid:tid` prefixes, ChildFailedError `host :`;
verl's pprinted config dump (a Python dict repr over many prefixed lines, whose nesting is followed
by column: pprint starts the keys of a dict one column after its `{`), Hydra's `Error executing job
with overrides: [...]` and `key=value` command-line arguments. torch and Ray print no version in a
normal run; their message styles (§4.4, §5.5) give an approximate range, marked `(log style)`. verl
never prints its version: the era comes from the marker table of §9, intersected; markers that
disagree (a main-branch build between two releases) give "between A and B".

fingerprint() is a flat dict (values str, int, float, bool or list[str]); keys, each omitted when
unknown: torch, cuda, cuda_driver, nvidia_driver, nccl, vllm, vllm_engine, sglang, ray, python,
transformers, flash_attn, wandb, verl, verl_era, verl_era_evidence, gpu_model, gpu_memory_gib,
world_size, hosts, model_path, rollout_engine, and `config.<dotted.path>` for each config value seen
(a dotted path when the nesting is known, else the bare leaf name; None values left out).

Bounds: hosts at most MAX_HOSTS (64), config values at most MAX_CONFIG (256), era evidence at most
one per rule (about 30), Ray actor names remembered at most MAX_ACTORS (64); one config dump is
followed for at most MAX_DUMP_LINES (5,000) lines of its stream; value-format checks run on the
first STEP_FORMAT_LINES (3) verl step lines only.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from logparse.model import Environment
from logparse.read.normalize import Record
from logparse.read.progress_syntax import keyword_pattern
from logparse.read.steps import STEP_KEYWORD, split_step_line
from patterns.environment import environment_wordings
from patterns.numbers import log_int
from patterns.schema import LazyRe

MAX_HOSTS = 64
MAX_CONFIG = 256
MAX_ACTORS = 64
MAX_HANDLER_LISTS = 4096  # keyword tuples whose handlers are remembered (EnvironmentTracker._handlers_of)
MAX_DUMP_LINES = 5_000
STEP_FORMAT_LINES = 3

ConfigValue = str | int | float | bool | None


@dataclass(frozen=True)
class EraRule:
    """A marker and the verl minor versions (0.lo - 0.hi; None: open) it implies (reference §9)."""

    label: str
    lo: int | None
    hi: int | None


# Every wording below is patterns/environment.yaml's, each regex compiled here (on first use: LazyRe;
# most logs show few of them).
_E = environment_wordings()


def _regex(wording_id: str) -> LazyRe:
    return LazyRe(_E.regex(wording_id))


def _era_rule(wording_id: str) -> EraRule:
    item = _E.item(wording_id)
    return EraRule(item.field("label", item.value), item.field("since"), item.field("until"))


# Config leaves worth reporting. Ambiguous leaves count only under the parent named here.
CONFIG_LEAVES = frozenset(_E.literals("tracked-keys"))
AMBIGUOUS_PARENTS = _E.table("ambiguous-parents")


def _config_places(wording_id: str) -> tuple[tuple[str, str | None], ...]:
    """A config fact's places, in order: (leaf, parent) pairs from `parent.leaf` or `leaf`."""
    out = []
    for text in _E.literals(wording_id):
        parent, _, leaf = text.rpartition(".")
        out.append((leaf, parent or None))
    return tuple(out)


MODEL_PATH_PLACES = _config_places("config-model-path")
ROLLOUT_ENGINE_PLACES = _config_places("config-rollout-engine")
NNODES_PLACES = _config_places("config-nnodes")
GPUS_PER_NODE_PLACES = _config_places("config-gpus-per-node")

PIP_PACKAGES = _E.table("pip-packages")
NCCL_PIP_PACKAGE = _E.literal("nccl-pip-package")
PIP_RE = _regex("pip-line")
TORCH_BUILD_RE = _regex("torch-cuda-build")
NCCL_VERSION_RE = _regex("nccl-version")
CUDA_DRIVER_RE = _regex("cuda-driver")
SMI_HEADER_RE = _regex("smi-header")
COLLECT_ENV_RE = _regex("collect-env")
COLLECT_ENV_FACTS = dict(_E.item("collect-env").field("facts"))
VLLM_VERSION_RE = _regex("vllm-version")
RAY_VERSION_RE = _regex("ray-version")
TRANSFORMERS_RE = _regex("transformers-version")
WANDB_RE = _regex("wandb-version")
PYTHON_PATH_RE = _regex("python-path")
GPU_TOTAL_RE = _regex("gpu-memory")
GPU_MODEL_RE = _regex("gpu-model")
WORLD_SIZE_IDS = ("world-size", "checkpoint-world-size", "nccl-ranks")  # explicit, checkpoint, nranks
WORLD_SIZE_RE, CKPT_WORLD_RE, NRANKS_RE = (_regex(i) for i in WORLD_SIZE_IDS)
WORLD_SIZE_NEEDS = tuple(_E.item(i).field("keywords") for i in WORLD_SIZE_IDS)
# (key in world_sizes, the keywords one of which its regex needs, the regex): a loop, not zip and any()
# with a generator, for a rule asked on every checkpoint line of every rank
WORLD_SIZE_RULES = tuple(
    zip(
        ("explicit", "checkpoint", "nranks"),
        WORLD_SIZE_NEEDS,
        (WORLD_SIZE_RE, CKPT_WORLD_RE, NRANKS_RE),
        strict=True,
    )
)
HOST_IDS = tuple(w.id for w in _E.section("hosts"))
HOST_RES = tuple(re.compile(_E.regex(i)) for i in HOST_IDS)
OVERRIDE_ITEM_RE = _regex("hydra-overrides")
CMDLINE_ITEM_RE = _regex("command-line-override")
DUMP_START = _E.literal("config-dump-start")
DUMP_TOKEN_RE = _regex("config-dump-token")
SCALAR_RE = _regex("config-dump-scalar")
THREE_DECIMALS_RE = _regex("era-three-decimals")
LONG_NUMBER_RE = _regex("era-full-repr")
NUMPY_STARTS = _E.item("era-full-repr").field("starts")
PIP_LIST_NAMES = _E.literals("pip-list-names")
VERL_STEP_KEYS = _E.literals("era-step-keys")

# Literal substrings of messages (the same substring is the dispatch keyword and the evidence label).
MESSAGE_ERA_RULES: dict[str, EraRule] = {
    w.value: _era_rule(w.id)
    for w in _E.section("era")
    if w.kind == "literal" and w.field("actor") is None and w.field("label") is None
}
STEP_ERA_KEYS = tuple(w.value for w in _E.section("era") if w.field("step_key"))
# Ray actor prefixes, looked up in the raw line once per new actor name.
ACTOR_ERA_RULES = {w.field("actor"): _era_rule(w.id) for w in _E.section("era") if w.field("actor")}
RANK0_SAVE_RULE = _era_rule("era-rank0-saving")
RANK0_SAVE_MARK = _E.literal("era-rank0-saving")  # in the raw line: the normaliser strips it
RANK_SAVED_RULE = _era_rule("era-rank-saved")
RANK_SAVED_MARK = _E.literal("era-rank-saved")
CKPT_TRACKER_FSTRING_RULE = _era_rule("era-tracker-fstring")
CKPT_TRACKER_PERCENT_S = _E.literal("era-tracker-fstring")  # its absence marks the f-string
THREE_DECIMALS_RULE = _era_rule("era-three-decimals")
FULL_REPR_RULE = _era_rule("era-full-repr")

# Style markers of torch / Ray (no version printed in a normal run); boundaries are approximate.
TORCH_STYLES = tuple((w.value, w.field("style")) for w in _E.section("styles") if w.field("fact") == "torch")
RAY_STYLES = tuple((w.value, w.field("style")) for w in _E.section("styles") if w.field("fact") == "ray")
# (literal in a line's prefix, launcher): a torchrun job says so in its launcher's and ranks' prefixes
LAUNCHERS = tuple((w.value, w.field("style")) for w in _E.section("styles") if w.field("fact") == "launcher")
VLLM_V1 = _E.literals("vllm-v1-marks")
VLLM_V0 = _E.literals("vllm-v0-marks")
SGLANG_MARKS = _E.literals("sglang-marks")


def _scalar(text: str) -> ConfigValue:
    """A config value's Python / Hydra literal as a value: 8, 0.6, True, None, 'fsdp'."""
    t = text.strip().strip('"').strip("'")
    low = t.lower()
    if low in ("true", "false"):
        return low == "true"
    if low in ("none", "null", "~"):
        return None
    try:
        return int(t)
    except ValueError:
        pass
    try:
        return float(t)
    except ValueError:
        return t


def _dump_value(text: str) -> tuple[bool, ConfigValue]:
    """(found, value) of the scalar that starts `text` in a dict repr; lists and dicts are not scalars."""
    m = SCALAR_RE.match(text)
    if m is None:
        return False, None
    if m.group("s1") is not None:
        return True, m.group("s1")
    if m.group("s2") is not None:
        return True, m.group("s2")
    return True, _scalar(m.group("num") or m.group("word"))


def _minor(text: str) -> str:
    """`12080` (cudaDriverVersion) -> `12.8`."""
    n = log_int(text)
    return f"{n // 1000}.{(n % 1000) // 10}"


COMMON_KEYWORDS = frozenset(_E.literals("common-keywords"))


def _dispatch_keywords(wording_ids: Iterable[str]) -> list[str]:
    """The keywords of these wordings in order, each once, without those that hold an earlier one (a
    message with `_world_size_` holds `world_size`: the reader runs for it already)."""
    out: list[str] = []
    for wording_id in wording_ids:
        for keyword in _E.item(wording_id).field("keywords") or ():
            if not any(k in keyword for k in out):
                out.append(keyword)
    return out


class EnvironmentTracker:
    """Bounded collector of environment facts; `fingerprint()` reports them."""

    def __init__(self) -> None:
        self.facts: dict[str, str] = {}  # first value seen wins (torch, cuda, nccl, ...)
        self.gpu_memory_gib: float | None = None
        self.hosts: set[str] = set()
        self.config: dict[str, tuple[int, ConfigValue]] = {}  # dotted key -> (priority, value)
        self.era: dict[str, EraRule] = {}
        self.world_sizes: dict[str, int] = {}  # explicit / checkpoint / nranks
        self.engines: set[str] = set()
        self._actors: set[str] = set()
        self._step_lines = 0
        self._dump_stream: tuple | None = None
        self._dump_openers: dict[int, tuple[str, ...]] = {}
        self._dump_lines = 0
        self._handlers = self._make_handlers()
        # A line without any of these changes nothing, except config-dump continuation lines (the
        # lines after `{'actor_rollout_ref':` of the same stream) and the Ray actor / node of a prefix.
        self.keywords: tuple[str, ...] = tuple(sorted(self._handlers))
        # what a scanner that skips lines should look for: the keywords that are rare in a log. The
        # common ones (Ray's `ip=` prefix, `version`, site-packages paths) are read from the lines the
        # scanner reads anyway (tracebacks, markers, errors); a skipping scan sees fewer of them.
        self.scan_keywords: tuple[str, ...] = tuple(k for k in self.keywords if k not in COMMON_KEYWORDS)
        self._common = tuple(k for k in self.keywords if k in COMMON_KEYWORDS)
        self._handler_lists: dict[tuple[str, ...], tuple[Callable[[Record, str], None], ...]] = {}
        self._order = {k: i for i, k in enumerate(self._handlers)}

    def _make_handlers(self) -> dict[str, list[Callable[[Record, str], None]]]:
        """keyword -> the handlers to run on a message that contains it."""
        # each reader with the wordings it reads: their keywords, in this order, are its dispatch keywords
        readers: list[tuple[Callable[[Record, str], None], tuple[str, ...]]] = [
            (self._pip, ("pip-line",)),
            (self._nccl, ("nccl-version",)),
            (self._cuda_driver, ("cuda-driver",)),
            (self._smi_header, ("smi-header",)),
            (self._collect_env, ("collect-env",)),
            (self._misc_versions, ("vllm-version", "ray-version", "wandb-version")),
            (self._transformers, ("transformers-version",)),
            (self._python, ("python-path",)),
            (self._gpu_memory, ("gpu-memory",)),
            (self._gpu_model, ("gpu-model",)),
            (self._world_size, WORLD_SIZE_IDS),
            (self._hosts, HOST_IDS),
            (self._overrides, ("hydra-overrides",)),
        ]
        h: list[tuple[str, Callable[[Record, str], None]]] = []
        for handler, ids in readers:
            h += [(keyword, handler) for keyword in _dispatch_keywords(ids)]
        h += [
            (DUMP_START, self._dump_start),
            (STEP_KEYWORD, self._step_line),
            *((k, self._saving) for k in _dispatch_keywords(("era-rank0-saving",))),
            *((k, self._saved) for k in _dispatch_keywords(("era-rank-saved",))),
            *((k, self._tracker_missing) for k in _dispatch_keywords(("era-tracker-fstring",))),
        ]
        h += [(style, self._styles) for style, _ in TORCH_STYLES + RAY_STYLES]
        h += [(mark, self._engine) for mark in VLLM_V1 + VLLM_V0 + SGLANG_MARKS]
        h += [(label, self._era_literal) for label in MESSAGE_ERA_RULES]
        h += [(f"{leaf}=", self._cmdline) for leaf in sorted(CONFIG_LEAVES) if len(leaf) > 2]
        table: dict[str, list[Callable[[Record, str], None]]] = {}
        for keyword, handler in h:
            table.setdefault(keyword, []).append(handler)
        return table

    @functools.cached_property
    def _prefilter(self) -> re.Pattern[str]:
        """The keywords as one trie alternation, compiled on first use (only a record fed without its
        prefilter keywords needs it)."""
        return keyword_pattern(self.keywords)

    # -- feeding ---------------------------------------------------------------------------------
    def dump_open(self) -> bool:
        """A config dump is being read (every record fed meanwhile counts towards its limit)."""
        return self._dump_stream is not None

    def step_format_known(self) -> bool:
        """Has the step-line format been read (a later step line tells nothing more)?"""
        return self._step_lines >= STEP_FORMAT_LINES

    def ignores(self, message: str) -> bool:
        """Would `feed` learn nothing from a record with this message, given that its keywords hold
        no scan keyword but `step:`, its actor and node were noted (note_process), no config dump is
        open and, for a message that starts with a step line, the format is known? Depends on the
        message alone (logparse.read.progress_lines asks it where the lines are read)."""
        if message.startswith(STEP_KEYWORD):
            return True
        return (
            not message.startswith(PIP_LIST_NAMES)
            and STEP_KEYWORD not in message
            and not self._common_pattern.search(message)
        )

    @functools.cached_property
    def _common_pattern(self) -> re.Pattern[str]:
        return keyword_pattern(self._common)

    def note_process(self, actor: str | None, node: str | None) -> bool:
        """What `feed` notes of a record's Ray actor and node, for a line fed without its record:
        False, noting nothing, when the actor is new (its era rules read the raw line: feed the record
        instead)."""
        if actor is not None and actor not in self._actors and len(self._actors) < MAX_ACTORS:
            return False
        if node is not None and len(self.hosts) < MAX_HOSTS:
            self.hosts.add(node)
        return True

    def dump_open_in(self, source: str) -> bool:
        """A config dump of `source` is being read: its continuation lines carry no keyword."""
        return self._dump_stream is not None and self._dump_stream[0] == source

    @property
    def dump_stream(self) -> tuple | None:
        """The stream whose config dump is being read, if any."""
        return self._dump_stream

    def feed(self, rec: Record, keywords: Iterable[str] | None = None) -> None:
        """`keywords`: those of `self.scan_keywords` that a scanner's prefilter found in the raw line
        (None: not known, the message is searched for all keywords)."""
        origin = rec.origin
        if not self.note_process(origin.actor, origin.node):
            self._actors.add(origin.actor)
            text = rec.line.text  # nested prefixes: the outer actor is only in the raw text
            for rule in ACTOR_ERA_RULES.values():
                if rule.label in text:
                    self._era(rule)
            self.note_process(origin.actor, origin.node)
        message = rec.message
        # (a Ray actor's `[rank0]:` is torch.distributed's prefix inside a Ray job, not torchrun's)
        if (
            "launcher" not in self.facts
            and origin.actor is None
            and (origin.rank, origin.level) != (None, None)
        ):
            self._launcher(rec.line.text, message)
        if self._dump_stream is not None and self._dump_continues(rec, message):
            return
        if message.startswith(PIP_LIST_NAMES):
            self._pip(rec, message)
        if self._step_lines >= STEP_FORMAT_LINES and message.startswith(STEP_KEYWORD):
            return  # the step-line format is known; a step line's ~2 KB of metrics tells nothing more
        if keywords is None:
            if not self._prefilter.search(message):
                return
            found = tuple(k for k in self._handlers if k in message)
        else:  # the rare keywords the prefilter found, and the common ones it does not look for
            found = tuple([k for k in keywords if k in message and k in self._order]) if keywords else ()
            if self._common_pattern.search(message):  # (one search before a look for each of them)
                found += tuple([k for k in self._common if k in message])
            if not found:
                return
        for handler in self._handlers_of(found):
            handler(rec, message)

    def _handlers_of(self, found: tuple[str, ...]) -> tuple[Callable[[Record, str], None], ...]:
        """The handlers of the keywords `found` in a message, in keyword order, each once (remembered
        per keyword tuple: the lines of one kind find the same keywords, line after line)."""
        handlers = self._handler_lists.get(found)
        if handlers is None:
            done: dict[Callable[[Record, str], None], None] = {}
            for keyword in sorted(found, key=self._order.__getitem__):
                for handler in self._handlers[keyword]:
                    done.setdefault(handler, None)
            handlers = tuple(done)
            if len(self._handler_lists) < MAX_HANDLER_LISTS:
                self._handler_lists[found] = handlers
        return handlers

    def _fact(self, key: str, value: str) -> None:
        self.facts.setdefault(key, value)

    def _era(self, rule: EraRule) -> None:
        self.era.setdefault(rule.label, rule)

    # -- versions --------------------------------------------------------------------------------
    def _pip(self, rec: Record, message: str) -> None:
        m = PIP_RE.match(message.strip())
        if m:
            self._package(m.group("pkg"), m.group("ver"))

    def _package(self, pkg: str, version: str) -> None:
        if pkg.startswith(NCCL_PIP_PACKAGE):
            self._fact("nccl", version)
            return
        key = PIP_PACKAGES[pkg]
        self.facts[key] = version  # an installed version beats a style guess
        if key == "torch":
            m = TORCH_BUILD_RE.search(version)
            if m:
                self._fact("cuda", f"{m.group(1)}.{m.group(2)}")

    def _nccl(self, rec: Record, message: str) -> None:
        m = NCCL_VERSION_RE.search(message)
        if m:
            self._fact("nccl", m.group("nccl"))
            if m.group("cuda"):
                self.facts["cuda"] = m.group("cuda")  # what NCCL was built for: the best CUDA fact

    def _cuda_driver(self, rec: Record, message: str) -> None:
        m = CUDA_DRIVER_RE.search(message)
        if m:
            self._fact("cuda_driver", _minor(m.group(1)))

    def _smi_header(self, rec: Record, message: str) -> None:
        m = SMI_HEADER_RE.search(message)
        if m:
            self._fact("nvidia_driver", m.group("driver"))
            self._fact("cuda_driver", m.group("cuda"))

    def _collect_env(self, rec: Record, message: str) -> None:
        m = COLLECT_ENV_RE.match(message.strip())
        if not m:
            return
        fact, value = COLLECT_ENV_FACTS[m.group("field")], m.group("value")
        if fact == "torch":
            self._package("torch", value)
        elif fact in ("cuda", "python"):
            self._fact(fact, ".".join(value.split(".")[:2]))
        else:
            self._fact(fact, value)

    def _misc_versions(self, rec: Record, message: str) -> None:
        m = VLLM_VERSION_RE.search(message)
        if m:
            self._fact("vllm", m.group("ver") or m.group("api"))
        m = RAY_VERSION_RE.search(message)
        if m:
            self._fact("ray", m.group(1))
        m = WANDB_RE.search(message)
        if m:
            self._fact("wandb", m.group(1))

    def _transformers(self, rec: Record, message: str) -> None:
        m = TRANSFORMERS_RE.search(message)
        if m:
            self._fact("transformers", m.group(1))

    def frame(self, rec: Record) -> None:
        """A traceback's frame line (which `feed` is not given): the Python of its path, the one fact a
        frame tells, until it is known (python-path: "every traceback shows one")."""
        if "python" not in self.facts and "-packages/" in rec.message:
            self._python(rec, rec.message)

    def _python(self, rec: Record, message: str) -> None:
        if "python" not in self.facts:
            m = PYTHON_PATH_RE.search(message)
            if m:
                self._fact("python", m.group(1))

    def _launcher(self, text: str, message: str) -> None:
        """The launcher a line's prefix names (`[rank3]:`, `torch/distributed/run.py:793]`)."""
        prefix = text[: len(text) - len(message)] if message and text.endswith(message) else text
        for literal, launcher in LAUNCHERS:
            if literal in prefix:
                self._fact("launcher", launcher)
                return

    def _styles(self, rec: Record, message: str) -> None:
        for marker, value in TORCH_STYLES:
            if marker in message:
                self._fact("torch_style", value)
        for marker, value in RAY_STYLES:
            if marker in message:
                self._fact("ray_style", value)

    def _engine(self, rec: Record, message: str) -> None:
        if any(m in message for m in VLLM_V1):
            self._fact("vllm_engine", "V1")
            self.engines.add("vllm")
        elif any(m in message for m in VLLM_V0):
            self._fact("vllm_engine", "V0")
            self.engines.add("vllm")
        elif any(m in message for m in SGLANG_MARKS):
            self.engines.add("sglang")

    # -- hardware and topology -------------------------------------------------------------------
    def _gpu_memory(self, rec: Record, message: str) -> None:
        m = GPU_TOTAL_RE.search(message)
        if m:
            value = float(next(g for g in m.groups() if g is not None))
            if self.gpu_memory_gib is None or value > self.gpu_memory_gib:
                self.gpu_memory_gib = value

    def _gpu_model(self, rec: Record, message: str) -> None:
        if "gpu_model" not in self.facts:
            m = GPU_MODEL_RE.search(message)
            if m:
                self._fact("gpu_model", m.group("model").strip())

    def _world_size(self, rec: Record, message: str) -> None:
        # each regex needs one of its literals, and no match starts before the first of them: without
        # one the search is skipped, and it starts there (checkpoint paths hold `_world_size_8_rank_0`
        # near their end, on every rank's every save)
        for key, needs, regex in WORLD_SIZE_RULES:
            at = -1
            for k in needs:
                found = message.find(k)
                if found >= 0 and (at < 0 or found < at):
                    at = found
            if at >= 0:
                m = regex.search(message, at)
                if m:
                    value = log_int(m.group(1))
                    if value > self.world_sizes.get(key, -1):
                        self.world_sizes[key] = value

    def _hosts(self, rec: Record, message: str) -> None:
        for regex in HOST_RES:
            if len(self.hosts) >= MAX_HOSTS:
                return
            for m in regex.finditer(message):
                self.hosts.add(m.group(1))

    # -- verl era --------------------------------------------------------------------------------
    def _era_literal(self, rec: Record, message: str) -> None:
        for label, rule in MESSAGE_ERA_RULES.items():
            if label not in self.era and label in message:
                self._era(rule)

    def _saving(self, rec: Record, message: str) -> None:
        if RANK0_SAVE_MARK in rec.line.text:  # the prefix the normaliser strips from v0.2/v0.3 saves
            self._era(RANK0_SAVE_RULE)

    def _saved(self, rec: Record, message: str) -> None:
        if RANK_SAVED_MARK in message:
            self._era(RANK_SAVED_RULE)

    def _tracker_missing(self, rec: Record, message: str) -> None:
        if CKPT_TRACKER_PERCENT_S not in message:
            self._era(CKPT_TRACKER_FSTRING_RULE)

    def _step_line(self, rec: Record, message: str) -> None:
        if not any(k in message for k in VERL_STEP_KEYS):
            return  # a non-verl script's step line says nothing about verl
        for key in STEP_ERA_KEYS:
            if key not in self.era and key in message:
                self._era(MESSAGE_ERA_RULES[key])
        if self._step_lines >= STEP_FORMAT_LINES:
            return
        split = split_step_line(message)
        if split is None:
            return
        self._step_lines += 1
        raws = [raw.strip() for _, raw in split[1]]
        if any(r.startswith(NUMPY_STARTS) for r in raws) or any(LONG_NUMBER_RE.match(r) for r in raws):
            self._era(FULL_REPR_RULE)
        elif len(raws) >= 3 and all(THREE_DECIMALS_RE.match(r) for r in raws):
            self._era(THREE_DECIMALS_RULE)

    # -- configuration ---------------------------------------------------------------------------
    def _set_config(
        self, path: tuple[str, ...], parent_known: bool, value: ConfigValue, priority: int
    ) -> None:
        leaf = path[-1]
        if leaf not in CONFIG_LEAVES:
            return
        needed = AMBIGUOUS_PARENTS.get(leaf)
        if needed is not None and (not parent_known or len(path) < 2 or path[-2] != needed):
            return
        key = ".".join(path) if parent_known else leaf
        old = self.config.get(key)
        if old is not None and old[0] > priority:
            return
        if old is None and len(self.config) >= MAX_CONFIG:
            return
        self.config[key] = (priority, value)

    def _overrides(self, rec: Record, message: str) -> None:
        for m in OVERRIDE_ITEM_RE.finditer(message):
            self._set_config(tuple(m.group(1).lstrip("+~").split(".")), True, _scalar(m.group(2)), 1)

    def _cmdline(self, rec: Record, message: str) -> None:
        for m in CMDLINE_ITEM_RE.finditer(message):
            value = m.group(2).rstrip("\\")
            if value and not value.startswith("["):
                self._set_config(tuple(m.group(1).split(".")), True, _scalar(value), 0)

    def _dump_start(self, rec: Record, message: str) -> None:
        if message.startswith(DUMP_START):
            self._dump_stream = rec.stream
            self._dump_openers = {}
            self._dump_lines = 0
            self._dump_line(message)

    def _dump_continues(self, rec: Record, message: str) -> bool:
        """Feed a line of the open config dump; False when the line is not part of it. Every record
        seen while a dump is open counts towards MAX_DUMP_LINES, so an unfinished dump costs little."""
        self._dump_lines += 1
        if self._dump_lines > MAX_DUMP_LINES:
            self._end_dump()
            return False
        if rec.stream != self._dump_stream:
            return False
        if not message.startswith(" "):
            self._end_dump()
            return False
        self._dump_line(message)
        return True

    def _end_dump(self) -> None:
        self._dump_stream = None
        self._dump_openers = {}

    def _dump_line(self, message: str) -> None:
        """One line of pprint's dict repr. pprint starts the keys of a dict one column after its `{`, so
        the first key of a line finds its parent by its column; braces within the line nest the keys after."""
        stack: list[tuple[str, ...] | None] = []
        pending: tuple[str, ...] | None = None  # the path of a key whose value is the next `{`
        for index, m in enumerate(DUMP_TOKEN_RE.finditer(message)):
            key = m.group("key")
            if key is not None:
                if index == 0:
                    stack = [self._dump_openers.get(m.start())]
                parent = stack[-1] if stack else None
                path = (*parent, key) if parent is not None else (key,)
                rest = message[m.end() :]
                pending = path if parent is not None and rest.startswith("{") else None
                found, value = _dump_value(rest)
                if found:
                    self._set_config(path, parent is not None, value, 2)
            elif m.group("open") is not None:
                opened = pending if pending is not None else (() if index == 0 else None)
                stack.append(opened)
                if opened is not None:
                    self._dump_openers[m.end()] = opened
                pending = None
            elif m.group("close") is not None and stack:
                stack.pop()

    # -- the report ------------------------------------------------------------------------------
    def verl_era(self) -> str | None:
        if not self.era:
            return None
        lows = [r.lo for r in self.era.values() if r.lo is not None]
        highs = [r.hi for r in self.era.values() if r.hi is not None]
        lo, hi = (max(lows) if lows else None), (min(highs) if highs else None)
        if lo is not None and hi is not None:
            if lo == hi:
                return f"0.{lo}"
            if lo < hi:
                return f"0.{lo}-0.{hi}"
            return f"between 0.{hi} and 0.{lo} (markers of both: a main-branch build between releases)"
        return f">=0.{lo}" if lo is not None else f"<=0.{hi}"

    def config_values(self) -> dict[str, ConfigValue]:
        return {k: v for k, (_, v) in sorted(self.config.items())}

    def _config_first(self, places: tuple[tuple[str, str | None], ...]) -> ConfigValue:
        """The first of `places` (patterns/environment.yaml's config-* lists) the log gave a value."""
        for leaf, under in places:
            value = self._config_leaf(leaf, under)
            if value:
                return value
        return None

    def _config_leaf(self, leaf: str, under: str | None = None) -> ConfigValue:
        for key, (_, value) in sorted(self.config.items()):
            parts = key.split(".")
            if parts[-1] == leaf and (under is None or under in parts[:-1]):
                return value
        return None

    def fingerprint(self) -> Environment:
        """What is known; keys with unknown values are omitted (see the module docstring)."""
        f = self.facts
        out: dict[str, object] = {}
        for key in (
            "torch",
            "cuda",
            "cuda_driver",
            "nvidia_driver",
            "nccl",
            "vllm",
            "vllm_engine",
            "sglang",
            "ray",
            "python",
            "transformers",
            "flash_attn",
            "wandb",
            "verl",
        ):
            if key in f:
                out[key] = f[key]
        if "torch" not in out and "torch_style" in f:
            out["torch"] = f["torch_style"]
        if "ray" not in out and "ray_style" in f:
            out["ray"] = f["ray_style"]
        if "launcher" in f:
            out["launcher"] = f["launcher"]
        era = self.verl_era()
        if era is not None:
            out["verl_era"] = era
            out["verl_era_evidence"] = list(self.era)
        if "gpu_model" in f:
            out["gpu_model"] = f["gpu_model"]
        if self.gpu_memory_gib is not None:
            out["gpu_memory_gib"] = self.gpu_memory_gib
        world = self._world()
        if world is not None:
            out["world_size"] = world
        if self.hosts:
            out["hosts"] = sorted(self.hosts)
        model = self._config_first(MODEL_PATH_PLACES)
        if model is not None:
            out["model_path"] = model
        engine = self._config_first(ROLLOUT_ENGINE_PLACES)
        if engine is None and len(self.engines) == 1:
            engine = next(iter(self.engines))
        if engine is not None:
            out["rollout_engine"] = engine
        for key, value in self.config_values().items():
            if value is not None:
                out[f"config.{key}"] = value
        return Environment.of(out)

    def _world(self) -> int | None:
        for key in ("explicit", "checkpoint"):
            if key in self.world_sizes:
                return self.world_sizes[key]
        nodes = self._config_first(NNODES_PLACES)
        gpus = self._config_first(GPUS_PER_NODE_PLACES)
        if isinstance(nodes, int) and isinstance(gpus, int):
            return nodes * gpus
        return self.world_sizes.get("nranks")
