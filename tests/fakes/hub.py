"""A fake Hugging Face Hub for tests: real HTTP on 127.0.0.1, enough of the Hub API for `gen push`.

The real ``huggingface_hub`` client talks to it (point HF_ENDPOINT, and huggingface_hub.constants.ENDPOINT,
at ``hub.url``), so a test exercises the whole upload path without a network::

    with FakeHub(users={"hf_secret": User("me", orgs=["lab"])}) as hub:
        ...  # gen push ... with HF_ENDPOINT=hub.url and HF_TOKEN=hf_secret
        repo = hub.repos["me/quickstart"]
        repo.private, repo.files("main"), repo.commits   # what the Hub now holds

Served: GET /api/whoami-v2; POST /api/repos/create; GET /api/datasets/<repo>[/revision/<rev>] (id, sha, private,
siblings, cardData parsed from README.md); POST /api/datasets/<repo>/branch/<name>; POST /api/validate-yaml;
POST /api/datasets/<repo>/preupload/<rev> (every file "regular", so contents travel in the commit);
POST /api/datasets/<repo>/commit/<rev>[?create_pr=1] (ndjson: header, file, deletedFile, deletedFolder);
GET /api/datasets/<repo>/tree/<rev>[/<folder>] and GET/HEAD /datasets/<repo>/resolve/<rev>/<path> (listing and
files, for downloads: snapshot_download).
Anything else is a 404 and is recorded in ``hub.unknown``.

Permissions as on the Hub: a token must be known (else 401 "Invalid credentials"), a "read" token may not write,
and a user writes only under their own name or their orgs (else 403). Private repos of others are invisible
(404 RepoNotFound). A commit whose parentCommit is not the branch head gets 412.

Faults: ``hub.fail_next("commit", status=429, headers={"Retry-After": "120"}, message="...")`` answers the next
request of that kind (``whoami``, ``create``, ``info``, ``preupload``, ``commit``) with the error instead.

``hub.requests`` logs (method, path, kind, authorization header) for every request, and ``hub.bodies`` the raw
request bodies, so tests can check that a token was sent only in the Authorization header.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

import yaml


@dataclass
class User:
    name: str
    orgs: list[str] = field(default_factory=list)
    role: str = "write"


@dataclass
class Commit:
    sha: str
    branch: str
    message: str
    description: str
    added: list[str]
    deleted: list[str]
    parent: str | None
    pr: int | None = None


@dataclass
class Repo:
    repo_id: str
    private: bool
    branches: dict[str, dict[str, bytes]] = field(default_factory=dict)  # branch → {path: content}
    heads: dict[str, str] = field(default_factory=dict)
    commits: list[Commit] = field(default_factory=list)
    prs: dict[int, dict[str, bytes]] = field(default_factory=dict)

    def files(self, branch: str = "main") -> dict[str, bytes]:
        return self.branches[branch]

    def branch_of(self, revision: str) -> str | None:
        """The branch a revision names: a branch, or a branch's head commit."""
        if revision in self.branches:
            return revision
        return next((branch for branch, head in self.heads.items() if head == revision), None)

    def card_data(self, branch: str = "main") -> dict | None:
        text = self.branches[branch].get("README.md", b"").decode()
        if not text.startswith("---\n"):
            return None
        end = text.find("\n---\n", 3)
        return yaml.safe_load(text[4 : end + 1]) if end != -1 else None


class FakeHub:
    def __init__(self, users: dict[str, User] | None = None) -> None:
        self.users = users or {}
        self.repos: dict[str, Repo] = {}
        self.requests: list[tuple[str, str, str, str | None]] = []
        self.bodies: list[bytes] = []
        self.unknown: list[str] = []
        self.faults: dict[str, list[tuple[int, dict, str]]] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self.handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )  # a short poll: shutdown() at the end of a test is quick

    def __enter__(self) -> FakeHub:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    # --- test helpers -----------------------------------------------------------------------------

    def add_repo(self, repo_id: str, private: bool = True, files: dict[str, bytes] | None = None) -> Repo:
        repo = Repo(repo_id, private)
        self.repos[repo_id] = repo
        self.apply(
            repo, "main", "initial commit", "", {".gitattributes": b"*.parquet filter=lfs\n", **(files or {})}, [], None
        )
        return repo

    def fail_next(self, kind: str, status: int, headers: dict | None = None, message: str = "") -> None:
        self.faults.setdefault(kind, []).append((status, headers or {}, message))

    def commits(self) -> list[Commit]:
        return [c for repo in self.repos.values() for c in repo.commits if c.message != "initial commit"]

    def apply(
        self,
        repo: Repo,
        branch: str,
        message: str,
        description: str,
        added: dict[str, bytes],
        deleted: list[str],
        pr: int | None,
    ) -> Commit:
        parent = repo.heads.get(branch)
        base = dict(repo.branches.get(branch, {}))
        for path in deleted:
            for existing in [p for p in base if p == path or p.startswith(path.rstrip("/") + "/")]:
                del base[existing]
        base.update(added)
        sha = hashlib.sha1(f"{repo.repo_id}{len(repo.commits)}{message}".encode()).hexdigest()
        commit = Commit(sha, branch, message, description, sorted(added), sorted(deleted), parent, pr)
        repo.commits.append(commit)
        if pr is None:
            repo.branches[branch], repo.heads[branch] = base, sha
        else:
            repo.prs[pr] = base
        return commit

    # --- HTTP -------------------------------------------------------------------------------------

    def handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                hub.dispatch(self, "GET")

            def do_POST(self) -> None:
                hub.dispatch(self, "POST")

            def do_HEAD(self) -> None:
                hub.dispatch(self, "HEAD")

        return Handler

    def dispatch(self, request: BaseHTTPRequestHandler, method: str) -> None:
        url = urlsplit(request.path)
        length = int(request.headers.get("Content-Length") or 0)
        body = request.rfile.read(length) if length else b""
        auth = request.headers.get("Authorization")
        user = self.users.get(auth.removeprefix("Bearer ").strip()) if auth else None
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        routes = [
            ("GET", r"/api/whoami-v2", "whoami", self.whoami),
            ("POST", r"/api/repos/create", "create", self.create),
            ("POST", r"/api/validate-yaml", "validate", self.validate_yaml),
            ("GET", r"/api/datasets/([^/]+/[^/]+)(?:/revision/(.+))?", "info", self.info),
            ("POST", r"/api/datasets/([^/]+/[^/]+)/branch/(.+)", "branch", self.branch),
            ("POST", r"/api/datasets/([^/]+/[^/]+)/preupload/(.+)", "preupload", self.preupload),
            ("POST", r"/api/datasets/([^/]+/[^/]+)/commit/(.+)", "commit", self.commit),
            ("GET", r"/api/datasets/([^/]+/[^/]+)/tree/([^/]+)(?:/(.*))?", "tree", self.tree),
            ("GET", r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", "resolve", self.resolve),
            ("HEAD", r"/datasets/([^/]+/[^/]+)/resolve/([^/]+)/(.+)", "resolve", self.resolve),
        ]
        for verb, pattern, kind, action in routes:
            match = re.fullmatch(pattern, url.path)
            if verb == method and match:
                with self.lock:
                    self.requests.append((method, url.path, kind, auth))
                    self.bodies.append(body)
                    if self.faults.get(kind):
                        status, headers, message = self.faults[kind].pop(0)
                        return self.reply(request, status, {"error": message or f"injected {status}"}, headers)
                    try:
                        status, payload, headers = action(
                            user, auth, body, query, *[unquote(g) if g else g for g in match.groups()]
                        )
                    except Exception as exc:  # a broken fake must be loud, not hang the client
                        status, payload, headers = 500, {"error": f"fake hub bug: {exc!r}"}, {}
                return self.reply(request, status, payload, headers)
        with self.lock:
            self.requests.append((method, url.path, "unknown", auth))
            self.unknown.append(f"{method} {url.path}")
        self.reply(request, 404, {"error": "not served by the fake hub"}, {})

    def reply(self, request: BaseHTTPRequestHandler, status: int, payload, headers: dict) -> None:
        raw = isinstance(payload, bytes)  # a file's content
        data = payload if raw else json.dumps(payload).encode()
        request.send_response(status)
        request.send_header("Content-Type", "application/octet-stream" if raw else "application/json")
        request.send_header("Content-Length", str(len(data)))
        for key, value in headers.items():
            request.send_header(key, value)
        request.end_headers()
        if request.command != "HEAD":
            request.wfile.write(data)

    # --- endpoints --------------------------------------------------------------------------------

    @staticmethod
    def unauthorized():
        return (
            401,
            {"error": "Invalid credentials in Authorization header"},
            {"X-Error-Message": "Invalid credentials in Authorization header"},
        )

    @staticmethod
    def not_found(repo_id: str):
        return (
            404,
            {"error": "Repository not found"},
            {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"},
        )

    @staticmethod
    def can_write(user: User | None, repo_id: str) -> bool:
        owner = repo_id.split("/")[0]
        return user is not None and user.role != "read" and (owner == user.name or owner in user.orgs)

    def visible(self, user: User | None, repo: Repo | None) -> bool:
        if repo is None:
            return False
        owner = repo.repo_id.split("/")[0]
        return not repo.private or (user is not None and (owner == user.name or owner in user.orgs))

    def whoami(self, user, auth, body, query):
        if user is None:
            return self.unauthorized()
        return (
            200,
            {
                "type": "user",
                "name": user.name,
                "orgs": [{"name": org} for org in user.orgs],
                "auth": {"type": "access_token", "accessToken": {"displayName": "test", "role": user.role}},
            },
            {},
        )

    def create(self, user, auth, body, query):
        if user is None:
            return self.unauthorized()
        payload = json.loads(body)
        repo_id = f"{payload.get('organization') or user.name}/{payload['name']}"
        if payload.get("type") != "dataset":
            return 400, {"error": f"this fake only makes dataset repos, got {payload.get('type')}"}, {}
        if not self.can_write(user, repo_id):
            return (
                403,
                {
                    "error": f"You don't have the rights to create a dataset under the namespace "
                    f'"{repo_id.split("/")[0]}"'
                },
                {},
            )
        if repo_id in self.repos:
            return 409, {"error": "You already created this dataset repo", "url": f"{self.url}/datasets/{repo_id}"}, {}
        private = payload.get("visibility", "private" if payload.get("private") else "public") == "private"
        self.add_repo(repo_id, private=private)
        return 200, {"url": f"{self.url}/datasets/{repo_id}", "name": repo_id}, {}

    def validate_yaml(self, user, auth, body, query):
        content = json.loads(body)["content"]
        try:
            if content.startswith("---\n"):
                yaml.safe_load(content[4 : content.index("\n---\n", 3)])
        except (ValueError, yaml.YAMLError) as exc:
            return 400, {"errors": [{"message": str(exc)}]}, {}
        return 200, {"errors": [], "warnings": []}, {}

    def info(self, user, auth, body, query, repo_id, revision=None):
        repo = self.repos.get(repo_id)
        if not self.visible(user, repo):
            return self.not_found(repo_id)
        branch = repo.branch_of(revision or "main")
        if branch is None:
            return 404, {"error": f"Invalid rev id: {revision}"}, {"X-Error-Code": "RevisionNotFound"}
        return (
            200,
            {
                "id": repo_id,
                "_id": repo_id,
                "author": repo_id.split("/")[0],
                "sha": repo.heads[branch],
                "private": repo.private,
                "disabled": False,
                "gated": False,
                "downloads": 0,
                "likes": 0,
                "tags": [],
                "lastModified": "2026-01-01T00:00:00.000Z",
                "cardData": repo.card_data(branch),
                "siblings": [{"rfilename": path} for path in sorted(repo.files(branch))],
            },
            {},
        )

    def at(self, user, repo_id, revision):
        """(repo, branch, None) for a revision the user may read, else (None, None, the error reply)."""
        repo = self.repos.get(repo_id)
        if not self.visible(user, repo):
            return None, None, self.not_found(repo_id)
        branch = repo.branch_of(revision)
        if branch is None:
            return None, None, (404, {"error": f"Invalid rev id: {revision}"}, {"X-Error-Code": "RevisionNotFound"})
        return repo, branch, None

    def tree(self, user, auth, body, query, repo_id, revision, folder=None):
        """Every file under a folder (recursive: the only way snapshot_download asks), in one page."""
        repo, branch, refused = self.at(user, repo_id, revision)
        if refused:
            return refused
        prefix = f"{folder.rstrip('/')}/" if folder else ""
        entries = [
            {"type": "file", "oid": hashlib.sha1(content).hexdigest(), "size": len(content), "path": path}
            for path, content in sorted(repo.files(branch).items())
            if path.startswith(prefix)
        ]
        return 200, entries, {}

    def resolve(self, user, auth, body, query, repo_id, revision, path):
        """A file's content at a branch or at a branch's head commit, with the headers hf_hub_download reads."""
        repo, branch, refused = self.at(user, repo_id, revision)
        if refused:
            return refused
        content = repo.files(branch).get(path)
        if content is None:
            return 404, {"error": f"{path} not found"}, {"X-Error-Code": "EntryNotFound"}
        etag = f'"{hashlib.sha256(content).hexdigest()}"'
        return 200, content, {"X-Repo-Commit": repo.heads[branch], "ETag": etag}

    def branch(self, user, auth, body, query, repo_id, name):
        repo = self.repos.get(repo_id)
        if not self.visible(user, repo):
            return self.not_found(repo_id)
        if not self.can_write(user, repo_id):
            return 403, {"error": "You don't have write access"}, {}
        repo.branches[name] = dict(repo.branches["main"])
        repo.heads[name] = repo.heads["main"]
        return 200, {}, {}

    def preupload(self, user, auth, body, query, repo_id, revision):
        repo = self.repos.get(repo_id)
        if not self.visible(user, repo):
            return self.not_found(repo_id)
        files = json.loads(body)["files"]
        return (
            200,
            {
                "files": [
                    {"path": f["path"], "uploadMode": "regular", "shouldIgnore": False, "oid": None} for f in files
                ]
            },
            {},
        )

    def commit(self, user, auth, body, query, repo_id, revision):
        repo = self.repos.get(repo_id)
        if not self.visible(user, repo):
            return self.not_found(repo_id)
        if not self.can_write(user, repo_id):
            return 403, {"error": "You don't have write access to this repo"}, {}
        branch = revision
        if branch not in repo.branches:
            return 404, {"error": f"Invalid rev id: {branch}"}, {"X-Error-Code": "RevisionNotFound"}
        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header = next(line["value"] for line in lines if line["key"] == "header")
        parent = header.get("parentCommit")
        if parent is not None and parent != repo.heads[branch]:
            return 412, {"error": "A commit has happened since. Please refresh and try again."}, {}
        added, deleted = {}, []
        for line in lines:
            if line["key"] == "file":
                added[line["value"]["path"]] = base64.b64decode(line["value"]["content"])
            elif line["key"] in ("deletedFile", "deletedFolder"):
                deleted.append(line["value"]["path"])
            elif line["key"] != "header":
                return 400, {"error": f"this fake does not take {line['key']} operations"}, {}
        pr = len(repo.prs) + 1 if query.get("create_pr") == "1" else None
        commit = self.apply(repo, branch, header["summary"], header.get("description", ""), added, deleted, pr)
        url = f"{self.url}/datasets/{repo_id}"
        return (
            200,
            {
                "commitUrl": f"{url}/commit/{commit.sha}",
                "commitOid": commit.sha,
                "pullRequestUrl": f"{url}/discussions/{pr}" if pr else None,
            },
            {},
        )


TOKEN = "hf_TESTtokenDoNotLeak0123456789"
READ_TOKEN = "hf_READonlyTokenDoNotLeak98765"

try:  # pytest fixtures, offered to every test through tests/conftest.py
    import pytest

    @pytest.fixture
    def no_network(monkeypatch):
        """Any name lookup other than the loopback fails the test: the fake Hub is the only server."""
        import socket

        real = socket.getaddrinfo

        def loopback_only(host, *args, **kwargs):
            if host not in ("127.0.0.1", "localhost", "::1"):
                raise OSError(f"the test tried to reach {host}")
            return real(host, *args, **kwargs)

        monkeypatch.setattr(socket, "getaddrinfo", loopback_only)

    @pytest.fixture
    def hub(monkeypatch, tmp_path):
        """A running FakeHub with a writing user "me" (token TOKEN, also in HF_TOKEN) and a reading one, the
        Hugging Face client pointed at it, and a fresh Hugging Face cache for downloads."""
        from huggingface_hub import constants

        with FakeHub(users={TOKEN: User("me", orgs=["lab"]), READ_TOKEN: User("me", role="read")}) as fake:
            monkeypatch.setenv("HF_ENDPOINT", fake.url)
            monkeypatch.setattr(constants, "ENDPOINT", fake.url)  # read at import by huggingface_hub's own helpers
            # the download URL is built from the endpoint when huggingface_hub is imported, too
            template = fake.url + "/{repo_id}/resolve/{revision}/{filename}"
            monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", template)
            monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)  # CI exports it; a push needs the (fake) Hub
            monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
            monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
            monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-home" / "hub"))
            monkeypatch.setenv("HF_TOKEN", TOKEN)
            monkeypatch.delenv("HUGGING_FACE_HUB_TOKEN", raising=False)
            monkeypatch.delenv("HF_OIDC_RESOURCE", raising=False)
            monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "no-login" / "token"))
            monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
            yield fake
except ImportError:  # pragma: no cover
    pass
