"""Property-based fuzzing of gen's surfaces: hostile recipes, source files, LLM replies, predictions, templates,
command-line values, signals, people's own logs (tests/fuzz/own_logs.py) and runs on a terminal, each run the
way a user runs gen, with the promises every run must keep checked in one place (tests/fuzz/runner.py). The
fixed-seed budget runs in `pytest -q` (marker `fuzz`); bench/fuzz.py loops the same strategies with fresh seeds
for as long as it is given."""
