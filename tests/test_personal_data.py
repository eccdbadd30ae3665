"""Care with personal data: the recipe's `redact:` step (emails, phone numbers, links, listed names replaced before
anything is built, counted in run.json and the card), the card's section on personal information, and `gen push`
asking for --personal-data-ok before it uploads a run made from people's own logs. Every expected text below was
worked out by hand from the rules in gen/redaction.py's docstring."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from gen.recipe import load_recipe
from gen.redaction import Redactor, RedactSpec
from tests.conftest import read_jsonl, run_cli, write_recipe
from tests.fakes.hub import FakeHub

pytestmark = pytest.mark.usefixtures("no_network")  # the fake Hub is the only server

NAMES = ["Ann", "Zoë", "Jean Luc"]


def redacted(text: str, **settings) -> tuple[str, dict[str, int]]:
    counts: Counter[str] = Counter()
    return Redactor(RedactSpec(**settings)).text(text, counts), dict(counts)


@pytest.mark.parametrize(
    ("text", "expected", "counts"),
    [
        # emails: plus tags, subdomains, inside brackets and punctuation, Unicode on both sides of the @
        (
            "mail ann.lee+tag@example.co.uk, or (bob@mail.example.org).",
            "mail [EMAIL], or ([EMAIL]).",
            {"email": 2},
        ),
        (
            "José: josé.garcía@correo.es; 用户@例子.广告 and <x_y@sub-d.example.io>",
            "José: [EMAIL]; [EMAIL] and <[EMAIL]>",
            {"email": 3},
        ),
        ("an @ alone, a@b and me@host are not addresses", "an @ alone, a@b and me@host are not addresses", {}),
        # links: the sentence's full stop and an unopened bracket stay out, a link's own parentheses stay in
        (
            "see https://en.wikipedia.org/wiki/Foo_(bar). and (https://example.com/a?b=c&d=e) ok",
            "see [URL]. and ([URL]) ok",
            {"url": 2},
        ),
        (
            "go to www.example.com/path, then example.org! not file.txt, end.So, ASP.NET or Node.js",
            "go to [URL], then [URL]! not file.txt, end.So, ASP.NET or Node.js",
            {"url": 2},
        ),
        ("https://例子.com/路径。下一句", "[URL]。下一句", {"url": 1}),
        # overlaps: the match that starts first wins, so an address inside a link is one link
        ("mailto:ann@example.com and https://x.com/u/ann@y.com", "mailto:[EMAIL] and [URL]", {"email": 1, "url": 1}),
        # phone numbers: international anywhere, national ones of the region, full-width digits
        (
            "Call +44 20 7946 0958, or 020 7946 0958; US: +1 (415) 555-0132.",
            "Call [PHONE], or [PHONE]; US: [PHONE].",
            {"phone": 3},
        ),
        ("＋４４ ２０ ７９４６ ０９５８ was it", "[PHONE] was it", {"phone": 1}),
        ("tel:+33 1 42 68 53 00!", "tel:[PHONE]!", {"phone": 1}),
        # numbers that are not phone numbers stay
        (
            "Born 1987, met 2023-05-08 at 13:56, paid 1,234.56 for v3.11.4",
            "Born 1987, met 2023-05-08 at 13:56, paid 1,234.56 for v3.11.4",
            {},
        ),
        # names: whole words only, as listed (case kept), in either Unicode form, spaces inside a name flexible
        (
            "Ann, Ann's, Annabel, Joanna, ANN, Zoë, Zoe\u0308, Zoey, Jean  Luc, Jean-Luc",
            "[NAME], [NAME]'s, Annabel, Joanna, ANN, [NAME], [NAME], Zoey, [NAME], Jean-Luc",
            {"name": 5},
        ),
    ],
)
def test_each_kind_is_replaced_in_the_shapes_people_write_it(text, expected, counts):
    assert redacted(text, phone_region="GB", names=NAMES) == (expected, counts)


def test_without_a_region_only_numbers_with_their_country_code_are_phone_numbers():
    assert redacted("(415) 555-0132 or +1 415 555 0132")[0] == "(415) 555-0132 or [PHONE]"
    assert redacted("(415) 555-0132 or +1 415 555 0132", phone_region="us")[0] == "[PHONE] or [PHONE]"


def test_ignore_case_matches_names_in_any_case_but_still_as_whole_words():
    text = "ANN and ann but not annex, nor zoëy; ZOË yes"
    assert redacted(text, names=NAMES, ignore_case=True, emails=False, phones=False, urls=False) == (
        "[NAME] and [NAME] but not annex, nor zoëy; [NAME] yes",
        {"name": 3},
    )


def test_placeholders_are_configurable():
    # (a placeholder may not hold what the rules replace: the recipe is published with its placeholders but
    # without its names, so "<email of Ann>" would publish Ann; see the test below)
    text, counts = redacted(
        "Ann wrote to ann@x.org", names=["Ann"], placeholders={"name": "someone", "email": "<an email>"}
    )
    assert (text, counts) == ("someone wrote to <an email>", {"name": 1, "email": 1})


# --- a run -----------------------------------------------------------------------------------------------------


def message(conversation, speaker, text, time):
    return {"conversation": conversation, "speaker": speaker, "text": text, "time": time}


LINES = [
    message("c1", "Ann", "Morning! Mail me at ann.lee@example.com or call +44 20 7946 0958.", "2023-05-08 09:00"),
    message("c1", "Bob", "Sure Ann, see https://example.org/x?y=1 and Annabel says hi.", "2023-05-08 09:01"),
    message("c1", "Ann", "Bob, ring 020 7946 0958 after lunch.", "2023-05-08 13:56"),
    message("c1", "Bob", "Welcome back.", "2023-05-08 13:58"),
    message("c2", "Cy", "Nothing private here.", "2023-05-09 08:00"),
    message("c2", "Di", "Agreed, Cy.", "2023-05-09 08:01"),
]


def own_logs_recipe(tmp_path: Path, lines=LINES, redact=None, source=None, **extra) -> Path:
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), encoding="utf-8")
    recipe = {
        "name": "mine",
        "sources": [{"format": "chat_logs", "path": str(log), **(source or {})}],
        "timeline": {"padding": {"mode": "none"}},
        "products": [{"type": "log"}, {"type": "conversations"}, {"type": "time_queries"}],
        **extra,
    }
    if redact is not None:
        recipe["redact"] = redact
    return write_recipe(tmp_path / "mine.yaml", recipe)


def test_a_run_redacts_before_building_and_counts_in_run_json_and_the_card(tmp_path, capsys):
    recipe = own_logs_recipe(tmp_path, redact={"phone_region": "GB", "names": ["Ann", "Bob"]})
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err  # time_queries' validators passed on the redacted conversations
    run_dir = tmp_path / "out" / "mine"
    log = [(r["speaker"], r["text"]) for r in read_jsonl(run_dir / "log" / "test.jsonl")]
    assert log == [
        ("[NAME] 1", "Morning! Mail me at [EMAIL] or call [PHONE]."),
        ("[NAME] 2", "Sure [NAME], see [URL] and Annabel says hi."),
        ("[NAME] 1", "[NAME], ring [PHONE] after lunch."),
        ("[NAME] 2", "Welcome back."),
        ("Cy", "Nothing private here."),
        ("Di", "Agreed, Cy."),
    ]
    report = json.loads((run_dir / "run.json").read_text())
    redaction = report["redaction"]
    # names: the two speakers of c1 (once each) and "Ann", "Bob" in the texts
    assert redaction["replaced"] == {"email": 1, "phone": 2, "url": 1, "name": 4}
    assert (redaction["conversations_read"], redaction["conversations_changed"]) == (2, 1)
    assert redaction["names"] == 2 and redaction["phone_region"] == "GB"
    assert report["sources"][0]["personal"] is True
    everything = "\n".join(p.read_text(encoding="utf-8") for p in run_dir.rglob("*.jsonl"))
    for secret in ("ann.lee@example.com", "7946", "example.org", '"Ann"', '"Bob"', "Sure Ann"):
        assert secret not in everything
    card = (run_dir / "README.md").read_text(encoding="utf-8")
    section = card[card.index("## Personal and sensitive information") : card.index("## Limitations")]
    assert "`log.jsonl` (`chat_logs` reader) holds" in section
    for row in ("| email addresses | `[EMAIL]` | 1 |", "| phone numbers | `[PHONE]` | 2 |", "| links | `[URL]` | 1 |"):
        assert row in section
    assert "| names from the recipe's list | `[NAME]` | 4 |" in section
    assert "1 of the 2 conversations read" in section and "region GB" in section
    assert "refuses to upload this run unless it is given `--personal-data-ok`" in section
    # the card's recipe (and the folder's, once pushed) does not list the names the redaction hides
    recipe_block = card[card.index("```yaml") :]
    assert "redact.names is withheld: it listed 2 name(s)" in recipe_block
    assert "- Ann" not in recipe_block and "- Bob" not in recipe_block


def test_without_redact_the_card_says_nothing_was_replaced_and_what_was_not_checked(tmp_path, capsys):
    code, _, err = run_cli(["run", own_logs_recipe(tmp_path), "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    run_dir = tmp_path / "out" / "mine"
    assert "redaction" not in json.loads((run_dir / "run.json").read_text())
    assert "Mail me at ann.lee@example.com" in (run_dir / "log" / "test.jsonl").read_text()
    card = (run_dir / "README.md").read_text(encoding="utf-8")
    assert "**What gen replaced.** Nothing: the recipe has no `redact` step" in card
    assert "gen does not look for postal addresses" in card


def test_a_conversation_id_holding_an_address_is_kept_and_warned_about(tmp_path, capsys):
    lines = [
        message("ann@example.com", "A", "hi", "2023-05-08 09:00"),
        message("ann@example.com", "B", "yo", "2023-05-08 09:01"),
    ]
    code, _, err = run_cli(["run", own_logs_recipe(tmp_path, lines, redact={}), "--output-dir", tmp_path / "o"], capsys)
    assert code == 0, err
    assert (
        "warning:" in err and "conversation id 'chat_logs/ann@example.com' holds what redaction replaces (email)" in err
    )
    assert read_jsonl(tmp_path / "o" / "mine" / "conversations" / "test.jsonl")[0]["conversation_id"] == (
        "chat_logs/ann@example.com"
    )


@pytest.mark.parametrize(
    ("redact", "said"),
    [
        ({"phone_region": "XX"}, "redact.phone_region"),
        ({"emails": False, "phones": False, "urls": False}, "nothing to replace"),
        ({"names": ["Ann", " "]}, "name 2 is blank"),
        ({"names": [" Ann"]}, "has spaces around it"),
        ({"phones": False, "phone_region": "GB"}, "phone_region only applies when phones is true"),
        ({"placeholders": {"email": ""}}, "redact.placeholders.email"),
        ({"emails": "yes please"}, "redact.emails"),
        ({"names": "Ann"}, "redact.names"),
        ({"nmaes": ["Ann"]}, "names"),  # an unknown key, with the nearest valid one
    ],
)
def test_a_bad_redact_section_is_one_error_naming_the_field(tmp_path, capsys, redact, said):
    code, _, err = run_cli(["validate", own_logs_recipe(tmp_path, redact=redact)], capsys)
    assert code == 2 and said in err and "mine.yaml" in err and "Traceback" not in err


def test_the_fingerprint_follows_the_redaction_and_stays_put_without_it(tmp_path):
    def fingerprint(**extra) -> str:
        folder = tmp_path / str(len(list(tmp_path.iterdir())))
        folder.mkdir()
        return load_recipe(own_logs_recipe(folder, **extra)).fingerprint

    plain = fingerprint()
    variants = [
        fingerprint(redact={}),
        fingerprint(redact={"names": ["Ann"]}),
        fingerprint(redact={"names": ["Bob"]}),
        fingerprint(redact={"names": ["Ann"], "ignore_case": True}),
        fingerprint(redact={"placeholders": {"url": "<link>"}}),
        fingerprint(redact={"phone_region": "GB"}),
    ]
    assert len({plain, *variants}) == 7
    assert fingerprint(source={"personal": False}) == plain  # who is in the data changes none of it
    # a recipe without `redact:` has the fingerprint it had before the step existed (computed by that gen)
    quickstart = load_recipe(Path(__file__).parent.parent / "recipes" / "quickstart.yaml")
    assert quickstart.fingerprint == "fa71a16704feb3d15f2296373c9a2a54a74b11d614356e5c1701c91bb9eba70f"


# --- gen push ----------------------------------------------------------------------------------------------------


def own_logs_run(tmp_path: Path, capsys, **recipe) -> Path:
    code, _, err = run_cli(["run", own_logs_recipe(tmp_path, **recipe), "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    return tmp_path / "out" / "mine"


def test_push_of_own_logs_is_refused_without_the_flag_before_anything_is_sent(tmp_path, hub: FakeHub, capsys):
    run_dir = own_logs_run(tmp_path, capsys)
    code, _, err = run_cli(["push", run_dir, "--repo-id", "me/mine"], capsys)
    assert code == 2 and "Traceback" not in err
    assert "made from people's own conversations (log.jsonl (chat_logs))" in err
    assert "--personal-data-ok" in err and "run.json: sources" in err
    assert hub.requests == [] and hub.repos == {}


def test_push_with_the_flag_uploads_and_the_card_records_it(tmp_path, hub: FakeHub, capsys):
    run_dir = own_logs_run(tmp_path, capsys, redact={"names": ["Ann", "Bob"], "phone_region": "GB"})
    code, _, err = run_cli(["push", run_dir, "--repo-id", "me/mine", "--personal-data-ok"], capsys)
    assert code == 0, err
    files = hub.repos["me/mine"].files()
    card = files["README.md"].decode()
    assert "The publisher confirmed with `gen push --personal-data-ok`" in card
    assert "| names from the recipe's list | `[NAME]` | 4 |" in card
    # no listed name, address or number is in anything uploaded: texts, and the strings of every parquet file
    texts = [content.decode() for path, content in files.items() if not path.endswith(".parquet")]
    for path, content in files.items():
        if path.endswith(".parquet"):
            table = pq.read_table(pa.BufferReader(content))
            texts.append(json.dumps(table.to_pylist(), ensure_ascii=False, default=str))
    uploaded = "\n".join(texts)
    assert "[NAME] 1" in uploaded  # the parquet was read
    for secret in ('"Ann"', '"Bob"', "- Ann", "- Bob", "Sure Ann", "ann.lee@example.com", "7946 0958", "example.org/x"):
        assert secret not in uploaded


def test_a_dry_run_needs_no_flag_and_says_a_push_would(tmp_path, hub: FakeHub, capsys):
    run_dir = own_logs_run(tmp_path, capsys)
    code, out, err = run_cli(["push", run_dir, "--repo-id", "me/mine", "--dry-run"], capsys)
    assert code == 0, err
    assert "own logs    made from people's own conversations: log.jsonl (chat_logs); a real push is refused" in out
    assert hub.requests == []


def test_a_source_marked_not_personal_pushes_without_the_flag(tmp_path, hub: FakeHub, capsys):
    run_dir = own_logs_run(tmp_path, capsys, source={"personal": False})
    code, _, err = run_cli(["push", run_dir, "--repo-id", "me/mine"], capsys)
    assert code == 0, err
    card = hub.repos["me/mine"].files()["README.md"].decode()
    assert "Made from people's own conversations" not in card
    assert "The sources are not people's own logs: a source gen has no facts about." in card


def test_a_run_json_without_the_personal_mark_is_judged_by_its_format(tmp_path, hub: FakeHub, capsys):
    """A run folder written before gen recorded `personal`: a chat_logs source still counts as own logs."""
    run_dir = own_logs_run(tmp_path, capsys)
    report = json.loads((run_dir / "run.json").read_text())
    del report["sources"][0]["personal"]
    (run_dir / "run.json").write_text(json.dumps(report))
    code, _, err = run_cli(["push", run_dir, "--repo-id", "me/mine"], capsys)
    assert code == 2 and "--personal-data-ok" in err and hub.repos == {}


def test_export_hub_in_the_recipe_needs_personal_data_ok_there_too(tmp_path, hub: FakeHub, capsys):
    recipe = own_logs_recipe(tmp_path, export={"hub": {"repo_id": "me/auto"}})
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 2 and "the run was written to" in err and "personal_data_ok: true" in err
    assert hub.repos == {} and (tmp_path / "out" / "mine" / "log" / "test.jsonl").is_file()
    recipe = own_logs_recipe(tmp_path, export={"hub": {"repo_id": "me/auto", "personal_data_ok": True}})
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    assert "The publisher confirmed" in hub.repos["me/auto"].files()["README.md"].decode()


def test_a_link_ending_in_a_long_run_of_brackets_is_cut_in_one_pass():
    """Each bracket is counted once: a link followed by 200,000 closing brackets (none opened) stays fast."""
    text = "see https://x.com/a" + ")" * 200_000
    assert redacted(text) == ("see [URL]" + ")" * 200_000, {"url": 1})


@pytest.mark.parametrize(
    ("placeholders", "names", "said"),
    [
        ({"name": "Ann"}, ["Ann"], "placeholders.name: 'Ann' holds 'Ann'"),  # the name would stay in the text
        ({"name": "ann"}, ["Ann"], None),  # names match in their case unless ignore_case
        ({"email": "me@example.org"}, [], "placeholders.email: 'me@example.org' holds 'me@example.org'"),
        ({"url": "see www.example.org"}, [], "placeholders.url: 'see www.example.org' holds 'www.example.org'"),
    ],
)
def test_a_placeholder_the_redaction_would_replace_is_refused(placeholders, names, said):
    from pydantic import ValidationError

    from gen.redaction import RedactSpec

    if said is None:
        RedactSpec(names=names, placeholders=placeholders)
        return
    with pytest.raises(ValidationError, match=re.escape(said)):
        RedactSpec(names=names, placeholders=placeholders)
