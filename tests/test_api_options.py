"""The settings a Python caller builds (gen.RunOptions, RunSettings, RateLimits) refuse a value out of its range,
of the wrong type or under an unknown name when they are made: one GenError naming the field and what it takes,
as the command line refuses its own options; never pydantic's ValidationError. Fields the command line does not
expose are checked the same way."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

import gen
from gen.errors import GenError
from gen.llm.config import RateLimits, RunSettings

CASES = {
    "max_concurrency 0": (
        lambda: RateLimits(max_concurrency=0),
        "RateLimits.max_concurrency",
        "a number at least 1 and at most 1,024",
    ),
    "negative requests_per_minute, nested as mappings": (
        lambda: gen.RunOptions(llm={"limits": {"requests_per_minute": -5}}),
        "RateLimits.requests_per_minute",
        "a number at least 0.001 and at most 1,000,000,000",
    ),
    "tokens_per_minute 0": (
        lambda: RateLimits(tokens_per_minute=0),
        "RateLimits.tokens_per_minute",
        "a number at least 1 and at most 1,000,000,000,000",
    ),
    "max_retries past 100 (no option of the command line)": (
        lambda: RateLimits(max_retries=101),
        "RateLimits.max_retries",
        "a number at least 0 and at most 100",
    ),
    "timeout_s 0 (no option of the command line)": (
        lambda: RateLimits(timeout_s=0),
        "RateLimits.timeout_s",
        "a number more than 0",
    ),
    "progress_interval_s negative (no option of the command line)": (
        lambda: RunSettings(progress_interval_s=-1),
        "RunSettings.progress_interval_s",
        "a number more than 0",
    ),
    "request_processes past 64": (
        lambda: RunSettings(request_processes=65),
        "RunSettings.request_processes",
        "a number at least 0 and at most 64",
    ),
    "progress not a mode": (
        lambda: RunSettings(progress="loud"),
        "RunSettings.progress",
        "'auto' or 'live' or 'plain' or 'off'",
    ),
    "workers 0": (lambda: gen.RunOptions(workers=0), "RunOptions.workers", "a number at least 1 and at most 256"),
    "workers as words": (
        lambda: gen.RunOptions(workers="four"),
        "RunOptions.workers",
        "a number at least 1 and at most 256",
    ),
    "negative limit": (
        lambda: gen.RunOptions(limit=-1),
        "RunOptions.limit",
        "a number at least 0 and at most 1,000,000,000",
    ),
    "executor unknown": (lambda: gen.RunOptions(executor="dask"), "RunOptions.executor", "'local' or 'ray'"),
    "llm not settings": (lambda: gen.RunOptions(llm=5), "RunOptions.llm", "RunSettings"),
    "output_dir not a path": (lambda: gen.RunOptions(output_dir=3), "RunOptions.output_dir", "Path or None"),
}


@pytest.mark.parametrize(("make", "field", "expected"), CASES.values(), ids=list(CASES))
def test_a_bad_setting_from_python_is_one_error_naming_the_field_and_what_it_takes(make, field, expected):
    with pytest.raises(GenError) as raised:
        make()
    assert raised.value.field == field
    assert raised.value.expected == expected


def test_a_misspelt_setting_is_named_with_the_nearest_one():
    with pytest.raises(GenError) as raised:
        RateLimits(max_concurency=4)
    assert raised.value.field == "RateLimits.max_concurency"
    assert raised.value.message == "unknown key 'max_concurency'; did you mean 'max_concurrency'?"


def test_settings_in_range_are_kept_as_given_and_cannot_change():
    options = gen.RunOptions(workers=256, limit=0, llm={"limits": {"requests_per_minute": 0.001}})
    assert (options.workers, options.limit, options.llm.limits.requests_per_minute) == (256, 0, 0.001)
    with pytest.raises(ValidationError):  # frozen: one run's settings do not change under it
        options.workers = 3  # type: ignore[misc]
