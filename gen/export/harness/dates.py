"""The date styles the target harnesses read. Names are spelled out here rather than taken from the locale
(strftime's %B and %a follow it), so an export is the same on every machine."""

from __future__ import annotations

from datetime import datetime

MONTHS = [
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
]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def locomo_style(moment: datetime) -> str:
    """LoCoMo's session_N_date_time: "1:56 pm on 8 May, 2023" (12-hour clock, no leading zeros on the hour or
    the day, lower-case am/pm; minutes only, so seconds are dropped)."""
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {MONTHS[moment.month - 1]}, {moment.year}"


def longmemeval_style(moment: datetime) -> str:
    """LongMemEval's haystack_dates and question_date: "2023/05/20 (Sat) 02:21" (24-hour clock, minutes)."""
    return f"{moment:%Y/%m/%d} ({DAYS[moment.weekday()][:3]}) {moment:%H:%M}"


def beir_style(moment: datetime) -> str:
    """The corpus titles' and queries' style: "Friday 2024-03-22 16:12:08", sortable and full to the second."""
    return f"{DAYS[moment.weekday()]} {moment:%Y-%m-%d %H:%M:%S}"
