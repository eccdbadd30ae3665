"""Validators of the time-query products: an independent path to every relevant set.

Nothing here uses the generator's window code (windows.py). Each conversation is read back as its
`log` records (the strings a consumer sees: timestamp, date, session_index, is_padding); `now` is the last
timestamp plus the recipe's now_offset_minutes. Each test's window is then applied to those strings with
plain comparisons, and the windows every test should have produced are listed again from the same strings,
so a missing or extra base question is caught as well as a wrong relevant set.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from typing import Any

from gen.calendar_names import month_name, weekday_name
from gen.hashing import stable_id
from gen.products.base import Unit
from gen.products.checks import Checks
from gen.products.date_words import Yearless
from gen.products.temporal.options import ABSTAINING_TESTS, TESTS, TimeQueriesOptions, WindowOptions
from gen.products.temporal.sampling import ABSTENTION_DRAW, seeded_draw

SPAN_TESTS = ("session_span", "date_span")
Key = tuple[str, tuple[tuple[str, Any], ...]]  # a base question: test and sorted params


class LogView:
    """One conversation's log records, reduced to what the windows need."""

    def __init__(self, records: list[dict], now_offset_minutes: float):
        self.index = [r["response_index"] for r in records]
        self.session = [r["session_index"] for r in records]
        self.date = [r["date"] for r in records]  # "2023-05-08"
        self.stamp = [r["timestamp"] for r in records]  # "2023-05-08T13:56:04", compares as a string
        self.padding = [r["is_padding"] for r in records]
        self.padding_indices = {i for i, p in zip(self.index, self.padding) if p}
        last = max(datetime.fromisoformat(s) for s in self.stamp)
        self.now = last + timedelta(minutes=now_offset_minutes)
        self.now_text = self.now.isoformat(timespec="seconds")
        self.today = self.now.date()
        self.current_session = max(self.session) + 1
        self.real_sessions = sorted({s for s, p in zip(self.session, self.padding) if not p})
        self.real_dates = sorted({d for d, p in zip(self.date, self.padding) if not p})
        self.real_months = sorted({d[:7] for d in self.real_dates})
        # per response: whole days and calendar months before today, from its date string (once per date)
        days_ago = {d: self.days_before_today(d) for d in set(self.date)}
        months_ago = {d: self.months_before_today(d[:7]) for d in days_ago}
        self.days_ago = [days_ago[d] for d in self.date]
        self.months_ago = [months_ago[d] for d in self.date]
        self.first_date_of_session: dict[int, str] = {}
        for s, d in zip(self.session, self.date):
            self.first_date_of_session.setdefault(s, d)
        # the responses of each session, date, month and number of days ago, for the windows that are one of them
        self.by_session = group(self.index, self.session)
        self.by_date = group(self.index, self.date)
        self.by_month = group(self.index, [d[:7] for d in self.date])
        self.by_days_ago = group(self.index, self.days_ago)
        self.by_months_ago = group(self.index, self.months_ago)
        self.windows: dict[Key, list[int]] = {}  # filled by window_of
        self.bases: dict[tuple, list[tuple[str, dict]]] = {}  # filled by base_questions

    @staticmethod
    def union(groups: dict[Any, list[int]], keys: Iterable[Any]) -> list[int]:
        """The sorted responses of every group named in `keys`."""
        return sorted(i for k in keys for i in groups.get(k, ()))

    def days_before_today(self, day: str) -> int:
        return (self.today - date.fromisoformat(day)).days

    def months_before_today(self, month: str) -> int:
        year, number = map(int, month.split("-"))
        return (self.today.year - year) * 12 + (self.today.month - number)

    def window(self, test: str, p: dict) -> list[int]:
        """The responses a question asks about, from the relative quantity the question states."""
        if test == "session":
            return self.by_session.get(p["session"], [])
        if test == "session_span":
            return self.union(self.by_session, range(p["first_session"], p["last_session"] + 1))
        if test == "rel_session":
            return self.by_session.get(self.current_session - p["sessions_ago"], [])
        if test == "dates":
            return self.by_date.get(p["date"], [])
        if test == "date_span":
            return self.union(self.by_date, [d for d in self.by_date if p["first_date"] <= d <= p["last_date"]])
        if test == "month":
            return self.by_month.get(p["month"], [])
        if test == "rel_day":
            return self.by_days_ago.get(p["days_ago"], [])
        if test == "rel_month":
            return self.by_months_ago.get(p["months_ago"], [])
        if test == "day_span":
            return self.union(self.by_days_ago, range(p["days"] + 1))
        if test == "last_day":
            if not 1 <= p["days_ago"] <= 7:
                return []
            return self.by_days_ago.get(p["days_ago"], [])
        if test == "earlier_today":
            return [i for i, n, t in zip(self.index, self.days_ago, self.stamp) if n == 0 and t < self.now_text]
        raise ValueError(f"unknown test {test!r}")

    def has_real(self, indices: list[int]) -> bool:
        return any(i not in self.padding_indices for i in indices)

    def window_of(self, k: Key) -> list[int]:
        """`window` once per base question: the rows of a base question share it."""
        if k not in self.windows:
            self.windows[k] = self.window(k[0], dict(k[1]))
        return self.windows[k]

    def base_questions(self, options: WindowOptions) -> list[tuple[str, dict]]:
        """(test, params) of every base question the options define, in the order the products ask them (tests
        in the options' order), less those whose window is empty or only padding. Listed once per options."""
        asked = (tuple(options.tests), options.span_length, tuple(options.day_spans))
        if asked not in self.bases:
            self.bases[asked] = [
                (test, params)
                for test in options.tests
                for params in self.expected(test, options.span_length, options.day_spans)
                if (window := self.window_of(key(test, params))) and self.has_real(window)
            ]
        return self.bases[asked]

    def silent_windows(self, test: str) -> list[dict]:
        """The params of every empty window of an abstaining test inside the conversation's span, in date order,
        from the log's date strings: the days after the first real date and before today on which no response,
        padding included, is dated; the months after the first real month and before today's month in which none
        is dated. The time_queries generator lists them from its timeline (windows.py); this is the check's list."""
        if not self.real_dates:
            return []
        said, today = set(self.date), self.today.isoformat()
        first = date.fromisoformat(self.real_dates[0])
        days = [(first + timedelta(days=n)).isoformat() for n in range(1, (self.today - first).days)]
        silent = [d for d in days if d not in said]
        if test == "dates":
            return [{"date": d} for d in silent]
        if test == "rel_day":
            return [{"date": d, "days_ago": self.days_before_today(d)} for d in silent]
        if test == "last_day":
            recent = [d for d in silent if 1 <= self.days_before_today(d) <= 7]
            return [
                {"weekday": weekday_name(date.fromisoformat(d)), "date": d, "days_ago": self.days_before_today(d)}
                for d in recent
            ]
        months_said = {d[:7] for d in said}
        months = []
        year, month = first.year, first.month
        while True:
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
            key = f"{year:04d}-{month:02d}"
            if key >= today[:7]:
                break
            if key not in months_said:
                months.append(key)
        if test == "month":
            return [{"month": m} for m in months]
        if test == "rel_month":
            return [{"month": m, "months_ago": self.months_before_today(m)} for m in months]
        raise ValueError(f"test {test!r} has no abstention questions")

    def abstention_questions(
        self, options: TimeQueriesOptions, seed: int, conversation_id: str
    ) -> list[tuple[str, dict]]:
        """(test, params) of every abstention question time_queries should ask, in its order: per abstaining test,
        the seeded draw of `per_test` among `silent_windows` (the draw sampling.py makes for the generator)."""
        if options.abstentions is None:
            return []
        found: list[tuple[str, dict]] = []
        for test in options.abstaining_tests:
            silent = self.silent_windows(test)
            limit = options.abstentions.per_test
            found += [
                (test, silent[i]) for i in seeded_draw(len(silent), limit, seed, ABSTENTION_DRAW, conversation_id, test)
            ]
        return found

    def expected(self, test: str, span_length: int, day_spans: list[int]) -> list[dict]:
        """The params of every base question the test defines for this conversation, in the order the products
        ask them (before dropping empty or padding-only windows)."""
        if test == "session":
            return [{"session": k} for k in self.real_sessions]
        if test == "session_span":
            runs = [self.real_sessions[i : i + span_length] for i in range(len(self.real_sessions) - span_length + 1)]
            return [{"first_session": run[0], "last_session": run[-1]} for run in runs]
        if test == "rel_session":
            return [{"session": k, "sessions_ago": self.current_session - k} for k in self.real_sessions]
        if test == "dates":
            return [{"date": d} for d in self.real_dates]
        if test == "date_span":
            out: list[dict[str, Any]] = []
            for i in range(len(self.real_sessions) - span_length + 1):
                first = self.first_date_of_session[self.real_sessions[i]]
                last = self.first_date_of_session[self.real_sessions[i + span_length - 1]]
                if first != last and {"first_date": first, "last_date": last} not in out:
                    out.append({"first_date": first, "last_date": last})
            return out
        if test == "month":
            return [{"month": m} for m in self.real_months]
        if test == "rel_day":
            return [{"date": d, "days_ago": self.days_before_today(d)} for d in self.real_dates]
        if test == "rel_month":
            return [{"month": m, "months_ago": self.months_before_today(m)} for m in self.real_months]
        if test == "day_span":
            return [
                {
                    "days": n,
                    "first_date": (self.today - timedelta(days=n)).isoformat(),
                    "last_date": self.today.isoformat(),
                }
                for n in day_spans
            ]
        if test == "last_day":  # the most recent first: one day back, then two...
            out = []
            for d in reversed(self.real_dates):
                back = self.days_before_today(d)
                if 1 <= back <= 7:
                    out.append({"weekday": weekday_name(date.fromisoformat(d)), "date": d, "days_ago": back})
            return out
        if test == "earlier_today":
            return [{"date": self.today.isoformat()}] if self.today.isoformat() in self.real_dates else []
        raise ValueError(f"unknown test {test!r}")


def group(indices: list[int], values: list) -> dict[Any, list[int]]:
    """value → the response indices that have it, in order."""
    out: dict[Any, list[int]] = {}
    for index, value in zip(indices, values):
        out.setdefault(value, []).append(index)
    return out


def key(test: str, params: dict) -> Key:
    return test, tuple(sorted(params.items()))


def names_mentioned(test: str, params: dict) -> list[str]:
    """Words a time expression of this test must contain: month and weekday names it refers to by name."""

    def month_of(iso: str) -> str:
        return month_name(int(iso[5:7]))

    if test == "dates":
        return [month_of(params["date"])]
    if test in ("date_span",):
        return [month_of(params["first_date"]), month_of(params["last_date"])]
    if test == "month":
        return [month_of(params["month"] + "-01")]
    if test == "last_day":
        return [params["weekday"]]
    return []


def check_unit(
    unit: Unit,
    rows: Sequence[dict],
    options: WindowOptions,
    checks: Checks,
    product: str,
    now_offset_minutes: float,
    also: Sequence[dict] = (),
) -> LogView:
    """Checks both products share, for one conversation, against its `log` records. Returns the log's view, for
    a product's own checks. `also`: the conversation's abstention questions, checked apart (check_abstentions)
    but counted here for unique question ids."""
    ids = [row["question_id"] for part in (rows, also) for row in part]
    unique = len(set(ids)) == len(ids)
    repeated = () if unique else Counter(ids).most_common(3)
    checks.check("question_id is unique", unique, ", ".join(i for i, n in repeated if n > 1))
    view = LogView(list(unit.records_of("log")), now_offset_minutes)
    check_conversation(view, list(rows), options, checks, unit.conversation_id, product)
    return view


ROW_CHECKS = (
    "relevant set equals the window recomputed from the log",
    "num_relevant is the number of relevant responses",
    "relevant set is not empty and not only padding",
    "now and current_session agree with the log",
    "test is one the options ask for",
    "time expression names its month or weekday",
    "the variants of a base question share test, params and relevant set",
)


@dataclass
class BaseSeen:
    """What the rows of one base question are checked against, worked out at its first row; and what its rows
    were already found to agree with (they share their relevant list and their time expressions recur)."""

    key: Key
    window: list[int]
    window_is_real: bool
    names: list[str]  # month and weekday names its time expression must mention, lower case
    agreeing: list | None = None  # a relevant list (this object) found equal to the window
    signature: tuple = ()  # (test, key, relevant list): the same for every variant of the base question
    named: dict[str, bool] = field(default_factory=dict)  # time expression → whether it names what it must


def check_conversation(
    view: LogView, rows: list[dict], options: WindowOptions, checks: Checks, conversation_id: str, product: str
) -> None:
    bases: dict[Key, BaseSeen] = {}
    present: dict[str, set[Key]] = defaultdict(set)
    groups: dict[str, tuple] = {}
    failed: dict[str, list[str]] = {name: [] for name in ROW_CHECKS}  # every row is checked by each of these
    relevant, counted, not_empty, clock, asked, named, shared = (failed[name] for name in ROW_CHECKS)
    tests, now_text, current_session = set(options.tests), view.now_text, view.current_session
    last: tuple[str, dict | None, BaseSeen | None] = ("", None, None)  # the previous row's test, params, base

    def at(row: dict) -> str:  # only built for a failure
        return f"{conversation_id} {row['question_id']}"

    for row in rows:
        test, params, indices = row["test"], row["params"], row["relevant_response_indices"]
        if params is not last[1] or test != last[0]:  # the build gives a base question's rows one params dict
            k = key(test, params)
            if k not in bases:
                window = view.window_of(k)
                present[test].add(k)
                names = [name.lower() for name in names_mentioned(test, params)]
                bases[k] = BaseSeen(k, window, bool(window) and view.has_real(window), names)
            last = (test, params, bases[k])
        base = last[2]
        assert base is not None
        if indices is base.agreeing:  # the very list already compared (rows of a base question share it)
            same = True
        else:
            same = indices == base.window
            if same:
                base.agreeing = indices
            else:
                relevant.append(f"{at(row)} {test} {params}: {len(indices)} given, {len(base.window)} recomputed")
        if row["num_relevant"] != len(indices):
            counted.append(at(row))
        if not (base.window_is_real if same else bool(indices) and view.has_real(indices)):
            not_empty.append(at(row))
        if row["now"] != now_text or row["current_session"] != current_session:
            clock.append(at(row))
        if test not in tests:
            asked.append(at(row))
        if base.names:
            expression = row["time_expression"]
            ok = base.named.get(expression)
            if ok is None:
                ok = base.named[expression] = all(name in expression.lower() for name in base.names)
            if not ok:
                named.append(f"{at(row)}: {expression!r}")
        signature = base.signature
        if not signature or signature[2] is not indices:  # made again only for another relevant list
            signature = base.signature = (test, base.key, indices)
        if groups.setdefault(row["group_id"], signature) != signature:
            shared.append(at(row))
    for name, failures in failed.items():
        if rows:
            checks.add(name, len(rows), failures)

    defined: dict[str, set[Key]] = defaultdict(set)
    for test, params in view.base_questions(options):
        defined[test].add(key(test, params))
    for test in options.tests:
        expected = defined[test]
        missing, extra = expected - present[test], present[test] - expected
        checks.check(
            f"base questions are exactly the windows the test defines ({product})",
            not missing and not extra,
            f"{conversation_id} {test}: missing {sorted(map(str, missing))[:2]}, "
            f"unexpected {sorted(map(str, extra))[:2]}",
        )
    group_count = Counter(row["group_id"] for row in rows)
    if options.variant_limit is not None:
        checks.check(
            "at most max_variants_per_group variants per base question",
            max(group_count.values(), default=0) <= options.variant_limit,
            conversation_id,
        )


ABSTENTION_CHECKS = (
    "an abstention question has an empty relevant set",
    "an abstention's window, recomputed from the log, holds no response",
    "an abstention question is not a real window",
    "an abstention question's test is one that can have them",
    "now and current_session agree with the log (abstentions)",
    "time expression names its month or weekday (abstentions)",
    "the variants of an abstention question share test and params",
)


def check_abstentions(
    view: LogView,
    rows: Sequence[dict],
    options: TimeQueriesOptions,
    seed: int,
    conversation_id: str,
    checks: Checks,
) -> None:
    """The abstention questions of one conversation (the rows flagged `abstention: true`), by the validator's own
    path: the window each one names, recomputed from the log's strings, holds no response at all (padding
    included); none is a window the tests ask about for real; and their base questions are exactly the seeded draw
    among the empty windows the log shows inside the conversation's span (LogView.abstention_questions). A row
    with an empty window that is not flagged is a real question's row, and fails its checks in
    `check_conversation`."""
    real = {key(test, params) for test, params in view.base_questions(options)}
    drawn = {key(test, params) for test, params in view.abstention_questions(options, seed, conversation_id)}
    failed: dict[str, list[str]] = {name: [] for name in ABSTENTION_CHECKS}
    empty, silent, not_real, asked, clock, named, shared = (failed[name] for name in ABSTENTION_CHECKS)
    present: set[Key] = set()
    groups: dict[str, Key] = {}
    for row in rows:
        test, params, where = row["test"], row["params"], f"{conversation_id} {row['question_id']}"
        k = key(test, params)
        present.add(k)
        if row["relevant_response_indices"] or row["num_relevant"] != 0:
            empty.append(where)
        if test not in ABSTAINING_TESTS:
            asked.append(f"{where}: {test}")
        elif window := view.window_of(k):
            silent.append(f"{where} {test} {params}: {len(window)} responses")
        if k in real:
            not_real.append(f"{where} {test} {params}")
        if row["now"] != view.now_text or row["current_session"] != view.current_session:
            clock.append(where)
        expression = row["time_expression"].lower()
        if not all(name.lower() in expression for name in names_mentioned(test, params)):
            named.append(f"{where}: {row['time_expression']!r}")
        if groups.setdefault(row["group_id"], k) != k:
            shared.append(where)
    for name, failures in failed.items():
        if rows:
            checks.add(name, len(rows), failures)
    missing, extra = drawn - present, present - drawn
    checks.check(
        "abstention questions are the seeded draw of the empty windows inside the span",
        not missing and not extra,
        f"{conversation_id}: missing {sorted(map(str, missing))[:2]}, unexpected {sorted(map(str, extra))[:2]}",
    )
    if options.variant_limit is not None:
        checks.check(
            "at most max_variants_per_group variants per abstention question",
            max(Counter(row["group_id"] for row in rows).values(), default=0) <= options.variant_limit,
            conversation_id,
        )


def count(rows: Sequence[dict]) -> Counter[tuple[str, str]]:
    """One conversation's share of the summary: per test, base questions, variants and whether it has any."""
    counts: Counter[tuple[str, str]] = Counter()
    groups: dict[str, set[str]] = defaultdict(set)
    for row in rows:
        counts["variants", row["test"]] += 1
        groups[row["test"]].add(row["group_id"])
    for test, ids in groups.items():
        counts["base_questions", test] += len(ids)
        counts["conversations", test] += 1
    if rows:
        counts["conversations", "*"] += 1
    return counts


def summary(counts: Counter, asked: Sequence[str]) -> dict:
    """Per asked test: base questions (groups), variants (records) and conversations with at least one question.
    A test asked for that produced nothing stays in the table with zeros and is named in `not_produced`."""
    tests = {
        test: {
            "base_questions": counts["base_questions", test],
            "variants": counts["variants", test],
            "conversations": counts["conversations", test],
        }
        for test in TESTS
        if test in asked
    }
    return {
        "by_test": tests,
        "total": {
            "base_questions": sum(t["base_questions"] for t in tests.values()),
            "variants": sum(t["variants"] for t in tests.values()),
            "conversations": counts["conversations", "*"],
        },
        "not_produced": [test for test, row in tests.items() if not row["variants"]],
    }


Variants = Callable[[str, dict, str, bool], tuple[int, Callable[[int], Hashable]]]


def seeded_sample_failures(
    conversation_id: str,
    kept: Mapping[str, list[Hashable]],
    view: LogView,
    options: WindowOptions,
    seed: int,
    product: str,
    variants: Variants,
    abstentions: Sequence[tuple[str, dict]] = (),
) -> tuple[list[str], int]:
    """The base questions whose kept variants are not the seeded sample: min(limit, variants) drawn, less those
    the conversation already used. Drawn again here from the full list, so a choice that depended on the worker,
    the order of work or a shared random state would show. Returns the failures and how many were checked.

    The base questions, their order and whether their dates may go without the year come from the log (the
    validator's own list of windows); `variants(test, params, group, yearless_ok)` gives how many variants a
    base question has and how to put the i-th into words, so only the drawn ones are. `abstentions` are asked
    after them (time_queries' abstention questions, LogView.abstention_questions)."""
    yearless = Yearless(map(date.fromisoformat, set(view.date)), until=view.today)
    seen: set[Hashable] = set()
    wrong = []
    bases = [*view.base_questions(options), *abstentions]
    for test, params in bases:
        group = stable_id([conversation_id, test, params])  # the group_id rule, written again
        count, variant = variants(test, params, group, yearless.ok(params))
        expected = []
        for i in seeded_draw(count, options.variant_limit, seed, product, conversation_id, group):
            text = variant(i)
            if text not in seen:
                seen.add(text)
                expected.append(text)
        if kept.get(group, []) != expected:
            wrong.append(sample_difference(f"{conversation_id} {test} {params}", kept.get(group, []), expected))
    return wrong, len(bases)


def sample_difference(where: str, kept: Sequence[Hashable], expected: Sequence[Hashable]) -> str:
    """The first text where the kept wordings and the seeded sample part, for the validation report."""
    at = next((i for i, (a, b) in enumerate(zip(kept, expected)) if a != b), min(len(kept), len(expected)))
    first = [texts[at] if at < len(texts) else None for texts in (kept, expected)]
    return f"{where}: {len(kept)} kept, {len(expected)} drawn; wording {at + 1}: {first[0]!r} kept, {first[1]!r} drawn"
