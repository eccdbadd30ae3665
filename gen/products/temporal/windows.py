"""The base questions of the time-query products: which windows each test asks about, from a Timeline
(the 11 tests are described in docs/time-queries.md).

This is the generator's side. Each test enumerates its windows from the timeline's `Response` objects and
collects the response indices that fall inside. The validators recompute every window separately, from the
`log` records' timestamp strings (checking.py).

Shared by `time_queries` and `ambiguous_time_queries`, so the two products have the same base questions
and the same `group_id`s. The abstention questions (`abstention_questions`, empty windows) are time_queries' only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta

from gen.calendar_names import weekday_name
from gen.hashing import stable_id
from gen.products.temporal.options import ABSTAINING_TESTS, TESTS, TimeQueriesOptions, WindowOptions
from gen.products.temporal.sampling import ABSTENTION_DRAW, seeded_draw
from gen.timeline import Response, Timeline


@dataclass(frozen=True)
class BaseQuestion:
    """One window of one test: every wording of it shares `group_id` and the relevant responses."""

    conversation_id: str
    test: str
    params: dict  # JSON-ready: ints and ISO date strings
    relevant: tuple[int, ...]  # response indices, sorted
    abstention: bool = False  # a time when nothing was said: relevant is empty, the gold answer abstains

    @property
    def group_id(self) -> str:
        return group_id(self.conversation_id, self.test, self.params)


def group_id(conversation_id: str, test: str, params: dict) -> str:
    return stable_id([conversation_id, test, params])


def month_key(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


def months_between(earlier: date, later: date) -> int:
    return (later.year * 12 + later.month) - (earlier.year * 12 + earlier.month)


class Windows:
    """A timeline indexed by session, date and month, to select responses quickly."""

    def __init__(self, timeline: Timeline):
        self.timeline = timeline
        self.by_session: dict[int, list[Response]] = {}
        self.by_date: dict[date, list[Response]] = {}
        for response in timeline.responses:
            self.by_session.setdefault(response.session_index, []).append(response)
            self.by_date.setdefault(response.timestamp.date(), []).append(response)
        self.real_sessions = sorted(s for s, rs in self.by_session.items() if not all(r.is_padding for r in rs))
        self.real_dates = sorted(d for d, rs in self.by_date.items() if any(not r.is_padding for r in rs))
        self.real_months = sorted({month_key(d) for d in self.real_dates})
        self.today = timeline.today
        self.now = timeline.now
        self.current_session = timeline.current_session

    def session_date(self, session: int) -> date:
        """The date a session is 'on': the date of its first response."""
        return self.by_session[session][0].timestamp.date()

    def sessions(self, first: int, last: int) -> list[Response]:
        return [r for s in range(first, last + 1) for r in self.by_session.get(s, ())]

    def dates(self, first: date, last: date) -> list[Response]:
        return [r for d, rs in sorted(self.by_date.items()) if first <= d <= last for r in rs]

    def month(self, key: str) -> list[Response]:
        return [r for d, rs in sorted(self.by_date.items()) if month_key(d) == key for r in rs]

    def silent_days(self) -> list[date]:
        """Dates strictly after the first real response's date and before today on which no response at all was
        said, padding included, in order."""
        if not self.real_dates:
            return []
        first, days = self.real_dates[0], (self.today - self.real_dates[0]).days
        return [d for d in (first + timedelta(days=n) for n in range(1, days)) if d not in self.by_date]

    def silent_months(self) -> list[str]:
        """Months strictly after the first real response's month and before today's month without any response."""
        if not self.real_dates:
            return []
        spoken = {month_key(d) for d in self.by_date}
        first, last = self.real_dates[0], self.today
        count = months_between(first, last)
        keys = [
            month_key(date(first.year + (first.month - 1 + n) // 12, (first.month - 1 + n) % 12 + 1, 1))
            for n in range(1, count)
        ]
        return [key for key in keys if key not in spoken]


def base_questions(timeline: Timeline, options: WindowOptions) -> Iterator[BaseQuestion]:
    """Every base question of the chosen tests for one conversation, tests in the order given."""
    windows = Windows(timeline)
    for test in options.tests:
        for params, responses in ENUMERATORS[test](windows, options):
            if responses and not all(r.is_padding for r in responses):
                yield BaseQuestion(
                    timeline.conversation_id, test, params, tuple(sorted(r.response_index for r in responses))
                )


def abstention_questions(timeline: Timeline, options: TimeQueriesOptions, seed: int) -> Iterator[BaseQuestion]:
    """The abstention questions of one conversation: for each test that can have one (`abstaining_tests`), a seeded
    draw of `per_test` of its empty windows inside the conversation's span, in the order listed (chronological).

    A window is empty only when no response at all falls in it, padding included: padding is talk the memory
    holds, so "nothing was said then" would be false of it. An empty window is never one of the real base
    questions (those hold real responses). The draw (sampling.seeded_draw) follows from the seed, the
    conversation and the test alone; the validator lists the empty windows again from the log and draws again."""
    if options.abstentions is None:
        return
    windows, conversation_id = Windows(timeline), timeline.conversation_id
    for test in options.abstaining_tests:
        candidates = EMPTY_WINDOWS[test](windows)
        drawn = seeded_draw(len(candidates), options.abstentions.per_test, seed, ABSTENTION_DRAW, conversation_id, test)
        for i in drawn:
            yield BaseQuestion(conversation_id, test, candidates[i], (), abstention=True)


def empty_dates(w: Windows) -> list[dict]:
    return [{"date": day.isoformat()} for day in w.silent_days()]


def empty_rel_days(w: Windows) -> list[dict]:
    return [{"date": day.isoformat(), "days_ago": (w.today - day).days} for day in w.silent_days()]


def empty_last_days(w: Windows) -> list[dict]:
    recent = [day for day in w.silent_days() if 1 <= (w.today - day).days <= 7]
    return [{"weekday": weekday_name(day), "date": day.isoformat(), "days_ago": (w.today - day).days} for day in recent]


def empty_months(w: Windows) -> list[dict]:
    return [{"month": key} for key in w.silent_months()]


def empty_rel_months(w: Windows) -> list[dict]:
    def ago(key: str) -> int:
        year, month = map(int, key.split("-"))
        return months_between(date(year, month, 1), w.today)

    return [{"month": key, "months_ago": ago(key)} for key in w.silent_months()]


EMPTY_WINDOWS = {
    "dates": empty_dates,
    "month": empty_months,
    "rel_day": empty_rel_days,
    "rel_month": empty_rel_months,
    "last_day": empty_last_days,
}


def enumerate_session(w: Windows, options: WindowOptions):
    for k in w.real_sessions:
        yield {"session": k}, w.by_session[k]


def enumerate_session_span(w: Windows, options: WindowOptions):
    length = options.span_length
    for i in range(len(w.real_sessions) - length + 1):
        first, last = w.real_sessions[i], w.real_sessions[i + length - 1]
        yield {"first_session": first, "last_session": last}, w.sessions(first, last)


def enumerate_rel_session(w: Windows, options: WindowOptions):
    for k in w.real_sessions:
        yield {"session": k, "sessions_ago": w.current_session - k}, w.by_session[k]


def enumerate_dates(w: Windows, options: WindowOptions):
    for day in w.real_dates:
        yield {"date": day.isoformat()}, w.by_date[day]


def enumerate_date_span(w: Windows, options: WindowOptions):
    """Runs of L consecutive real sessions, as date ranges. Runs that give the same range (or a single date,
    which the `dates` test already asks about) are not repeated."""
    length, seen = options.span_length, set()
    for i in range(len(w.real_sessions) - length + 1):
        first = w.session_date(w.real_sessions[i])
        last = w.session_date(w.real_sessions[i + length - 1])
        if first == last or (first, last) in seen:
            continue
        seen.add((first, last))
        yield {"first_date": first.isoformat(), "last_date": last.isoformat()}, w.dates(first, last)


def enumerate_month(w: Windows, options: WindowOptions):
    for key in w.real_months:
        yield {"month": key}, w.month(key)


def enumerate_rel_day(w: Windows, options: WindowOptions):
    for day in w.real_dates:
        yield {"date": day.isoformat(), "days_ago": (w.today - day).days}, w.by_date[day]


def enumerate_rel_month(w: Windows, options: WindowOptions):
    for key in w.real_months:
        year, month = map(int, key.split("-"))
        yield {"month": key, "months_ago": months_between(date(year, month, 1), w.today)}, w.month(key)


def enumerate_day_span(w: Windows, options: WindowOptions):
    for n in options.day_spans:
        first = w.today - timedelta(days=n)
        yield {"days": n, "first_date": first.isoformat(), "last_date": w.today.isoformat()}, w.dates(first, w.today)


def enumerate_last_day(w: Windows, options: WindowOptions):
    for back in range(1, 8):
        day = w.today - timedelta(days=back)
        if day in w.real_dates:
            yield {"weekday": weekday_name(day), "date": day.isoformat(), "days_ago": back}, w.by_date[day]


def enumerate_earlier_today(w: Windows, options: WindowOptions):
    if w.today in w.real_dates:
        yield {"date": w.today.isoformat()}, [r for r in w.by_date[w.today] if r.timestamp < w.now]


ENUMERATORS = {
    "session": enumerate_session,
    "session_span": enumerate_session_span,
    "rel_session": enumerate_rel_session,
    "dates": enumerate_dates,
    "date_span": enumerate_date_span,
    "month": enumerate_month,
    "rel_day": enumerate_rel_day,
    "rel_month": enumerate_rel_month,
    "day_span": enumerate_day_span,
    "last_day": enumerate_last_day,
    "earlier_today": enumerate_earlier_today,
}
assert set(ENUMERATORS) == set(TESTS)
assert set(EMPTY_WINDOWS) == set(ABSTAINING_TESTS)
