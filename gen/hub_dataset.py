"""A dataset named on the command line: a local folder, or a dataset id on the Hugging Face Hub.

The commands that read a finished dataset (`gen eval`, `gen baseline`, `gen judge`, `gen export`) take either.
A Hub id (``owner/name``, at ``--revision`` if given) is downloaded whole into the Hugging Face cache, exactly the
files `datasets.load_dataset` reads from there (``data/<config>/*.parquet``), with the run report and card the
exporter published beside them; the commands then read that folder as they read an export folder. A token, when
the dataset is private, comes from the environment (``HF_TOKEN``) or the Hub client's login, as for
`load_dataset`; it is never printed.
"""

from __future__ import annotations

import re
from pathlib import Path

from gen.errors import GenError

__all__ = ["dataset_folder"]

HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


def dataset_folder(dataset: str | Path, revision: str | None = None) -> Path:
    """The local folder of ``dataset``: itself when it exists, else the Hub dataset it names, downloaded."""
    path = Path(dataset)
    if path.exists() or not HUB_ID.fullmatch(str(dataset)):
        if revision is not None:
            raise GenError(
                "--revision is for a dataset on the Hub", file=path, expected="a Hub dataset id such as me/name"
            )
        return path  # what is wrong with a folder is said by the reader
    return download(str(dataset), revision)


def download(repo_id: str, revision: str | None) -> Path:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError,
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    where = f"{repo_id}@{revision}" if revision else repo_id
    expected = "a local folder gen wrote, or the id of a dataset gen pushed to the Hub"
    try:
        return Path(snapshot_download(repo_id=repo_id, repo_type="dataset", revision=revision))
    except RevisionNotFoundError:
        raise GenError("the Hub has no such revision of this dataset", record=where, field="--revision") from None
    except GatedRepoError:
        raise GenError("this Hub dataset is gated: accept its terms on the Hub first", record=where) from None
    except RepositoryNotFoundError:
        raise GenError(
            "no such local folder, and no such dataset on the Hub (or it is private: set HF_TOKEN)",
            record=where,
            expected=expected,
        ) from None
    except LocalEntryNotFoundError:
        raise GenError(
            "the Hub cannot be reached and this dataset is not in the local Hugging Face cache",
            record=where,
            expected="a network connection (HF_HUB_OFFLINE unset), or an earlier download of the same revision",
        ) from None
    except HfHubHTTPError as exc:
        raise GenError(f"the Hub refused the download: {exc.server_message or exc}", record=where) from None
