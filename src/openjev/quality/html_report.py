"""`openjev eval --html`: the report as one self-contained page (inline CSS and SVG, no script, no asset).

One section per file, then the whole run when there are several: the headline figures with 95 %
Wilson intervals, the reliability diagram, the confusion matrix, accuracy against coverage, the ROC
curve for yes/no files, and the wrong answers, the most confident first. Built from the report
alone (the same data `--out` writes), so a page can be remade from a saved JSON report.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from openjev.quality.figures import confusion, coverage_curve, gold_name, roc_curve, scored, wrong_answers
from openjev.quality.metrics import Interval, wilson_interval
from openjev.quality.runner import EvalReport, FileReport, ItemAnswer
from openjev.quality.svg_plots import confusion_plot, coverage_plot, esc, reliability_plot, roc_plot

WRONG_SHOWN = 40  # rows of the wrong-answers table; the JSON report lists them all
POLICY = "default-src 'none'; style-src 'unsafe-inline'"  # nothing outside the page may load

CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1f2937;
  margin: 0 auto; padding: 24px; max-width: 1180px; background: #fff; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 32px 0 8px; word-break: break-all; }
h3 { font-size: 15px; margin: 18px 0 6px; }
.meta, .note { color: #4b5563; } .banner { background: #fef3c7; border: 1px solid #f59e0b; padding: 8px 12px; }
nav ul { margin: 6px 0; padding-left: 20px; }
section { border-top: 2px solid #e5e7eb; }
table { border-collapse: collapse; }
.figures td, .figures th { padding: 3px 12px 3px 0; text-align: left; vertical-align: top; }
.figures th { font-weight: 600; color: #374151; }
.plots { display: flex; flex-wrap: wrap; gap: 16px; align-items: flex-start; }
.plots svg { border: 1px solid #e5e7eb; border-radius: 4px; background: #fff; }
table.wrong-answers { width: 100%; font-size: 13px; }
.wrong-answers th, .wrong-answers td { border-bottom: 1px solid #e5e7eb; padding: 4px 8px; text-align: left;
  vertical-align: top; }
.wrong-answers td.state { white-space: pre-wrap; word-break: break-word; width: 55%; }
.wrong-answers td.num { text-align: right; font-variant-numeric: tabular-nums; }
.cut { color: #b45309; font-style: italic; white-space: nowrap; }
svg text { font: 11px system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; fill: #374151; }
svg .plot-title { font-size: 14px; font-weight: 600; fill: #111827; }
svg .axis-label { font-size: 12px; fill: #111827; }
svg .grid { stroke: #f1f5f9; } svg .axes { fill: none; stroke: #6b7280; }
svg .bar { fill: #93c5fd; stroke: #3b82f6; } svg .mean-confidence { fill: #1e3a8a; }
svg .diagonal, svg .chance { stroke: #9ca3af; stroke-dasharray: 5 4; }
svg .curve { fill: none; stroke: #2563eb; stroke-width: 2; stroke-linejoin: round; }
svg .threshold { fill: #fff; stroke: #b45309; stroke-width: 1.5; } svg .threshold-label { fill: #b45309; }
svg .cell { stroke: #fff; } svg .cell.right { fill: #2563eb; } svg .cell.wrong { fill: #ea580c; }
svg .cell-count.light { fill: #fff; } svg .no-data { fill: #6b7280; font-style: italic; }
"""


def render_html(report: EvalReport) -> str:
    """The whole page."""
    sections = [file_section(f, f"file-{i}", f.answers, wrong=True) for i, f in enumerate(report.files, start=1)]
    links = [(f"file-{i}", f.file) for i, f in enumerate(report.files, start=1)]
    if report.overall is not None:
        every = [a for f in report.files for a in f.answers]
        sections.append(file_section(report.overall, "overall", every, wrong=False))
        links.append(("overall", report.overall.file))
    banner = (
        '<p class="banner" data-interrupted="true">Interrupted: the figures cover the items answered before Ctrl-C.</p>'
        if report.interrupted
        else ""
    )
    nav = "".join(f'<li><a href="#{esc(anchor)}">{esc(name)}</a></li>' for anchor, name in links)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>openjev eval: {esc(', '.join(f.file for f in report.files))}</title>"
        f"<style>{CSS}</style></head><body>"
        "<h1>openjev eval</h1>"
        f'<p class="meta">model <code>{esc(report.model)}</code> at <code>{esc(report.url)}</code>, '
        f"{len(report.files)} file{'s' if len(report.files) != 1 else ''}</p>"
        f"{banner}<nav><ul>{nav}</ul></nav>{''.join(sections)}</body></html>\n"
    )


def file_section(f: FileReport, anchor: str, answers: Sequence[ItemAnswer], *, wrong: bool) -> str:
    """One file's figures, plots and (with `wrong`) wrong answers; `answers` are the items it covers."""
    plots = [
        reliability_plot(f.reliability),
        confusion_plot(confusion(answers)),
        coverage_plot(coverage_curve(scored(answers)), f.confident),
    ]
    if f.yes_no is not None:
        plots.append(roc_plot(roc_curve(answers), f.yes_no.auc))
    tail = (
        wrong_table(wrong_answers(answers))
        if wrong
        else '<p class="note">Each file above lists its own wrong answers.</p>'
    )
    return (
        f'<section id="{esc(anchor)}" data-file="{esc(f.file)}"><h2>{esc(f.file)}</h2>'
        f"{figures_table(f)}<h3>Plots</h3>"
        f'<div class="plots">{"".join(plots)}</div>{tail}</section>'
    )


def pct(value: float | None) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{100 * value:.1f} %"


def fixed(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.{digits}f}"


def with_interval(share: float, trials: int) -> str:
    """`72.0 % (95 % interval 61.3–80.7 %, n = 75)`: the share and its Wilson interval."""
    if trials == 0 or math.isnan(share):
        return "n/a"
    interval: Interval | None = wilson_interval(round(share * trials), trials)
    assert interval is not None  # trials > 0
    return (
        f'{pct(share)} <span class="interval" data-low="{interval.low:.6g}" data-high="{interval.high:.6g}">'
        f"(95 % interval {100 * interval.low:.1f}–{100 * interval.high:.1f} %, n = {trials})</span>"
    )


def figures_table(f: FileReport) -> str:
    counts = f"{f.answered} of {f.items} answered" + (f", {f.failures} failed" if f.failures else "")
    if f.unsent:
        counts += f", {f.unsent} not sent (interrupted)"
    rows = [
        ("items", esc(counts)),
        ("accuracy", with_interval(f.accuracy, f.answered)),
    ]
    if f.reversed is not None:
        rows += [
            ("stability (options reversed)", with_interval(f.reversed.stable, f.reversed.items)),
            ("accuracy, options reversed", with_interval(f.reversed.accuracy, f.reversed.items)),
        ]
    rows += [
        ("mean confidence", pct(f.mean_confidence)),
        ("Brier score / ECE / NLL", f"{fixed(f.brier)} / {fixed(f.ece)} / {fixed(f.nll)}"),
        ("confidence ranks right above wrong (AUC)", fixed(f.confidence_auc)),
    ]
    if f.yes_no is not None:
        y = f.yes_no
        rows.append(
            (
                "yes/no: AUC of P(yes); best cut",
                f"{fixed(y.auc)}; yes when P(yes) ≥ {fixed(y.best_threshold)}: {pct(y.best_threshold_accuracy)} "
                "(fitted on these items, so optimistic)",
            )
        )
    if f.pairs is not None:
        rows.append(("contrastive pairs", f"{pct(f.pairs.all_right)} of {f.pairs.pairs} with every half right"))
    if f.temperature is not None:
        t = f.temperature
        rows.append(
            (
                "fitted temperature",
                f"×{t.temperature:.3f}: NLL {fixed(t.nll_before)} → {fixed(t.nll_after)}, "
                f"ECE {fixed(f.ece)} → {fixed(t.ece_after)}",
            )
        )
    rows.append(
        (
            "latency, throughput",
            f"p50 {fixed(f.latency_p50, 2)} s, p90 {fixed(f.latency_p90, 2)} s, {fixed(f.items_per_second, 2)} items/s",
        )
    )
    rows += [("error", esc(e)) for e in f.errors]
    body = "".join(f'<tr><th scope="row">{esc(name)}</th><td>{value}</td></tr>' for name, value in rows)
    return f'<table class="figures">{body}</table>'


def excerpt_cell(answer: ItemAnswer) -> str:
    """The stored start of the state; when the state is longer, the cut is marked with what is missing."""
    text = esc(answer.excerpt)
    missing = answer.state_chars - len(answer.excerpt)
    if missing > 0:
        text += f'<span class="cut" data-truncated="{missing}">… [{missing} more characters]</span>'
    return f'<td class="state">{text}</td>'


def wrong_table(wrong: Sequence[ItemAnswer]) -> str:
    if not wrong:
        return '<h3>Wrong answers</h3><p class="note">None.</p>'
    rows = []
    for a in wrong[:WRONG_SHOWN]:
        confidence = (a.probabilities or {}).get(a.answer or "", math.nan)
        rows.append(
            f'<tr data-index="{a.index}"><td>{esc(a.id if a.id is not None else f"#{a.index + 1}")}</td>'
            f"<td>{esc(gold_name(a.gold))}</td><td>{esc(a.answer or '')}</td>"
            f'<td class="num">{fixed(confidence)}</td>{excerpt_cell(a)}</tr>'
        )
    more = (
        f'<p class="note">{len(wrong) - WRONG_SHOWN} more wrong answers are not shown: the JSON report '
        "(<code>--out</code>) lists every answer.</p>"
        if len(wrong) > WRONG_SHOWN
        else ""
    )
    return (
        f"<h3>Wrong answers, the most confident first ({len(wrong)})</h3>"
        '<table class="wrong-answers" data-table="wrong"><thead><tr><th>id</th><th>gold</th><th>answer given</th>'
        f"<th>confidence</th><th>state (start)</th></tr></thead><tbody>{''.join(rows)}</tbody></table>{more}"
    )
