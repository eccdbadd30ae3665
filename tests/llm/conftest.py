"""Shared fixtures of the LLM engine tests."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `gen` is not installed in the venv: import it (and tests.fakes) from the checkout
    sys.path.insert(0, str(ROOT))

import pytest

from tests.fakes.openai_server import FakeOpenAI, fake_openai  # noqa: F401 - the fixture, offered to every test here

FAKE_KEY = "sk-gen-test-KEY-7c1f0e9a4b2d"


@pytest.fixture
def api_key(monkeypatch):
    monkeypatch.setenv("GEN_TEST_API_KEY", FAKE_KEY)
    return FAKE_KEY


@pytest.fixture
def cache_dir(tmp_path):
    return tmp_path / "cache"
