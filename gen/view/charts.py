"""Plots as SVG drawn by the server: the geometry is computed here, the markup is in templates/view/charts.html.
No charting library, no script: a page prints and works without JavaScript."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

LABEL_WIDTH = 190  # room for a label left of a horizontal bar
BAR_HEIGHT = 18
BAR_GAP = 4


@dataclass
class Bar:
    label: str
    value: int
    x: float
    y: float
    width: float
    height: float
    kind: str = ""  # a CSS class: padding, relevant...


@dataclass
class Chart:
    title: str
    width: int
    height: int
    bars: list[Bar] = field(default_factory=list)
    vertical: bool = False  # a histogram: bars stand on the x axis, labels under them


def horizontal_bars(title: str, items: list[tuple[str, int]], width: int = 520, kind: str = "") -> Chart:
    """One bar per (label, value), longest value at full width."""
    top = max((value for _, value in items), default=0) or 1
    room = width - LABEL_WIDTH - 60
    bars = [
        Bar(label, value, LABEL_WIDTH, i * (BAR_HEIGHT + BAR_GAP), max(1.0, room * value / top), BAR_HEIGHT, kind)
        for i, (label, value) in enumerate(items)
    ]
    return Chart(title, width, max(1, len(items)) * (BAR_HEIGHT + BAR_GAP), bars)


def histogram(title: str, bins: list[tuple[str, int]], width: int = 260, height: int = 120, kind: str = "") -> Chart:
    """Vertical bars, one per bin, in the order given."""
    top = max((value for _, value in bins), default=0) or 1
    step = width / max(1, len(bins))
    plot = height - 30  # room below for the bins' labels, above for the counts
    bars = [
        Bar(label, value, i * step + 2, 14 + plot - plot * value / top, max(2.0, step - 4), plot * value / top, kind)
        for i, (label, value) in enumerate(bins)
    ]
    return Chart(title, width, height, bars, vertical=True)


def power_of_two_bins(counts: dict[int, int]) -> list[tuple[str, int]]:
    """Counts by floor(log2(size)) → labelled bins 1, 2–3, 4–7, ... from the first to the last bin present."""
    if not counts:
        return []
    return [(bin_label(k), counts.get(k, 0)) for k in range(min(counts), max(counts) + 1)]


def bin_label(k: int) -> str:
    low, high = 2**k, 2 ** (k + 1) - 1
    return str(low) if low == high else f"{low}–{high}"


@dataclass
class Block:
    session: int
    x: float
    width: float
    kind: str  # "real", "padding"; "relevant" added when a question points into it
    title: str


@dataclass
class Timeline:
    width: int
    height: int
    blocks: list[Block]
    now_x: float | None
    start_label: str
    end_label: str
    window: tuple[float, float] | None = None  # the span of a question's relevant responses


def timeline(
    sessions: list[dict],
    now: str | None,
    relevant_sessions: set[int] = frozenset(),  # type: ignore[assignment]
    window: tuple[str, str] | None = None,
    width: int = 900,
) -> Timeline:
    """Sessions (dicts with session, start, end, padding, responses) as blocks on a time axis from the first
    start to `now`; a block is at least 4 px wide, as a session of minutes vanishes on an axis of months."""
    times = [parse(s["start"]) for s in sessions] + [parse(s["end"]) for s in sessions]
    if now:
        times.append(parse(now))
    if not times:
        return Timeline(width, 40, [], None, "", "")
    first, last = min(times), max(times)
    span = max((last - first).total_seconds(), 1.0)
    inner = width - 20

    def x_of(moment: datetime) -> float:
        return 10 + inner * (moment - first).total_seconds() / span

    blocks = []
    for s in sessions:
        x0, x1 = x_of(parse(s["start"])), x_of(parse(s["end"]))
        kind = "padding" if s["padding"] else "real"
        if s["session"] in relevant_sessions:
            kind += " relevant"
        title = f"session {s['session']}: {s['start']} – {s['end']}, {s['responses']} responses"
        blocks.append(Block(s["session"], x0, max(4.0, x1 - x0), kind, title))
    band = (x_of(parse(window[0])), x_of(parse(window[1]))) if window else None
    return Timeline(
        width, 60, blocks, x_of(parse(now)) if now else None, first.isoformat(sep=" "), last.isoformat(sep=" "), band
    )


def parse(text: str) -> datetime:
    return datetime.fromisoformat(str(text))
