"""English month and weekday names, spelled out once. strftime's %A / %B / %p, strptime and the `calendar`
module's name lists follow the process's locale (set by whatever program embeds gen), which would change the
wordings, the validators and how LoCoMo's dates are read; gen takes every name from here instead."""

from __future__ import annotations

import re
from datetime import date, datetime

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
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTH_NUMBERS = {name.lower(): number for number, name in enumerate(MONTHS, start=1)}
# LoCoMo's session dates: "1:56 pm on 8 May, 2023" (12-hour clock, am/pm, day, full month name, year)
LOCOMO_DATE = re.compile(
    r"^\s*(?P<hour>\d{1,2}):(?P<minute>\d{2})\s*(?P<half>[ap]m)\s+on\s+(?P<day>\d{1,2})\s+(?P<month>[A-Za-z]+),?\s+"
    r"(?P<year>\d{4})\s*$",
    re.IGNORECASE,
)


def month_name(month: int) -> str:
    return MONTHS[month - 1]


def weekday_name(day: date) -> str:
    return WEEKDAYS[day.weekday()]


def parse_locomo_date(text: str) -> datetime:
    """A LoCoMo session date; ValueError if it is not one."""
    found = LOCOMO_DATE.match(text)
    month = MONTH_NUMBERS.get(found["month"].lower()) if found else None
    if found is None or month is None or not 1 <= int(found["hour"]) <= 12:
        raise ValueError(text)
    hour = int(found["hour"]) % 12 + (12 if found["half"].lower() == "pm" else 0)
    return datetime(int(found["year"]), month, int(found["day"]), hour, int(found["minute"]))
