"""What users of the openai client expect gen to honour: OPENAI_BASE_URL when a recipe names no base_url,
OPENAI_ORG_ID sent as the organization header, and max_completion_tokens (the cap newer OpenAI models take, given
through extra_params) counted in the plan like max_tokens."""

from __future__ import annotations

from gen.llm import Engine, RunSettings, Task
from gen.llm.calls.request import RetryPolicy
from gen.llm.config import EndpointConfig
from tests.fakes.openai_server import FakeOpenAI


def engine_for(endpoint: dict, cache_dir, plan_only: bool = False) -> Engine:
    settings = RunSettings(cache_dir=cache_dir, progress="off")
    return Engine({"main": endpoint}, settings, plan_only=plan_only, retry=RetryPolicy(backoff_base_s=0.01))


def test_openai_base_url_and_org_id_from_the_environment(api_key, cache_dir, monkeypatch):
    with FakeOpenAI(lambda request: "ok") as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_ORG_ID", "org-research")
        endpoint = {"model": "fake-model", "api_key_env": "GEN_TEST_API_KEY", "structured_output": "off"}
        assert EndpointConfig(**endpoint).base_url == server.base_url
        with engine_for(endpoint, cache_dir) as engine:
            (outcome,) = engine.run_step("s", [Task("t", "main", "hello")])
        (request,) = server.requests
    assert outcome.ok and outcome.text == "ok"
    assert request.headers.get("openai-organization") == "org-research"


def test_a_recipe_base_url_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert EndpointConfig(model="m", base_url="http://127.0.0.1:8000/v1").base_url == "http://127.0.0.1:8000/v1"
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert EndpointConfig(model="m").base_url == "https://api.openai.com/v1"


def test_max_completion_tokens_is_the_plans_upper_bound(cache_dir):
    endpoint = {
        "model": "fake-model",
        "base_url": "http://127.0.0.1:9/v1",
        "api_key_env": None,
        "structured_output": "off",
        "extra_params": {"max_completion_tokens": 120},
    }
    with engine_for(endpoint, cache_dir, plan_only=True) as engine:
        plan = engine.plan("s", [Task(f"t{k}", "main", "hello there") for k in range(3)])
    entry = plan.to_dict()["endpoints"]["main"]
    assert plan.projected_output_tokens == 3 * 120
    assert entry["output_basis"] == "max_completion_tokens (upper bound)"
