"""Every page of every order holds the records it should: a sorted page read from the sort's own index (filtered
on a facet field it carries, on another field, or not at all) and one answered by a top-N while that index is
missing give the same records as sorting the JSON lines in Python (missing values last, ties in file order). And
what the index costs: closing it while sort indexes are built, the modules a page needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, extra_marks, read_jsonl
from tests.view.viewer import VIEW_MODULES

pytestmark = extra_marks("view", *VIEW_MODULES)
SORTS = [("num_relevant", True), ("question", False), ("now", True), ("question_id", True)]


@pytest.fixture(scope="module")
def index(run_folder):
    from gen.view.folder import open_folder
    from gen.view.index import Index

    opened = Index(open_folder(run_folder))
    opened.start()
    for name in opened.states:
        assert opened.wait(name, 120), opened.states[name]
    yield opened
    opened.close()


def expected_numbers(rows: list[dict], column: str, desc: bool, filters: dict[str, object]) -> list[int]:
    """Record numbers (from 0) of the matches, in the sort's order, by plain Python."""
    matches = [(n, row) for n, row in enumerate(rows) if all(row.get(k) == v for k, v in filters.items())]
    valued = [pair for pair in matches if pair[1].get(column) is not None]
    present = sorted(valued, key=lambda pair: pair[1][column], reverse=desc)  # stable: ties stay in file order
    return [n for n, _ in present] + [n for n, row in matches if row.get(column) is None]


def every_page(index, config: str, column: str, desc: bool, filters: dict[str, str], size: int = 25) -> list[int]:
    from gen.view.tables import RecordsQuery

    found, page = [], 1
    while True:
        result = index.page(config, RecordsQuery(page=page, size=size, sort=column, desc=desc, filters=filters))
        found += [row["_row"] for row in result.rows]
        if page * size >= result.total:
            return found
        page += 1


def filter_cases(index, rows: list[dict]) -> list[dict[str, object]]:
    """No filter; one on a facet field the sort's index carries; one on a field it does not carry."""
    facets = index.states["time_queries"].facets
    carried = next(name for name, values in facets.items() if len(values) > 1)
    other = next(c.name for c in index.columns("time_queries") if c.scalar and c.name not in facets)
    counts: dict[object, int] = {}
    for row in rows:
        counts[row[other]] = counts.get(row[other], 0) + 1
    common = max(counts, key=lambda value: counts[value])
    return [{}, {carried: rows[len(rows) // 2][carried]}, {other: common}]


def as_filter(filters: dict[str, object]) -> dict[str, str]:
    return {k: json.dumps(v) if not isinstance(v, str) else v for k, v in filters.items()}


def test_sorted_pages_hold_the_records_python_sorts_to_them(index, run_folder: Path):
    rows = read_jsonl(run_folder / "time_queries" / "test.jsonl")
    for column, desc in SORTS:
        for filters in filter_cases(index, rows):
            expected = expected_numbers(rows, column, desc, filters)
            assert expected, filters
            assert every_page(index, "time_queries", column, desc, as_filter(filters)) == expected, (column, filters)
        index.sort_index("time_queries", column, desc)  # from here on, pages are read from the sort's index
        assert index.sort_index_ready("time_queries", column, desc)
        for filters in filter_cases(index, rows):
            expected = expected_numbers(rows, column, desc, filters)
            assert every_page(index, "time_queries", column, desc, as_filter(filters)) == expected, (column, filters)


def test_closing_while_sort_indexes_are_built_stops_them_and_leaves_nothing(run_folder, tmp_path, monkeypatch):
    """close() interrupts the builders a page started (sort indexes), waits for them, then closes the database
    (closing it under a running builder aborted the whole process); no statement starts after."""
    import threading

    import duckdb

    from gen.view.folder import open_folder
    from gen.view.index import Index

    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path))
    opened = Index(open_folder(run_folder))
    opened.start()
    assert opened.wait("time_queries", 120)
    started, outcome = threading.Event(), []

    def endless_builder() -> None:  # a statement that would run for hours unless interrupted
        with opened.cursor() as cur:
            started.set()
            try:
                cur.execute("SELECT count(*) FROM range(1000000000000) a")
                outcome.append("finished")
            except duckdb.InterruptException:
                outcome.append("interrupted")

    helper = threading.Thread(target=endless_builder)
    opened.helpers.append(helper)
    helper.start()
    for column, desc in SORTS:
        opened.build_sort_index_soon("time_queries", column, desc)
    assert started.wait(30)
    opened.close()
    assert outcome == ["interrupted"] and not any(thread.is_alive() for thread in [helper, *opened.helpers])
    assert not opened.store.spill.exists()
    with pytest.raises(duckdb.InterruptException):
        opened.cursor()


def test_serving_a_run_of_json_lines_never_imports_pyarrow(run_folder, tmp_path):
    """pyarrow costs the viewer 86 MB of memory (its peak at 100 copies of locomo10): a run of JSON lines is served,
    overview and rejects included, without it (only a parquet export needs it)."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tests.view.asgi import viewer_client\n"
        "with viewer_client(Path(sys.argv[1])) as client:\n"
        "    for url in ('/', '/rejects', '/records/log', '/records/time_queries?sort=now', '/records/log/1'):\n"
        "        assert client.get(url)[0] == 200, url\n"
        "print('pyarrow' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(run_folder)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "GEN_CACHE_DIR": str(tmp_path)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
