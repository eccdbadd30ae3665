"""Requests sent from other processes: the openai client's own work per request, in worker processes.

At a few hundred requests in flight, the openai client's work per request (about a millisecond of CPU: building
the request, the HTTP exchange, reading the reply) takes most of the engine's event-loop thread, and in one
process it shares the interpreter lock with the run's products. With ``request_processes: N`` (RunSettings;
``gen run --request-processes N``) the engine hands each request to one of N worker processes instead, each an
event loop with the real openai client (:func:`gen.llm.calls.request.send_once`, unchanged), and gets back the
:class:`Answer` or :class:`Failure` it made. Everything else stays in the engine's process: the limits and the
429 pause (gen/llm/calls/limiter.py), retries and the breaker, the cache and the accounting, so what a run sends, what
it caches and what it writes are the same.

The processes start with the engine of a run that may send requests (not a plan, not ``--offline``), so they load
the openai client while the run reads its sources and plans its first batch, rather than while its first requests
wait; they stop when the engine closes. They ignore Ctrl-C and SIGHUP (the engine's process handles them and
cancels its requests); SIGTERM ends one silently. The API key goes to a worker with each new client (through the
pipe, never the command line); a worker's failure reasons are scrubbed of keys by the engine as before. A worker
that dies fails its requests in flight as connection errors (retried within each call's budget) and is started again
on the next request.

The channel is the worker's stdin and stdout: length-prefixed pickles, each of a list of the messages one
side had to send in one turn of its event loop: (request id, client spec, body, timeout) one way and (request
id, result) the other. At hundreds of requests in flight a turn has many to send, and one pickle and one pipe
write for them all costs much less than one each.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import pickle
import struct
import sys
from collections.abc import Callable
from typing import Any

from gen import stopping
from gen.llm.calls.request import Answer, Failure

__all__ = ["Senders", "senders"]

HEADER = struct.Struct("<I")
READ_LIMIT = 2**26  # the longest message (a request body or a reply): 64 MB
ClientSpec = tuple[str, str, int, float]  # (base_url, api key, max_concurrency, timeout_s)


def senders(processes: int) -> Senders | None:
    """Request processes for an engine, or None (0: the requests go from the engine's own loop)."""
    return Senders(processes) if processes else None


class Senders:
    """``await senders.send(spec, body, timeout_s)``: one attempt in a worker process (round robin)."""

    def __init__(self, processes: int) -> None:
        self.processes = processes
        self._workers: list[_Worker | None] = [None] * processes
        self._turn = itertools.count()
        self._ids = itertools.count()
        self._starting = asyncio.Lock()

    async def start(self) -> None:
        """Start every process now (each loads the openai client at once), not on the first request."""
        async with self._starting:
            for index, worker in enumerate(self._workers):
                if worker is None or worker.dead:
                    self._workers[index] = await _Worker.start()

    async def send(self, spec: ClientSpec, body: dict, timeout_s: float) -> Answer | Failure:
        index = next(self._turn) % self.processes
        worker = self._workers[index]
        if worker is None or worker.dead:
            async with self._starting:  # the requests that arrive meanwhile wait for the same process
                worker = self._workers[index]
                if worker is None or worker.dead:
                    worker = self._workers[index] = await _Worker.start()
        return await worker.send(next(self._ids), spec, body, timeout_s)

    async def close(self) -> None:
        async with self._starting:  # (after a start still under way)
            for worker in self._workers:
                if worker is not None:
                    await worker.close()
            self._workers = [None] * self.processes


class Outbox:
    """Messages to send through a pipe, written together once this turn of the event loop is over."""

    def __init__(self, write: Callable[[bytes], object]) -> None:
        self.write = write
        self.messages: list[tuple] = []

    def add(self, message: tuple) -> None:
        if not self.messages:
            asyncio.get_running_loop().call_soon(self.flush)
        self.messages.append(message)

    def flush(self) -> None:
        if self.messages:
            data = pickle.dumps(self.messages, protocol=pickle.HIGHEST_PROTOCOL)
            self.messages = []
            self.write(HEADER.pack(len(data)) + data)


async def received(stream: asyncio.StreamReader) -> list[tuple]:
    """The next list of messages; IncompleteReadError when the pipe closes."""
    size = HEADER.unpack(await stream.readexactly(HEADER.size))[0]
    return pickle.loads(await stream.readexactly(size))


@dataclasses.dataclass
class _Worker:
    process: asyncio.subprocess.Process
    pending: dict[int, asyncio.Future] = dataclasses.field(default_factory=dict)
    dead: bool = False
    reader: asyncio.Task | None = None
    outbox: Outbox | None = None

    @classmethod
    async def start(cls) -> _Worker:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gen.llm.calls.senders",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=READ_LIMIT,
        )
        worker = cls(process)
        worker.outbox = Outbox(worker._write)
        worker.reader = asyncio.create_task(worker._read())
        return worker

    async def send(self, request: int, spec: ClientSpec, body: dict, timeout_s: float) -> Answer | Failure:
        future = asyncio.get_running_loop().create_future()
        self.pending[request] = future
        try:
            assert self.outbox is not None
            self.outbox.add((request, spec, body, timeout_s))
            async with asyncio.timeout(timeout_s + 30):  # (the worker times the request out itself)
                return await future
        except (TimeoutError, ConnectionError, RuntimeError) as exc:
            return Failure("connection_error", f"the request process did not answer ({type(exc).__name__})")
        finally:
            self.pending.pop(request, None)

    def _write(self, data: bytes) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(data)
        except (ConnectionError, RuntimeError):  # the process is gone: its requests fail now
            self._stopped()

    def _stopped(self) -> None:
        self.dead = True
        for future in self.pending.values():
            if not future.done():
                future.set_result(Failure("connection_error", "the request process stopped"))

    async def _read(self) -> None:
        stdout = self.process.stdout
        assert stdout is not None
        try:
            while True:
                for request, result in await received(stdout):
                    future = self.pending.get(request)
                    if future is not None and not future.done():
                        future.set_result(result)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._stopped()

    async def close(self) -> None:
        self.dead = True
        if self.process.stdin is not None and not self.process.stdin.is_closing():
            self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()
        if self.reader is not None:
            await self.reader


# --- the worker process ----------------------------------------------------------------------------------


async def serve() -> None:
    """Answer requests from stdin until it closes (then every request still in flight is cancelled)."""
    from gen.llm.calls.clients import openai_client  # loaded before the first request comes (the process starts early)
    from gen.llm.calls.request import send_once

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout.buffer)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    clients: dict[ClientSpec, Any] = {}

    def client(spec: ClientSpec) -> Any:
        if spec not in clients:
            base_url, key, limit, timeout = spec
            clients[spec] = openai_client(base_url, key, connections=limit, timeout=timeout)
        return clients[spec]

    outbox = Outbox(writer.write)

    async def one(request: int, spec: ClientSpec, body: dict, timeout_s: float) -> None:
        outbox.add((request, await send_once(client(spec), body, timeout_s, lambda text: text)))  # scrubbed later

    running: set[asyncio.Task] = set()
    try:
        while True:
            try:
                messages = await received(reader)
            except asyncio.IncompleteReadError:
                return
            for message in messages:
                task = asyncio.create_task(one(*message))
                running.add(task)
                task.add_done_callback(running.discard)
    finally:
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        for open_client in clients.values():
            await open_client.close()


def main() -> None:
    stopping.leave_to_parent()  # Ctrl-C and SIGHUP are the engine's process's to handle (gen/stopping.py)
    asyncio.run(serve())


if __name__ == "__main__":
    main()
