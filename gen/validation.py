"""A small tally for validators: each named check counts items checked and failures, with a few examples."""

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
        result = self.results.setdefault(name, Check())
        result.checked += 1
        if not ok:
            result.failed += 1
            if len(result.examples) < MAX_EXAMPLES:
                result.examples.append(detail)
        return ok

    @property
    def passed(self) -> bool:
        return all(result.failed == 0 for result in self.results.values())

    def report(self) -> dict:
        return {name: {"checked": r.checked, "failed": r.failed, **({"examples": r.examples} if r.examples else {})}
                for name, r in self.results.items()}
