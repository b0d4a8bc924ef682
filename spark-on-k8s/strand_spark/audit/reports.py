"""Writing a report to the report directory: ``audit-<time>.md``, ``.png`` and
``.json`` for each run, and the same as ``latest.*`` (a fixed name for people,
dashboards and the continuous mode's last run). Files are written whole, then renamed,
so a reader never sees half a report."""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from strand_spark.audit.model import AuditReport, utc
from strand_spark.audit.plot import render_plot
from strand_spark.audit.render import markdown, summary_json

LATEST = "latest"
# Reports are for people and dashboards to read (mkstemp would make them private).
_MODE = 0o644


@dataclass(frozen=True)
class ReportFiles:
    markdown: Path
    plot: Path
    summary: Path


def _write_text(path: Path, text: str) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(text)
        os.chmod(temporary, _MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_plot(report: AuditReport, path: Path) -> None:
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.",
                                         suffix=".png")
    os.close(handle)
    try:
        render_plot(report, Path(temporary))
        os.chmod(temporary, _MODE)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _copy(source: Path, target: Path) -> None:
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    os.close(handle)
    try:
        shutil.copyfile(source, temporary)
        os.chmod(temporary, _MODE)
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def report_stem(report: AuditReport) -> str:
    """``audit-20261127T130512.345Z``: sorts by time, milliseconds included so that
    two runs within a second do not clash."""
    moment = utc(report.started_ms)
    return f"audit-{moment:%Y%m%dT%H%M%S}.{report.started_ms % 1000:03d}Z"


def write_report(report: AuditReport, directory: Path) -> ReportFiles:
    """Write this run's files and refresh ``latest.*``; returns this run's files."""
    directory.mkdir(parents=True, exist_ok=True)
    stem = report_stem(report)
    files = ReportFiles(markdown=directory / f"{stem}.md", plot=directory / f"{stem}.png",
                        summary=directory / f"{stem}.json")
    _write_plot(report, files.plot)
    _write_text(files.markdown, markdown(report, plot_name=files.plot.name))
    _write_text(files.summary, summary_json(report))
    _copy(files.plot, directory / f"{LATEST}.png")
    _write_text(directory / f"{LATEST}.md", markdown(report, plot_name=f"{LATEST}.png"))
    _copy(files.summary, directory / f"{LATEST}.json")
    return files
