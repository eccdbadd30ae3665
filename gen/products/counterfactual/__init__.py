"""Counterfactual questions with a synthetic next session (TeaBag; docs/teabag.md)."""
