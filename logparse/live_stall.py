"""A live scan's stall ALERT (`scan --follow [--stall-after DURATION]`): one stderr line when no new
training step has arrived for that long, saying where each stream stopped.

The main thread reads the log and calls `tick(analysis)` as it reads (the analysis's progress
callback): a clock read, nothing more. A daemon thread looks every CHECK_S at what the analysis holds
through reads that are one C-level operation each under the GIL (the stage tracker's `last_step_line`
tuple, a copy of its `step_times`, a copy of the stall observer's last record per stream), so a silent
log (a read blocked on a pipe, or a followed file that does not grow) still gets its ALERT. How long is
too long is decide/stall.py's `live_alert_after`: `--stall-after` when given, else `follow_steps`
times the run's median step time (from the step lines' own timestamps; in a log without them, the
wall-clock gaps between steps that arrived after the scan caught up with the file), never less than
`min_silence_s`.

Silence is counted from the arrival of the last step (seen within CHECK_S), or from when the scan
caught up with what the file already held (a step read from the backlog arrived in a burst: its age in
wall time is not known). A new step re-arms the ALERT and is said (`progress resumed`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TextIO

from logparse.console import screen_width, wrap_text
from logparse.decide.stall import live_alert_after, median, median_step_time, span

CHECK_S = 0.5  # the clock is looked at this often
CAUGHT_UP_S = 1.0  # no read for this long: the backlog is read, arrivals are live
MAX_STREAMS_SAID = 8
_STALL, _DIM, _RESET = "\x1b[1m\x1b[35m", "\x1b[2m", "\x1b[0m"
LINE_CHARS = 120


class StallWatch:
    """See the module docstring. `clean(text, cut)` masks secrets and strips terminal escapes, as the
    fatal-line ALERT's does; `screen`: the status line to wipe first, if one is drawn."""

    def __init__(
        self,
        out: TextIO,
        clean: Callable[[str, bool], str],
        explicit_s: float | None = None,
        screen=None,
        clock: Callable[[], float] = time.monotonic,
        color: bool = False,
    ):
        self.out = out
        self.color = color
        self.clean = clean
        self.explicit_s = explicit_s
        self.screen = screen
        self.clock = clock
        self.started_at = clock()
        self.analysis = None  # set by the first tick
        self.step: int | None = None
        self.step_at: float | None = None  # when the last new step arrived (wall clock, live)
        self.caught_up_at: float | None = None
        self.live_gaps: list[float] = []  # seconds per step between live arrivals
        self._last_read = self.started_at
        self.alerted = False
        self.alerts: list[float] = []  # seconds from the start to each ALERT (benchmarks)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the main thread ---------------------------------------------------------------------------
    def tick(self, analysis) -> None:  # analysis: logparse.pipeline.Analysis
        self.analysis = analysis
        self._last_read = self.clock()

    # -- the watching thread -----------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="verl-logscan-stall-watch", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(CHECK_S):
            self.check()

    def check(self) -> None:
        """Note a new step; write the ALERT when the silence has reached the limit (once per silence)."""
        now = self.clock()
        a = self.analysis
        if self.caught_up_at is None and now - self._last_read >= CAUGHT_UP_S:
            self.caught_up_at = now  # no read for a while: whatever the input held is read
        if a is None:
            return
        last = a.stages.last_step_line  # (replaced whole by the reading thread)
        if last is not None and last.step != self.step:
            self._new_step(last.step, now)
        if self.alerted:
            return
        step_time = median_step_time(tuple(a.stages.step_times))
        if step_time is None and len(self.live_gaps) >= 2:
            step_time = median(self.live_gaps)
        limit = live_alert_after(step_time, self.explicit_s)
        since = self._since()
        if limit is None or since is None or now - since < limit:
            return
        self.alerted = True
        self.alerts.append(now - self.started_at)
        self._write(self._alert_text(a, now - since, limit, step_time))

    def _new_step(self, step: int, now: float) -> None:
        live = (
            self.caught_up_at is not None and self.step_at is not None and self.step_at >= self.caught_up_at
        )
        if live and self.step is not None and step > self.step:
            self.live_gaps.append((now - self.step_at) / (step - self.step))
        if self.alerted:
            self._write(f"verl-logscan: progress resumed: step {step}")
        self.step, self.step_at, self.alerted = step, now, False

    def _since(self) -> float | None:
        """When the silence began: the last live step's arrival, else when the backlog was read."""
        if self.caught_up_at is None:
            return None
        if self.step_at is not None and self.step_at >= self.caught_up_at:
            return self.step_at
        return self.caught_up_at

    def _alert_text(self, a, silence: float, limit: float, step_time: float | None) -> str:
        where = f"after step {self.step}" if self.step is not None else "before any step"
        try:
            stage = a.stages.current_stage
        except IndexError:  # (its list was cut meanwhile)
            stage = None
        if stage:
            where += f" in {stage}"
        why = (
            "--stall-after"
            if self.explicit_s is not None
            else f"{limit / step_time:.0f}x the median step time"
        )
        took = f"; steps took {span(step_time)} (median)" if step_time else ""
        limit_text = f"limit {span(limit)}: {why}{took}"
        parts = [f"verl-logscan: ALERT stalled: no new step for {span(silence)} {where} ({limit_text})"]
        streams = a.stalls.last_lines()
        for who, ev, message in streams[:MAX_STREAMS_SAID]:
            text = message.strip() or ev.text.strip()
            shown = self.clean(text[:LINE_CHARS], len(text) > LINE_CHARS)
            parts.append(f"  {self.clean(who, False)} last wrote {ev.source}:{ev.line}: {shown}")
        if len(streams) > MAX_STREAMS_SAID:
            parts.append(f"  ... and {len(streams) - MAX_STREAMS_SAID} more stream(s)")
        return "\n".join(parts)

    def _write(self, text: str) -> None:
        """`text` on the terminal: its first line (the ALERT) and the lines under it (the streams) each
        wrapped to the terminal's width at spaces; with colour the ALERT bold magenta (a stall's colour
        in the summary, as a fatal line's ALERT is bold red), the streams dim."""
        if self.screen is not None:
            self.screen.before_output()
        width = screen_width(self.out)
        head, _, rest = text.partition("\n")
        head, rest = wrap_text(head, width), wrap_text(rest, width) if rest else ""
        if self.color:
            head, rest = f"{_STALL}{head}{_RESET}", f"{_DIM}{rest}{_RESET}" if rest else ""
        self.out.write(head + (f"\n{rest}" if rest else "") + "\n")
        self.out.flush()
