"""What gen is called where: its distribution on the package index, and how to install one of its extras."""

# The name on the package index: `gen` there is an unrelated project. The import package and the command stay `gen`.
DISTRIBUTION = "gen-memory"


def install_hint(extra: str) -> str:
    """How to install one optional group of dependencies, from the index or from a checkout."""
    return f"pip install '{DISTRIBUTION}[{extra}]' (in a checkout: pip install -e '.[{extra}]')"
