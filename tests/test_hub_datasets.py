"""The commands that read a finished dataset take a Hub dataset id too: pushed to the fake Hub with `gen push`,
then read back by id (and revision) by `gen baseline`, `gen eval` and `gen export`, with the same results as from
the local run folder; an unknown id or revision is one error."""

from __future__ import annotations

import json

import pytest

from tests.conftest import run_cli

pytestmark = pytest.mark.usefixtures("no_network")  # the fake Hub is the only server


def test_eval_baseline_and_export_read_a_pushed_dataset_by_its_id(quickstart, hub, capsys, tmp_path):
    code, _, err = run_cli(["push", quickstart, "--repo-id", "me/quickstart"], capsys)
    assert code == 0, err
    head = hub.repos["me/quickstart"].heads["main"]

    local, remote = tmp_path / "local.jsonl", tmp_path / "remote.jsonl"
    assert run_cli(["baseline", "recent", quickstart, "--output", local, "--k", "5"], capsys)[0] == 0
    code, _, err = run_cli(["baseline", "recent", "me/quickstart", "--output", remote, "--k", "5"], capsys)
    assert code == 0, err
    assert sorted(remote.read_text().splitlines()) == sorted(local.read_text().splitlines())
    assert any(path.startswith("/datasets/me/quickstart/resolve/") for _, path, _, _ in hub.requests)

    scores = {}
    for name, dataset, more in (("local", quickstart, []), ("hub", "me/quickstart", ["--revision", head])):
        code, _, err = run_cli(
            ["eval", dataset, *more, "--predictions", local, "--json", tmp_path / f"{name}.json"], capsys
        )
        assert code == 0, err
        scores[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert scores["hub"]["configs"] == scores["local"]["configs"]

    for name, dataset in (("local", quickstart), ("hub", "me/quickstart")):
        code, _, err = run_cli(["export", dataset, "--format", "locomo", "--output", tmp_path / f"x-{name}"], capsys)
        assert code == 0, err
    exported = sorted(p.name for p in (tmp_path / "x-hub").iterdir() if p.name != "gen-export.json")
    assert exported == sorted(p.name for p in (tmp_path / "x-local").iterdir() if p.name != "gen-export.json")
    assert exported  # the questions, one file per config
    for file in exported:
        assert (tmp_path / "x-hub" / file).read_bytes() == (tmp_path / "x-local" / file).read_bytes()


def test_an_unknown_dataset_id_or_revision_is_one_error(hub, capsys, tmp_path):
    hub.add_repo("me/other", files={"README.md": b"# other\n"})
    code, _, err = run_cli(["eval", "me/nothing", "--predictions", tmp_path / "p.jsonl"], capsys)
    assert code == 2 and "me/nothing: no such local folder, and no such dataset on the Hub" in err
    code, _, err = run_cli(["eval", "me/other", "--revision", "v9", "--predictions", tmp_path / "p.jsonl"], capsys)
    assert code == 2 and "me/other@v9: --revision: the Hub has no such revision of this dataset" in err
    code, _, err = run_cli(["eval", tmp_path, "--revision", "v9", "--predictions", tmp_path / "p.jsonl"], capsys)
    assert code == 2 and "--revision is for a dataset on the Hub" in err
    assert "Traceback" not in err
