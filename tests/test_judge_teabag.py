"""`gen judge` on what the teabag product really writes: `gen run` builds one Conversation Chronicles episode
against the fake server (the scripted careful model of tests/test_teabag_product.py), `gen push --dry-run --export-dir`
exports it, and both folders are judged with the same answers and give the same verdicts."""

from __future__ import annotations

import json

from tests.conftest import read_jsonl, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.test_teabag_product import Model, recipe_for

RIGHT = "I quit the bank a while ago; I am off to teach in Porto."
WRONG = "The car is fine, thanks, I drove it here today."


class ModelAndJudge(Model):
    """The teabag steps as the careful model writes them; the judge says Correct to RIGHT only."""

    def __call__(self, request):
        if "You grade a chat assistant" in (request.system or ""):
            return {"reason": "scripted", "verdict": "Correct" if RIGHT in request.last_user else "Incorrect"}
        return super().__call__(request)


def test_a_built_teabag_run_and_its_export_are_judged_alike(tmp_path, capsys):
    cache = tmp_path / "cache"
    with FakeOpenAI(ModelAndJudge()) as server:
        recipe_for(tmp_path, server.base_url)  # writes tmp_path/recipe.yaml: one cc episode, endpoint main
        code, _, err = run_cli(
            ["run", tmp_path / "recipe.yaml", "--output-dir", tmp_path / "out", "--cache-dir", cache], capsys
        )
        assert code == 0, err
        folder = tmp_path / "out" / "teabag-test"
        rows = read_jsonl(folder / "teabag" / "test.jsonl")
        asked = {row["asker"]: row["question_id"] for row in rows}
        assert sorted(asked) == ["Ann", "Bob"]
        answers = tmp_path / "answers.jsonl"  # Ann asks Bob about the bank; Bob asks Ann about the car
        answers.write_text(
            json.dumps({"question_id": asked["Ann"], "answer": RIGHT})
            + "\n"
            + json.dumps({"question_id": asked["Bob"], "answer": WRONG})
            + "\n"
        )
        built = server.count

        code, out, err = run_cli(["judge", folder, "--answers", answers, "--cache-dir", cache], capsys)
        assert code == 0, err
        assert server.count == built + 2  # the recipe's endpoint (json_schema, so no probe), one call per answer
        assert "cc              2       2        1    0.500" in out
        from_run = json.loads((tmp_path / "answers.verdicts.json").read_text())

        export = tmp_path / "export"
        code, _, err = run_cli(["push", folder, "--repo-id", "me/teabag", "--dry-run", "--export-dir", export], capsys)
        assert code == 0, err
        assert list((export / "data" / "teabag").glob("*.parquet"))
        code, _, err = run_cli(["judge", export, "--answers", answers, "--cache-dir", cache], capsys)
        assert code == 2 and "left out when the dataset was published" in err  # 127.0.0.1 is not published
        own = write_recipe(
            tmp_path / "judge.yaml",
            {
                "llm": {
                    "main": {
                        "model": "fake-model",
                        "base_url": server.base_url,
                        "api_key_env": None,
                        "max_retries": 1,
                        "structured_output": "json_schema",
                    }
                }
            },
        )
        output = tmp_path / "export.verdicts.json"
        code, out, err = run_cli(
            ["judge", export, "--answers", answers, "--recipe", own, "--output", output, "--cache-dir", cache], capsys
        )
        assert code == 0, err
        assert server.count == built + 2  # the same endpoint and prompts: every verdict from the cache
    from_export = json.loads(output.read_text())
    assert (
        from_export["overall"]
        == from_run["overall"]
        == {"questions": 2, "no_answer": 0, "not_judged": 0, "scored": 2, "correct": 1, "success_rate": 0.5}
    )
    verdicts = {item["question_id"]: item["verdict"] for item in from_export["items"]}
    assert verdicts == {asked["Ann"]: "Correct", asked["Bob"]: "Incorrect"}
