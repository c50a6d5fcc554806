"""Progress lines applied without a record: the facts the reader's fast path hands on (step lines and
progress bars parsed into columns, logparse.read.progress_lines) go to the same observers a record of
the line would reach (StageTracker.apply, MetricsTracker.add_row, EnvironmentTracker.note_process),
line by line or a run of lines at once, whenever nothing the columns do not tell bears on the line.
Otherwise the line takes the usual way, as a record: reports are the same either way (tested on
every sample, fixture and generated log in tests/logparse/read/test_progress_lines.py).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_right
from typing import Protocol

from logparse.observe.environment import EnvironmentTracker
from logparse.observe.metrics import MetricsTracker
from logparse.observe.progress import StageTracker
from logparse.read.blocks import Block
from logparse.read.normalize import Origin
from logparse.read.progress_lines import (
    BAR_N,
    BAR_RATE,
    BAR_TOTAL,
    DEFERRED,
    FLOAT_FIELDS,
    INT_FIELDS,
    MARKER,
    MESSAGE_AT,
    OFFSET,
    PROCESS,
    SECONDS,
    SHAPE,
    STEP,
    ProgressColumns,
    ProgressTables,
)
from logparse.read.progress_syntax import MarkerHit, step_seconds

MIN_RUN_LINES = 4  # progress lines in a row applied at once (fewer: one by one, which costs less then)
MAX_NOTED_PROCESSES = 65_536  # (actor, node) pairs of progress lines whose note is known to be made
MAX_SAMPLE_TEXT_LINES = 5000  # lines of decoded model text skipped at most (logparse.pipeline)


class ScanState(Protocol):
    """What of the analysis' state a progress line applied without a record must respect."""

    seq: int  # records (and lines applied without one) so far
    sample_text: dict[tuple, int]  # stream -> lines of decoded model text so far

    def stream_busy(self, stream: tuple) -> bool:
        """Does a traceback or a multi-line message of `stream` wait for its next line?"""

    def stream_of(
        self, block: Block, idx: int, source: str, number: int, default: Origin | None, step_at: int = -1
    ) -> tuple:
        """The stream of candidate `idx` of `block`; `step_at`: where its message starts, when it is a
        step line's (`step:...`), else -1."""

    def activate(self, source: str) -> None:
        """`source` showed progress or a finding."""


class ProgressFacts:
    """Applies progress lines of ProgressColumns to the observers (see the module docstring)."""

    def __init__(
        self, state: ScanState, stages: StageTracker, metrics: MetricsTracker, env: EnvironmentTracker
    ):
        self.state = state
        self.stages = stages
        self.metrics = metrics
        self.env = env
        self._noted: set[tuple[str | None, str | None]] = set()  # EnvironmentTracker.note_process made
        # a progress line's marker hit (the markers it may match have no named groups)
        markers = stages.matcher.markers
        self._marker_hits = [MarkerHit(m, {}) for m in markers]
        self._plain_markers = [stages.plain_marker(i) for i in range(len(markers))]

    def ready(self, columns: ProgressColumns, tables: ProgressTables) -> bytearray:
        """For each progress line of `columns`, 1 if it may go in a run as far as its process (noted)
        and its marker (plain) tell; 0 if not, or not yet (a line taken alone may note its process)."""
        ints = columns.ints
        processes = ints[PROCESS::INT_FIELDS]
        noted = tables.noted
        for process in set(processes):
            if not noted[process] and tables.processes[process] in self._noted:
                noted[process] = 1
        ready = bytearray(map(noted.__getitem__, processes))
        markers = ints[MARKER::INT_FIELDS]
        plain = self._plain_markers
        for marker in set(markers):
            if marker >= 0 and not plain[marker]:
                for k, other in enumerate(markers):
                    if other == marker:
                        ready[k] = 0
        return ready

    def run(
        self,
        columns: ProgressColumns,
        k: int,
        runs: list[int],
        ready: bytearray,
        tables: ProgressTables,
        block: Block,
        idx: int,
        source: str,
    ) -> int:
        """Apply progress lines k, k + 1, ... of `columns` (candidates idx, idx + 1, ... of `block`, with
        no other candidate between them) at once, as `line` would each in turn, while what decides
        that stays the same: no region of the input is open (the caller knows; no record comes between
        them to open one) and no model text, no config dump, the input has no default origin, every
        line's process is noted and its marker plain (`ready`) and its step line's format is known.
        How many it applied; 0: none (fewer than MIN_RUN_LINES), the caller takes them one by one."""
        if self.state.sample_text or self.env.dump_open() or self.stages.checkpoint_pending:
            return 0
        end = self._run_end(columns, k, runs, ready, tables, idx)
        count = end - k
        if count < MIN_RUN_LINES:
            return 0
        ints, floats = columns.ints, columns.floats
        lo, hi = k * INT_FIELDS, end * INT_FIELDS
        flo, fhi = k * FLOAT_FIELDS, end * FLOAT_FIELDS
        steps = ints[lo + STEP : hi : INT_FIELDS]
        seconds = floats[flo + SECONDS : fhi : FLOAT_FIELDS]
        step_at = [j for j in range(count) if steps[j] >= 0]
        shapes = ints[lo + SHAPE : hi : INT_FIELDS]
        deferred = {}  # line -> its row: the step lines left to this side by a reader process that ran behind
        for j in step_at:
            if shapes[j] == DEFERRED:
                deferred[j], timing = self._deferred_row(
                    block, idx + j, ints[lo + j * INT_FIELDS + MESSAGE_AT]
                )
                seconds[j] = math.nan if timing is None else timing
        seq = self.state.seq + 1
        self.state.seq += count
        self.stages.apply_run(
            seq,
            source,
            block.numbers[idx : idx + count],
            steps,
            seconds,
            ints[lo + MARKER : hi : INT_FIELDS],
            ints[lo + BAR_N : hi : INT_FIELDS],
            ints[lo + BAR_TOTAL : hi : INT_FIELDS],
            floats[flo + BAR_RATE : fhi : FLOAT_FIELDS],
        )
        if step_at:
            self._add_rows(
                columns, tables, ints[lo + OFFSET : hi : INT_FIELDS], steps, shapes, step_at, deferred
            )
            self.state.activate(source)
        return count

    def _run_end(
        self,
        columns: ProgressColumns,
        k: int,
        runs: list[int],
        ready: bytearray,
        tables: ProgressTables,
        idx: int,
    ) -> int:
        """Where the run that starts at progress line k ends (see `run`)."""
        end = bisect_right(runs, idx - k, k)
        if end - k < MIN_RUN_LINES:
            return k
        ints = columns.ints
        stop = ready.find(0, k, end)
        while stop >= 0:
            marker = ints[stop * INT_FIELDS + MARKER]
            process = ints[stop * INT_FIELDS + PROCESS]
            if (marker >= 0 and not self._plain_markers[marker]) or (
                not tables.noted[process] and tables.processes[process] not in self._noted
            ):
                end = stop
                break
            tables.noted[process] = 1  # (noted by a line taken alone since the block came: ready now)
            ready[stop] = 1
            stop = ready.find(0, stop + 1, end)
        if not self.env.step_format_known():
            end = next((j for j in range(k, end) if ints[j * INT_FIELDS + STEP] >= 0), end)
        return end

    def _add_rows(
        self,
        columns: ProgressColumns,
        tables: ProgressTables,
        offsets: array,
        steps: array,
        shapes: array,
        step_at: list[int],
        deferred: dict[int, tuple],
    ) -> None:
        """The metrics rows of a run's step lines, rows of one shape at a time."""
        i, rows = 0, len(step_at)
        while i < rows:
            j = step_at[i]
            shape = shapes[j]
            if shape == DEFERRED:
                row = deferred[j]
                self.metrics.add_row(row[0], row[1], array("d", row[2]), row[3])
                i += 1
                continue
            g = i + 1
            while g < rows and shapes[step_at[g]] == shape:
                g += 1
            keys, names = tables.shapes[shape]
            start = offsets[j]
            self.metrics.add_rows(
                [steps[x] for x in step_at[i:g]],
                keys,
                columns.values[start : start + (g - i) * len(keys)],
                names,
            )
            i = g

    def _deferred_row(self, block: Block, idx: int, message_at: int) -> tuple[tuple, float | None]:
        """(StepParser.parse, step_seconds) of the DEFERRED step line that is candidate `idx` of `block`."""
        raw, _ = block.raw(idx)
        message = raw[message_at:].decode("ascii")
        return self.metrics.parser.parse(message), step_seconds(message)

    def line(
        self,
        columns: ProgressColumns,
        k: int,
        tables: ProgressTables,
        block: Block,
        idx: int,
        source: str,
        number: int,
        default: Origin | None,
        region: bool,
    ) -> bool:
        """Apply progress line `k` of `columns` (candidate `idx` of `block`, line `number` of `source`)
        as the analysis would its record, when nothing the columns do not tell bears on it; False: it
        needs its record."""
        fields = columns.ints
        at = k * INT_FIELDS
        step = fields[at + STEP]
        if (step >= 0 and not self.env.step_format_known()) or self.env.dump_open():
            return False
        actor, node = tables.processes[fields[at + PROCESS]]
        if default is not None:
            if default.rank is not None:
                return False
            actor = actor or default.actor
            node = node or default.node
        if region or self.state.sample_text:
            # (a step line's message starts where the reader found `step:`: its stream is its prefix's)
            message_at = fields[at + MESSAGE_AT] if step >= 0 else -1
            taken = self._in_stream(block, idx, source, number, default, region, step, message_at)
            if taken is not None:
                return taken
        if (actor, node) not in self._noted and not self._note(actor, node):
            return False  # a new Ray actor: its record tells the era rules
        self.state.seq += 1
        seq = self.state.seq
        line = tables.line(columns, k)
        marker = fields[at + MARKER]
        if marker >= 0:
            line = line._replace(hit=self._marker_hits[marker])
        shape = fields[at + SHAPE]
        if shape == DEFERRED:  # left to this side by a reader process that ran behind
            row, seconds = self._deferred_row(block, idx, fields[at + MESSAGE_AT])
            line = line._replace(seconds=seconds)
        self.stages.apply(seq, source, number, None, 1, line)
        if shape >= 0:
            keys, names = tables.shapes[shape]
            start = fields[at + OFFSET]
            self.metrics.add_row(step, keys, columns.values[start : start + len(keys)], names)
        elif shape == DEFERRED:
            self.metrics.add_row(row[0], row[1], array("d", row[2]), row[3])
        if step >= 0:
            self.state.activate(source)
        return True

    def _in_stream(
        self,
        block: Block,
        idx: int,
        source: str,
        number: int,
        default: Origin | None,
        region: bool,
        step: int,
        message_at: int = -1,
    ) -> bool | None:
        """What only the line's stream tells: False when a traceback or message of its stream waits for
        it; True when it is skipped as model text (as the analysis skips a record of it: model text
        goes on until a step line); None when neither. `message_at`: where a step line's message
        (`step:...`) starts in its bytes, or -1."""
        stream = self.state.stream_of(block, idx, source, number, default, message_at)
        if region and self.state.stream_busy(stream):
            return False
        sample_text = self.state.sample_text
        if stream in sample_text:
            lines = sample_text[stream] + 1
            if step < 0 and lines < MAX_SAMPLE_TEXT_LINES:
                sample_text[stream] = lines
                self.state.seq += 1
                return True
            del sample_text[stream]
        return None

    def _note(self, actor: str | None, node: str | None) -> bool:
        """Tell the environment tracker of the line's process; False when it needs the record."""
        if not self.env.note_process(actor, node):
            return False
        if len(self._noted) < MAX_NOTED_PROCESSES:
            self._noted.add((actor, node))
        return True
