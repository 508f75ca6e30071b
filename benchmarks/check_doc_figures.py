"""Check that measured figures quoted in README.md and docs/*.md come from a table or a test.

A figure here is a speed-up or ratio written as a number followed by "x" (2.3x, 0.78x) or a
percentage range (9-36%): the forms in which measurements are quoted. Each must appear, as written,
in BENCHMARKS.md or in a file under tests/, or be listed in CITED with where it comes from (figures
from elsewhere, such as a published case study the docs compare against). Prints each figure that
has no source and exits 1 if there is any.

    python benchmarks/check_doc_figures.py
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIGURE = re.compile(r"(?<![\w.-])(\d+(?:\.\d+)?x|\d+(?:\.\d+)?\s?[-–]\s?\d+(?:\.\d+)?\s?%)(?![\w])")
# Figures quoted from outside this repository, with where they come from.
CITED = {
    "35x": "the published LeNet-5/Fashion-MNIST training case study (160 s vs 4.55 s per epoch), notebook 07",
    "2.0x": "the published video pipeline case study (7 s -> 3.5 s), docs/benchmarks.md",
}


def doc_files(root: Path = ROOT) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def sources(root: Path = ROOT) -> str:
    texts = [(root / "BENCHMARKS.md").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in sorted((root / "tests").rglob("*.py"))]
    return "\n".join(texts)


def normal(figure: str) -> str:
    return re.sub(r"\s", "", figure).replace("–", "-")


def unsourced(root: Path = ROOT) -> list[tuple[str, int, str]]:
    """(file, line, figure) for each figure in the docs found in no table, test or CITED entry."""
    known = normal(sources(root))
    missing = []
    for path in doc_files(root):
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for m in FIGURE.finditer(line):
                fig = normal(m.group(1))
                if fig not in CITED and fig not in known:
                    missing.append((str(path.relative_to(root)), i, m.group(1)))
    return missing


def main() -> int:
    missing = unsourced()
    for path, line, fig in missing:
        print(f"{path}:{line}: {fig} is in no table of BENCHMARKS.md and no test")
    if not missing:
        print(f"Every figure quoted in {len(doc_files())} documents is in BENCHMARKS.md, a test or CITED.")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
