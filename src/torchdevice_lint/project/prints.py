"""Each file's project fingerprint, kept between runs for projects whose modules did not change.

A cached result of a file holds while its bytes and its project's facts (as the file reads them:
``ProjectFacts.fingerprint``) are the same. Those facts follow from the bytes of the project's
modules (the module facts are cached by content per tool build) and from the checkpoint files
the modules name (``shipped.shipped_files``). So a project whose module hashes are all as they
were, under the same root, and whose named checkpoint files have the same size and modification
time, gets back the fingerprints of an earlier run without its module facts being read or
combined: a second run with one file changed combines only that file's project.
"""

from __future__ import annotations

import hashlib
import os
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

#: A checkpoint file the facts looked at: (path, [size, modification time in ns]) or (path, None)
#: where there was no regular file.
Looked = Tuple[str, Optional[List[int]]]


def project_digest(root: str, hashes: Mapping[str, Optional[str]]) -> str:
    """What a project's module facts follow from: its root, and each module's path and content hash."""
    lines = [root, *(f"{path}\t{hashes[path]}" for path in sorted(hashes))]
    return hashlib.sha256("\n".join(lines).encode("utf-8", "surrogatepass")).hexdigest()


def looked_at(paths: Iterable[str]) -> List[Looked]:
    """The size and modification time of each path, as ``shipped.cpu_only`` keys what it read."""
    found = []
    for path in sorted(set(paths)):
        try:
            status = os.stat(path)
        except OSError:
            found.append((path, None))
            continue
        found.append((path, [status.st_size, status.st_mtime_ns] if os.path.isfile(path) else None))
    return found


def unchanged(looked: Sequence[Looked]) -> bool:
    return [(path, list(status) if status is not None else None) for path, status in looked] == [
        (path, status) for path, status in looked_at(path for path, _ in looked)
    ]


class StoredPrints:
    """The fingerprints of earlier runs by project digest: ``{"prints": {path: fingerprint},
    "looked": [[path, [size, mtime]] or [path, null]]}``; what this run computed goes back."""

    def __init__(self, known: Optional[Dict[str, dict]] = None) -> None:
        self.known: Dict[str, dict] = dict(known or {})
        #: Digests whose entries this run changed (or confirmed): only these need writing.
        self.changed: Dict[str, dict] = {}
        #: The digests of this run's projects: a save keeps no other entry.
        self.held: Set[str] = set()

    def prints_of(self, digest: str) -> Dict[str, str]:
        """The stored fingerprints of a project with this digest, if its checkpoint files are unchanged."""
        self.held.add(digest)
        entry = self.known.get(digest)
        if entry is None or not unchanged(entry["looked"]):
            return {}
        return dict(entry["prints"])

    def keep(self, digest: str, path: str, fingerprint: str, looked: List[Looked]) -> None:
        """A fingerprint this run computed, kept with what the project's checkpoint files were."""
        entry = self.changed.get(digest)
        if entry is None:
            entry = {"prints": self.prints_of(digest), "looked": [[name, status] for name, status in looked]}
            self.known[digest] = self.changed[digest] = entry
        entry["prints"][path] = fingerprint


def well_formed(entry) -> bool:
    """Whether a stored entry has the shape ``StoredPrints`` writes."""
    if not (isinstance(entry, dict) and set(entry) == {"prints", "looked"}):
        return False
    prints, looked = entry["prints"], entry["looked"]
    return (
        isinstance(prints, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in prints.items())
        and isinstance(looked, list) and all(
            isinstance(item, list) and len(item) == 2 and isinstance(item[0], str)
            and (item[1] is None or (isinstance(item[1], list) and len(item[1]) == 2 and all(type(n) is int for n in item[1])))
            for item in looked
        )
    )
