"""A batch's life as the Batch API documents it, against the fake server's /v1/files and /v1/batches: when it is
first polled, error lines whose code is request_timeout, a batch (or result file) the endpoint no longer knows,
the files deleted once collected (or kept), and `gen batches forget`."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import pytest

from gen.errors import Stopped
from gen.llm.batch import rounds as batch_module
from gen.llm.batch.commands import known_batches
from tests.conftest import run_cli
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.llm.test_batch import batched, run, summarize, tasks

OTHER_KEY = "sk-gen-test-OTHER-0d9e8f7a6b5c"


def good_tasks():
    """Four tasks whose first replies all parse: one round, one batch."""
    return tasks(5)[:2] + tasks(5)[3:]


def statuses(cache_dir):
    return [(b.id, b.status, b.requests, b.collected) for b in known_batches(cache_dir)]


def files_of(server, batch_id):
    batch = server.batch_api.batches[batch_id]
    return [batch[name] for name in ("input_file_id", "output_file_id", "error_file_id") if batch[name]]


@pytest.fixture
def waits(monkeypatch):
    """Every wait between polls, as (seconds, retrieves the server had answered by then); no real waiting."""
    seen: list[tuple[float, int]] = []
    server_box: list[FakeOpenAI] = []

    async def counted(seconds: float) -> None:
        seen.append((seconds, server_box[0].batch_api.retrieves))
        await asyncio.sleep(0)

    monkeypatch.setattr(batch_module, "_sleep", counted)
    return seen, server_box


def test_a_new_batch_is_first_polled_after_batch_poll_s_then_the_wait_doubles(api_key, tmp_path, waits):
    seen, server_box = waits
    with FakeOpenAI(summarize) as server:
        server_box.append(server)
        server.batch_api.polls = 2  # in progress for two polls, ended at the third
        outcomes, _, _ = run(server, tmp_path / "c", "batch", items=good_tasks(), batch_poll_s=0.5)
        assert server.batch_api.retrieves == 3
    assert all(o.ok for o in outcomes)
    assert seen == [(0.5, 0), (1.0, 1), (2.0, 2)]  # the first wait comes before any poll


def test_a_batch_sent_by_an_earlier_run_is_polled_at_once(api_key, tmp_path, waits):
    seen, server_box = waits
    with FakeOpenAI(summarize) as server:
        server_box.append(server)
        server.batch_api.retrieve_status = 401
        with pytest.raises(Stopped, match="could not poll batch batch_fake_1: HTTP 401"):
            run(server, tmp_path / "c", "batch", items=good_tasks(), batch_poll_s=0.5)
        assert seen == [(0.5, 0)] and server.batch_api.retrieves == 1
        seen.clear()
        server.batch_api.retrieve_status = None
        outcomes, _, _ = run(server, tmp_path / "c", "batch", items=good_tasks(), batch_poll_s=0.5)
        assert server.batch_api.creates == 1
    assert all(o.ok for o in outcomes)
    assert seen == [(0.5, 2)]  # polled once at once (in progress), then after batch_poll_s (completed)


def test_a_request_timeout_line_goes_into_the_next_batch(api_key, tmp_path):
    def script(request):
        if request.messages[0]["content"].startswith("topic1 ") and request.attempt == 0:
            return Reply.request_timeout()
        return summarize(request)

    with FakeOpenAI(script) as server:
        outcomes, report, rejects = run(server, tmp_path / "c", "batch", items=good_tasks(), batch_keep_files=True)
        first, second = server.batch_api.batches.values()
        (line,) = [json.loads(x) for x in server.batch_api.files[first["error_file_id"]].decode().splitlines()]
    assert line["response"] is None and line["error"]["code"] == "request_timeout"  # the line as the API writes it
    assert first["request_counts"] == {"total": 4, "completed": 3, "failed": 1}
    assert second["request_counts"] == {"total": 1, "completed": 1, "failed": 0}
    assert all(o.ok for o in outcomes) and rejects == []
    assert report["steps"]["summaries"]["calls_batch"] == 4


def test_request_timeout_lines_are_given_up_after_max_retries_batches(api_key, tmp_path):
    def script(request):
        if request.messages[0]["content"].startswith("topic1 "):
            return Reply.request_timeout()
        return summarize(request)

    with FakeOpenAI(script) as server:
        outcomes, _, rejects = run(server, tmp_path / "c", "batch", items=good_tasks(), max_retries=1, reject_rate=None)
        assert server.batch_api.creates == 2
    assert [o.ok for o in outcomes] == [True, False, True, True]
    (reject,) = rejects
    assert reject["kind"] == "request_failed"
    assert reject["reason"].startswith("given up after 2 batches; last: request_timeout: The model did not answer")


def test_a_batch_another_key_cannot_see_is_abandoned_and_its_requests_sent_again(
    api_key, tmp_path, monkeypatch, capsys
):
    cache = tmp_path / "c"
    with FakeOpenAI(summarize) as server:
        server.batch_api.retrieve_status = 401  # the first run stops while its batch is in flight
        with pytest.raises(Stopped):
            run(server, cache, "batch", items=good_tasks())
        server.batch_api.retrieve_status = None
        monkeypatch.setenv("GEN_TEST_API_KEY", OTHER_KEY)  # a key of another project: batch_fake_1 is a 404

        # max_retries 0: the resent requests were never tried in this run, so they are not given up
        outcomes, _, rejects = run(server, cache, "batch", items=good_tasks(), max_retries=0)
        assert server.batch_api.creates == 2 and len(batched(server)) == 4
        assert statuses(cache) == [("batch_fake_1", "abandoned", 4, False), ("batch_fake_2", "completed", 4, True)]

        retrieves = server.batch_api.retrieves
        again, _, _ = run(server, cache, "batch", items=good_tasks())  # all cached: the abandoned batch stays put
        assert server.batch_api.retrieves == retrieves and server.batch_api.creates == 2
    assert all(o.ok for o in outcomes) and rejects == []
    assert [o.value for o in again] == [o.value for o in outcomes]
    code, out, _ = run_cli(["batches", "--cache-dir", cache], capsys)
    assert code == 0 and [line.split()[3] for line in out.splitlines()[1:]] == ["abandoned", "completed"]


def test_a_batch_purged_while_in_flight_is_abandoned_and_sent_again(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        server.batch_api.hold = True

        def purge_when_polled():
            try:
                deadline = time.monotonic() + 30
                while server.batch_api.retrieves == 0 and time.monotonic() < deadline:
                    time.sleep(0.01)
                server.batch_api.purge("batch_fake_1")
            finally:
                server.batch_api.hold = False

        purger = threading.Thread(target=purge_when_polled)
        purger.start()
        outcomes, report, rejects = run(server, tmp_path / "c", "batch", items=good_tasks())
        purger.join()
        assert server.batch_api.creates == 2 and len(batched(server)) == 4  # the purged batch never ran a line
    assert all(o.ok for o in outcomes) and rejects == []
    assert report["steps"]["summaries"]["calls_batch"] == 4
    assert [(s, n, c) for _, s, n, c in statuses(tmp_path / "c")] == [("abandoned", 4, False), ("completed", 4, True)]


def test_a_batch_whose_output_file_is_gone_is_abandoned_and_sent_again(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        server.batch_api.deleted.append("file-fake-2")  # batch 1's output file, gone before it is read
        outcomes, _, rejects = run(server, tmp_path / "c", "batch", items=good_tasks())
        assert server.batch_api.batches["batch_fake_1"]["output_file_id"] == "file-fake-2"
        assert server.batch_api.creates == 2
    assert all(o.ok for o in outcomes) and rejects == []
    assert [s for _, s, _, _ in statuses(tmp_path / "c")] == ["abandoned", "completed"]


def test_every_file_of_a_collected_batch_is_deleted_from_the_provider(api_key, tmp_path):
    def script(request):
        if request.messages[0]["content"].startswith("topic1 "):
            return Reply.error(400, "this prompt is not allowed")  # an error file too
        return summarize(request)

    with FakeOpenAI(script) as server:
        _, _, rejects = run(server, tmp_path / "c", "batch", items=good_tasks(), reject_rate=None)
        made = files_of(server, "batch_fake_1")
        assert len(made) == 3 and sorted(server.batch_api.deleted) == sorted(made)
        assert server.batch_api.creates == 1
    assert [r["item_id"] for r in rejects] == ["item-1"]


def test_batch_keep_files_keeps_them(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        outcomes, _, _ = run(server, tmp_path / "c", "batch", items=good_tasks(), batch_keep_files=True)
        assert server.batch_api.deleted == [] and len(files_of(server, "batch_fake_1")) == 2
    assert all(o.ok for o in outcomes)


def test_a_file_that_cannot_be_deleted_is_a_warning_not_a_stop(api_key, tmp_path, caplog):
    with FakeOpenAI(summarize) as server:
        server.batch_api.delete_status = 403
        with caplog.at_level(logging.WARNING, logger="gen.llm"):
            outcomes, _, _ = run(server, tmp_path / "c", "batch", items=good_tasks())
    assert all(o.ok for o in outcomes)
    warned = [r.getMessage() for r in caplog.records if "could not delete" in r.getMessage()]
    assert len(warned) == 2  # the request file and the output file
    assert warned[0] == (
        "[llm] could not delete file file-fake-1 from main (HTTP 403: the file could not be deleted (fake)); "
        "it stays there until you delete it"
    )


def test_the_request_file_of_a_refused_or_failed_batch_is_deleted(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        server.batch_api.create_status = 400
        with pytest.raises(Stopped, match="could not create a batch: HTTP 400"):
            run(server, tmp_path / "a", "batch", items=good_tasks())
        assert server.batch_api.deleted == ["file-fake-1"]  # uploaded, then refused: no batch will read it

        server.batch_api.create_status = None
        server.batch_api.end = "failed"
        with pytest.raises(Stopped, match="refused batch batch_fake_1's request file"):
            run(server, tmp_path / "b", "batch", items=good_tasks())
        assert server.batch_api.deleted == ["file-fake-1", "file-fake-2"]


def test_gen_batches_forget_removes_a_batch_and_the_next_run_sends_its_requests(api_key, tmp_path, capsys):
    cache = tmp_path / "c"
    with FakeOpenAI(summarize) as server:
        server.batch_api.retrieve_status = 401
        with pytest.raises(Stopped):
            run(server, cache, "batch", items=good_tasks())
        assert statuses(cache) == [("batch_fake_1", "validating", 4, False)]
        capsys.readouterr()  # what the run logged

        code, _, err = run_cli(["batches", "forget", "batch_nope", "--cache-dir", cache], capsys)
        assert code == 2
        assert err.strip() == (
            "error: batch_nope: this cache sent no batch with that id (expected an id `gen batches` lists)"
        )
        code, _, err = run_cli(["batches", "forget", "batch_fake_1", "--cache-dir", cache], capsys)
        assert code == 0
        assert "batch batch_fake_1 forgotten: the next run sends its requests" in err
        assert "it was validating when last polled: the endpoint may still run it" in err
        assert statuses(cache) == []

        server.batch_api.retrieve_status = None
        retrieves = server.batch_api.retrieves
        outcomes, _, _ = run(server, cache, "batch", items=good_tasks())
        assert server.batch_api.creates == 2 and server.batch_api.batches["batch_fake_1"]["status"] == "validating"
        assert server.batch_api.retrieves == retrieves + 2  # batch_fake_2 only (in progress, then completed)
    assert all(o.ok for o in outcomes)
    assert statuses(cache) == [("batch_fake_2", "completed", 4, True)]
    code, _, err = run_cli(["batches", "forget", "batch_fake_1", "--cache-dir", cache], capsys)
    assert code == 2 and "batch_fake_1: this cache sent no batch with that id" in err


def test_error_line_codes_are_read_as_the_batch_api_documents_them():
    from gen.llm.batch.files import read_result

    def line(code):
        return read_result(json.dumps({"custom_id": "k", "response": None, "error": {"code": code, "message": "m"}}))

    timed_out = line("request_timeout")
    assert timed_out.retry and timed_out.failure.kind == "retry" and timed_out.failure.reason == "request_timeout: m"
    assert [line(code).failure.kind for code in ("batch_expired", "batch_cancelled")] == ["not_run", "not_run"]
    other = line("invalid_prompt")
    assert not other.retry and other.failure.kind == "batch_error"
