"""What an export folder lists: its files with their sizes (and rows), for the card and the commit summary."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ExportFile:
    path: str  # posix path inside the export folder (= path in the repo)
    size: int
    rows: int | None = None

    @property
    def size_text(self) -> str:
        return human_size(self.size)


def human_size(size: int) -> str:
    value: float = size  # an int until divided, so bytes print without a decimal point
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
