"""structured_output against llama.cpp's real server: `auto` finds a mode that works without the user setting
one, and an explicit `json_schema` (which this server answers with HTTP 500) fails within a few requests,
quoting the server's own message."""

from __future__ import annotations

import json

import pytest

from tests.realmodel.test_products import endpoint, gen_run, recipe

pytestmark = pytest.mark.realmodel

# four items: 2 questions in each of the sample's 2 conversations
PRODUCT = {"type": "time_content_questions", "per_conversation": 2, "retries": 0, "max_reject_rate": 1.0}
SERVER_SAID = "response_format.type: Input should be 'text' or 'json_object' (got 'json_schema')"


def formats(proxy) -> list[str | None]:
    return [(exchange.body.get("response_format") or {}).get("type") for exchange in proxy.exchanges]


def test_auto_finds_a_mode_llama_cpp_accepts(real_model, tmp_path):
    llm = endpoint(real_model)
    del llm["structured_output"]  # the default: auto
    path = recipe(tmp_path / "auto.yaml", "auto", llm, PRODUCT)
    result = gen_run(path, tmp_path / "out", tmp_path / "cache")
    assert result.returncode == 0, result.stderr
    # the probe: json_schema refused (500), json_object with the schema accepted; then the 4 questions
    assert formats(real_model.proxy)[:2] == ["json_schema", "json_object"]
    assert [exchange.status for exchange in real_model.proxy.exchanges[:2]] == [500, 200]
    assert all(exchange.body["response_format"].get("schema") for exchange in real_model.proxy.exchanges[1:])
    report = json.loads((tmp_path / "out" / "auto" / "run.json").read_text())
    chosen = report["llm"]["endpoints"]["main"]["structured_output_chosen"]
    assert chosen == {
        "mode": "json_object_schema",
        "how": "probe",
        "refused": {"json_schema": f"HTTP 500: {SERVER_SAID}"},
    }
    assert "structured_output auto uses json_object_schema" in result.stderr


def test_explicit_json_schema_fails_within_a_few_requests_quoting_the_server(real_model, tmp_path):
    path = recipe(tmp_path / "schema.yaml", "schema", endpoint(real_model, structured_output="json_schema"), PRODUCT)
    result = gen_run(path, tmp_path / "out", tmp_path / "cache")
    assert result.returncode != 0
    assert SERVER_SAID in result.stderr
    assert "set structured_output: json_object (or auto" in result.stderr
    assert "Traceback" not in result.stderr
    # the 4 items go out together: the first 500 is retried, the same message again is a refusal, and three
    # refusals in a row stop the step; at most each item's first request and one retry reach the server
    assert 4 <= real_model.proxy.count <= 2 * 4
    assert set(formats(real_model.proxy)) == {"json_schema"}
