"""Test doubles shared by the test suites (e.g. the fake OpenAI-compatible server)."""
