"""`gen push` through the real huggingface_hub client against a local fake Hub (tests/fakes/hub.py); no network."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from gen.export.card_header import split_card
from gen.export.hub_folder import build_export
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.recipe import load_recipe
from tests.conftest import REPO, run_cli, write_recipe
from tests.fakes.hub import READ_TOKEN, TOKEN, FakeHub

pytestmark = pytest.mark.usefixtures("no_network")  # the fake Hub is the only server


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """A quickstart run with the log and conversations only: enough for the push paths, and fast."""
    folder = tmp_path_factory.mktemp("small")
    recipe = yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text())
    recipe["sources"][0]["path"] = str(REPO / "gen" / "data" / "sample_locomo.json")
    recipe["products"] = [{"type": "log"}, {"type": "conversations"}]
    return run(load_recipe(write_recipe(folder / "quickstart.yaml", recipe)), RunOptions(output_dir=folder / "out"))


def configs_of(run_dir: Path) -> list[str]:
    return list(json.loads((run_dir / "run.json").read_text())["configs"])


def hub_calls(hub: FakeHub) -> list[str]:
    """The API calls the fake served (huggingface_hub's own agent-registry lookup aside)."""
    return [kind for _, path, kind, _ in hub.requests if not path.endswith("/api/agent-harnesses")]


def files_under(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_push_makes_one_private_commit_with_the_export_and_never_shows_the_token(quickstart, hub, capsys, tmp_path):
    export_dir = tmp_path / "export"
    code, out, err = run_cli(["push", quickstart, "--repo-id", "me/quickstart", "--export-dir", export_dir], capsys)
    assert code == 0, err
    repo = hub.repos["me/quickstart"]
    assert repo.private is True
    commits = hub.commits()
    assert len(commits) == 1
    exported = files_under(export_dir)
    # the folder keeps gen's marker (what gen wrote there); the marker is never published
    assert json.loads(exported.pop(".gen-files.json")) == {"written_by": "gen", "files": sorted(exported)}
    assert set(exported) == {"README.md", "recipe.yaml", "run.json"} | {
        f"data/{name}/test-00000-of-00001.parquet" for name in configs_of(quickstart)
    }
    assert commits[0].added == sorted(exported) and commits[0].deleted == []
    assert {k: v for k, v in repo.files().items() if k != ".gitattributes"} == exported
    assert f"{hub.url}/datasets/me/quickstart" in out and "(private)" in out
    # the token went only into the Authorization header
    assert hub_calls(hub) == ["whoami", "create", "info", "validate", "preupload", "commit"]
    assert all(auth == f"Bearer {TOKEN}" for _, path, _, auth in hub.requests if "agent-harnesses" not in path)
    assert not any(TOKEN.encode() in body for body in hub.bodies)
    assert TOKEN not in out + err
    for content in [*exported.values(), *files_under(quickstart).values(), *repo.files().values()]:
        assert TOKEN.encode() not in content
    header, _ = split_card(repo.files()["README.md"].decode())
    assert header["configs"][0]["data_files"][0]["path"] == "data/log/test-*"


def test_dry_run_prints_target_files_and_card_and_sends_nothing(small_run, hub, capsys, tmp_path):
    code, out, err = run_cli(["push", small_run, "--repo-id", "me/quickstart", "--dry-run"], capsys)
    assert code == 0, err
    assert hub_calls(hub) == [] and hub.repos == {}
    assert "nothing was sent" in out and f"{hub.url}/datasets/me/quickstart" in out
    assert "private when the repo is created" in out and "token       from HF_TOKEN (never shown)" in out
    for path in (
        "README.md",
        "recipe.yaml",
        "run.json",
        "data/log/test-00000-of-00001.parquet",
        "data/conversations/test-00000-of-00001.parquet",
    ):
        assert f"\n  {path} " in out
    card = out.split("----- README.md -----\n", 1)[1].split("\n----- end of README.md -----", 1)[0]
    expected = build_export(small_run, tmp_path / "same", repo_id="me/quickstart").card
    assert card == expected.rstrip("\n")
    assert TOKEN not in out + err


def test_dry_run_needs_no_repo_id_and_a_real_push_still_does(small_run, hub, capsys):
    # small_run's recipe has no export.hub section: the dry run stands in me/<folder name>, a push refuses
    code, out, err = run_cli(["push", small_run, "--dry-run"], capsys)
    assert code == 0, err
    assert f"me/{Path(small_run).name}" in err and f"{hub.url}/datasets/me/{Path(small_run).name}" in out
    assert hub_calls(hub) == [] and hub.repos == {}
    code, out, err = run_cli(["push", small_run], capsys)
    assert code == 2 and "--repo-id" in err and hub_calls(hub) == []


def test_dry_run_on_the_quickstart_shows_the_card_a_hub_reader_expects(quickstart, hub, capsys):
    code, out, err = run_cli(["push", quickstart, "--repo-id", "me/quickstart", "--dry-run"], capsys)
    assert code == 0, err
    header, body = split_card(out.split("----- README.md -----\n", 1)[1].split("\n----- end of README.md -----")[0])
    assert header["pretty_name"] == "quickstart"
    assert header["annotations_creators"] == ["machine-generated"]
    assert header["source_datasets"] == ["original"]
    assert header["task_categories"] == ["question-answering", "text-retrieval"]
    assert header["task_ids"] == ["closed-domain-qa", "utterance-retrieval"]
    assert [c["config_name"] for c in header["configs"] if c.get("default")] == ["time_queries"]
    assert [info["config_name"] for info in header["dataset_info"]] == configs_of(quickstart)
    for title in ("## Uses", "## Counting", "## Limitations"):
        assert f"\n{title}\n" in body
    first = json.loads((quickstart / "log" / "test.jsonl").read_text().splitlines()[0])
    shown = body.split("### `log`", 1)[1].split("```json\n", 1)[1].split("\n```", 1)[0]
    assert json.loads(shown) == first
    assert 'load_dataset("me/quickstart", "time_queries", split="test")' in body
    assert hub_calls(hub) == []


def test_missing_token_is_a_clear_error_before_any_request(small_run, hub, capsys, monkeypatch):
    monkeypatch.delenv("HF_TOKEN")
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2
    assert "no Hugging Face token found" in err and "HF_TOKEN" in err and "hf auth login" in err
    assert hub_calls(hub) == []


def test_a_refused_token_is_named_by_its_source_not_its_value(small_run, hub, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_wrongWrongWrong")
    code, out, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2
    assert "the Hub refused the token from HF_TOKEN" in err and "401" in err
    assert "hf_wrongWrongWrong" not in out + err
    assert hub_calls(hub) == ["whoami"] and hub.repos == {}


def test_a_read_only_token_is_refused(small_run, hub, capsys, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", READ_TOKEN)
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2 and "read-only" in err and READ_TOKEN not in err
    assert hub.repos == {}


def test_a_repo_owned_by_someone_else_is_refused(small_run, hub, capsys):
    hub.add_repo("someone/data", private=False)
    code, _, err = run_cli(["push", small_run, "--repo-id", "someone/data"], capsys)
    assert code == 2
    assert "someone/data belongs to 'someone'" in err and "for 'me' (organizations: lab)" in err
    assert "me/data" in err  # a suggestion in the user's own namespace
    assert hub.commits() == [] and hub_calls(hub) == ["whoami"]


def test_an_org_repo_is_fine(small_run, hub, capsys):
    code, _, err = run_cli(["push", small_run, "--repo-id", "lab/quickstart"], capsys)
    assert code == 0, err
    assert hub.repos["lab/quickstart"].private and len(hub.commits()) == 1


def test_the_commit_rate_limit_is_reported_and_nothing_is_committed(small_run, hub, capsys):
    hub.fail_next("commit", 429, {"Retry-After": "120"}, "You have exceeded our commit rate limit")
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2
    assert "rate limit" in err and "after 120 seconds" in err and "nothing was committed" in err
    assert hub.commits() == []
    assert set(hub.repos["me/quickstart"].files()) == {".gitattributes"}


def test_a_concurrent_commit_fails_the_push_instead_of_mixing_in(small_run, hub, capsys, monkeypatch):
    from huggingface_hub import HfApi

    real_info = HfApi.repo_info

    def info_then_someone_commits(self, repo_id, **kwargs):
        info = real_info(self, repo_id, **kwargs)
        hub.apply(hub.repos[repo_id], "main", "someone else", "", {"notes.md": b"hello"}, [], None)
        return info

    monkeypatch.setattr(HfApi, "repo_info", info_then_someone_commits)
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2 and "changed while pushing" in err
    assert [c.message for c in hub.commits()] == ["someone else"]


def test_a_second_push_replaces_the_data_files_and_keeps_metadata_added_on_the_hub(quickstart, hub, capsys):
    code, _, err = run_cli(["push", quickstart, "--repo-id", "me/quickstart", "--max-shard-size", "30kB"], capsys)
    assert code == 0, err
    repo = hub.repos["me/quickstart"]
    first = {path for path in repo.files() if path.startswith("data/")}
    assert len([path for path in first if path.startswith("data/log/")]) > 1
    # someone edits the card on the Hub: adds a tag and a field of their own
    header, body = split_card(repo.files()["README.md"].decode())
    header["tags"] = ["edited-on-the-hub", *header["tags"]]
    header["annotations_creators"] = ["machine-generated"]
    readme = ("---\n" + yaml.safe_dump(header, sort_keys=False) + "---\n" + body).encode()
    hub.apply(repo, "main", "edit card", "", {"README.md": readme}, [], None)

    code, _, err = run_cli(["push", quickstart, "--repo-id", "me/quickstart"], capsys)
    assert code == 0, err
    last = hub.commits()[-1]
    single = {f"data/{name}/test-00000-of-00001.parquet" for name in configs_of(quickstart)}
    assert set(last.deleted) == first - single
    assert {path for path in repo.files() if path.startswith("data/")} == single
    header, _ = split_card(repo.files()["README.md"].decode())
    assert header["tags"][0] == "edited-on-the-hub" and header["annotations_creators"] == ["machine-generated"]
    assert next(c["data_files"][0]["path"] for c in header["configs"]) == "data/log/test-*"


def test_an_existing_public_repo_needs_public(small_run, hub, capsys):
    hub.add_repo("me/quickstart", private=False)
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2 and "already exists and is public" in err and "--public" in err
    assert hub.commits() == []
    code, out, err = run_cli(["push", small_run, "--repo-id", "me/quickstart", "--public"], capsys)
    assert code == 0, err
    assert "(public)" in out and len(hub.commits()) == 1


def test_public_creates_a_public_repo(small_run, hub, capsys):
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/open", "--public"], capsys)
    assert code == 0, err
    assert hub.repos["me/open"].private is False


def test_create_pr_leaves_main_alone(small_run, hub, capsys):
    hub.add_repo("me/quickstart", private=True)
    code, out, err = run_cli(["push", small_run, "--repo-id", "me/quickstart", "--create-pr"], capsys)
    assert code == 0, err
    commit = hub.commits()[0]
    assert commit.pr == 1 and "pull request" in out and "/discussions/1" in out
    assert set(hub.repos["me/quickstart"].files()) == {".gitattributes"}
    assert "README.md" in hub.repos["me/quickstart"].prs[1]


def test_revision_commits_to_a_new_branch(small_run, hub, capsys):
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart", "--revision", "v2"], capsys)
    assert code == 0, err
    repo = hub.repos["me/quickstart"]
    assert [c.branch for c in hub.commits()] == ["v2"]
    assert "README.md" in repo.files("v2") and "README.md" not in repo.files("main")


def test_offline_mode_is_a_clear_error(small_run, hub, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    code, _, err = run_cli(["push", small_run, "--repo-id", "me/quickstart"], capsys)
    assert code == 2 and "HF_HUB_OFFLINE is set" in err and "--dry-run" in err
    assert hub_calls(hub) == []


def test_repo_id_is_required_without_a_recipe_default(small_run, hub, capsys):
    code, _, err = run_cli(["push", small_run], capsys)
    assert code == 2 and "--repo-id owner/name" in err
    code, _, err = run_cli(["push", small_run, "--repo-id", "not a repo"], capsys)
    assert code == 2 and "--repo-id" in err


def test_a_recipe_with_export_hub_pushes_at_the_end_of_gen_run(hub, capsys, tmp_path):
    recipe = yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text())
    recipe["sources"][0]["path"] = str(REPO / "gen" / "data" / "sample_locomo.json")
    recipe["products"] = [{"type": "log"}]
    recipe["export"] = {"hub": {"repo_id": "lab/auto", "card": {"tags": ["from-recipe"]}}}
    path = write_recipe(tmp_path / "auto.yaml", recipe)
    code, out, err = run_cli(["run", path, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    assert len(hub.commits()) == 1 and hub.repos["lab/auto"].private
    header, _ = split_card(hub.repos["lab/auto"].files()["README.md"].decode())
    assert header["tags"] == ["from-recipe"]
    assert TOKEN not in out + err
    # `gen push` on that run folder takes the repo from the recipe copy
    code, out, err = run_cli(["push", tmp_path / "out" / "quickstart", "--dry-run"], capsys)
    assert code == 0 and f"{hub.url}/datasets/lab/auto" in out


def test_a_failed_push_after_gen_run_keeps_the_run_and_says_how_to_retry(hub, capsys, tmp_path):
    recipe = yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text())
    recipe["sources"][0]["path"] = str(REPO / "gen" / "data" / "sample_locomo.json")
    recipe["products"] = [{"type": "log"}]
    recipe["export"] = {"hub": {"repo_id": "someone/else"}}
    code, _, err = run_cli(["run", write_recipe(tmp_path / "r.yaml", recipe), "--output-dir", tmp_path / "out"], capsys)
    assert code == 2
    assert "the run was written to" in err and "gen push" in err and "belongs to 'someone'" in err
    assert (tmp_path / "out" / "quickstart" / "log" / "test.jsonl").is_file()


# --- what push may replace, and what it may publish -------------------------------------------------------


def test_export_dir_never_empties_a_folder_gen_did_not_write(small_run, capsys, tmp_path):
    """A folder that looks like an export (README.md, data/, run.json) but also holds the user's notes and a .git
    is refused whole, byte for byte; an earlier export of gen's is replaced; one a user added a file to is refused
    naming the file."""
    mine = tmp_path / "mine"
    for relative, text in {
        "README.md": "card",
        "run.json": "{}",
        "data/x.txt": "x",
        "NOTES.txt": "n",
        ".git/HEAD": "h",
    }.items():
        (mine / relative).parent.mkdir(parents=True, exist_ok=True)
        (mine / relative).write_text(text)
    before = files_under(mine)
    code, _, err = run_cli(["push", small_run, "--dry-run", "--export-dir", mine], capsys)
    assert code == 2 and f"{mine}: a folder gen did not write is in the way" in err and "Traceback" not in err
    assert files_under(mine) == before
    ours = tmp_path / "ours"
    assert run_cli(["push", small_run, "--dry-run", "--export-dir", ours], capsys)[0] == 0
    assert run_cli(["push", small_run, "--dry-run", "--export-dir", ours], capsys)[0] == 0  # its own: replaced
    (ours / "NOTES.txt").write_text("mine now")
    code, _, err = run_cli(["push", small_run, "--dry-run", "--export-dir", ours], capsys)
    assert code == 2 and "holds files gen did not write (NOTES.txt)" in err
    assert (ours / "NOTES.txt").read_text() == "mine now"


@pytest.mark.parametrize("inside", ["log/test.jsonl", "README.md", "recipe.yaml", "rejects.jsonl"])
def test_push_never_publishes_a_file_from_outside_the_run_folder(small_run, inside, hub, capsys, tmp_path):
    """A symbolic link in the run folder (a data file, the card, the recipe, an extra file) pointing outside it
    is refused on every push path (a dry run, --export-dir, a real push), and nothing is sent."""
    run_dir = tmp_path / "run"
    shutil.copytree(small_run, run_dir)
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the Hub\n")
    (run_dir / inside).unlink(missing_ok=True)
    (run_dir / inside).symlink_to(secret)
    for options in (["--dry-run"], ["--dry-run", "--export-dir", tmp_path / "e"], []):
        code, out, err = run_cli(["push", run_dir, "--repo-id", "me/quickstart", *options], capsys)
        assert code == 2 and f"{run_dir / inside}: this is a symbolic link" in err, (options, err)
        assert "not for the Hub" not in out + err
    assert hub_calls(hub) == [] and not (tmp_path / "e").exists()


def test_push_never_publishes_a_file_run_json_points_outside_the_folder(small_run, hub, capsys, tmp_path):
    """A tampered run.json whose config path climbs out with ".." is refused on every push path."""
    run_dir = tmp_path / "run"
    shutil.copytree(small_run, run_dir)
    secret = tmp_path / "secret.jsonl"
    secret.write_text((run_dir / "log" / "test.jsonl").read_text())  # a valid file, just not the run's
    report = json.loads((run_dir / "run.json").read_text())
    report["configs"]["log"]["path"] = "../secret.jsonl"
    (run_dir / "run.json").write_text(json.dumps(report))
    for options in (["--dry-run"], ["--dry-run", "--export-dir", tmp_path / "e"], []):
        code, _, err = run_cli(["push", run_dir, "--repo-id", "me/quickstart", *options], capsys)
        assert code == 2 and "this file is outside the run folder" in err, (options, err)
    assert hub_calls(hub) == [] and not (tmp_path / "e").exists()
