"""CPU accounting from /proc, shared by the benchmarks that report how busy the rest of the machine was (Linux)."""

from __future__ import annotations


def busy_ticks() -> int:
    """CPU ticks the whole machine spent busy (user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as stat:
        fields = [int(x) for x in stat.readline().split()[1:]]
    return sum(fields) - fields[3] - fields[4]  # less idle and iowait


def process_ticks(pid: int, reaped_children: bool = False) -> int:
    """utime + stime of a live process, with those of the children it reaped if asked."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11 : 15 if reaped_children else 13])


def peak_rss_mb() -> float:
    """This process's peak resident memory in MB (VmHWM: unlike ru_maxrss it does not keep the peak of the
    parent it was forked from)."""
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM"))
    return int(line.split()[1]) / 1024
