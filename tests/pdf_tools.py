"""Reading the PDFs the API and the admin produce, with poppler-utils (apt-get install poppler-utils; CI
installs it): their text, as a reader would copy it, and their pages as PNG images under
test-artifacts/pdf/, to look at."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts" / "pdf"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is missing: apt-get install poppler-utils")
    return found


def pdf_text(content: bytes, *, layout: bool = False) -> str:
    """The text of every page; with `layout`, in its columns as printed (rows of a table on one line)."""
    command = [_tool("pdftotext"), *(["-layout"] if layout else []), "-", "-"]
    return subprocess.run(command, input=content, capture_output=True, check=True, timeout=60).stdout.decode()  # noqa: S603


def pdf_pages(content: bytes) -> int:
    info = subprocess.run([_tool("pdfinfo"), "-"], input=content, capture_output=True, check=True, timeout=60)  # noqa: S603
    (pages,) = [line.split()[-1] for line in info.stdout.decode().splitlines() if line.startswith("Pages:")]
    return int(pages)


def pdf_png(content: bytes, name: str, *, resolution: int = 100) -> list[Path]:
    """Every page as test-artifacts/pdf/<name>-<page>.png (earlier images of that name replaced), beside the
    PDF itself and its text as laid out (<name>.pdf, <name>.txt)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for old in ARTIFACTS.glob(f"{name}-*.png"):
        old.unlink()
    source = ARTIFACTS / f"{name}.pdf"
    source.write_bytes(content)
    (ARTIFACTS / f"{name}.txt").write_text(pdf_text(content, layout=True))
    command = [_tool("pdftoppm"), "-r", str(resolution), "-png", str(source), str(ARTIFACTS / name)]
    subprocess.run(command, capture_output=True, check=True, timeout=60)  # noqa: S603
    return sorted(ARTIFACTS.glob(f"{name}-*.png"))


def reddish_share(page: Path) -> float:
    """The share of a page image's pixels that are tinted red: the DRAFT or CANCELLED mark across it."""
    from PIL import Image

    with Image.open(page) as image:
        red, green, blue = (band.tobytes() for band in image.convert("RGB").split())
    return sum(1 for r, g, b in zip(red, green, blue, strict=True) if r - max(g, b) > 8) / len(red)
