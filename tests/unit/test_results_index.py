"""benchmarks/results is a reference indexed by docs/results.md, and the docs' relative links resolve.

Every file under benchmarks/results must be reachable from docs/results.md: linked from it, or from a
README.md it links (a README linked by its folder counts), directly or through a linked folder above
the file. Every top-level folder there has a README.md. Every relative link in README.md, docs/*.md
and the results' READMEs must name a path that exists.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
INDEX = ROOT / "docs" / "results.md"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def links(md: Path) -> list[Path]:
    """Return the paths that md's relative Markdown links name (anchors dropped; URLs and pure anchors skipped)."""
    out = []
    for target in LINK.findall(md.read_text(encoding="utf-8")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue
        out.append((md.parent / unquote(target.split("#", 1)[0])).resolve())
    return out


def reachable() -> tuple[set[Path], set[Path]]:
    """Return (files, folders) under benchmarks/results linked from the index or a README it reaches."""
    files: set[Path] = set()
    folders: set[Path] = set()
    todo, seen = [INDEX], set()
    while todo:
        md = todo.pop()
        if md in seen:
            continue
        seen.add(md)
        for p in links(md):
            if not p.is_relative_to(RESULTS):
                continue
            if p.is_dir():
                folders.add(p)
                if (p / "README.md").is_file():
                    todo.append(p / "README.md")
            elif p.is_file():
                files.add(p)
                if p.name == "README.md":
                    todo.append(p)
    return files, folders


def stored() -> list[Path]:
    return sorted(p for p in RESULTS.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_every_result_file_is_reached_from_the_index():
    files, folders = reachable()
    loose = [str(p.relative_to(ROOT)) for p in stored()
             if p not in files and not any(p.is_relative_to(d) for d in folders)]
    assert not loose, f"not linked from docs/results.md or a README it links: {loose}"


def test_every_top_level_result_folder_has_a_readme():
    bare = [d.name for d in RESULTS.iterdir() if d.is_dir() and not (d / "README.md").is_file()]
    assert not bare, f"result folders without a README.md: {bare}"


def test_relative_links_resolve():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted(RESULTS.rglob("README.md"))]
    broken = [f"{md.relative_to(ROOT)} -> {p}" for md in pages for p in links(md) if not p.exists()]
    assert not broken, f"broken relative links: {broken}"
