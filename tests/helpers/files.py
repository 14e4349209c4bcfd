"""What a refused command must leave behind: the files of a folder, byte for byte."""

from __future__ import annotations

from pathlib import Path


def folder_bytes(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (relative path → bytes); two calls are equal iff nothing was written,
    added or removed in between."""
    return {str(p.relative_to(d)): p.read_bytes() for p in Path(d).rglob("*") if p.is_file()}
