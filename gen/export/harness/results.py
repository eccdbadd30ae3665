"""A harness's own result file read back into gen's predictions (`gen import-predictions`), so a user who ran
LoCoMo's, LongMemEval's or BEIR's official code on an export gets gen's per-test table from `gen eval`.

Every id a harness reports is one the export wrote, and the export's gen-export.json says what it means: a
conversation's name, where each of its sessions starts, how many responses it has. Questions keep gen's ids,
except where a harness reads meaning into an id (LongMemEval's "_abs" for an abstention question): the manifest's
`harness_ids` maps those back, and `import_results`, which every reader goes through, applies the map. A result
that names a session rather than a turn (LongMemEval at session granularity, a LoCoMo summary's `S<n>`) stands for
every response of that session, in order.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen import reading
from gen.callers import named
from gen.errors import GenError
from gen.export.harness.formats import ResultsReader, find
from gen.export.harness.staging import MANIFEST

LONGMEMEVAL_ID = re.compile(r"^(?:answer_|noans_)?(?P<name>[A-Za-z0-9.-]+)_s(?P<session>\d+)(?:_(?P<turn>\d+))?$")
LOCOMO_ID = re.compile(r"^D(?P<session>\d+):(?P<turn>\d+)$|^S(?P<only>\d+)$")


@dataclass
class Layout:
    """A conversation as the export laid it out: where each session starts, and its size."""

    session_starts: list[int]
    responses: int

    def responses_of(self, session: int, turn: int | None) -> list[int] | None:
        """The response indices of a session (or of one turn of it, counted from 1); None if there is none."""
        if not 1 <= session <= len(self.session_starts):
            return None
        start = self.session_starts[session - 1]
        end = self.session_starts[session] if session < len(self.session_starts) else self.responses
        if turn is None:
            return list(range(start, end))
        return [start + turn - 1] if 1 <= turn <= end - start else None


def read_layouts(export: Path) -> dict[str, Layout]:
    path = export / MANIFEST
    try:
        manifest = reading.read_json(path, "the gen-export.json `gen export` wrote")
        return {
            name: Layout(list(info["session_starts"]), int(info["responses"]))
            for name, info in manifest["conversations"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GenError(
            f"cannot read how the export laid out its conversations ({exc.__class__.__name__}: {exc})",
            file=path,
            field="conversations",
            expected="the folder `gen export` wrote for the harness that produced the results",
        ) from None


def read_harness_ids(export: Path) -> dict[str, str]:
    """Every question id the export wrote under another name (in any config) → gen's id."""
    path = export / MANIFEST
    try:
        manifest = reading.read_json(path, "the gen-export.json `gen export` wrote")
        return {
            str(exported): str(gen_id)
            for info in manifest["configs"].values()
            for exported, gen_id in (info.get("harness_ids") or {}).items()
        }
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GenError(
            f"cannot read the export's question ids ({exc.__class__.__name__}: {exc})",
            file=path,
            field="configs.<config>.harness_ids",
            expected="the folder `gen export` wrote for the harness that produced the results",
        ) from None


def unique(indices: Iterator[int]) -> list[int]:
    return list(dict.fromkeys(indices))


def longmemeval(results: Path, layouts: dict[str, Layout]) -> Iterator[tuple[str, list[int]]]:
    """LongMemEval's retrieval log (run_retrieval.py's output): JSON lines with `question_id` and
    `retrieval_results.ranked_items[].corpus_id`, a session id or `<session id>_<turn>`."""
    for number, record in json_lines(results):
        where = f"line {number}"
        try:
            question_id = record["question_id"]
            ranked = [item["corpus_id"] for item in record["retrieval_results"]["ranked_items"]]
        except (KeyError, TypeError) as exc:
            raise GenError(
                f"not a LongMemEval retrieval log line (no {exc})",
                file=results,
                record=where,
                field="retrieval_results.ranked_items",
                expected="the retrieval log run_retrieval.py writes",
            ) from None
        if not isinstance(question_id, str):
            raise GenError("question_id is not a string", file=results, record=where, field="question_id")
        yield (
            question_id,
            unique(index for corpus_id in ranked for index in longmemeval_id(corpus_id, layouts, results, where)),
        )


def longmemeval_id(corpus_id: Any, layouts: dict[str, Layout], results: Path, where: str) -> list[int]:
    found = LONGMEMEVAL_ID.match(corpus_id) if isinstance(corpus_id, str) else None
    if not found or found["name"] not in layouts:
        raise GenError(
            f"{corpus_id!r} is not an id this export wrote",
            file=results,
            record=where,
            field="corpus_id",
            expected="<name>_s<session>[_<turn>], with a name from gen-export.json's conversations",
        )
    turn = int(found["turn"]) if found["turn"] else None
    return located(layouts[found["name"]], int(found["session"]), turn, results, where)


def located(layout: Layout, session: int, turn: int | None, results: Path, where: str) -> list[int]:
    found = layout.responses_of(session, turn)
    if found is None:
        place = f"session {session}" + (f", turn {turn}" if turn is not None else "")
        raise GenError(
            f"{place} is not in this conversation ({len(layout.session_starts)} sessions)", file=results, record=where
        )
    return found


def locomo(results: Path, layouts: dict[str, Layout], key: str | None) -> Iterator[tuple[str, list[int]]]:
    """LoCoMo's QA output (evaluate_qa.py with RAG): the samples again, each qa entry holding the retrieved
    dia_ids under `<prediction key>_context`, and the `question_id` the export put there."""
    samples = read_json(results)
    if not isinstance(samples, list):
        raise GenError("not a list of LoCoMo samples", file=results, expected="the file LoCoMo's QA evaluation writes")
    for position, sample in enumerate(samples):
        name = sample.get("sample_id") if isinstance(sample, dict) else None
        if not isinstance(name, str) or name not in layouts:
            raise GenError(
                f"sample_id {str(name)[:80]!r} is not one this export wrote", file=results, record=f"sample {position}"
            )
        entries = sample.get("qa") or []
        if not isinstance(entries, list):
            raise GenError("qa is not a list", file=results, record=f"sample {name}", field="qa")
        for number, qa in enumerate(entries):
            where = f"sample {name}, qa {number}"
            if not isinstance(qa, dict):
                raise GenError("a qa entry is not an object", file=results, record=where)
            context = qa.get(context_key(qa, key, results, where))
            if not isinstance(qa.get("question_id"), str) or not isinstance(context, list):
                raise GenError("a qa entry without question_id or a list of retrieved ids", file=results, record=where)
            yield (
                qa["question_id"],
                unique(index for dia_id in context for index in locomo_id(dia_id, layouts[name], results, where)),
            )


def context_key(qa: dict[str, Any], key: str | None, results: Path, where: str) -> str:
    if key is not None:
        return f"{key}_context"
    keys = [name for name in qa if name.endswith("_context")]
    if len(keys) != 1:
        raise GenError(
            f"cannot tell which retrieval to read ({', '.join(keys) or 'no key ends in _context'})",
            file=results,
            record=where,
            field=named("--prediction-key", "import_predictions(prediction_key=...)"),
            expected="the prediction key LoCoMo's evaluation used (its <key>_context holds the retrieved ids)",
        )
    return keys[0]


def locomo_id(dia_id: Any, layout: Layout, results: Path, where: str) -> list[int]:
    found = LOCOMO_ID.match(dia_id) if isinstance(dia_id, str) else None
    if not found:
        raise GenError(
            f"{dia_id!r} is not a LoCoMo turn or session id", file=results, record=where, expected="D<s>:<t> or S<s>"
        )
    if found["only"]:
        return located(layout, int(found["only"]), None, results, where)
    return located(layout, int(found["session"]), int(found["turn"]), results, where)


BEIR_DOCS = "{document id: score, ...} for each query id"
TREC_LINE = "query Q0 document rank score tag"


def run_score(value: Any, results: Path, record: str, expected: str) -> float:
    """A retriever's score: a finite number (or its text, in a TREC run file)."""
    try:
        score = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else None
    except ValueError:
        score = None
    if score is None or not math.isfinite(score):
        raise GenError(f"the score {str(value)[:40]!r} is not a number", file=results, record=record, expected=expected)
    return score


def beir(results: Path) -> Iterator[tuple[str, list[int]]]:
    """A BEIR run: the JSON dict a retriever returns ({query id: {document id: score}}), or a TREC run file
    (`query Q0 document rank score tag`). Document ids are response indices; higher scores rank first, ties as
    trec_eval orders them (the larger id, compared as text, first)."""
    text = reading.read_text(results, "a BEIR run: a JSON dict or a TREC run file", reading.max_record_bytes())
    scored: dict[str, dict[str, float]] = {}
    if text.lstrip().startswith("{"):
        data = read_json(results)
        for query, docs in data.items() if isinstance(data, dict) else ():
            if not isinstance(docs, dict):
                raise GenError("not a mapping", file=results, record=f"query {query}", expected=BEIR_DOCS)
            scored[str(query)] = {
                doc: run_score(value, results, f"query {query}", BEIR_DOCS) for doc, value in docs.items()
            }
    else:
        for number, line in enumerate(text.splitlines(), start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 6:
                raise GenError(
                    "not a TREC run line",
                    file=results,
                    record=f"line {number}",
                    expected=TREC_LINE,
                )
            scored.setdefault(parts[0], {})[parts[2]] = run_score(parts[4], results, f"line {number}", TREC_LINE)
    for query, docs in scored.items():
        # higher scores first; ties as trec_eval (and so BEIR's evaluator) breaks them: larger id as text first
        ranked = sorted(docs, key=lambda doc: (docs[doc], doc), reverse=True)
        try:
            yield query, unique(int(doc) for doc in ranked)
        except ValueError:
            raise GenError("a document id is not a response index", file=results, record=f"query {query}") from None


def json_lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, record in reading.json_lines(path, "JSON lines, one object per line"):
        if not isinstance(record, dict):
            raise GenError("the line is not a JSON object", file=path, record=f"line {number}")
        yield number, record


def read_json(path: Path) -> Any:
    return reading.read_json(path, "a JSON file the harness wrote")


def export_folder_setting() -> str:
    """The export folder's name as the caller knows it (gen/callers.py)."""
    return named("--export", "import_predictions(export_folder=...)")


def exported_layouts(export: Path | None) -> dict[str, Layout]:
    if export is None:  # import_results checks a reader's needs_export first; this keeps the type honest
        raise GenError(
            "the export folder the harness read is needed to read its results", field=export_folder_setting()
        )
    return read_layouts(export)


def read_locomo(results: Path, export: Path | None, key: str | None) -> Iterator[tuple[str, list[int]]]:
    return locomo(results, exported_layouts(export), key)


def read_longmemeval(results: Path, export: Path | None, key: str | None) -> Iterator[tuple[str, list[int]]]:
    return longmemeval(results, exported_layouts(export))


def read_beir(results: Path, export: Path | None, key: str | None) -> Iterator[tuple[str, list[int]]]:
    return beir(results)


def import_results(
    results: Path, format_name: str, export: Path | None, key: str | None = None
) -> tuple[list[dict[str, Any]], ResultsReader]:
    """gen's prediction lines ({question_id, retrieved}) from one harness result file, and the reader that read
    it (its `after` line says what to do next)."""
    reader = find(format_name, reading=True).results
    assert reader is not None  # find(reading=True) returns only formats that read results
    if export is None and reader.needs_export:
        message = f"the format {format_name} needs the export folder it was run on"
        raise GenError(message, field=export_folder_setting())
    pairs = reader.read(results, export, key)
    gen_ids = read_harness_ids(export) if export is not None else {}
    lines = [{"question_id": gen_ids.get(qid, qid), "retrieved": retrieved} for qid, retrieved in pairs]
    return lines, reader
