"""Every page of every order holds the records it should: a sorted page read from the sort's own index (filtered
on a facet field it carries, on another field, or not at all) and one answered by a top-N while that index is
missing give the same records as sorting the JSON lines in Python (missing values last, ties in file order). And
what the index costs: closing it while sort indexes are built, the modules a page needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def fresh_index(run_folder: Path, cache: Path, monkeypatch):
    """An index of the quickstart run built from nothing in `cache` (its own cache folder), started."""
    from gen.view.folder import open_folder
    from gen.view.index import Index

    monkeypatch.setenv("GEN_CACHE_DIR", str(cache))
    opened = Index(open_folder(run_folder))
    opened.start()
    return opened


def test_a_sorted_page_found_without_its_index_is_the_page_the_index_gives(run_folder, tmp_path, monkeypatch):
    """While a sort's index is missing, a page deep in it is found by counting (gen/view/seek.py) instead of
    waiting for the index: for every order, filter, search and page, the records, ties and all, are those the
    index gives once built, and those Python's sort gives."""
    from gen.view import index as index_module
    from gen.view.index import Index
    from gen.view.tables import RecordsQuery

    monkeypatch.setattr(index_module, "DIRECT_SORT_ROWS", 0)  # every page unindexed is found by the seek
    monkeypatch.setattr(Index, "build_sort_index_soon", lambda *args: None)  # and stays unindexed
    opened = fresh_index(run_folder, tmp_path, monkeypatch)
    try:
        assert opened.wait("time_queries", 120)
        deadline = time.monotonic() + 120  # a hang guard: the searches below need the whole word index
        while opened.finder("time_queries")[1] is not None and time.monotonic() < deadline:
            time.sleep(0.01)
        rows = read_jsonl(run_folder / "time_queries" / "test.jsonl")
        cases = [(filters, "") for filters in filter_cases(opened, rows)] + [({}, "session")]

        def pages(column: str, desc: bool, filters: dict[str, object], text: str) -> list[int]:
            found, page = [], 1
            while True:
                asked = RecordsQuery(page=page, size=20, sort=column, desc=desc, text=text, filters=as_filter(filters))
                result = opened.page("time_queries", asked)
                found += [row["_row"] for row in result.rows]
                if page * 20 >= result.total:
                    return found
                page += 1

        def no_waiting(*args):
            raise AssertionError("the seek missed a page and waited for the sort's index")

        for column, desc in SORTS:
            opened.sort_index = no_waiting  # type: ignore[method-assign]
            unindexed = {(str(f), text): pages(column, desc, f, text) for f, text in cases}
            del opened.sort_index
            opened.sort_index("time_queries", column, desc)
            assert opened.sort_index_ready("time_queries", column, desc)
            for filters, text in cases:
                indexed = pages(column, desc, filters, text)
                assert unindexed[(str(filters), text)] == indexed, (column, desc, filters, text)
                if not text:
                    assert indexed == expected_numbers(rows, column, desc, filters), (column, desc, filters)
    finally:
        opened.close()


def test_the_seek_finds_every_page_through_ties_missing_values_and_samples_that_miss(monkeypatch):
    """gen/view/seek.py over a table made for it: many ties, values missing, text beyond ASCII, negative numbers,
    and a sample so small that its first try (no margin) misses pages and the wider one must find them; every
    page equals Python's sort (missing values last, ties in file order), filtered or not."""
    import duckdb

    from gen.view import seek

    count = 3000
    table = [
        {
            "n": None if i % 7 == 0 else (i * 37) % 11,
            "s": None if i % 13 == 0 else ["b", "á", "ab", "é", "a", "ß", "Z"][(i * 5) % 7] + str(i % 3),
            "x": None if i % 17 == 0 else ((i * 7919) % 1000) / 8 - 60.0,
        }
        for i in range(count)
    ]
    db = duckdb.connect()
    db.execute("SET threads=1")  # rows go in in list order: rowid i is table[i]
    db.execute(
        "CREATE TABLE t AS SELECT unnest(?::BIGINT[]) AS n, unnest(?::VARCHAR[]) AS s, unnest(?::DOUBLE[]) AS x",
        [[row[name] for row in table] for name in ("n", "s", "x")],
    )
    monkeypatch.setattr(seek, "SAMPLE_ROWS", 30)  # every 100th record: quantiles off by several percent
    monkeypatch.setattr(seek, "MARGINS", (0.0, 1.0))  # no margin, then the whole sort
    tries = []
    real_try = seek.valued_page

    def counted_try(*args):
        found = real_try(*args)
        tries.append(found is not None)
        return found

    monkeypatch.setattr(seek, "valued_page", counted_try)
    kinds = {"n": "BIGINT", "s": "VARCHAR", "x": "DOUBLE"}
    for column in kinds:
        for desc in (False, True):
            for where, params, filters in (("", [], {}), (" WHERE n = ?", [4], {"n": 4})):
                expected = expected_numbers(table, column, desc, filters)
                size = 40
                for start in range(0, len(expected), size):
                    end = min(start + size, len(expected))
                    asked = seek.Request("t", column, kinds[column], desc, where, params, start, end)
                    assert seek.page_numbers(db, asked) == expected[start:end], (column, desc, where, start)
    assert False in tries and True in tries  # first tries missed, and the seek found those pages all the same


def test_many_requests_while_the_index_builds_then_a_stop_never_find_a_connection_busy(
    run_folder, tmp_path, monkeypatch
):
    """Pages are served from many threads while the background builders import, index words and build sort
    indexes, all through connections of one DuckDB database; then the viewer stops with requests in flight.
    DuckDB refuses to close a database while another thread is making or closing a connection of it
    ("connection is busy", seen in the crawler tests under load). No page may fail before the stop, and each
    stop must close everything without an error. Half the threads ask the app for pages, half run statements
    back to back on connections of the index, as pages and builders do: a statement begun on a connection just
    before the stop must not meet the database's close."""
    urls = [
        "/",
        "/records/time_queries?sort=question&page=3",
        "/records/time_queries?sort=num_relevant&desc=1&page=4",
        "/records/time_queries?sort=now&f.test=session",
        "/records/time_queries?q=session",
        "/records/log?page=2",
        "/records/log/3",
        "/rejects",
    ]
    for attempt in range(8):
        opened = fresh_index(run_folder, tmp_path / str(attempt), monkeypatch)
        answers, failures = serve_then_stop(opened, urls, 30)
        assert not failures
        assert len(answers) >= 30 and all(status == 200 for _, status in answers), [a for a in answers if a[1] != 200]


def serve_then_stop(opened, urls: list[str], wanted: int) -> tuple[list[tuple[str, int]], list[str]]:
    """Three threads asking the app for `urls` in turn and three running statements on connections of the
    index, until `wanted` pages have answered; then close() with all of them in flight. The pages' statuses
    (those answered before the stop) and what raised."""
    import threading
    import time

    import duckdb

    from gen.view.app import make_app
    from gen.view.pages import Viewer
    from tests.view.asgi import Client

    client = Client(make_app(Viewer(opened.folder, opened)))
    stopping = threading.Event()
    answers: list[tuple[str, int]] = []
    failures: list[str] = []

    def ask_pages(offset: int) -> None:
        turn = offset
        while not stopping.is_set():
            url = urls[turn % len(urls)]
            turn += 1
            try:
                status, _ = client.get(url)
            except Exception as exc:  # a page that raised is what this test looks for
                failures.append(f"{url}: {exc!r}")
                return
            if not stopping.is_set():
                answers.append((url, status))

    def run_statements() -> None:
        while not stopping.is_set():
            try:
                with opened.cursor() as cur:  # several statements on one connection, as pages and builders run them
                    for _ in range(20):
                        cur.execute("SELECT count(*) FROM range(2000)").fetchall()
            except duckdb.InterruptException:  # the stop interrupts a statement or refuses a new connection
                return
            except Exception as exc:
                failures.append(repr(exc))
                return

    askers = [threading.Thread(target=ask_pages, args=(n,)) for n in range(3)]
    askers += [threading.Thread(target=run_statements) for _ in range(3)]
    for asker in askers:
        asker.start()
    deadline = time.monotonic() + 60  # a hang guard, not a measure
    while len(answers) < wanted and time.monotonic() < deadline:
        time.sleep(0.01)
    stopping.set()
    try:
        opened.close()  # with statements in flight: raised "connection is busy" before the fix
    except Exception as exc:
        failures.append(f"close: {exc!r}")
    for asker in askers:
        asker.join(timeout=60)
    assert not any(asker.is_alive() for asker in askers)
    return answers, failures


def test_a_search_while_the_word_index_is_built_finds_the_matches_among_the_records_it_covers_and_says_so(
    run_folder, tmp_path, monkeypatch
):
    """A search answered while the log's word index is built (held after its first batches here): before any
    batch, no record looked at; after three, exactly the matches the whole index finds among the records those
    batches hold (searched alone, or sorted too), and the page says how many records it looked at; searches go
    on while the build ends (leaving SQLite's WAL mode under a reader failed at once and killed the builder);
    once the index is whole, every match and no such note."""
    import re
    import threading

    from gen.view import search
    from gen.view.app import make_app
    from gen.view.pages import Viewer
    from tests.view.asgi import Client

    monkeypatch.setattr(search, "BATCH", 20)
    held = {0: (threading.Event(), threading.Event()), 3: (threading.Event(), threading.Event())}
    real_build = search.build

    def held_build(path, rows):
        def batches():
            for number, batch in enumerate(rows):
                if number in held:
                    reached, go_on = held[number]
                    reached.set()
                    assert go_on.wait(60)  # a hang guard
                yield batch

        real_build(path, batches() if path == opened.search_path("log") else rows)

    monkeypatch.setattr(search, "build", held_build)
    opened = fresh_index(run_folder, tmp_path, monkeypatch)
    client = Client(make_app(Viewer(opened.folder, opened)))

    def shown(url: str) -> tuple[int, list[int], str]:
        status, body = client.get(url)
        assert status == 200, body
        count = int(re.search(r'data-count="(\d+)"', body)[1])
        numbers = [int(n) - 1 for n in re.findall(r'<td class="n"><a href="/records/log/(\d+)"', body)]
        return count, numbers, body

    try:
        assert held[0][0].wait(60)
        count, numbers, body = shown("/records/log?q=the")
        assert (count, numbers) == (0, []) and "this search has looked at no record" in body
        held[0][1].set()
        assert held[3][0].wait(60)
        partial, numbers, body = shown("/records/log?q=the&size=200")
        assert "has looked at its first 60 records of 292 only" in body
        partial_sorted, _, body = shown("/records/log?q=the&sort=response_index&desc=1")
        assert "its first 60 records" in body
        held[3][1].set()
        deadline = time.monotonic() + 60  # a hang guard: searching on while the build ends must not stop it
        while opened.finder("log")[1] is not None and time.monotonic() < deadline:
            shown("/records/log?q=the")
        assert opened.finder("log")[1] is None and not opened.search_failures, opened.search_failures
        whole, every, body = shown("/records/log?q=the&size=200")
        assert "The word index of" not in body
        assert numbers == [n for n in every if n < 60] and partial == len(numbers) == partial_sorted
        assert 0 < partial < whole
    finally:
        for _reached, go_on in held.values():
            go_on.set()
        opened.close()


def test_the_sort_indexes_pages_ask_for_are_built_one_at_a_time_and_all_of_them(run_folder, tmp_path, monkeypatch):
    """Each order asked for (twice here) is queued once and built by one background thread, never two at once."""
    import threading

    from gen.view.index import Index

    building, most = [0], [0]
    guard = threading.Lock()
    real_sort_index = Index.sort_index

    def counted(self, config, column, desc):
        with guard:
            building[0] += 1
            most[0] = max(most[0], building[0])
        try:
            return real_sort_index(self, config, column, desc)
        finally:
            with guard:
                building[0] -= 1

    monkeypatch.setattr(Index, "sort_index", counted)
    opened = fresh_index(run_folder, tmp_path, monkeypatch)
    try:
        assert opened.wait("time_queries", 120)
        for column, desc in SORTS + SORTS:
            opened.build_sort_index_soon("time_queries", column, desc)
        deadline = time.monotonic() + 60  # a hang guard
        while opened.sorts_queued and time.monotonic() < deadline:
            time.sleep(0.01)
        assert all(opened.sort_index_ready("time_queries", column, desc) for column, desc in SORTS)
        assert most[0] == 1
    finally:
        opened.close()


@pytest.mark.parametrize("rank_max_values", [0, 1_000_000])  # every text field keyed by prefix; then by rank
def test_pages_of_a_text_order_found_by_its_integer_key_are_the_pages_of_the_text_order(monkeypatch, rank_max_values):
    """gen/view/sortkeys.py: a text order's page found through the field's integer key (near the ends a top-N,
    deeper a seek) holds the records Python's sort of the text puts there, through texts that share their first
    8 bytes or more, texts beyond ASCII (one of them with a 2-byte letter across the 8th byte), empty texts,
    prefixes of other texts, and missing values (last, in file order)."""
    import duckdb

    from gen.view import seek, sortkeys
    from gen.view.tables import Column

    words = ["When did Ann", "When did Anna", "When did", "", "When di", "Wheń did", "Zoë", "abcdefgé", "abcdefgh",
             "abcdefg", "abcdefgf", "ß", "a", "When did Ann"]  # fmt: skip
    count = 2000
    table = [{"s": None if i % 11 == 0 else words[(i * 7) % len(words)] + ("" if i % 3 else str(i % 5))}
             for i in range(count)]  # fmt: skip
    db = duckdb.connect()
    db.execute("SET threads=1")  # rows go in in list order: rowid i is table[i]
    db.execute("CREATE TABLE t AS SELECT unnest(?::VARCHAR[]) AS s", [[row["s"] for row in table]])
    monkeypatch.setattr(sortkeys, "RANK_MAX_VALUES", rank_max_values)
    monkeypatch.setattr(seek, "SAMPLE_ROWS", 100)
    kinds = sortkeys.build(db, "c", "t", [Column("s", "VARCHAR")])
    assert kinds == {"s": "prefix" if rank_max_values == 0 else "rank"}
    for desc in (False, True):
        expected = expected_numbers(table, "s", desc, {})
        for direct_rows in (0, 100):  # every page by the seek; then the first and last pages by a top-N
            for start in range(0, count, 30):
                end = min(start + 30, count)
                asked = sortkeys.Keyed("c", "t", "s", kinds["s"], desc, start, end)
                assert sortkeys.page_numbers(db, asked, direct_rows) == expected[start:end], (desc, direct_rows, start)


def test_a_page_the_file_cannot_serve_says_it_waits_for_the_index_not_that_nothing_matches(
    run_folder, tmp_path, monkeypatch
):
    """Before a config is indexed, pages in file order are read from the file; a search, a filter, a sort or a
    page past the file's head cannot be, and the page says it is answered once the index is ready ("0 records
    match" would be false)."""
    from gen.view.app import make_app
    from gen.view.folder import open_folder
    from gen.view.index import Index
    from gen.view.pages import Viewer
    from tests.view.asgi import Client

    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path))  # an empty cache: nothing indexed, the index not started
    opened = Index(open_folder(run_folder))
    try:
        client = Client(make_app(Viewer(opened.folder, opened)))
        for address in (
            "/records/time_queries?q=dates",
            "/records/time_queries?f.test=dates",
            "/records/log?sort=text",
        ):
            status, page = client.get(address)
            assert status == 200
            assert "This page is answered once" in page and "waiting for the index" in page, address
            assert "0 records" not in page
        status, page = client.get("/records/log")  # file order: served from the file meanwhile
        assert status == 200 and "This page is answered once" not in page and 'data-count="0"' not in page
    finally:
        opened.close()


def test_a_page_that_finds_duckdbs_memory_taken_by_an_index_build_waits_for_it_then_answers(monkeypatch):
    """At 100x a question page asked while the word indexes were built (under a small memory cap shared with the
    pages) failed with DuckDB's OutOfMemoryException: it now waits for the builder's next step, and fails as the
    bug page only past MEMORY_WAIT_S."""
    import duckdb

    from gen.view import app

    attempts = []

    def build(request):
        attempts.append(request)
        if len(attempts) < 3:
            raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 2.0 MiB")
        return "question.html", {"built": True}

    assert app.built_when_memory_allows(build, "the request") == ("question.html", {"built": True})
    assert len(attempts) == 3
    monkeypatch.setattr(app, "MEMORY_WAIT_S", 0.3)
    attempts.clear()

    def never(request):
        attempts.append(request)
        raise duckdb.OutOfMemoryException("Out of Memory Error")

    with pytest.raises(duckdb.OutOfMemoryException):
        app.built_when_memory_allows(never, "the request")
    assert 2 <= len(attempts) <= 4
