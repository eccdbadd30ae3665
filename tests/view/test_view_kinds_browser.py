"""The pages of every kind of record in a real headless Chromium, over the small runs of tests/view/product_runs.py,
each holding one 6,000-letter word: no page is wider than the window, and a records table's rows are one line
high. GEN_VIEW_SCREENSHOTS=FOLDER also writes each page kind's screenshot there (docs/images holds docs/view.md's).

Needs the view and browser extras and Debian's chromium and chromium-driver packages; skipped otherwise."""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import read_jsonl
from tests.view.test_view_browser import CHROMIUM, DRIVER, open_page, pytestmark  # noqa: F401
from tests.view.viewer import running_viewer, wait_indexed

WIDTH, HEIGHT = 1360, 1000


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def pages_of(folder: Path) -> list[tuple[str, str | None]]:
    """(address, screenshot name) of every page kind a run has: its configs' tables, first records, rejects."""
    found: list[tuple[str, str | None]] = [("/", None), ("/rejects", None)]
    for config in sorted(p.name for p in folder.iterdir() if (p / "test.jsonl").is_file()):
        found.append((f"/records/{config}", None))
        found.append((f"/records/{config}/1", None))
    return found


SHOTS = {
    "persona": {"/records/persona_sql/2": "view-persona-sql.png", "/records/persona_sql": "view-records.png"},
    "teabag": {"/records/teabag/2": "view-teabag.png"},
    "quality": {"/records/quality_turns/6": "view-quality.png", "/records/log/6": "view-log-response.png"},
}


def check_pages(browser, url: str, folder: Path, shots: dict[str, str], extra: list[str]) -> None:
    addresses = [address for address, _ in pages_of(folder)] + extra + list(shots)
    for address in dict.fromkeys(addresses):
        open_page(browser, url + address)
        wide = browser.execute_script("return document.documentElement.scrollWidth")
        window = browser.execute_script("return document.documentElement.clientWidth")
        assert wide <= window, f"{address} is {wide} px wide in a {window} px window"
        if address.startswith("/records/") and address.count("/") == 2:
            heights = browser.execute_script(
                "return [...document.querySelectorAll('#records tbody tr')].map(r => r.getBoundingClientRect().height)"
            )
            line = browser.execute_script(
                "return parseFloat(getComputedStyle(document.querySelector('#records tbody td')).lineHeight)"
            )
            assert heights and max(heights) < 2 * line, f"{address}: rows {heights} with lines of {line} px"
        target = os.environ.get("GEN_VIEW_SCREENSHOTS")
        if target and address in shots:
            Path(target).mkdir(parents=True, exist_ok=True)
            browser.set_window_size(WIDTH, 1400)
            assert browser.save_screenshot(str(Path(target) / shots[address]))
            browser.set_window_size(WIDTH, HEIGHT)


def test_persona_sql_pages_fit_the_window(browser, persona_folder):
    with running_viewer(persona_folder) as url:
        wait_indexed(url)
        check_pages(browser, url, persona_folder, SHOTS["persona"], [])


def test_teabag_pages_fit_the_window(browser, teabag_folders):
    folder, verdicts = teabag_folders
    with running_viewer(folder, "--verdicts", verdicts) as url:
        wait_indexed(url)
        check_pages(browser, url, folder, SHOTS["teabag"], ["/records/teabag/2"])


def test_quality_and_log_pages_fit_the_window(browser, quality_folder):
    conversation = read_jsonl(quality_folder / "log" / "test.jsonl")[0]["conversation_id"]
    with running_viewer(quality_folder) as url:
        wait_indexed(url)
        extra = [f"/conversations/{quote(conversation)}", "/records/quality_dialogues/1"]
        check_pages(browser, url, quality_folder, SHOTS["quality"], extra)
