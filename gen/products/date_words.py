"""Dates and numbers in words, shared by the question products: one definition of each rule.

Styles: "digits" ("5", "5th") and "words" ("five", "fifth"); the words style spells out 0-100 only and writes
larger numbers in digits, as style guides do. A date may be named without its year when no other date of the
conversation has the same day and month.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import date
from functools import lru_cache

from num2words import num2words

from gen.calendar_names import month_name, weekday_name

WORDS_UP_TO = 100


@lru_cache(maxsize=4096)
def cardinal(n: int, style: str) -> str:
    return num2words(n) if style == "words" and 0 <= n <= WORDS_UP_TO else str(n)


@lru_cache(maxsize=4096)
def ordinal(n: int, style: str) -> str:
    return num2words(n, to="ordinal") if style == "words" and 0 <= n <= WORDS_UP_TO else num2words(n, to="ordinal_num")


def date_variables(day: date, style: str = "digits", prefix: str = "") -> dict[str, str]:
    """Template variables of a date: month ("May"), day ("8"), day_ordinal ("8th"/"eighth"), year, weekday."""
    return {
        f"{prefix}month": month_name(day.month),
        f"{prefix}day": str(day.day),
        f"{prefix}day_ordinal": ordinal(day.day, style),
        f"{prefix}year": str(day.year),
        f"{prefix}weekday": weekday_name(day),
    }


def yearless_dates(dates: Iterable[date]) -> set[date]:
    """The dates that may be named without their year: no other date of the set has the same day and month."""
    distinct = set(dates)
    counts = Counter((d.month, d.day) for d in distinct)
    return {d for d in distinct if counts[(d.month, d.day)] == 1}


def yearless_months(dates: Iterable[date]) -> set[int]:
    """The month numbers that may be named without a year: they occur in one year only among the dates."""
    counts = Counter(month for month, _ in {(d.month, d.year) for d in dates})
    return {month for month, n in counts.items() if n == 1}


class Yearless:
    """Whether a base question's dates and months can be named without their year (date_words.py's rule),
    given every date of the conversation (padding included).

    A date or month on which nothing was said (an abstention question's) is not among those dates: it may go
    without its year only when `until` (today) is given and no other year's same day and month, or same month, falls
    between the conversation's first date and `until`, so the yearless phrase still names one time a reader could
    mean. Dates and months with responses keep the rule above, whatever `until`."""

    def __init__(self, dates: Iterable[date], until: date | None = None):
        dates = set(dates)
        self.dates = yearless_dates(dates)
        self.months = yearless_months(dates)
        self.known_dates = dates
        self.known_months = {(d.year, d.month) for d in dates}
        self.span = (min(dates), until) if dates and until is not None else None

    def ok(self, p: dict) -> bool:
        days = [date.fromisoformat(p[k]) for k in ("date", "first_date", "last_date") if k in p]
        months = [(int(p["month"][:4]), int(p["month"][5:7]))] if "month" in p else []
        return all(self.date_ok(d) for d in days) and all(self.month_ok(*m) for m in months)

    def date_ok(self, day: date) -> bool:
        if day in self.known_dates:
            return day in self.dates
        if self.span is None:
            return False
        first, until = self.span
        for year in range(first.year, until.year + 1):
            try:
                other = day.replace(year=year)
            except ValueError:  # 29 February in a year without one
                continue
            if year != day.year and first <= other <= until:
                return False
        return True

    def month_ok(self, year: int, month: int) -> bool:
        if (year, month) in self.known_months:
            return month in self.months
        if self.span is None:
            return False
        first, until = self.span
        others = range(first.year, until.year + 1)
        return not any(
            y != year and (first.year, first.month) <= (y, month) <= (until.year, until.month) for y in others
        )
