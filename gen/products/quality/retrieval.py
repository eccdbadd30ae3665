"""A retrieval file (option `retrieval_file`, `memories: retrieval_file`): what a memory system retrieved before
each reply of the log, one JSON line {conversation_id, response_index, retrieved} per reply, as
`gen baseline NAME RUN --turns` writes it for a reference system. Read once per process."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from gen.errors import GenError

EXPECTED = 'one JSON object per line: {"conversation_id": "...", "response_index": 12, "retrieved": [3, 7]}'
Retrieved = dict[tuple[str, int], list[int]]


def resolve(recipe_file: str | Path | None, path: str) -> Path:
    """A relative path is read from the recipe's folder, as sources are."""
    found = Path(path).expanduser()
    return found if found.is_absolute() or recipe_file is None else Path(recipe_file).parent / found


@lru_cache(maxsize=2)
def load(path: Path) -> Retrieved:
    if not path.is_file():
        raise GenError("the retrieval file is missing", file=path, field="retrieval_file", expected=EXPECTED)
    found: Retrieved = {}
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                key, retrieved = parse(line, path, number)
                if key in found:
                    raise GenError("a reply appears twice", file=path, record=f"line {number}", expected=EXPECTED)
                found[key] = retrieved
    return found


def parse(line: str, path: Path, number: int) -> tuple[tuple[str, int], list[int]]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise GenError(f"not JSON ({exc.msg})", file=path, record=f"line {number}", expected=EXPECTED) from None
    fields = {"conversation_id": str, "response_index": int, "retrieved": list}
    for name, kind in fields.items():
        value = data.get(name) if isinstance(data, dict) else None
        if not isinstance(value, kind) or isinstance(value, bool):
            raise GenError(
                f"{name} is missing or not a {kind.__name__}",
                file=path,
                record=f"line {number}",
                field=name,
                expected=EXPECTED,
            )
    if not all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in data["retrieved"]):
        raise GenError(
            "retrieved holds something other than response indices",
            file=path,
            record=f"line {number}",
            field="retrieved",
            expected="a list of response indices (0 or more)",
        )
    return (data["conversation_id"], data["response_index"]), data["retrieved"]
