"""How much of a file this process holds mapped and resident, read from `/proc/self/smaps` (Linux)."""

from __future__ import annotations

from pathlib import Path


def resident(path: Path) -> int:
    """Bytes of `path` mapped into this process and resident."""
    total, inside = 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        fields = line.split()
        if fields and "-" in fields[0] and ":" not in fields[0]:
            inside = fields[-1] == str(path.resolve())
        elif inside and fields[0] == "Rss:":
            total += int(fields[1]) * 1024
    return total
