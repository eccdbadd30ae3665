"""`gen push`: a run folder → one commit on the Hugging Face Hub.

Order, so that nothing reaches the Hub unless everything before it worked:
  1. build the export folder locally (data errors stop here, before any network access);
  2. the token: only what huggingface_hub finds itself (HF_TOKEN, or the login file of `hf auth login`);
     gen never reads it into its own output, never passes it on the command line and never writes it;
  3. whoami: the token is accepted, may write, and the repo's namespace is the user's or one of their orgs;
  4. create_repo(exist_ok=True) (private unless asked otherwise), then repo_info: visibility, head commit,
     files, and the card metadata already there (merged into the new card);
  5. one create_commit with every file, and deletions of stale files under data/ (a shard count that shrank),
     against the head commit seen in step 4, so a concurrent change fails the push instead of being mixed in.
Every Hub error becomes one GenError line that says what to do.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import yaml

from gen import progress, stopping
from gen.callers import named
from gen.errors import GenError, Stopped
from gen.export.files import human_size
from gen.export.hub_folder import Export, building_export, read_run
from gen.export.spec import ExportSpec, HubTarget
from gen.personal import FLAG, describe, personal_sources, refuse_unconsented_upload
from gen.templating import INSTALLED, Templates

log = logging.getLogger(__name__)

Say = Callable[[str], None]
DATA_PREFIX = "data/"
TOKEN_HELP = "set HF_TOKEN to a token with write access (https://huggingface.co/settings/tokens) or run `hf auth login`"


@dataclass
class PushResult:
    repo_url: str
    commit_url: str | None
    pr_url: str | None
    private: bool | None
    files: int
    deleted: list[str]


def endpoint() -> str:
    """HF_ENDPOINT at call time (a mirror, or a test's local fake), else huggingface_hub's default."""
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def repo_url(repo_id: str) -> str:
    return f"{endpoint()}/datasets/{repo_id}"


def token_source() -> str | None:
    """Where huggingface_hub will take the token from, without reading or showing it."""
    from huggingface_hub import constants

    if os.environ.get("HF_TOKEN") or os.environ.get("HUGGING_FACE_HUB_TOKEN"):
        return "HF_TOKEN"
    if os.environ.get("HF_OIDC_RESOURCE"):
        return "the OIDC exchange (HF_OIDC_RESOURCE)"
    return "the Hub login (`hf auth login`)" if Path(constants.HF_TOKEN_PATH).is_file() else None


def recipe_target(run_dir: Path) -> HubTarget | None:
    """export.hub of the recipe copy in the run folder, if it has one (the defaults for `gen push`)."""
    path = Path(run_dir) / "recipe.yaml"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
        return ExportSpec.model_validate((data or {}).get("export") or {}).hub if isinstance(data, dict) else None
    except Exception as exc:  # a broken copy only loses the defaults; say why
        raise GenError(f"the recipe's export section is not valid: {exc}", file=path, field="export.hub") from None


def default_message(report: dict) -> str:
    recipe = report["recipe"]
    return (
        f"Upload {recipe['name']} (gen {report.get('packages', {}).get('gen', '?')}, "
        f"recipe {recipe.get('fingerprint', '')[:12]})"
    )


def commit_description(report: dict) -> str:
    lines = [f"- {name}: {info['records']:,} records ({report['split']})" for name, info in report["configs"].items()]
    return (
        "Published with `gen push`.\n\n"
        + "\n".join(lines)
        + f"\n\nRecipe fingerprint: {report['recipe'].get('fingerprint', '')}"
    )


# --- the plan (dry run) ---------------------------------------------------------------------------


def describe_plan(export: Export, target: HubTarget, message: str) -> str:
    """What a push would send, for --dry-run: target, settings, every file with its size, then the card."""
    files = export.all_files
    width = max(len(f.path) for f in files)
    source = token_source()
    branch = target.revision or "main"
    lines = [
        "Dry run: nothing was sent to the Hub.",
        "",
        f"  target      {repo_url(target.repo_id)}  (dataset repo {target.repo_id})",
        f"  branch      {branch}" + ("  (created from main if it does not exist)" if target.revision else ""),
        f"  commit      {'a pull request against ' + branch if target.create_pr else 'one new commit on ' + branch}",
        f"  message     {message}",
        "  visibility  "
        + (
            "private when the repo is created; an existing public repo needs --public"
            if target.private
            else "public when the repo is created"
        ),
        "  token       " + (f"from {source} (never shown)" if source else f"none found: {TOKEN_HELP}"),
        *personal_line(export, target),
        "",
        f"Files in the commit ({len(files)}, {human_size(sum(f.size for f in files))}):",
    ]
    for file in files:
        rows = f"{file.rows:>10,} records" if file.rows is not None else ""
        lines.append(f"  {file.path.ljust(width)}  {file.size_text:>9}  {rows}".rstrip())
    lines += [
        "",
        "Files already in the repo under data/ that are not listed are deleted in the same commit; other files",
        "in the repo are left alone. The card's metadata is merged with the card already in the repo, if any:",
        "its keys are kept, except configs, dataset_info and license, which describe these files.",
        "",
        "----- README.md -----",
        export.card.rstrip("\n"),
        "----- end of README.md -----",
    ]
    return "\n".join(lines)


def personal_line(export: Export, target: HubTarget) -> list[str]:
    """The dry run's line about people's own logs, when the run was made from some."""
    own = personal_sources(export.report)
    if not own:
        return []
    word = f"given ({FLAG})" if target.personal_data_ok else f"a real push is refused without {FLAG}"
    return [f"  own logs    made from people's own conversations: {describe(own)}; {word}"]


# --- the push -------------------------------------------------------------------------------------


def push(
    run_dir: Path,
    target: HubTarget,
    *,
    dry_run: bool = False,
    export_dir: Path | None = None,
    message: str | None = None,
    templates: Templates = INSTALLED,
    out: Say = print,
) -> PushResult | None:
    """Build the export of `run_dir` and publish it to `target` as one commit (or only describe it). A run made
    from people's own logs is refused before any work unless the target carries the publisher's word (a dry run
    sends nothing, so it only says so)."""
    if not dry_run:
        refuse_unconsented_upload(read_run(Path(run_dir).resolve()), target.personal_data_ok, Path(run_dir))
    with tempfile.TemporaryDirectory(prefix="gen-push-") as scratch:
        folder = Path(export_dir) if export_dir else Path(scratch) / "export"
        built = building_export(
            run_dir,
            folder,
            target.max_shard_size,
            templates=templates,
            repo_id=target.repo_id,
            overrides=target.card,
            personal_data_ok=target.personal_data_ok,
        )
        with built as export:  # --export-dir is replaced only once the card is final and the push went through
            message = message or target.commit_message or default_message(export.report)
            if dry_run:
                out(describe_plan(export, target, message))
                return None
            return publish(export, target, message, out)


def publish(export: Export, target: HubTarget, message: str, out: Say) -> PushResult:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, DatasetInfo, HfApi, constants
    from huggingface_hub.errors import RevisionNotFoundError

    if constants.is_offline_mode() or os.environ.get("HF_HUB_OFFLINE", "").upper() in ("1", "ON", "YES", "TRUE"):
        raise GenError(
            "HF_HUB_OFFLINE is set, so the Hub cannot be reached; unset it to push "
            f"(or use {named('--dry-run', 'PushOptions(dry_run=True)')} to see what would be sent)"
        )
    source = token_source()
    if source is None:
        raise GenError(f"no Hugging Face token found: {TOKEN_HELP}")
    api = HfApi(endpoint=endpoint())
    repo_id = target.repo_id
    with hub_errors("checking the token", repo_id, source):
        identity = api.whoami()
    check_namespace(identity, repo_id, source)

    log.info(f"pushing to {repo_url(repo_id)} as {identity.get('name')}")
    with hub_errors("creating the repo", repo_id, source):
        api.create_repo(repo_id, repo_type="dataset", private=target.private, exist_ok=True)
    with hub_errors("reading the repo", repo_id, source):
        try:
            info = api.repo_info(repo_id, repo_type="dataset", revision=target.revision)
        except RevisionNotFoundError:
            if target.revision is None:  # main itself is missing: there is nothing to branch from
                raise
            log.info(f"branch {target.revision} does not exist; creating it from main")
            api.create_branch(repo_id, repo_type="dataset", branch=target.revision)
            info = api.repo_info(repo_id, repo_type="dataset", revision=target.revision)
    assert isinstance(info, DatasetInfo)  # what repo_info answers for repo_type="dataset"
    if info.private is False and target.private:
        raise GenError(
            f"{repo_id} already exists and is public, and this push asked for a private repo; pass "
            f"{named('--public', 'PushOptions(private=False)')} (or set export.hub.private: false) to publish to it",
            field="repo_id",
        )
    if info.private and not target.private:
        log.info(f"note: {repo_id} already exists and is private; it stays private (change that in its settings)")

    existing = info.card_data.to_dict() if info.card_data else {}
    export.write_card(repo_id, existing=[existing] if existing else [], overrides=target.card)
    files = export.all_files
    new_paths = {file.path for file in files}
    stale = sorted(
        s.rfilename
        for s in (info.siblings or [])
        if s.rfilename.startswith(DATA_PREFIX) and s.rfilename not in new_paths
    )
    operations = [
        CommitOperationAdd(path_in_repo=file.path, path_or_fileobj=str(export.folder / file.path)) for file in files
    ] + [CommitOperationDelete(path_in_repo=path) for path in stale]
    log.info(
        f"committing {len(files)} files ({human_size(sum(f.size for f in files))})"
        + (f" and deleting {len(stale)} stale data files" if stale else "")
    )
    with hub_errors("committing", repo_id, source), uploading(len(files)):
        commit = api.create_commit(
            repo_id,
            operations,
            repo_type="dataset",
            commit_message=message,
            commit_description=commit_description(export.report),
            revision=target.revision,
            create_pr=target.create_pr,
            parent_commit=None if target.create_pr else getattr(info, "sha", None),
        )
    result = PushResult(repo_url(repo_id), commit.commit_url, commit.pr_url, info.private, len(files), stale)
    visibility = "private" if info.private else "public"
    if commit.pr_url:
        out(f"opened a pull request on {result.repo_url} ({visibility}): {commit.pr_url}")
    else:
        out(f"pushed {len(files)} files to {result.repo_url} ({visibility}) in one commit: {commit.commit_url}")
    return result


@contextlib.contextmanager
def uploading(files: int) -> Iterator[None]:
    """The upload as a step of gen's own progress display (gen/progress.py): huggingface_hub's tqdm bars are
    turned off meanwhile, since they would draw over it, and draw under -q and into a pipe too."""
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    were_off = are_progress_bars_disabled()
    disable_progress_bars()
    try:
        with progress.task(f"uploading {files} files to the Hub"):
            yield
    finally:
        if not were_off:
            enable_progress_bars()


def check_namespace(identity: dict, repo_id: str, source: str) -> None:
    name = identity.get("name") or "?"
    orgs = [
        org["name"] for org in identity.get("orgs") or [] if isinstance(org, dict) and isinstance(org.get("name"), str)
    ]
    role = ((identity.get("auth") or {}).get("accessToken") or {}).get("role")
    if role == "read":
        raise GenError(f"the token from {source} is read-only; pushing needs write access: {TOKEN_HELP}")
    owner, _, repo_name = repo_id.partition("/")
    if owner != name and owner not in orgs:
        mine = f" (organizations: {', '.join(orgs)})" if orgs else ""
        raise GenError(
            f"{repo_id} belongs to {owner!r}, and the token from {source} is for {name!r}{mine}; "
            f"push to a repo you own, e.g. {name}/{repo_name}",
            field="repo_id",
        )


class hub_errors:
    """`with hub_errors(step, repo_id, source):` turns huggingface_hub / network errors into one clear GenError."""

    def __init__(self, step: str, repo_id: str, source: str) -> None:
        self.step, self.repo_id, self.source = step, repo_id, source

    def __enter__(self) -> hub_errors:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> Literal[False]:
        if error is None or isinstance(error, GenError):
            return False
        raise translate(error, self.step, self.repo_id, self.source) from None


def translate(error: BaseException, step: str, repo_id: str, source: str) -> GenError:
    from huggingface_hub.errors import HfHubHTTPError, LocalTokenNotFoundError, OfflineModeIsEnabled

    if isinstance(error, LocalTokenNotFoundError):
        return GenError(f"no Hugging Face token found: {TOKEN_HELP}")
    if isinstance(error, OfflineModeIsEnabled):
        return GenError("HF_HUB_OFFLINE is set, so the Hub cannot be reached; unset it to push")
    nothing = "" if step == "checking the token" else "; nothing was committed"
    if isinstance(error, HfHubHTTPError) and error.response is not None:
        status = error.response.status_code
        server = (getattr(error, "server_message", None) or "").strip().splitlines()
        detail = f" (the Hub said: {server[0][:200]})" if server else ""
        if status == 401:
            return GenError(
                f"the Hub refused the token from {source} while {step} (401 Unauthorized): it is "
                f"invalid, expired or revoked{nothing}; {TOKEN_HELP}"
            )
        if status == 403:
            return GenError(
                f"the token from {source} may not write to {repo_id} (403 Forbidden while {step})"
                f"{detail}{nothing}; push to a repo you own, or use a token with write access to it"
            )
        if status == 429:
            wait = error.response.headers.get("Retry-After")
            when = f"after {wait} seconds" if wait and wait.isdigit() else "later"
            return GenError(
                f"the Hub's rate limit was reached while {step} (429 Too Many Requests){detail}"
                f"{nothing}; try again {when}: `gen push` is safe to repeat"
            )
        if status in (409, 412) and step == "committing":
            return GenError(
                f"{repo_id} changed while pushing (someone else committed){detail}; nothing was "
                "committed; run `gen push` again"
            )
        if status == 404:
            return GenError(
                f"{repo_id} was not found while {step} (404){detail}{nothing}; check the repo id, "
                "and that the token can see it"
            )
        return GenError(f"the Hub answered {status} while {step}{detail}{nothing}")
    if isinstance(error, OSError) or type(error).__module__.startswith(("httpx", "httpcore")):
        return GenError(f"cannot reach the Hub at {endpoint()} while {step} ({type(error).__name__}: {error}){nothing}")
    return GenError(f"{step} failed: {type(error).__name__}: {error}{nothing}")


# --- `export: {hub: ...}` at the end of `gen run` ---------------------------------------------------


def push_after_run(run_dir: Path, target: HubTarget, templates: Templates) -> None:
    """The hook the runner calls once the run folder is in place. A failure or a stop keeps the run and says how to
    retry."""
    stopping.resumed()  # the run is done and in place; publishing it is new work, and may be stopped
    try:
        push(run_dir, target, templates=templates, out=log.info)
    except GenError as exc:
        raise GenError(
            f"the run was written to {run_dir}, but publishing it failed: {exc}. Fix that and run `gen push {run_dir}`"
        ) from None
    except KeyboardInterrupt as exc:
        signum = stopping.signal_of(exc)
        raise Stopped(
            f"{stopping.reason(signum)} while publishing; the run was written to {run_dir}: run `gen push {run_dir}` "
            "to publish it",
            exit_code=stopping.exit_code(signum),
        ) from None
