"""The report's SVG plots: where the marks go, what names them, and that every text is escaped.

Each plot is parsed as XML, so a stray `<` or `&` from an option name fails the parse, and the marks
are found by the class names and data attributes the page promises.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from openjev.quality.figures import Confusion, Point
from openjev.quality.metrics import ConfidentShare, ReliabilityBin
from openjev.quality.svg_plots import FRAME, confusion_plot, coverage_plot, num, reliability_plot, roc_plot

NS = "{http://www.w3.org/2000/svg}"
HOSTILE = """<script>alert("x")</script> & 'quoted'"""


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg)


def marks(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(NS + tag) if cls in (e.get("class") or "").split()]


def floats(element: ET.Element, *names: str) -> list[float]:
    return [float(element.get(name, "nan")) for name in names]


def bins(*filled: tuple[int, int, float, float]) -> list[ReliabilityBin]:
    """Ten bins; `filled`: (bin, count, mean confidence, accuracy)."""
    given = {i: (count, conf, acc) for i, count, conf, acc in filled}
    return [
        ReliabilityBin(
            low=i / 10,
            high=(i + 1) / 10,
            count=given[i][0] if i in given else 0,
            mean_confidence=given[i][1] if i in given else None,
            accuracy=given[i][2] if i in given else None,
        )
        for i in range(10)
    ]


@pytest.mark.parametrize(
    ("svg", "plot"),
    [
        (reliability_plot(bins((7, 3, 0.75, 2 / 3))), "reliability"),
        (coverage_plot([Point(0.5, 1.0), Point(1.0, 0.5)], []), "coverage"),
        (roc_plot([Point(0, 0), Point(1, 1)], 0.5), "roc"),
        (confusion_plot(Confusion(labels=["a", "b"], counts=[[1, 0], [0, 1]])), "confusion"),
    ],
)
def test_every_plot_is_named_titled_and_labelled(svg: str, plot: str) -> None:
    root = parse(svg)
    assert root.tag == NS + "svg" and root.get("data-plot") == plot and root.get("role") == "img"
    title = root.find(NS + "title")
    assert title is not None and title.text and root[0] is title  # the accessible name comes first
    assert (root.get("aria-label") or "").startswith(title.text + ": ")
    [visible] = marks(root, "text", "plot-title")
    assert visible.text == title.text
    axes = {e.get("data-axis"): e.text for e in marks(root, "text", "axis-label")}
    assert set(axes) == {"x", "y"} and all(axes.values())


def test_reliability_bars_rise_to_each_bins_accuracy_over_its_confidence_range() -> None:
    root = parse(reliability_plot(bins((5, 4, 0.55, 0.5), (9, 6, 0.95, 5 / 6))))
    bars = marks(root, "rect", "bar")
    assert [(b.get("data-low"), b.get("data-high"), b.get("data-count")) for b in bars] == [
        ("0.5", "0.6", "4"),
        ("0.9", "1", "6"),
    ]  # the eight empty bins draw nothing
    for bar, (low, high, accuracy) in zip(bars, [(0.5, 0.6, 0.5), (0.9, 1.0, 5 / 6)], strict=True):
        x, y, width, height = floats(bar, "x", "y", "width", "height")
        assert x == pytest.approx(FRAME.x(low) + 1, abs=0.01) and x + width == pytest.approx(
            FRAME.x(high) - 1, abs=0.02
        )
        assert y == pytest.approx(FRAME.y(accuracy), abs=0.01) and y + height == pytest.approx(FRAME.y(0), abs=0.02)
    dots = [floats(d, "cx", "cy") for d in marks(root, "circle", "mean-confidence")]
    assert dots == [
        pytest.approx([FRAME.x(0.55), FRAME.y(0.5)], abs=0.01),
        pytest.approx([FRAME.x(0.95), FRAME.y(5 / 6)], abs=0.01),
    ]
    assert [c.text for c in marks(root, "text", "count")] == ["4", "6"]
    [line] = marks(root, "line", "diagonal")  # perfect calibration: from (0, 0) to (1, 1)
    assert floats(line, "x1", "y1", "x2", "y2") == [FRAME.x(0), FRAME.y(0), FRAME.x(1), FRAME.y(1)]
    assert marks(root, "text", "no-data") == []


def test_a_reliability_diagram_without_answers_says_so() -> None:
    root = parse(reliability_plot(bins()))
    assert marks(root, "rect", "bar") == [] and len(marks(root, "text", "no-data")) == 1


def test_the_coverage_curve_maps_each_point_and_marks_the_thresholds() -> None:
    points = [Point(0.25, 1.0), Point(0.5, 0.75), Point(1.0, 0.5)]
    shares = [
        ConfidentShare(threshold=0.5, coverage=1.0, accuracy=0.5),
        ConfidentShare(threshold=0.6, coverage=1.0, accuracy=0.5),  # on top of 0.5: its label would overlap
        ConfidentShare(threshold=0.9, coverage=0.25, accuracy=1.0),
        ConfidentShare(threshold=0.95, coverage=0.0, accuracy=None),  # no item that confident: no mark
    ]
    root = parse(coverage_plot(points, shares))
    [curve] = marks(root, "polyline", "curve")
    drawn = [tuple(map(float, pair.split(","))) for pair in (curve.get("points") or "").split()]
    assert drawn == [pytest.approx((FRAME.x(p.x), FRAME.y(p.y)), abs=0.01) for p in points]
    circles = marks(root, "circle", "threshold")
    assert [c.get("data-threshold") for c in circles] == ["0.5", "0.6", "0.9"]
    assert floats(circles[2], "cx", "cy") == pytest.approx([FRAME.x(0.25), FRAME.y(1.0)], abs=0.01)
    assert [t.text for t in marks(root, "text", "threshold-label")] == ["≥0.5", "≥0.9"]


def test_the_roc_plot_draws_its_curve_against_chance_or_says_why_not() -> None:
    root = parse(roc_plot([Point(0, 0), Point(0, 1), Point(1, 1)], 1.0))
    assert root.findtext(NS + "title") == "ROC of P(yes), AUC 1.000"
    [curve] = marks(root, "polyline", "curve")
    assert curve.get("points") == f"{num(FRAME.x(0))},{num(FRAME.y(0))} {num(FRAME.x(0))},{num(FRAME.y(1))} " + (
        f"{num(FRAME.x(1))},{num(FRAME.y(1))}"
    )
    assert len(marks(root, "line", "chance")) == 1
    empty = parse(roc_plot([], None))
    assert empty.findtext(NS + "title") == "ROC of P(yes)" and marks(empty, "polyline", "curve") == []
    assert "both yes and no" in (marks(empty, "text", "no-data")[0].text or "")


def test_confusion_cells_hold_the_counts_shaded_by_their_share_of_the_row() -> None:
    root = parse(confusion_plot(Confusion(labels=["World", "Sports"], counts=[[3, 1], [0, 2]])))
    cells = marks(root, "rect", "cell")
    got = [(c.get("data-gold"), c.get("data-predicted"), c.get("data-count"), c.get("class")) for c in cells]
    assert got == [
        ("World", "World", "3", "cell right"),
        ("World", "Sports", "1", "cell wrong"),
        ("Sports", "World", "0", "cell wrong"),
        ("Sports", "Sports", "2", "cell right"),
    ]
    opacity = [float(c.get("fill-opacity", "nan")) for c in cells]
    assert opacity == pytest.approx([0.08 + 0.92 * 0.75, 0.08 + 0.92 * 0.25, 0.08, 1.0], abs=0.01)
    xs, ys = sorted({float(c.get("x", "nan")) for c in cells}), sorted({float(c.get("y", "nan")) for c in cells})
    assert len(xs) == len(ys) == 2 and xs[1] - xs[0] == ys[1] - ys[0] == float(cells[0].get("width", "nan"))
    assert [t.text for t in marks(root, "text", "cell-count")] == ["3", "1", "2"]  # an empty cell shows no 0
    assert [t.findtext(NS + "title") for t in marks(root, "text", "row-label")] == ["World", "Sports"]


def test_option_names_are_escaped_and_long_ones_cut_with_the_whole_name_kept() -> None:
    svg = confusion_plot(Confusion(labels=[HOSTILE, "ok"], counts=[[1, 0], [0, 1]]))
    assert "<script>" not in svg and 'alert("x")' not in svg
    root = parse(svg)  # well-formed despite the name
    assert marks(root, "rect", "cell")[0].get("data-gold") == HOSTILE
    [label, _] = marks(root, "text", "column-label")
    assert label.findtext(NS + "title") == HOSTILE
    assert "".join(label.itertext()).endswith(HOSTILE[:17] + "…")


def test_coordinates_are_written_short() -> None:
    assert [num(12.0), num(12.5), num(12.345), num(-0.001), num(0.0)] == ["12", "12.5", "12.35", "0", "0"]
