"""A small tally for validators: each named check counts items checked and failures, with a few examples.

Tallies of different conversations (or worker processes) add up with `merge`, in conversation order, so the
report is the same however the work was split.
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_EXAMPLES = 5


@dataclass
class Check:
    checked: int = 0
    failed: int = 0
    examples: list[str] = field(default_factory=list)


class Checks:
    def __init__(self) -> None:
        self.results: dict[str, Check] = {}

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        result = self.results.get(name)  # (not setdefault: a validator checks often, and a Check is made once)
        if result is None:
            result = self.results[name] = Check()
        result.checked += 1
        if not ok:
            result.failed += 1
            if len(result.examples) < MAX_EXAMPLES:
                result.examples.append(detail)
        return ok

    def add(self, name: str, checked: int, failures: list[str]) -> None:
        """`checked` items checked at once, of which `failures` (their details, in order) failed."""
        result = self.results.setdefault(name, Check())
        result.checked += checked
        result.failed += len(failures)
        result.examples.extend(failures[: MAX_EXAMPLES - len(result.examples)])

    def merge(self, other: Checks) -> None:
        for name, theirs in other.results.items():
            ours = self.results.setdefault(name, Check())
            ours.checked += theirs.checked
            ours.failed += theirs.failed
            ours.examples.extend(theirs.examples[: MAX_EXAMPLES - len(ours.examples)])

    @property
    def passed(self) -> bool:
        return all(result.failed == 0 for result in self.results.values())

    def report(self) -> dict:
        return {
            name: {"checked": r.checked, "failed": r.failed, **({"examples": r.examples} if r.examples else {})}
            for name, r in self.results.items()
        }
