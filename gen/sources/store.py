"""Where a run keeps the conversations it loaded: on disk, one pickled conversation after another, read back
one at a time. A run holds per conversation only a `Summary` (id, sessions, words, where it is stored), so its
memory follows the largest conversation rather than the size of the corpus.

The file is an anonymous temporary file (it has no name and is gone when the last process holding it exits,
however it exits). Forked workers inherit it and read with `os.pread`, which never moves a shared file
position, so any number of them can read at once. Pickled for another process, a store carries its bytes; a Ray
run instead sends each task only the conversations its shard reads (`blob`, `HeldConversations`).
"""

from __future__ import annotations

import copy
import mmap
import os
import pickle
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any

from gen.conversation import Conversation
from gen.errors import GenError


@dataclass(frozen=True, slots=True)
class Summary:
    """What selection and padding need to know of a stored conversation without reading it."""

    position: int  # in the store
    conversation_id: str
    session_count: int
    word_count: int
    session_words: tuple[int, ...] = ()  # words per session: which donors a padding reads follows from them


class ConversationStore:
    def __init__(self) -> None:
        # the store owns the file for as long as it lives; it goes with the last process that holds it
        self._file: IO[bytes] | None = tempfile.TemporaryFile(prefix="gen-conversations-")  # noqa: SIM115
        self._bytes: memoryview | None = None  # instead of the file, in a store unpickled elsewhere
        self._spans: list[tuple[int, int]] = []  # (offset, length) per position
        self._end = 0
        self._unread = False  # written and not yet flushed to the file
        self.summaries: list[Summary] = []

    def add(self, conversation: Conversation) -> Summary:
        assert self._file is not None, "a store unpickled from another process is read-only"
        blob = pickle.dumps(conversation, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.write(blob)
        self._spans.append((self._end, len(blob)))
        self._end += len(blob)
        self._unread = True
        session_words = tuple(session.word_count for session in conversation.sessions)
        summary = Summary(
            len(self.summaries), conversation.conversation_id, len(session_words), sum(session_words), session_words
        )
        self.summaries.append(summary)
        return summary

    def __len__(self) -> int:
        return len(self._spans)

    def blob(self, position: int) -> bytes:
        """The stored (pickled) bytes of one conversation, not unpickled."""
        offset, length = self._spans[position]
        if self._bytes is not None:
            return bytes(self._bytes[offset : offset + length])
        assert self._file is not None
        if self._unread:
            self._file.flush()
            self._unread = False
        return os.pread(self._file.fileno(), length, offset)

    def __getitem__(self, position: int) -> Conversation:
        offset, length = self._spans[position]
        if self._bytes is not None:
            return pickle.loads(self._bytes[offset : offset + length])
        assert self._file is not None
        if self._unread:
            self._file.flush()
            self._unread = False
        return pickle.loads(os.pread(self._file.fileno(), length, offset))

    def shared(self) -> SharedConversations | None:
        """The same conversations for other processes of this machine to read from this store's file while this
        process lives, or None where the file cannot be named (no /proc)."""
        assert self._file is not None, "only the store that wrote the file can share it"
        self._file.flush()
        self._unread = False
        path = f"/proc/{os.getpid()}/fd/{self._file.fileno()}"
        return SharedConversations(path, self._spans, self.summaries) if os.path.exists(path) else None

    def __reduce_ex__(self, protocol: Any) -> tuple:
        """Pickled, a store carries its bytes. With protocol 5 they travel as an out-of-band buffer (one copy
        in an object store such as Ray's, read in place by whoever unpickles it)."""
        data: Any = self._bytes
        if data is None:
            assert self._file is not None
            self._file.flush()
            # mapped, not read: the bytes go from the page cache to wherever they are sent, never all in this heap
            data = mmap.mmap(self._file.fileno(), 0, access=mmap.ACCESS_READ) if self._end else b""
        buffer = pickle.PickleBuffer(data) if protocol >= 5 else bytes(data)
        return _reopen, (buffer, self._spans, self.summaries)


def _reopen(data: Any, spans: list[tuple[int, int]], summaries: list[Summary]) -> ConversationStore:
    store = ConversationStore.__new__(ConversationStore)
    store._bytes, store._spans, store.summaries = memoryview(data), spans, summaries
    store._file, store._unread, store._end = None, False, store._bytes.nbytes
    return store


class HeldConversations:
    """A store's summaries and, of its conversations, only those one shard reads (`hold`): what a Ray worker
    keeps, so that no process but the driver holds the whole corpus. Read like a ConversationStore."""

    def __init__(self, summaries: list[Summary]) -> None:
        self.summaries = summaries
        self.blobs: dict[int, bytes] = {}

    def hold(self, blobs: dict[int, bytes]) -> None:
        """The conversations of the next shard (position → stored bytes), in place of the previous shard's."""
        self.blobs = blobs

    def __len__(self) -> int:
        return len(self.summaries)

    def __getitem__(self, position: int) -> Conversation:
        blob = self.blobs.get(position)
        if blob is None:
            raise RuntimeError(f"conversation {self.summaries[position].conversation_id} was not sent with this shard")
        return pickle.loads(blob)


class SharedConversations:
    """Another process's store, read through its file's /proc/<pid>/fd entry (Linux), which opens the file even
    though it has no name: a local Ray worker reads what its shard needs with `os.pread` and nothing is sent."""

    def __init__(self, path: str, spans: list[tuple[int, int]], summaries: list[Summary]) -> None:
        self.path, self.spans, self.summaries = path, spans, summaries
        self._file: IO[bytes] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_file": None}  # each process opens the file for itself

    def __len__(self) -> int:
        return len(self.spans)

    def __getitem__(self, position: int) -> Conversation:
        if self._file is None:
            try:
                self._file = open(self.path, "rb", buffering=0)  # noqa: SIM115 (closed when the store goes)
            except OSError as error:  # e.g. a kernel that keeps other processes out of /proc/<pid>/fd
                raise GenError(
                    f"a Ray worker cannot open the run's conversations at {self.path}: {error.strerror}",
                    field="--executor",
                    expected="--executor local, or --ray-address naming a Ray cluster",
                    exit_code=1,
                ) from None
        offset, length = self.spans[position]
        return pickle.loads(os.pread(self._file.fileno(), length, offset))


Store = ConversationStore | HeldConversations | SharedConversations


class Stored:
    """Some of a store's conversations, in the order of `positions`, each read when it is asked for."""

    def __init__(self, store: Store, positions: Iterable[int]) -> None:
        self.store, self.positions = store, list(positions)

    def __len__(self) -> int:
        return len(self.positions)

    def __getitem__(self, index: int) -> Conversation:
        return self.store[self.positions[index]]

    def __iter__(self) -> Iterator[Conversation]:
        return (self.store[position] for position in self.positions)


class SourcePool:
    """One source's conversations in the store: the padding donors of the conversations chosen from it."""

    def __init__(self, store: Store, positions: range) -> None:
        self.store = store
        with_sessions = [store.summaries[p] for p in positions if store.summaries[p].session_count]
        self._ids = sorted(s.conversation_id for s in with_sessions)
        self._position = {s.conversation_id: s.position for s in with_sessions}

    def donor_ids(self) -> Sequence[str]:
        """Every conversation of the source that has sessions, by id."""
        return self._ids

    def donor(self, conversation_id: str) -> Conversation:
        return self.store[self._position[conversation_id]]

    def position(self, conversation_id: str) -> int:
        return self._position[conversation_id]

    def session_words(self, conversation_id: str) -> tuple[int, ...]:
        """A donor's words per session, from its summary (the conversation is not read)."""
        return self.store.summaries[self._position[conversation_id]].session_words

    def reading(self, store: Store) -> SourcePool:
        """The same pool, its conversations read from `store` (the same summaries)."""
        pool = copy.copy(self)
        pool.store = store
        return pool
