"""gen's own export formats, registered under the `gen.exports` entry point group as any plugin's are (see
pyproject.toml and gen/export/harness/formats.py). Their order here is the order the registry lists them in."""

from gen.export.harness import beir, locomo, longmemeval

FORMATS = (locomo.FORMAT, longmemeval.FORMAT, beir.FORMAT)
