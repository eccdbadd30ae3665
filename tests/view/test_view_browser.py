"""`gen view` as a user meets it: the real command in its own process over a run made by `gen run` on the
quickstart recipe (and a run stopped by its reject limit), driven by a real headless Chromium. Every expected
value is computed here from the JSON lines with plain json, not by the viewer's code.

Needs the view and browser extras and Debian's `chromium` and `chromium-driver` packages; skipped, saying which
is missing, otherwise. GEN_VIEW_SCREENSHOT=PATH also writes the question view's screenshot to PATH (the
README's is docs/images/view-question.png)."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import REPO, extra_marks, gen_subprocess, read_jsonl, tcq_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.view.viewer import VIEW_MODULES, running_viewer, tree_state, wait_indexed

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [
    *extra_marks("view and browser", *VIEW_MODULES, "selenium"),
    pytest.mark.skipif(
        not (CHROMIUM and DRIVER),
        reason="needs Debian's chromium and chromium-driver packages (apt-get install chromium chromium-driver; "
        ".ci/run installs them)",
    ),
]
SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
NOT_JSON = "I am not JSON at all"


# -- fixtures ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stopped_folder(tmp_path_factory) -> Path:
    """A run stopped by its reject limit: a model that never answers JSON, so every question is rejected with
    its raw reply and the run is kept as .tcq.stopped."""
    tmp = tmp_path_factory.mktemp("stopped")
    with FakeOpenAI(lambda request: NOT_JSON) as server:
        recipe = tcq_recipe(tmp / "tcq.yaml", server.base_url)
        done = gen_subprocess(
            "run", recipe, "--output-dir", tmp / "out", env={"GEN_TEST_KEY": "sk-test", "GEN_CACHE_DIR": str(tmp)}
        )
    assert done.returncode == 1, done.stderr
    return tmp / "out" / ".tcq.stopped"


@pytest.fixture(scope="module")
def before(run_folder, stopped_folder) -> dict[str, dict]:
    """Both folders' files before the viewer opened them."""
    return {"run": tree_state(run_folder), "stopped": tree_state(stopped_folder)}


@pytest.fixture(scope="module")
def viewer(run_folder, stopped_folder, before):
    with running_viewer(run_folder, "--compare", stopped_folder) as url:
        wait_indexed(url)
        yield url


@pytest.fixture(scope="module")
def stopped_viewer(stopped_folder, before):
    with running_viewer(stopped_folder) as url:
        wait_indexed(url)
        yield url


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1360,1000"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def open_page(browser, url: str) -> None:
    """Load a page and fail on anything the browser's console reported as an error (a missing asset...)."""
    browser.get_log("browser")  # drop what earlier pages left
    browser.get(url)
    errors = [entry for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, f"{url}: {errors}"
    heading = browser.find_element("css selector", "h1").text
    main = browser.find_element("css selector", "main").text
    assert heading not in ("Not found", "Cannot show this"), f"{url}: {main}"


def css(browser, selector: str):
    return browser.find_elements("css selector", selector)


# -- every page ----------------------------------------------------------------------------------------------
def test_every_page_renders_without_console_errors(viewer, browser, run_folder):
    report = json.loads((run_folder / "run.json").read_text())
    configs = {name: read_jsonl(run_folder / info["path"]) for name, info in report["configs"].items()}
    urls = ["/", "/rejects", "/compare", "/records/log/1"]
    urls += [f"/records/{name}" for name in configs]
    urls += [
        f"/questions/{name}/{rows[0]['question_id']}" for name, rows in configs.items() if "question_id" in rows[0]
    ]
    urls += [f"/conversations/{quote(row['conversation_id'])}" for row in configs["conversations"]]
    for url in urls:
        open_page(browser, viewer + url)
    open_page(browser, viewer + "/")
    shown = {
        row.find_elements("css selector", "td")[0].text.split()[0]: row.find_elements("css selector", "td")[2].text
        for row in css(browser, "#configs tbody tr")
    }
    assert shown == {name: f"{len(rows):,}" for name, rows in configs.items()}
    assert css(browser, "figure.chart svg rect.bar")  # the plots drew bars
    assert browser.find_element("css selector", "link[rel=stylesheet]")  # served by the app, not a CDN
    assert all(
        src.startswith(viewer)
        for src in browser.execute_script(
            "return [...document.querySelectorAll('link[href],script[src],img[src]')].map(e => e.href || e.src)"
        )
    )


def test_a_filter_narrows_the_records_to_the_expected_rows(viewer, browser, run_folder):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    log = read_jsonl(run_folder / "log" / "test.jsonl")
    speaker = log[0]["speaker"]
    expected = [n for n, row in enumerate(log, start=1) if row["speaker"] == speaker and row["is_padding"] is False]
    assert 0 < len(expected) < len(log)

    open_page(browser, viewer + "/records/log")
    Select(browser.find_element("name", "f.speaker")).select_by_value(speaker)
    Select(browser.find_element("name", "f.is_padding")).select_by_value("false")
    browser.find_element("css selector", "form.filters button[type=submit]").click()
    WebDriverWait(browser, 30).until(lambda driver: "f.speaker=" in driver.current_url)
    assert int(browser.find_element("id", "match-count").get_attribute("data-count")) == len(expected)
    seen = []
    while True:
        seen += [int(cell.text.replace(",", "")) for cell in css(browser, "#records tbody td:first-child a")]
        following = css(browser, "nav.pager a.next")
        if not following:
            break
        open_page(browser, following[0].get_attribute("href"))
    assert seen == expected  # every matching record, once, in file order, across the pages


def test_a_text_search_finds_the_records_holding_the_text(viewer, browser, run_folder):
    log = read_jsonl(run_folder / "log" / "test.jsonl")
    word = "marathon"
    whole_word = re.compile(rf"(?<![^\W_]){word}(?![^\W_])")  # letters and digits make words; all else splits
    expected = sum(1 for row in log if any(whole_word.search(v.lower()) for v in row.values() if isinstance(v, str)))
    assert expected > 0
    open_page(browser, f"{viewer}/records/log?q={word.upper()}")
    assert int(browser.find_element("id", "match-count").get_attribute("data-count")) == expected


def test_sorting_orders_the_page_by_the_field(viewer, browser, run_folder):
    questions = read_jsonl(run_folder / "time_queries" / "test.jsonl")
    # descending num_relevant, ties in file order
    expected = [n for n, _ in sorted(enumerate(questions, start=1), key=lambda p: (-p[1]["num_relevant"], p[0]))]
    open_page(browser, f"{viewer}/records/time_queries?sort=num_relevant&desc=1&size=25")
    shown = [int(cell.text.replace(",", "")) for cell in css(browser, "#records tbody td:first-child a")]
    assert shown == expected[:25]


def question_samples(run_folder: Path, config: str) -> list[dict]:
    """The first question of each test, and the one with the fewest relevant responses."""
    rows = read_jsonl(run_folder / config / "test.jsonl")
    firsts = {row["test"]: row for row in reversed(rows)}
    return [*firsts.values(), min(rows, key=lambda row: row["num_relevant"])]


@pytest.mark.parametrize("config", ["time_queries", "ambiguous_time_queries"])
def test_a_question_page_highlights_exactly_its_relevant_responses(viewer, browser, run_folder, config):
    log = {
        (row["conversation_id"], row["response_index"]): row for row in read_jsonl(run_folder / "log" / "test.jsonl")
    }
    for question in question_samples(run_folder, config):
        open_page(browser, f"{viewer}/questions/{config}/{question['question_id']}")
        marked = css(browser, "li.response.relevant")
        indices = [int(item.get_attribute("data-response-index")) for item in marked]
        assert sorted(indices) == sorted(question["relevant_response_indices"]), question["question_id"]
        assert int(browser.find_element("id", "relevant-count").text) == len(question["relevant_response_indices"])
        for item, index in zip(marked, indices):  # the highlighted text is the log's response
            assert item.find_element("css selector", ".text").text == log[(question["conversation_id"], index)]["text"]
        others = css(browser, "li.response:not(.relevant)")
        assert len(marked) + len(others) == sum(1 for key in log if key[0] == question["conversation_id"])


def test_the_question_view_screenshot(viewer, browser, run_folder):
    """Writes the README's screenshot when GEN_VIEW_SCREENSHOT names a file (a question with a short window)."""
    target = os.environ.get("GEN_VIEW_SCREENSHOT")
    if not target:
        pytest.skip("GEN_VIEW_SCREENSHOT is not set (set it to docs/images/view-question.png to redraw the README's)")
    questions = read_jsonl(run_folder / "time_queries" / "test.jsonl")
    rows = read_jsonl(run_folder / "log" / "test.jsonl")
    log = {(row["conversation_id"], row["response_index"]): row for row in rows}

    def splits_a_session(q: dict) -> bool:
        """Its window starts a session and ends inside it: highlighted and plain responses near the top."""
        first, after = q["relevant_response_indices"][0], q["relevant_response_indices"][-1] + 1
        start, following = log[(q["conversation_id"], first)], log.get((q["conversation_id"], after))
        same_session = following is not None and following["session_index"] == start["session_index"]
        return start["turn_index"] == 0 and same_session

    question = next(q for q in questions if q["test"] == "dates" and splits_a_session(q))
    open_page(browser, f"{viewer}/questions/time_queries/{question['question_id']}")
    browser.set_window_size(1360, 1500)
    Path(target).parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(target))
    browser.set_window_size(1360, 1000)


def test_the_conversation_timeline_shows_sessions_padding_and_now(viewer, browser, run_folder):
    conversations = read_jsonl(run_folder / "conversations" / "test.jsonl")
    log = read_jsonl(run_folder / "log" / "test.jsonl")
    for conversation in conversations:
        open_page(browser, f"{viewer}/conversations/{quote(conversation['conversation_id'])}")
        rows = [row for row in log if row["conversation_id"] == conversation["conversation_id"]]
        sessions = sorted({row["session_index"] for row in rows})
        padding = sorted({row["session_index"] for row in rows if row["is_padding"]})
        assert len(css(browser, "svg.timeline rect.session")) == len(sessions)
        assert len(css(browser, "svg.timeline rect.session.padding")) == len(padding) == 1
        assert len(css(browser, "svg.timeline line.now")) == 1
        assert len(css(browser, "li.response")) == len(rows)
        captions = [row["image_caption"] for row in rows if row.get("image_caption")]
        assert [c.text for c in css(browser, "li.response .caption")] == [f"image: {c}" for c in captions]


def test_compare_counts_the_records_that_differ_by_id(viewer, browser, run_folder, stopped_folder):
    a = {(r["conversation_id"], r["response_index"]): r for r in read_jsonl(run_folder / "log" / "test.jsonl")}
    b = {(r["conversation_id"], r["response_index"]): r for r in read_jsonl(stopped_folder / "log" / "test.jsonl")}
    expected = [
        sum(1 for k in a if k not in b),
        sum(1 for k in b if k not in a),
        sum(1 for k in a if k in b and a[k] != b[k]),
        sum(1 for k in a if k in b and a[k] == b[k]),
    ]
    open_page(browser, viewer + "/compare")
    row = next(r for r in css(browser, "#compare-diff tbody tr") if r.find_element("css selector", "td").text == "log")
    cells = [td.text for td in row.find_elements("css selector", "td")]
    assert [int(text.replace(",", "")) for text in cells[2:6]] == expected


# -- a stopped run, its rejects --------------------------------------------------------------------------------
def test_a_stopped_run_opens(stopped_viewer, browser, stopped_folder):
    report = json.loads((stopped_folder / "run.json").read_text())
    open_page(browser, stopped_viewer + "/")
    assert browser.find_element("css selector", "header .kind").text == "stopped run"
    assert report["stopped"]["reason"] in browser.find_element("css selector", "p.note").text
    log = read_jsonl(stopped_folder / "log" / "test.jsonl")
    open_page(browser, stopped_viewer + "/records/log")
    assert int(browser.find_element("id", "match-count").get_attribute("data-count")) == len(log)


def test_the_rejects_page_shows_each_reject_with_its_raw_reply(stopped_viewer, browser, stopped_folder):
    rejects = read_jsonl(stopped_folder / "rejects.jsonl")
    assert rejects and all(r["raw_text"] == NOT_JSON for r in rejects)
    by_reason = Counter(r["reason"] for r in rejects)
    open_page(browser, stopped_viewer + "/rejects")
    assert browser.find_element("id", "reject-count").text == str(len(rejects))
    groups = {
        group.find_element("css selector", "h2").text.rsplit(" (", 1)[0]: group
        for group in css(browser, "section.reject-group")
    }
    assert set(groups) == set(by_reason)
    for reason, group in groups.items():
        replies = [pre.text for pre in group.find_elements("css selector", "pre.raw-reply")]
        assert replies == [NOT_JSON] * min(by_reason[reason], 5)


# -- last: nothing was written --------------------------------------------------------------------------------
def test_the_viewer_wrote_nothing_into_the_folders(viewer, stopped_viewer, run_folder, stopped_folder, before):
    assert tree_state(run_folder) == before["run"]
    assert tree_state(stopped_folder) == before["stopped"]
