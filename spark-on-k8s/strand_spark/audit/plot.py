"""The report's picture: per topic, source and mirror records per bucket with the
findings marked; below, the mirror latency per topic.

Drawn with matplotlib's object API on the Agg canvas (no pyplot, no display, no global
state), so it works in a driver pod and from several threads.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
from matplotlib import rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from strand_spark.audit.model import AuditReport, Finding, FindingKind

# More topics than this get no panel of their own (the tables still list them).
MAX_TOPIC_PANELS = 8
# Findings of one bucket beyond this many are summed up as "+N more" in its label.
_LABEL_LINES = 4

_MARKERS: dict[FindingKind, tuple[str, str]] = {
    FindingKind.MISSING: ("X", "tab:red"),
    FindingKind.DUPLICATE: ("^", "tab:orange"),
    FindingKind.ALTERED: ("D", "tab:purple"),
    FindingKind.UNMATCHED: ("v", "tab:brown"),
    FindingKind.OVERDUE: ("s", "tab:gray"),
    FindingKind.LATE: ("o", "tab:cyan"),
}


def _topic_panel(axes: Axes, report: AuditReport, topic: str) -> None:
    source: dict[int, int] = defaultdict(int)
    mirror: dict[int, int] = defaultdict(int)
    for b in report.buckets:
        if b.topic == topic:
            source[b.bucket_start_ms] += b.source_records + b.pending + b.overdue
            mirror[b.bucket_start_ms] += b.mirror_records
    starts = sorted(set(source) | set(mirror))
    when = np.array(starts, dtype="datetime64[ms]")
    axes.plot(when, [source[ms] for ms in starts], "o-", color="tab:blue",
              label="source records", linewidth=2)
    axes.plot(when, [mirror[ms] for ms in starts], "s--", color="tab:green",
              label="mirror copies", linewidth=1.5)
    found: dict[int, list[Finding]] = defaultdict(list)
    for f in report.findings:
        if f.topic == topic:
            found[f.bucket_start_ms].append(f)
    marked: set[FindingKind] = set()
    for start, here in sorted(found.items()):
        y = source.get(start, 0)
        # The markers of one bucket side by side, one label listing them all.
        for index, f in enumerate(here):
            marker, colour = _MARKERS[f.kind]
            shifted = np.array([start + index * report.bucket_ms // 15], dtype="datetime64[ms]")
            axes.scatter(shifted, [y], marker=marker, color=colour, s=90, zorder=5,
                         label=None if f.kind in marked else f.kind.value)
            marked.add(f.kind)
        lines = [f"p{f.partition}: {f.records} {f.kind.value}" for f in here[:_LABEL_LINES]]
        if len(here) > _LABEL_LINES:
            lines.append(f"+{len(here) - _LABEL_LINES} more")
        axes.annotate("\n".join(lines), (np.datetime64(start, "ms"), y),
                      textcoords="offset points", xytext=(4, 8), fontsize=7,
                      color=_MARKERS[here[0].kind][1], va="bottom")
    axes.set_title(f"{topic}: records per {report.bucket_ms // 60_000}-minute bucket "
                   "(UTC, record timestamp)", fontsize=10)
    axes.set_ylabel("records")
    highest = max([*source.values(), *mirror.values(), 1])
    axes.set_ylim(0, highest * 1.45)  # room for the labels above the lines
    axes.margins(x=0.08)
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8, loc="lower left")


def _latency_panel(axes: Axes, report: AuditReport) -> None:
    if not report.latency:
        axes.text(0.5, 0.5, "no copies carry a mirror time", ha="center", va="center",
                  transform=axes.transAxes)
        axes.set_axis_off()
        return
    topics = [x.topic for x in report.latency]
    positions = range(len(topics))
    width = 0.27
    for shift, name, values, colour in (
            (-width, "p50", [x.p50_ms for x in report.latency], "tab:green"),
            (0.0, "p99", [x.p99_ms for x in report.latency], "tab:orange"),
            (width, "max", [x.max_ms for x in report.latency], "tab:red")):
        # A log axis shows p50 and a far larger max together; it needs positive values
        # (a copy can seem written before its timestamp when clocks differ).
        seconds = [max(v, 1) / 1000 for v in values]
        bars = axes.bar([p + shift for p in positions], seconds, width, label=name,
                        color=colour)
        axes.bar_label(bars, [f"{v / 1000:.3g}" if v < 100_000 else f"{v / 1000:.0f}"
                              for v in values], fontsize=7)
    axes.set_yscale("log")
    axes.axhline(report.late_after_ms / 1000, color="gray", linestyle=":",
                 label="late threshold")
    axes.set_xticks(list(positions), topics, fontsize=8)
    axes.set_ylabel("seconds (log scale)")
    axes.set_title("mirror latency (strand.mirror.time - record timestamp)", fontsize=10)
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)


def render_plot(report: AuditReport, path: Path) -> None:
    """Write the PNG to ``path``."""
    with rc_context({"date.converter": "concise"}):  # compact dates on the bucket axes
        _render(report, path)


def _render(report: AuditReport, path: Path) -> None:
    topics = list(report.topics)[:MAX_TOPIC_PANELS]
    panels = max(len(topics), 1) + 1
    figure = Figure(figsize=(11, 3.2 * panels), layout="constrained")
    FigureCanvasAgg(figure)
    grid = figure.subplots(panels, 1, squeeze=False)
    if topics:
        for axes, topic in zip(grid[:-1, 0], topics, strict=True):
            _topic_panel(axes, report, topic)
    else:
        grid[0, 0].text(0.5, 0.5, "no records in the audited topics", ha="center",
                        va="center", transform=grid[0, 0].transAxes)
        grid[0, 0].set_axis_off()
    _latency_panel(grid[-1, 0], report)
    hidden = len(report.topics) - len(topics)
    note = f" ({hidden} more topics in the tables)" if hidden > 0 else ""
    figure.suptitle(f"Mirror audit {report.source_cluster} → {report.target_cluster}: "
                    f"{'clean' if report.clean else 'LOSS OR DUPLICATION'}{note}",
                    color="tab:green" if report.clean else "tab:red")
    figure.savefig(path, format="png", dpi=100)
