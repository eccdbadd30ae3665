"""Every address `gen view` links to opens what the link names, and no address makes it fail: a crawler follows
every link from the overview of a quickstart run, a run whose conversation ids hold every awkward character
("/", "%", "?", "#", spaces, letters beyond ASCII, "..", a very long id), a stopped run of time+content
questions with its rejects, and a parquet export; a fuzzer asks for addresses nobody links to. Served in this
process (tests/view/asgi.py) so thousands of pages take seconds. Expected records are read from the JSON lines
with plain json."""

from __future__ import annotations

import html
import json
import re
from collections import deque
from pathlib import Path
from urllib.parse import quote, unquote, urlencode, urlsplit

import pytest

from tests.conftest import REPO, extra_marks, gen_subprocess, read_jsonl, tcq_recipe, write_recipe
from tests.view.viewer import VIEW_MODULES

pytestmark = extra_marks("view", *VIEW_MODULES)

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
AWKWARD_IDS = [
    "a/b c%20d?e=f#g",  # slash, a space, a percent sign that looks like an escape, query and fragment marks
    "..",  # a path segment browsers resolve away
    "Zürich 東京 ✓ " + "x" * 1_200,  # beyond ASCII, and longer than an id a URL carries
]
MAX_PAGES = 500  # pages per run: the crawl stops here (breadth first: every kind of page is met before)


@pytest.fixture(scope="module")
def awkward_run(tmp_path_factory) -> Path:
    """The quickstart's products over the sample conversations renamed to AWKWARD_IDS (and one plain)."""
    tmp = tmp_path_factory.mktemp("awkward")
    samples = json.loads(SAMPLE.read_text())
    renamed = [{**sample, "sample_id": name} for sample, name in zip(samples * 2, AWKWARD_IDS)]
    (tmp / "awkward.json").write_text(json.dumps(renamed))
    recipe = write_recipe(
        tmp / "awkward.yaml",
        {
            "name": "awkward",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(tmp / "awkward.json")}],
            "timeline": {"padding": {"mode": "donor", "target_words": 400}},
            "products": [{"type": "log"}, {"type": "conversations"}, {"type": "time_queries"}],
        },
    )
    done = gen_subprocess("run", recipe, "--output-dir", tmp / "out")
    assert done.returncode == 0, done.stderr
    return tmp / "out" / "awkward"


@pytest.fixture(scope="module")
def export_folder(run_folder, tmp_path_factory) -> Path:
    export = tmp_path_factory.mktemp("export") / "export"
    done = gen_subprocess("push", run_folder, "--repo-id", "me/quickstart", "--dry-run", "--export-dir", export)
    assert done.returncode == 0, done.stderr
    return export


def records_of(folder: Path) -> dict[str, list[dict]]:
    """Each config's records, as the run's JSON lines hold them (an export: the run it was made from)."""
    report = json.loads((folder / "run.json").read_text())
    return {name: read_jsonl(folder / info["path"]) for name, info in report["configs"].items()}


LINK = re.compile(r'href="([^"#]+)"')


def links(page: str) -> list[str]:
    return [html.unescape(found) for found in LINK.findall(page) if found.startswith("/")]


def shown(value: str) -> str:
    return html.escape(value, quote=True).replace("&#x27;", "&#39;").replace("&quot;", "&#34;")


def check_record_page(page: str, record: dict, number: int, where: str) -> None:
    """The page is record `number` and shows its fields' text."""
    assert f"· record {number:,}</p>" in page, where
    for name, value in record.items():
        if isinstance(value, str) and value[:1] not in "[{":
            # a parquet export holds timestamps as timestamps: shown with a space for the T
            assert shown(value) in page or shown(value.replace("T", " ")) in page, f"{where}: {name} = {value[:60]!r}"


def check_kind(page: str, config: str, record: dict, where: str) -> None:
    """The view made for the record's kind is about this record: its response, turn, pair or question."""
    if config == "log":
        index = record["response_index"]
        assert re.search(rf'<li class="response relevant[^"]*" data-response-index="{index}"', page), where
    elif config == "quality_turns":
        assert f'<tr id="turn-{record["response_index"]}" class="current"' in page, where
    elif config == "persona_sql":
        assert f"Pair {record['pair_index']} of {shown(record['episode_id'])}" in page, where
    elif config == "teabag":
        assert 'class="kind-page teabag"' in page and shown(record["question"]) in page, where


def check_page(client, url: str, page: str, records: dict[str, list[dict]]) -> tuple[str, int] | None:
    """The page shows what its address names; returns the config and number of the record it showed, if any."""
    parts = [unquote(part) for part in urlsplit(url).path.split("/")[1:]]
    if parts[0] == "records" and len(parts) == 3:
        config, number = parts[1], int(parts[2])
        check_record_page(page, records[config][number - 1], number, url)
        check_kind(page, config, records[config][number - 1], url)
        return config, number
    if parts[0] == "questions":
        config, wanted = parts[1], "/".join(parts[2:])
        rows = records[config]
        if wanted.startswith("~md5~"):
            number = next(n for n, r in enumerate(rows, 1) if md5(r["question_id"]) == wanted[5:])
        else:
            number = next(n for n, r in enumerate(rows, 1) if r["question_id"] == wanted)
        check_record_page(page, rows[number - 1], number, url)
        check_kind(page, config, rows[number - 1], url)
        return config, number
    elif parts[0] == "conversations":
        wanted = "/".join(parts[1:])
        log = records["log"]
        ids = {row["conversation_id"] for row in log}
        conversation = next(c for c in ids if (md5(c) == wanted[5:] if wanted.startswith("~md5~") else c == wanted))
        assert f"<h1>Conversation {shown(conversation)}</h1>" in page, url
        assert page.count('<li class="response') == sum(1 for row in log if row["conversation_id"] == conversation)
    return None


def md5(text: str) -> str:
    import hashlib

    return hashlib.md5(text.encode("utf-8")).hexdigest()


def crawl(
    folder: Path,
    records: dict[str, list[dict]],
    depth: int = 3,
    opened: set[tuple[str, int]] | None = None,
    verdicts: Path | None = None,
) -> dict[str, int]:
    """Every link from the overview to `depth` clicks, each page checked; returns how many of each kind, and adds
    to `opened` each record (config, number) a page showed."""
    from tests.view.asgi import viewer_client

    seen, kinds = {"/"}, {}
    queue = deque([("/", 0)])
    with viewer_client(folder, verdicts) as client:
        while queue and sum(kinds.values()) < MAX_PAGES:
            url, level = queue.popleft()
            status, page = client.get(url)
            assert status == 200, (url, status, re.findall(r'class="error">(.*?)<', page))
            kind = urlsplit(url).path.split("/")[1] or "overview"
            kinds[kind] = kinds.get(kind, 0) + 1
            record = check_page(client, url, page, records)
            if record is not None and opened is not None:
                opened.add(record)
            for found in links(page) if level < depth else ():
                if found not in seen and not found.startswith("/static/"):
                    seen.add(found)
                    queue.append((found, level + 1))
    return kinds


def test_every_link_of_the_quickstart_run_opens_what_it_names(run_folder):
    kinds = crawl(run_folder, records_of(run_folder))
    assert kinds.get("records", 0) > 50 and kinds.get("questions", 0) > 20 and kinds.get("conversations") == 2


def test_every_link_of_a_run_with_awkward_ids_opens_what_it_names(awkward_run):
    records = records_of(awkward_run)
    conversation_ids = {row["conversation_id"] for row in records["log"]}
    assert {f"locomo/{name}" for name in AWKWARD_IDS} == conversation_ids  # the ids reached the records
    kinds = crawl(awkward_run, records)
    assert kinds.get("conversations") == len(AWKWARD_IDS)


def test_every_link_of_a_parquet_export_opens_what_it_names(export_folder, run_folder):
    kinds = crawl(export_folder, records_of(run_folder))
    assert kinds.get("records", 0) > 50 and kinds.get("questions", 0) > 20


@pytest.fixture(scope="module", params=["quality_turns", "teabag", "persona_sql"])
def product_run(request, tmp_path_factory) -> Path:
    """A run of each product with a page of its own, its ids awkward where a source sets them: quality labels of
    a log whose conversation id is long and beyond ASCII; TeaBag (its question ids hold the episode id with "/",
    "%", "?", "#" and a space) and persona SQL, each with quality labels of the dialogues it wrote."""
    from tests.view.product_runs import labelled_run, quality_run

    tmp = tmp_path_factory.mktemp(request.param)
    if request.param == "quality_turns":
        return quality_run(tmp, sample_id=AWKWARD_IDS[2])
    return labelled_run(tmp, request.param, episode_id=AWKWARD_IDS[0] + " Zürich")


def test_every_link_of_a_run_of_each_product_opens_what_it_names(product_run):
    records = records_of(product_run)
    opened: set[tuple[str, int]] = set()
    crawl(product_run, records, opened=opened)
    every_record = {(config, number) for config, rows in records.items() for number in range(1, len(rows) + 1)}
    assert every_record - opened == set()  # every record of every config was reached by a link, and checked
    assert {"quality_turns", "quality_dialogues"} <= records.keys()


def test_every_link_of_a_judged_teabag_run_opens_what_it_names(teabag_folders):
    folder, verdicts = teabag_folders
    records = records_of(folder)
    opened: set[tuple[str, int]] = set()
    crawl(folder, records, opened=opened, verdicts=verdicts)
    assert {("teabag", 1), ("teabag", 2), ("teabag_summaries", 1)} <= opened


def test_the_first_record_is_number_1_and_there_is_no_record_0(run_folder):
    from tests.view.asgi import viewer_client

    log = read_jsonl(run_folder / "log" / "test.jsonl")
    with viewer_client(run_folder) as client:
        status, page = client.get("/records/log")
        first_link = re.search(r'<td class="n"><a href="([^"]+)">1</a>', page)
        assert first_link and first_link[1] == "/records/log/1"
        status, page = client.get("/records/log/1")
        assert status == 200
        check_record_page(page, log[0], 1, "/records/log/1")
        status, page = client.get(f"/records/log/{len(log)}")
        assert status == 200
        check_record_page(page, log[-1], len(log), "last")
        for missing in ("0", str(len(log) + 1), "18446744073709551617", "-1", "1.0", "one"):
            status, page = client.get(f"/records/log/{quote(missing)}")
            assert status == 404, missing
            assert f"log has records 1 to {len(log):,}" in page


# -- addresses nobody links to --------------------------------------------------------------------------------
def bad_addresses(records: dict[str, list[dict]]) -> list[tuple[str, int]]:
    """Addresses people and link checkers make, each with the status a user should get."""
    huge = str(2**64 + 1)
    return [
        (f"/records/log?page={huge}", 400),
        ("/records/log?page=0", 200),  # read as the first page
        ("/records/log?page=abc", 400),
        ("/records/log?size=7", 400),
        (f"/records/time_queries?sort=num_relevant&desc=1&page={huge}", 400),
        ("/records/time_queries?sort=no_such_field", 400),
        ("/records/time_queries?sort=relevant_response_indices", 400),  # a list: not sortable
        ("/records/time_queries?sort=num_relevant&desc=maybe", 200),
        ("/records/time_queries?f.num_relevant=many", 400),
        ("/records/time_queries?f.num_relevant=" + "9" * 40, 400),
        ("/records/log?f.is_padding=perhaps", 400),
        ("/records/log?f.nothing=1", 400),
        ("/records/log?q=%21%21%21", 400),
        (f"/rejects?reason=anything&page={huge}", 404),  # no reject has that reason
        ("/rejects?page=-5", 200),
        ("/records/nothing", 404),
        ("/questions/time_queries/no-such-question", 404),
        ("/questions/log/x", 404),
        ("/conversations/nobody", 404),
        ("/conversations/", 404),
        ("/no/such/page", 404),
        ("/static/..%2F..%2Fpyproject.toml", 404),
    ]


@pytest.fixture(scope="module")
def quickstart_client(run_folder):
    from tests.view.asgi import viewer_client

    with viewer_client(run_folder) as client:
        yield client


def one_sentence(page: str) -> str:
    [message] = re.findall(r'<p class="error">(.*?)</p>', page, re.S)
    assert "Traceback" not in page and message.count(". ") == 0, message
    return message


def test_each_bad_address_gets_a_4xx_page_with_one_sentence(quickstart_client, run_folder):
    for url, expected in bad_addresses(records_of(run_folder)):
        status, page = quickstart_client.get(url)
        assert status == expected, (url, status, page[-400:])
        if status >= 400:
            one_sentence(page)


def test_a_typed_filter_on_a_parquet_export_with_a_value_of_another_type_is_a_400(export_folder):
    from tests.view.asgi import viewer_client

    with viewer_client(export_folder) as client:
        for url in (
            "/records/time_queries?f.num_relevant=lots",
            "/records/time_queries?f.num_relevant=1e999",
            "/records/log?f.is_padding=2",
            "/records/log?f.response_index=-",
        ):
            status, page = client.get(url)
            assert status == 400, (url, status)
            assert "not" in one_sentence(page)
        status, page = client.get("/records/log?f.response_index=3")
        assert status == 200


def test_a_reason_filter_with_a_huge_page_is_a_400(stopped_folder_with_rejects):
    from tests.view.asgi import viewer_client

    rejects = read_jsonl(stopped_folder_with_rejects / "rejects.jsonl")
    reason = rejects[0]["reason"]
    with viewer_client(stopped_folder_with_rejects) as client:
        status, page = client.get("/rejects?" + urlencode({"reason": reason, "page": 2**70}))
        assert status == 400
        assert "there is no page" in one_sentence(page)
        status, page = client.get("/rejects?" + urlencode({"reason": reason}))
        assert status == 200 and page.count('class="raw-reply"') == min(50, sum(r["reason"] == reason for r in rejects))


@pytest.fixture(scope="module")
def stopped_folder_with_rejects(tmp_path_factory) -> Path:
    """A run stopped by its reject limit (a model that never answers JSON): a rejects file to page through."""
    from tests.fakes.openai_server import FakeOpenAI

    tmp = tmp_path_factory.mktemp("stopped")
    with FakeOpenAI(lambda request: "not JSON") as server:
        recipe = tcq_recipe(tmp / "tcq.yaml", server.base_url)
        done = gen_subprocess("run", recipe, "--output-dir", tmp / "out", env={"GEN_TEST_KEY": "sk-test"})
    assert done.returncode == 1, done.stderr
    return tmp / "out" / ".tcq.stopped"


def test_fuzzed_addresses_never_fail_inside_the_viewer(quickstart_client):
    """Random paths and query strings over the viewer's routes: 200 or a 4xx, never a 5xx."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    words = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=30)
    numbers = st.one_of(st.integers(-(2**70), 2**70).map(str), words)
    route = st.sampled_from(["/records/log", "/records/time_queries", "/records/nothing", "/rejects", "/"])
    params = st.dictionaries(
        st.sampled_from(["page", "size", "sort", "desc", "q", "f.speaker", "f.num_relevant", "f.is_padding", "f."]),
        st.one_of(numbers, st.sampled_from(["text", "num_relevant", "now", "session_index", "1", "50"])),
        max_size=4,
    )
    paths = st.one_of(
        st.tuples(route, params).map(lambda pair: pair[0] + "?" + urlencode(pair[1])),
        st.tuples(st.sampled_from(["/records/log/", "/questions/time_queries/", "/conversations/"]), numbers).map(
            lambda pair: pair[0] + quote(pair[1], safe="")
        ),
    )

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(paths)
    def answers(url: str) -> None:
        status, page = quickstart_client.get(url)
        assert status < 500, (url, page[-300:])

    answers()


ODD_TEXTS = ["", " ", "%", "%25", "#", "?", "..", ".", "/", "a/b", "Zürich 東京", "-1", "0", str(2**70), "1e999"]
ODD_TEXTS.append("(none)")  # the value a pick-list gives for a missing field


def odd_addresses(config: str, record: dict, columns: list[str]) -> list[str]:
    """Addresses nobody links to, for one config: odd record numbers, ids, pages, sorts and filters."""
    base = f"/records/{quote(config, safe='')}"
    found = [f"{base}/{quote(text, safe='')}" for text in ODD_TEXTS]
    found += [f"/questions/{quote(config, safe='')}/{quote(text, safe='')}" for text in ODD_TEXTS]
    found += [f"/conversations/{quote(text, safe='')}" for text in ODD_TEXTS]
    for page in ("-5", "0", str(2**64 + 1), str(-(2**70)), "1.5"):
        found.append(f"{base}?page={page}")
        for name in columns:
            found.append(f"{base}?" + urlencode({"sort": name, "desc": "1", "page": page}))
            found.append(f"{base}?" + urlencode({f"f.{name}": "x", "sort": name, "page": page}))
    for name in columns:
        found += [f"{base}?" + urlencode({f"f.{name}": text}) for text in ODD_TEXTS]
        found += [f"{base}?" + urlencode({f"f.{name}": text, "q": "Ann"}) for text in ODD_TEXTS[:4]]
    return found


def filter_text(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def test_odd_addresses_and_every_filter_of_each_product_run(product_run):
    check_odd_addresses(product_run, records_of(product_run))


def test_odd_addresses_and_every_filter_of_a_parquet_export(export_folder, run_folder):
    check_odd_addresses(export_folder, records_of(run_folder))  # typed columns: timestamps, integers, booleans


def check_odd_addresses(folder: Path, records: dict[str, list[dict]]) -> None:
    """For each config: odd ids, record numbers, pages, sorts and filter values answer 200 or a 4xx page with one
    sentence, never a 5xx; a filter on each field of every scalar type, given the first record's value, lists
    that record."""
    from tests.view.asgi import viewer_client

    with viewer_client(folder) as client:
        for config, rows in records.items():
            first = rows[0]
            for url in odd_addresses(config, first, list(first)):
                status, page = client.get(url)
                assert status < 500, (url, page[-300:])
                if status >= 400:
                    one_sentence(page)
            for name, value in first.items():
                if value is None or isinstance(value, list | dict) or (isinstance(value, str) and value[:1] in "[{"):
                    continue  # not a field a table filters on (lists, tables and objects are JSON)
                url = f"/records/{config}?" + urlencode({f"f.{name}": filter_text(value)})
                status, page = client.get(url)
                assert status == 200, (url, status, page[-300:])
                assert re.search(r'<td class="n"><a href="[^"]+">1</a>', page), (url, "record 1 is not listed")
