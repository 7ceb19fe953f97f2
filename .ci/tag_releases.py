#!/usr/bin/env python3
"""Tag every release: ``vX.Y.Z`` on the commit that set ``version = "X.Y.Z"`` in pyproject.toml,
for each ``## X.Y.Z`` section of CHANGELOG.md. The README's pre-commit snippet names
``rev: v<version>``; pre-commit clones that tag, so it must exist in the repository users clone.

Run it after committing a release (version, CHANGELOG section, README rev), then push the tags.
Existing tags are left alone; one that points at a commit without its version is an error.
Usage: python .ci/tag_releases.py [REPOSITORY]   (default: this repository)
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional

RELEASE_HEADING = re.compile(r"^## (\d+\.\d+\.\d+)\s*$", re.MULTILINE)


def git(repository: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repository, check=True, capture_output=True, text=True).stdout.strip()


def released_versions(repository: Path) -> List[str]:
    """The versions CHANGELOG.md has a section for, newest first ("Unreleased" is none)."""
    return RELEASE_HEADING.findall((repository / "CHANGELOG.md").read_text(encoding="utf-8"))


def release_commit(repository: Path, version: str) -> Optional[str]:
    """The first commit whose pyproject.toml says ``version = "<version>"``."""
    found = git(repository, "log", "--reverse", "--format=%H", "-G", rf'^version = "{re.escape(version)}"', "--", "pyproject.toml")
    for commit in found.splitlines():
        if f'version = "{version}"' in git(repository, "show", f"{commit}:pyproject.toml").splitlines():
            return commit
    return None


def tag_releases(repository: Path) -> Dict[str, str]:
    """Create the missing ``v<version>`` tags; returns the tags created, by name."""
    created = {}
    for version in released_versions(repository):
        tag = f"v{version}"
        commit = release_commit(repository, version)
        if commit is None:
            raise SystemExit(f"tag_releases: no commit sets version {version}, which CHANGELOG.md lists")
        existing = git(repository, "tag", "--list", tag)
        if existing:
            tagged = git(repository, "rev-list", "-n", "1", tag)
            if f'version = "{version}"' not in git(repository, "show", f"{tagged}:pyproject.toml").splitlines():
                raise SystemExit(f"tag_releases: {tag} points at {tagged[:12]}, whose version is not {version}")
            continue
        git(repository, "-c", "user.name=release", "-c", "user.email=release@example.invalid",
            "tag", "-a", tag, commit, "-m", f"torchdevice-lint {version}")
        created[tag] = commit
    return created


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    for name, commit in tag_releases(root).items():
        print(f"{name} -> {commit[:12]}")
