"""Date facts: which spellings are read as dates, which are left out, and the line the prompt gets."""

from __future__ import annotations

import datetime
import re
import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from openjev.domain.date_facts import MAX_DATES, PREFIX, date_facts, find_dates, windows

D = datetime.date
AUG_4 = D(2026, 8, 4)
MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)


@pytest.mark.parametrize(
    "text",
    [
        "2026-08-04",
        "2026/08/04",
        "2026-8-4",
        "August 4, 2026",
        "Aug 4 2026",
        "Aug. 4, 2026",
        "August 4th, 2026",
        "AUGUST 4TH 2026",
        "4 August 2026",
        "4th of August 2026",
        "4 Aug, 2026",
        "04 aug 2026",
        "2026-08-04T10:30:00Z",
        "(2026-08-04)",
        "on 2026-08-04.",
        "Tuesday, August 4, 2026, at noon",
    ],
)
def test_each_supported_spelling_is_read(text: str) -> None:
    assert find_dates(text) == [AUG_4]


@pytest.mark.parametrize("text", ["Sept 3 2026", "3 Sep 2026", "September 3rd, 2026", "3rd of sept. 2026"])
def test_september_has_three_abbreviations(text: str) -> None:
    assert find_dates(text) == [D(2026, 9, 3)]


@pytest.mark.parametrize("text", ["13/04/2026", "04/13/2026", "13-04-2026", "04-13-2026", "13.04.2026", "4.13.2026"])
def test_numeric_dates_with_one_valid_reading_are_read(text: str) -> None:
    assert find_dates(text) == [D(2026, 4, 13)]


def test_a_numeric_date_with_equal_day_and_month_reads_the_same_either_way() -> None:
    assert find_dates("04/04/2026") == [D(2026, 4, 4)]


@pytest.mark.parametrize(
    "text",
    [
        "04/08/2026",  # 4 August or 8 April
        "1.2.2026",
        "12-11-2026",
        "2026-02-30",  # invalid
        "30/02/2026",
        "31/04/2026",
        "2026-13-01",
        "x2026-08-04",  # glued
        "12026-08-04",
        "2026-08-041",
        "2026-08-04x",
        "id_2026-08-04",
        "Augusta 4, 2026",
        "4 Augustus 2026",
        "2026-08-04/05",  # ranges
        "2026-08-04-05",
        "4–5 August 2026",
        "August 4–5, 2026",
        "1.2.3",  # not dates
        "10:30",
        "+1 555-123-4567",
        "2026-W32-1",
        "2026-216",
        "August 4",  # no year, or not a 4-digit one in range
        "4/8",
        "04/13/26",
        "4 August 26",
        "1899-12-31",
        "2200-01-01",
        "13/04/2026/1",
        "August\n4, 2026",  # across a line break
        "13/04-2026",  # mixed separators
        "AUGUſT 4, 2026",  # the long s only looks like an s
    ],
)
def test_anything_not_clearly_a_date_is_left_out(text: str) -> None:
    assert find_dates(text) == []


def test_the_years_1900_to_2199_are_read() -> None:
    assert find_dates("1900-01-01 and 31 Dec 2199") == [D(1900, 1, 1), D(2199, 12, 31)]


def test_the_example_line() -> None:
    line = date_facts(["Return request: delivered 2026-08-04, asked on 2026-08-16, within 21 days?"])
    assert line == f"{PREFIX} 2026-08-04 to 2026-08-16: 12 days (less than 21 days)."
    assert line == (
        "Date facts (computed by the server, not part of the data): 2026-08-04 to 2026-08-16: 12 days "
        "(less than 21 days)."
    )


@pytest.mark.parametrize(
    ("window", "said"),
    [
        ("within 12 days", "12 days (exactly 12 days)"),
        ("a 30-day window", "12 days (less than 30 days)"),
        ("within 1 week", "12 days (more than 7 days)"),
        ("10 calendar days", "12 days (more than 10 days)"),
        ("30 business days or 5 working days", "12 days"),  # not calendar days: never compared
        ("order 1.5 days or v2,10 days", "12 days"),  # a number glued to another is no window
        ("0 days", "12 days"),
    ],
)
def test_each_count_is_compared_with_the_windows_the_texts_state(window: str, said: str) -> None:
    line = date_facts([f"delivered 2026-08-04, asked on 2026-08-16; {window}"])
    assert line == f"{PREFIX} 2026-08-04 to 2026-08-16: {said}."


def test_windows_are_distinct_smallest_first_and_at_most_three() -> None:
    assert windows(["60 days, 14 days, 2 weeks, 30 days, 7 days"]) == [14, 30, 60]
    line = date_facts(["2026-01-01 and 2026-01-20 and 2026-03-01, within 30 days or 45 days"])
    assert line == (
        f"{PREFIX} 2026-01-01 to 2026-01-20: 19 days (less than 30 days, less than 45 days); "
        "2026-01-20 to 2026-03-01: 40 days (more than 30 days, less than 45 days); "
        "2026-01-01 to 2026-03-01: 59 days (more than 30 days, more than 45 days)."
    )


def test_dates_are_collected_across_texts_in_order() -> None:
    assert date_facts(["delivered August 16, 2026", "ordered 4 Aug 2026"]) == (
        f"{PREFIX} 2026-08-04 to 2026-08-16: 12 days."
    )


@pytest.mark.parametrize(
    "texts",
    [
        [],
        [""],
        ["no dates here"],
        ["delivered 2026-08-04"],
        ["delivered 2026-08-04", "that is, August 4th, 2026 (04 Aug 2026)"],
        ["04/08/2026 and 2026-08-04"],
    ],
)
def test_no_line_for_fewer_than_two_distinct_dates(texts: list[str]) -> None:
    assert date_facts(texts) is None


def test_three_dates_give_consecutive_pairs_then_first_to_last() -> None:
    line = date_facts(["paid 2026-09-01; ordered 2026-08-04; delivered 2026-08-16"])
    assert line == (
        f"{PREFIX} 2026-08-04 to 2026-08-16: 12 days; 2026-08-16 to 2026-09-01: 16 days; "
        "2026-08-04 to 2026-09-01: 28 days."
    )


def test_one_day_is_singular_and_leap_days_count() -> None:
    assert date_facts(["2028-02-28 to 2028-03-01"]) == f"{PREFIX} 2028-02-28 to 2028-03-01: 2 days."
    assert date_facts(["2027-02-28 to 2027-03-01"]) == f"{PREFIX} 2027-02-28 to 2027-03-01: 1 day."
    assert date_facts(["2100-02-28 to 2100-03-01"]) == f"{PREFIX} 2100-02-28 to 2100-03-01: 1 day."


def test_only_the_first_six_distinct_dates_are_used() -> None:
    texts = [f"2026-08-{day:02d}" for day in (9, 1, 1, 2, 3, 4, 5, 6, 7)]
    line = date_facts(texts)
    assert line is not None
    assert "\n" not in line
    assert sorted(set(re.findall(r"\d{4}-\d{2}-\d{2}", line))) == [f"2026-08-{day:02d}" for day in (1, 2, 3, 4, 5, 9)]
    assert line.endswith("; 2026-08-01 to 2026-08-09: 8 days.")


def test_a_single_string_is_refused() -> None:
    with pytest.raises(TypeError):
        date_facts("2026-08-04 and 2026-08-16")


# --- properties ---------------------------------------------------------------------------------

DATES = st.dates(min_value=D(1900, 1, 1), max_value=D(2199, 12, 31))


def ordinal(day: int) -> str:
    suffix = "th" if 10 <= day % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


@st.composite
def spellings(draw: st.DrawFn, date: datetime.date) -> str:
    """`date` in one of the supported spellings, chosen at random."""
    full = MONTHS[date.month - 1]
    names = [full, full[:3], full[:3] + "."] + (["Sept", "Sept."] if date.month == 9 else [])
    month = draw(st.sampled_from(names))
    month = draw(st.sampled_from([month, month.lower(), month.upper()]))
    day = draw(st.sampled_from([str(date.day), ordinal(date.day)]))
    comma = draw(st.sampled_from(["", ","]))
    y, m, d = date.year, date.month, date.day
    layouts = [
        f"{y}-{m:02d}-{d:02d}",
        f"{y}/{m:02d}/{d:02d}",
        f"{month} {day}{comma} {y}",
        f"{day} {month}{comma} {y}",
        f"{day} of {month} {y}",
    ]
    if d > 12 or d == m:
        sep = draw(st.sampled_from("-/."))
        pad = draw(st.sampled_from(["{}", "{:02d}"]))
        dd, mm = pad.format(d), pad.format(m)
        layouts += [f"{dd}{sep}{mm}{sep}{y}", f"{mm}{sep}{dd}{sep}{y}"]
    return draw(st.sampled_from(layouts))


# Surroundings without digits; the date is kept apart from them by a space or a bracket.
FILLER = st.text(alphabet=string.ascii_letters + " ,;:!?'\"()-", max_size=30)
LEFT = st.sampled_from([" ", "(", " [", '"'])
RIGHT = st.sampled_from([" ", ")", ". ", ", ", "; ", "]", '"'])


@given(data=st.data(), first=DATES, second=DATES)
def test_the_day_count_is_right_whatever_the_spelling(data: st.DataObject, first: D, second: D) -> None:
    if first == second:
        second = first + datetime.timedelta(days=1) if first.year < 2199 else first - datetime.timedelta(days=1)
    parts = [data.draw(FILLER)]
    for date in (first, second):
        parts += [data.draw(LEFT), data.draw(spellings(date)), data.draw(RIGHT), data.draw(FILLER)]
    text = "".join(parts)
    low, high = sorted((first, second))
    days = (high - low).days
    assert find_dates(text) == [first, second]
    assert date_facts([text]) == f"{PREFIX} {low} to {high}: {days} day{'' if days == 1 else 's'}."


@given(date=DATES, sep=st.sampled_from("-/."), pad=st.booleans(), day_first=st.booleans())
def test_an_ambiguous_numeric_date_is_never_read(date: D, sep: str, pad: bool, day_first: bool) -> None:
    day, month = (date.day, date.month) if date.day <= 12 else (date.day % 12 + 1, date.month)
    if day == month:
        day = day % 12 + 1
    fmt = "{:02d}" if pad else "{}"
    a, b = (day, month) if day_first else (month, day)
    text = f"due {fmt.format(a)}{sep}{fmt.format(b)}{sep}{date.year} and 2026-08-04"
    assert find_dates(text) == [AUG_4]
    assert date_facts([text]) is None


@given(date=DATES.filter(lambda d: d.day > 12), sep=st.sampled_from("-/."))
def test_swapping_day_and_month_of_an_unambiguous_date_gives_the_same_date(date: D, sep: str) -> None:
    y, m, d = date.year, date.month, date.day
    assert find_dates(f"{d}{sep}{m:02d}{sep}{y}") == [date]
    assert find_dates(f"{m:02d}{sep}{d}{sep}{y}") == [date]


def _spelled_somewhere(date: D, text: str) -> bool:
    """A loose, independent check: the year, the day and the month (as a number or a name) are all in `text`."""
    low = text.lower()
    month = str(date.month) in low or MONTHS[date.month - 1][:3].lower() in low
    return str(date.year) in low and str(date.day) in low and month


# Text rich in dates and near-dates, so that odd joins between them are actually tried.
PIECES = st.sampled_from(
    [
        *("2026-08-04", "13/04/2026", "04/13/2026", "04/08/2026", "2026-02-30", "1899-12-31", "Aug 4, 2026"),
        *("4th of August 2026", "Sept 3 2026", "2026", "04", "13", "4", "-", "/", ".", ":", " ", ",", "T10"),
        *("x", "th", "of", "Aug", "may", "\n", "_", "–", "ſ", "٤"),
    ]
)
DATEISH = st.lists(PIECES, max_size=40).map("".join)


@given(text=st.one_of(st.text(), DATEISH))
def test_arbitrary_text_never_raises_and_only_reports_dates_it_spells(text: str) -> None:
    found = find_dates(text)
    assert all(D(1900, 1, 1) <= d <= D(2199, 12, 31) and _spelled_somewhere(d, text) for d in found)
    line = date_facts([text])
    if line is None:
        assert len(set(found)) < 2
        return
    assert line.startswith(PREFIX + " ")
    assert line.endswith(".")
    assert "\n" not in line
    reported = {D.fromisoformat(iso) for iso in re.findall(r"\d{4}-\d{2}-\d{2}", line)}
    assert 2 <= len(reported) <= MAX_DATES
    assert reported <= set(found)
