"""The date styles the target harnesses read, with gen's locale-free month and weekday names, so an export is
the same on every machine."""

from __future__ import annotations

from datetime import date, datetime

from gen.calendar_names import month_name, weekday_name


def locomo_style(moment: datetime) -> str:
    """LoCoMo's session_N_date_time: "1:56 pm on 8 May, 2023" (12-hour clock, no leading zeros on the hour or
    the day, lower-case am/pm; minutes only, so seconds are dropped)."""
    hour = moment.hour % 12 or 12
    half = "am" if moment.hour < 12 else "pm"
    return f"{hour}:{moment.minute:02d} {half} on {moment.day} {month_name(moment.month)}, {moment.year}"


def longmemeval_style(moment: datetime) -> str:
    """LongMemEval's haystack_dates and question_date: "2023/05/20 (Sat) 02:21" (24-hour clock, minutes)."""
    return f"{moment:%Y/%m/%d} ({weekday_name(moment)[:3]}) {moment:%H:%M}"


def beir_style(moment: datetime) -> str:
    """The corpus titles' and queries' style: "Friday 2024-03-22 16:12:08", sortable and full to the second."""
    return f"{weekday_name(moment)} {moment:%Y-%m-%d %H:%M:%S}"


def locomo_answer_date(day: date) -> str:
    """A date as LoCoMo's own temporal answers write one: "7 May 2023"."""
    return f"{day.day} {month_name(day.month)} {day.year}"


def longmemeval_answer_date(day: date) -> str:
    """A date in LongMemEval's style, the date part of its haystack_dates: "2023/05/20 (Sat)"."""
    return f"{day:%Y/%m/%d} ({weekday_name(day)[:3]})"
