"""A pinned corpus of real PyTorch code, taken from PyPI source distributions.

Benchmarks and precision checks must run over the same bytes every time, so each project is
pinned to one sdist by file name and SHA-256. The sdist is looked up in the registry's simple
index (the JSON form pip itself reads), downloaded once into ``bench/.cache/``, verified, and only
its ``.py`` files are extracted into ``bench/corpus/<name>/`` (both folders are git-ignored).
Building is idempotent: a project whose folder is complete is left alone.

    python bench/corpus.py              # build everything, print file and line counts
    python bench/corpus.py timm fairseq # only these projects

From Python::

    from bench.corpus import corpus_files
    paths = corpus_files(["timm"])      # builds what is missing, returns sorted .py paths
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence

BENCH_DIR = Path(__file__).resolve().parent
CORPUS_DIR = BENCH_DIR / "corpus"
DOWNLOAD_DIR = BENCH_DIR / ".cache" / "sdists"
INDEX_URL = os.environ.get("TORCHDEVICE_BENCH_INDEX", "https://pypi.org/simple")
#: Written last, so a folder without it is an interrupted extraction and is redone.
COMPLETE_MARKER = ".complete"


@dataclass(frozen=True)
class Project:
    name: str
    version: str
    sdist: str
    sha256: str

    @property
    def folder(self) -> Path:
        return CORPUS_DIR / self.name


PROJECTS: Dict[str, Project] = {
    project.name: project
    for project in (
        Project("timm", "1.0.15", "timm-1.0.15.tar.gz",
                "756a3bc30c96565f056e608a9b559daed904617eaadb6be536f96874879b1055"),
        Project("fairseq", "0.12.2", "fairseq-0.12.2.tar.gz",
                "34f1b18426bf3844714534162f065ab733e049597476daa35fffb4d06a92b524"),
        Project("pytorch-lightning", "2.5.1", "pytorch_lightning-2.5.1.tar.gz",
                "27a8adb799c13b8202afad518352248d61303fb230ec1f9fa60e0f81d431d6b1"),
        Project("diffusers", "0.33.1", "diffusers-0.33.1.tar.gz",
                "fc7f140295d2ec82b1e7474b77bb7057fc0686c14eadc54ca0e52a66527e18a2"),
    )
}


def _sdist_url(project: Project) -> str:
    """The download URL of the pinned file, from the PEP 691 JSON simple index."""
    request = urllib.request.Request(
        f"{INDEX_URL}/{project.name}/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        listing = json.load(response)
    for entry in listing["files"]:
        if entry["filename"] == project.sdist:
            return entry["url"]
    raise LookupError(f"{project.sdist} is not in the index for {project.name}")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(project: Project) -> Path:
    target = DOWNLOAD_DIR / project.sdist
    if target.exists() and _sha256(target) == project.sha256:
        return target
    DOWNLOAD_DIR.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    with urllib.request.urlopen(_sdist_url(project), timeout=300) as response, partial.open("wb") as out:
        shutil.copyfileobj(response, out)
    actual = _sha256(partial)
    if actual != project.sha256:
        partial.unlink()
        raise ValueError(f"{project.sdist}: sha256 {actual} != pinned {project.sha256}")
    partial.replace(target)
    return target


def _extract_python_files(archive: Path, destination: Path) -> None:
    """Extract the ``.py`` members, without the sdist's top folder, into a fresh folder."""
    if destination.exists():
        shutil.rmtree(destination)
    staging = Path(tempfile.mkdtemp(dir=CORPUS_DIR, prefix=f".{destination.name}-"))
    with tarfile.open(archive) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if not member.isfile() or not member.name.endswith(".py") or len(parts) < 2 or ".." in parts:
                continue
            relative = Path(*parts[1:])
            out = staging / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(member) as source:
                out.write_bytes(source.read())
    (staging / COMPLETE_MARKER).write_text(f"{archive.name} {_sha256(archive)}\n")
    staging.replace(destination)


def build(names: Optional[Iterable[str]] = None) -> List[Project]:
    """Make sure each named project (all by default) is downloaded and extracted."""
    projects = _select(names)
    CORPUS_DIR.mkdir(parents=True, exist_ok=True)
    for project in projects:
        marker = project.folder / COMPLETE_MARKER
        if marker.exists() and marker.read_text().split()[1:] == [project.sha256]:
            continue
        _extract_python_files(_download(project), project.folder)
    return projects


def _select(names: Optional[Iterable[str]]) -> List[Project]:
    if names is None:
        return list(PROJECTS.values())
    unknown = [name for name in names if name not in PROJECTS]
    if unknown:
        raise KeyError(f"unknown corpus project(s) {unknown}; known: {sorted(PROJECTS)}")
    return [PROJECTS[name] for name in names]


def corpus_files(names: Optional[Sequence[str]] = None) -> List[Path]:
    """Sorted ``.py`` files of the named projects (all by default), building what is missing."""
    files: List[Path] = []
    for project in build(names):
        files.extend(sorted(project.folder.rglob("*.py")))
    return files


def line_count(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)


def joined_files(files: Iterable[Path], lines: int, target: Path, keep: Callable[[str], bool] = lambda text: True) -> Path:
    """``target``: the files ``keep`` takes, one after another, until about ``lines`` lines (one
    long valid module when each is; files with ``from __future__`` imports, which must come
    first, or carriage returns are left out)."""
    parts, total = [], 0
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        if "from __future__" in text or "\r" in text or not keep(text):
            continue
        parts.append(text if text.endswith("\n") else text + "\n")
        total += text.count("\n")
        if total >= lines:
            break
    target.write_text("".join(parts), encoding="utf-8")
    return target


def fraction(files: Sequence[Path], share: float) -> List[Path]:
    """An evenly spread subset (every k-th file), so each project keeps its share."""
    if share >= 1:
        return list(files)
    count = max(1, round(len(files) * share))
    step = len(files) / count
    return [files[int(index * step)] for index in range(count)]


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help=f"projects to build (default all: {', '.join(PROJECTS)})")
    parser.add_argument("--list", action="store_true", help="print the file paths, one a line")
    args = parser.parse_args(argv)
    names = args.names or None
    files = corpus_files(names)
    if args.list:
        for path in files:
            print(path)
        return 0
    total_files = total_lines = 0
    for project in _select(names):
        paths = sorted(project.folder.rglob("*.py"))
        lines = sum(line_count(path) for path in paths)
        total_files += len(paths)
        total_lines += lines
        print(f"{project.name + '==' + project.version:28} {len(paths):6} files {lines:9} lines")
    print(f"{'total':28} {total_files:6} files {total_lines:9} lines  ({CORPUS_DIR})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
