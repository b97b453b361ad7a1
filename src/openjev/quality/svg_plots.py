"""The HTML report's plots as inline SVG strings: no plotting library, so nothing joins `openjev serve`'s install.

Pure functions from figures to markup. Each plot is an `<svg role="img">` named by a `<title>` and
an `aria-label`, and carries `data-plot` (and its marks `class` and `data-*` attributes), so that a
test or a reader can find a plot and what it is drawn from. Every text is HTML-escaped.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import NamedTuple

from openjev.quality.figures import Confusion, Point
from openjev.quality.metrics import ConfidentShare, ReliabilityBin

SIZE = (360, 340)  # width, height of the unit-square plots
TICKS = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
LABEL_CHARS = 18  # option names longer than this are cut in the confusion matrix (whole in the tooltip)
LABEL_GAP = (30, 14)  # px: a threshold's label nearer than this to one already drawn would overlap it
CHAR_WIDTH = 6.5  # px of an 11 px label character, to leave room for the longest label


class Frame(NamedTuple):
    """The plotting area inside an SVG: data in [0, 1]² maps onto it, y upwards."""

    left: float
    top: float
    width: float
    height: float

    def x(self, value: float) -> float:
        return self.left + value * self.width

    def y(self, value: float) -> float:
        return self.top + (1.0 - value) * self.height


FRAME = Frame(left=58, top=44, width=SIZE[0] - 58 - 20, height=SIZE[1] - 44 - 56)


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


def num(value: float) -> str:
    """A coordinate: two decimals at most, no trailing zeros (`12`, `12.5`)."""
    text = f"{value:.2f}".rstrip("0").rstrip(".")
    return "0" if text == "-0" else text


def svg(plot: str, title: str, description: str, size: tuple[int, int], body: str) -> str:
    """The plot's `<svg>`: accessible name and description, a visible title, then `body`."""
    width, height = size
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" data-plot="{esc(plot)}" role="img" '
        f'aria-label="{esc(title)}: {esc(description)}" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}">'
        f"<title>{esc(title)}</title><desc>{esc(description)}</desc>"
        f'<text class="plot-title" x="{width / 2:g}" y="22" text-anchor="middle">{esc(title)}</text>'
        f"{body}</svg>"
    )


def unit_axes(frame: Frame, x_label: str, y_label: str) -> str:
    """Grid, ticks at every 0.2 and the axis labels of a plot over [0, 1]²."""
    parts = []
    for t in TICKS:
        x, y = num(frame.x(t)), num(frame.y(t))
        parts.append(
            f'<line class="grid" x1="{x}" y1="{num(frame.y(0))}" x2="{x}" y2="{num(frame.y(1))}"/>'
            f'<line class="grid" x1="{num(frame.x(0))}" y1="{y}" x2="{num(frame.x(1))}" y2="{y}"/>'
            f'<text class="tick" x="{x}" y="{num(frame.y(0) + 16)}" text-anchor="middle">{t:.1f}</text>'
            f'<text class="tick" x="{num(frame.x(0) - 6)}" y="{num(frame.y(t) + 4)}" text-anchor="end">{t:.1f}</text>'
        )
    parts.append(
        f'<rect class="axes" x="{num(frame.left)}" y="{num(frame.top)}" '
        f'width="{num(frame.width)}" height="{num(frame.height)}"/>'
    )
    return "".join(parts) + axis_labels(frame, x_label, y_label)


def axis_labels(frame: Frame, x_label: str, y_label: str) -> str:
    bottom = frame.top + frame.height
    middle_y = frame.top + frame.height / 2
    return (
        f'<text class="axis-label" data-axis="x" x="{num(frame.left + frame.width / 2)}" y="{num(bottom + 40)}" '
        f'text-anchor="middle">{esc(x_label)}</text>'
        f'<text class="axis-label" data-axis="y" x="{num(frame.left - 42)}" y="{num(middle_y)}" '
        f'text-anchor="middle" transform="rotate(-90 {num(frame.left - 42)} {num(middle_y)})">{esc(y_label)}</text>'
    )


def diagonal(frame: Frame, name: str) -> str:
    return (
        f'<line class="{esc(name)}" x1="{num(frame.x(0))}" y1="{num(frame.y(0))}" '
        f'x2="{num(frame.x(1))}" y2="{num(frame.y(1))}"/>'
    )


def no_data(frame: Frame, why: str) -> str:
    return (
        f'<text class="no-data" x="{num(frame.x(0.5))}" y="{num(frame.y(0.5))}" text-anchor="middle">{esc(why)}</text>'
    )


def polyline(points: Sequence[Point], frame: Frame, name: str) -> str:
    coordinates = " ".join(f"{num(frame.x(p.x))},{num(frame.y(p.y))}" for p in points)
    return f'<polyline class="{esc(name)}" points="{coordinates}"/>'


def reliability_plot(bins: Sequence[ReliabilityBin]) -> str:
    """Accuracy per confidence bin as bars against the diagonal (perfect calibration), each bin's
    mean confidence as a dot and its item count above it; empty bins are left blank."""
    frame = FRAME
    marks = []
    for b in bins:
        if not b.count or b.accuracy is None or b.mean_confidence is None:
            continue
        x, width = frame.x(b.low) + 1, (b.high - b.low) * frame.width - 2
        top = frame.y(b.accuracy)
        marks.append(
            f'<rect class="bar" data-low="{b.low:g}" data-high="{b.high:g}" data-count="{b.count}" '
            f'data-accuracy="{b.accuracy:.6g}" x="{num(x)}" y="{num(top)}" width="{num(width)}" '
            f'height="{num(frame.y(0) - top)}"><title>confidence {b.low:.1f}–{b.high:.1f}: {b.count} items, '
            f"mean confidence {b.mean_confidence:.3f}, accuracy {b.accuracy:.3f}</title></rect>"
            f'<circle class="mean-confidence" cx="{num(frame.x(b.mean_confidence))}" cy="{num(top)}" r="3"/>'
            f'<text class="count" x="{num(x + width / 2)}" y="{num(top - 6)}" '
            f'text-anchor="middle">{b.count}</text>'
        )
    body = unit_axes(frame, "confidence (probability of the answer given)", "accuracy")
    body += diagonal(frame, "diagonal") + "".join(marks)
    if not marks:
        body += no_data(frame, "no answered items")
    return svg(
        "reliability",
        "Reliability",
        "accuracy per confidence bin (bars, with the item count above) against the diagonal of perfect calibration",
        SIZE,
        body,
    )


def coverage_plot(points: Sequence[Point], thresholds: Sequence[ConfidentShare]) -> str:
    """Accuracy among the answers acted on as the least confident are held back (from the right:
    everything acted on), with the report's confidence thresholds marked on the curve."""
    frame = FRAME
    body = unit_axes(frame, "coverage (share of items acted on)", "accuracy among them")
    if not points:
        body += no_data(frame, "no answered items")
    else:
        body += polyline(points, frame, "curve")
        labelled: list[tuple[float, float]] = []  # where labels went: one too close to another is left out
        for share in thresholds:
            if share.accuracy is None:
                continue
            x, y = frame.x(share.coverage), frame.y(share.accuracy)
            body += (
                f'<circle class="threshold" data-threshold="{share.threshold:g}" cx="{num(x)}" cy="{num(y)}" r="3.5">'
                f"<title>confidence ≥ {share.threshold:.1f}: {share.coverage:.1%} of the items, "
                f"{share.accuracy:.1%} right</title></circle>"
            )
            if all(abs(x - lx) > LABEL_GAP[0] or abs(y - ly) > LABEL_GAP[1] for lx, ly in labelled):
                labelled.append((x, y))
                body += (
                    f'<text class="threshold-label" x="{num(x)}" y="{num(y - 7)}" '
                    f'text-anchor="middle">≥{share.threshold:.1f}</text>'
                )
    return svg(
        "coverage",
        "Accuracy against coverage",
        "accuracy when only the most confident answers are acted on, by the share of items acted on",
        SIZE,
        body,
    )


def roc_plot(points: Sequence[Point], auc: float | None) -> str:
    """The ROC curve of answering yes above each cut on P(yes), against the chance diagonal."""
    frame = FRAME
    title = "ROC of P(yes)" + (f", AUC {auc:.3f}" if auc is not None else "")
    body = unit_axes(frame, "false positive rate (no answered yes)", "true positive rate")
    body += diagonal(frame, "chance")
    body += polyline(points, frame, "curve") if points else no_data(frame, "needs both yes and no gold answers")
    return svg(
        "roc",
        title,
        "true against false positive rate of answering yes above each cut on P(yes); the diagonal is chance",
        SIZE,
        body,
    )


def clip(name: str, limit: int = LABEL_CHARS) -> str:
    return name if len(name) <= limit else name[: limit - 1] + "…"


def confusion_plot(matrix: Confusion) -> str:
    """Gold answers (rows) against the answers given (columns): each cell's count, shaded by its share
    of the row, right answers on the diagonal in blue, wrong ones in orange."""
    n = len(matrix.labels)
    cell = 34 if n <= 8 else 24
    longest = max((len(clip(name)) for name in matrix.labels), default=0)
    left, top = max(90, round(36 + longest * CHAR_WIDTH)), 44  # room for the row labels and the axis label
    bottom = top + n * cell
    size = (left + max(n, 1) * cell + 24, round(bottom + 16 + longest * CHAR_WIDTH * 0.77 + 34))  # sin 50° ≈ 0.77
    parts = []
    for g, (gold, row) in enumerate(zip(matrix.labels, matrix.counts, strict=True)):
        total = sum(row)
        y = top + g * cell
        parts.append(
            f'<text class="row-label" x="{left - 6}" y="{num(y + cell / 2 + 4)}" text-anchor="end">'
            f"<title>{esc(gold)}</title>{esc(clip(gold))}</text>"
        )
        for p, count in enumerate(row):
            share = count / total if total else 0.0
            kind = "right" if g == p else "wrong"
            parts.append(
                f'<rect class="cell {kind}" data-gold="{esc(gold)}" data-predicted="{esc(matrix.labels[p])}" '
                f'data-count="{count}" x="{left + p * cell}" y="{y}" width="{cell}" height="{cell}" '
                f'fill-opacity="{num(0.08 + 0.92 * share)}"><title>gold {esc(gold)}, answered '
                f"{esc(matrix.labels[p])}: {count}</title></rect>"
            )
            if count:
                ink = "light" if share > 0.55 else "dark"
                parts.append(
                    f'<text class="cell-count {ink}" x="{num(left + p * cell + cell / 2)}" '
                    f'y="{num(y + cell / 2 + 4)}" text-anchor="middle">{count}</text>'
                )
    for p, name in enumerate(matrix.labels):
        x = num(left + p * cell + cell / 2 + 4)
        parts.append(
            f'<text class="column-label" x="{x}" y="{bottom + 8}" text-anchor="end" '
            f'transform="rotate(-50 {x} {bottom + 8})"><title>{esc(name)}</title>{esc(clip(name))}</text>'
        )
    parts.append(
        f'<text class="axis-label" data-axis="x" x="{num(left + n * cell / 2)}" y="{size[1] - 10}" '
        f'text-anchor="middle">answer given</text>'
        f'<text class="axis-label" data-axis="y" x="14" y="{num(top + n * cell / 2)}" text-anchor="middle" '
        f'transform="rotate(-90 14 {num(top + n * cell / 2)})">gold answer</text>'
    )
    if n == 0:
        parts.append(f'<text class="no-data" x="{size[0] / 2:g}" y="{top + 20}" text-anchor="middle">no answers</text>')
    return svg(
        "confusion",
        "Confusion matrix",
        "item counts by gold answer (rows) and answer given (columns); the diagonal holds the right answers",
        size,
        "".join(parts),
    )
