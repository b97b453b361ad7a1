"""Day counts between the calendar dates a decision's text names, for a one-line hint in the prompt.

Small models cannot subtract dates: asked whether a return made on 2026-08-16 for a parcel delivered on
2026-08-04 falls within 21 days, they guess. The server counts the days itself and shows the model the
result next to the data. A wrong count misleads worse than none, so only dates that can be read one way
are taken: a 4-digit year in 1900-2199, a known layout, nothing glued to letters or digits, and no
numeric date whose day and month could be swapped. Anything else is left out, silently.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import datetime
import itertools
import re
from collections.abc import Sequence

PREFIX = "Date facts (computed by the server, not part of the data):"
# The first six distinct dates in reading order; more would make the line long and say little.
MAX_DATES = 6
MIN_YEAR = 1900
MAX_YEAR = 2199

_MONTH_NUMBERS = {
    name: number
    for number, name in enumerate(
        ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"), start=1
    )
}
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
# A separator that, with a digit on its far side, makes the date part of something longer:
# a range (2026-08-04/05), a version or a phone number. Hyphens and dashes U+2010..U+2015 count too.
_SEP = r"[-/.:\u2010-\u2015]"
# Not glued on the left to a letter, a digit or an underscore, nor to "<digit><separator>".
_LEFT = rf"(?<!\w)(?<![0-9]{_SEP})"
# The same on the right.
_RIGHT = rf"(?!\w)(?!{_SEP}[0-9])"
# Spaces within one line: a date is not read across a line break.
_SP = r"[^\S\r\n]{1,3}"
_ORDINAL = r"(?:st|nd|rd|th)?"
_YEAR = r"[0-9]{4}"

_DATE = re.compile(
    _LEFT
    + "(?:"
    # ISO 2026-08-04 or 2026/08/04; a time may follow glued on (2026-08-04T10:00:00Z).
    + rf"(?P<iso_y>{_YEAR})(?P<iso_sep>[-/])(?P<iso_m>[0-9]{{1,2}})(?P=iso_sep)(?P<iso_d>[0-9]{{1,2}})"
    + rf"(?:(?=t[0-9]{{2}})|{_RIGHT})"
    # August 4, 2026 / Aug. 4th 2026
    + rf"|(?P<md_m>{_MONTH})\.?{_SP}(?P<md_d>[0-9]{{1,2}}){_ORDINAL},?{_SP}(?P<md_y>{_YEAR}){_RIGHT}"
    # 4 August 2026 / 4th of August 2026 / 4 Aug, 2026
    + rf"|(?P<dm_d>[0-9]{{1,2}}){_ORDINAL}{_SP}(?:of{_SP})?(?P<dm_m>{_MONTH})\.?,?{_SP}(?P<dm_y>{_YEAR}){_RIGHT}"
    # 13/04/2026 or 04/13/2026 (also with - or .), the same separator twice
    + rf"|(?P<num_a>[0-9]{{1,2}})(?P<num_sep>[-/.])(?P<num_b>[0-9]{{1,2}})(?P=num_sep)(?P<num_y>{_YEAR}){_RIGHT}"
    + ")"
)


def _make_date(year: int, month: int, day: int) -> datetime.date | None:
    """The date, or None when it does not exist (2026-02-30) or its year is out of range."""
    if not MIN_YEAR <= year <= MAX_YEAR:
        return None
    try:
        return datetime.date(year, month, day)
    except ValueError:
        return None


def _numeric(a: int, b: int, year: int) -> datetime.date | None:
    """A day/month or month/day date, kept only when its two readings cannot disagree.

    04/08/2026 is 4 August in Europe and 8 April in the US: a count from either could be wrong, so
    neither is given. 13/04/2026 and 04/13/2026 have one valid reading; 04/04/2026 has two equal ones.
    """
    readings = {d for d in (_make_date(year, b, a), _make_date(year, a, b)) if d is not None}
    return readings.pop() if len(readings) == 1 else None


def _parse(match: re.Match[str]) -> datetime.date | None:
    """The date one match of `_DATE` names, or None when it is invalid, out of range or ambiguous."""
    g = match.groupdict()
    if g["iso_y"] is not None:
        return _make_date(int(g["iso_y"]), int(g["iso_m"]), int(g["iso_d"]))
    if g["md_y"] is not None:
        return _make_date(int(g["md_y"]), _MONTH_NUMBERS[g["md_m"][:3]], int(g["md_d"]))
    if g["dm_y"] is not None:
        return _make_date(int(g["dm_y"]), _MONTH_NUMBERS[g["dm_m"][:3]], int(g["dm_d"]))
    return _numeric(int(g["num_a"]), int(g["num_b"]), int(g["num_y"]))


def find_dates(text: str) -> list[datetime.date]:
    """Every date `text` names unambiguously, in reading order (repeats included).

    The text is lower-cased first rather than matched case-insensitively: Unicode case folding would
    let look-alikes such as the long s (ſ) spell a month name.
    """
    found = (_parse(m) for m in _DATE.finditer(text.lower()))
    return [d for d in found if d is not None]


# A window the texts state in days or weeks ("within 21 days", "a 30-day window", "2 weeks"): each span
# is compared with it, since comparing is the other step small models get wrong. Business or working
# days are not calendar days, so they never match (the word must follow the number directly).
_WINDOW = re.compile(r"(?<![\w.,])([0-9]{1,4})(?:[ -]|[^\S\r\n]calendar[ -])(day|week)s?(?!\w)")
MAX_WINDOWS = 3
MAX_WINDOW_DAYS = 3650


def windows(texts: Sequence[str]) -> list[int]:
    """The first `MAX_WINDOWS` distinct windows `texts` state, in days, smallest first."""
    found: list[int] = []
    for text in texts:
        for match in _WINDOW.finditer(text.lower()):
            days = int(match.group(1)) * (7 if match.group(2) == "week" else 1)
            if 0 < days <= MAX_WINDOW_DAYS and days not in found and len(found) < MAX_WINDOWS:
                found.append(days)
    return sorted(found)


def _days(count: int) -> str:
    return f"{count} day{'' if count == 1 else 's'}"


def _span(start: datetime.date, end: datetime.date, limits: Sequence[int] = ()) -> str:
    days = (end - start).days
    compared = [f"{'less than' if days < w else 'more than' if days > w else 'exactly'} {_days(w)}" for w in limits]
    said = f" ({', '.join(compared)})" if compared else ""
    return f"{start.isoformat()} to {end.isoformat()}: {_days(days)}{said}"


def _first_distinct(texts: Sequence[str]) -> list[datetime.date]:
    """The first `MAX_DATES` distinct dates of `texts`, in reading order."""
    distinct: list[datetime.date] = []
    for text in texts:
        for found in find_dates(text):
            if found not in distinct:
                distinct.append(found)
                if len(distinct) == MAX_DATES:
                    return distinct
    return distinct


def date_facts(texts: Sequence[str]) -> str | None:
    """The facts line for the dates found in `texts` (read in order), or None when fewer than two
    distinct dates are found.

    The distinct dates (the first `MAX_DATES`) are sorted; the line gives the days between each
    consecutive pair and, for three or more, from the first to the last, always in ISO form so the model
    sees the canonical date beside the source's spelling. Each count is compared with the windows the
    texts state (`windows`): "12 days (less than 21 days)".
    """
    if isinstance(texts, str):
        raise TypeError("date_facts takes a sequence of texts, not one string")
    ordered = sorted(_first_distinct(texts))
    if len(ordered) < 2:
        return None
    limits = windows(texts)
    spans = [_span(a, b, limits) for a, b in itertools.pairwise(ordered)]
    if len(ordered) > 2:
        spans.append(_span(ordered[0], ordered[-1], limits))
    return f"{PREFIX} {'; '.join(spans)}."
