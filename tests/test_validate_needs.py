"""`gen validate` says what `gen run` will need before the long work: the API-key variables of endpoints that still
have calls to make, and first-round prompts that do not render from their templates."""

from __future__ import annotations

from tests.conftest import REPO, run_cli, write_recipe

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def llm_recipe(tmp_path, templates_dir=None, api_key_env="GEN_TEST_VALIDATE_KEY"):
    data = {
        "name": "needs",
        "seed": 13,
        "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-1"]}],
        "timeline": {"padding": {"mode": "donor", "after_minutes": 60, "target_words": 300}},
        "llm": {"main": {"model": "fake-model", "base_url": "http://127.0.0.1:9/v1", "api_key_env": api_key_env}},
        "products": [{"type": "time_content_questions", "per_conversation": 3}],
    }
    if templates_dir is not None:
        data["templates_dir"] = str(templates_dir)
    return write_recipe(tmp_path / "recipe.yaml", data)


def test_an_unset_api_key_variable_is_named_before_the_run(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("GEN_TEST_VALIDATE_KEY", raising=False)
    code, _, err = run_cli(["validate", llm_recipe(tmp_path), "--cache-dir", tmp_path / "cache"], capsys)
    assert code == 2
    assert "GEN_TEST_VALIDATE_KEY (endpoint main)" in err and "recipe.yaml" in err
    assert "Traceback" not in err and not (tmp_path / "cache").exists()


def test_with_the_key_set_validate_passes_and_counts_the_calls_to_make(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEN_TEST_VALIDATE_KEY", "sk-not-a-real-key")
    code, out, err = run_cli(["validate", llm_recipe(tmp_path), "--cache-dir", tmp_path / "cache"], capsys)
    assert code == 0, err
    assert "recipe needs is valid" in err
    assert "time_content_questions: 3 calls to make" in err  # per_conversation 3, one conversation, none cached
    assert "sk-not-a-real-key" not in out + err


def test_a_server_without_keys_needs_no_variable(tmp_path, capsys, monkeypatch):
    code, _, err = run_cli(
        ["validate", llm_recipe(tmp_path, api_key_env=None), "--cache-dir", tmp_path / "cache"], capsys
    )
    assert code == 0, err


def test_a_prompt_template_that_does_not_render_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEN_TEST_VALIDATE_KEY", "sk-not-a-real-key")
    prompts = tmp_path / "templates" / "prompts"
    prompts.mkdir(parents=True)
    (prompts / "time_content_question.j2").write_text("Ask about {{ no_such_variable.field }}\n", encoding="utf-8")
    code, _, err = run_cli(
        ["validate", llm_recipe(tmp_path, tmp_path / "templates"), "--cache-dir", tmp_path / "cache"], capsys
    )
    assert code == 2, err
    assert "time_content_question.j2" in err and "no_such_variable" in err
    assert "Traceback" not in err


def test_plan_preview_and_validate_create_no_cache(tmp_path, capsys, monkeypatch):
    """They only read the cache: without one, none is made (a fuzzed `gen plan --cache-dir .` left llm.sqlite)."""
    monkeypatch.setenv("GEN_TEST_VALIDATE_KEY", "sk-not-a-real-key")
    recipe = llm_recipe(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    for args in (["plan", recipe], ["preview", recipe, "--product", "time_content_questions"], ["validate", recipe]):
        code, _, err = run_cli([*args, "--cache-dir", cache], capsys)
        assert code == 0, err
        assert not any(cache.iterdir()), args
