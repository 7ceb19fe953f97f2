"""The results front ends print: findings with positions, their fixes as text edits, errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional

from .errors import FileError
from .fixes import Applicability


@dataclass(frozen=True)
class Location:
    row: int  # 1-based
    column: int  # 1-based, as ruff prints it

    def as_dict(self) -> dict:
        return {"row": self.row, "column": self.column}


@dataclass(frozen=True)
class Edit:
    content: str
    location: Location
    end_location: Location
    #: In a notebook, the cell (1-based, among all its cells) the positions are relative to.
    cell: Optional[int] = None

    def as_dict(self) -> dict:
        item = {
            "content": self.content,
            "location": self.location.as_dict(),
            "end_location": self.end_location.as_dict(),
        }
        return item if self.cell is None else {**item, "cell": self.cell}


@dataclass
class FixInfo:
    applicability: Applicability
    message: str
    edits: List[Edit] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "applicability": self.applicability.value,
            "message": self.message,
            "edits": [edit.as_dict() for edit in self.edits],
        }


@dataclass
class Finding:
    code: str
    name: str
    message: str
    filename: str
    location: Location
    end_location: Location
    fix: Optional[FixInfo] = None
    #: Where it stands, for a baseline to match it without its line: the dotted name of the
    #: functions and classes around it (``""`` at module level) and its statement's code,
    #: normalised (``syntax/cst_statement.py``). Not part of the JSON output.
    scope: Optional[str] = None
    statement: Optional[str] = None
    #: In a notebook, the cell (1-based, among all its cells) the positions are relative to.
    cell: Optional[int] = None

    def as_dict(self) -> dict:
        item = {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "filename": self.filename,
            "location": self.location.as_dict(),
            "end_location": self.end_location.as_dict(),
            "fix": self.fix.as_dict() if self.fix else None,
        }
        return item if self.cell is None else {**item, "cell": self.cell}

    @property
    def position(self) -> str:
        """``row:column``, or ``cell N:row:column`` in a notebook (as ruff prints it)."""
        cell = "" if self.cell is None else f"cell {self.cell}:"
        return f"{cell}{self.location.row}:{self.location.column}"

    @property
    def where(self) -> str:
        return f"{self.filename}:{self.position}"


def position_key(finding: Finding) -> tuple:
    """Findings are listed in the order of the file, as ruff lists them."""
    return (finding.cell or 0, finding.location.row, finding.location.column, finding.end_location.row, finding.end_location.column, finding.code)


@dataclass
class FileResult:
    filename: str
    findings: List[Finding] = field(default_factory=list)
    error: Optional[FileError] = None
    parsed: bool = False

