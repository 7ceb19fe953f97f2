"""The formats CI services read: GitHub annotations, GitLab Code Quality, reviewdog's rdjson,
SARIF for code scanning, JUnit XML."""

from __future__ import annotations

import hashlib
import json
import os
import xml.etree.ElementTree as ElementTree
from collections import Counter
from pathlib import PurePath
from typing import Dict, Optional, Sequence, Tuple
from urllib.parse import quote

from ..model.findings import FileResult, Finding, Location
from .notebooks import NotebookError, parse_notebook


def _position(location) -> dict:
    return {"line": location.row, "column": location.column}


class _InNotebook:
    """Where a notebook's findings are in its JSON text, for the formats whose readers annotate
    the file as it is committed (GitHub, GitLab): the row holding the cell's line, else row 1."""

    def __init__(self, sources: Dict[str, str]) -> None:
        self.sources = sources
        self._rows: Dict[str, dict] = {}

    def span(self, finding: Finding) -> Tuple[Location, Location]:
        if finding.cell is None:
            return finding.location, finding.end_location
        if finding.filename not in self._rows:
            try:
                self._rows[finding.filename] = parse_notebook(finding.filename, self.sources.get(finding.filename, "")).json_rows()
            except NotebookError:
                self._rows[finding.filename] = {}
        rows = self._rows[finding.filename]
        start = rows.get((finding.cell, finding.location.row), 1)
        return Location(start, 1), Location(rows.get((finding.cell, finding.end_location.row), start), 1)


def _label(finding: Finding) -> str:
    """The message, led by the cell position in a notebook (its rows point at the JSON)."""
    return finding.message if finding.cell is None else f"{finding.position}: {finding.message}"


def gitlab(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    """GitLab Code Quality report. The fingerprint hashes the path, code and message (plus
    the occurrence number), not the line, so a finding keeps its identity when code moves."""
    items, seen = [], Counter()
    notebooks = _InNotebook(sources)
    for result in results:
        path = PurePath(os.path.relpath(result.filename) if os.path.isabs(result.filename) else result.filename).as_posix()
        for f in result.findings:
            key = (path, f.code, f.message)
            seen[key] += 1
            fingerprint = hashlib.sha256(json.dumps([*key, seen[key]]).encode()).hexdigest()
            begin, end = notebooks.span(f)
            items.append({
                "check_name": f.code,
                "description": f"{f.code} {_label(f)}",
                "severity": "major",
                "fingerprint": fingerprint,
                "location": {"path": path, "positions": {"begin": _position(begin), "end": _position(end)}},
            })
    return json.dumps(items, indent=2) + "\n"


def rdjson(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    """reviewdog's Diagnostic Format; a fix's edits become suggestions."""
    diagnostics = []
    for result in results:
        for f in result.findings:
            item = {
                "message": f.message,
                "location": {"path": f.filename, "range": {"start": _position(f.location), "end": _position(f.end_location)}},
                "code": {"value": f.code},
                "severity": "WARNING",
            }
            if f.fix and f.fix.edits:
                item["suggestions"] = [
                    {"range": {"start": _position(e.location), "end": _position(e.end_location)}, "text": e.content}
                    for e in f.fix.edits
                ]
            diagnostics.append(item)
    report = {"source": {"name": "torchdevice-lint"}, "severity": "WARNING", "diagnostics": diagnostics}
    return json.dumps(report, indent=2) + "\n"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")


def github(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    """GitHub Actions workflow commands: each finding becomes an annotation on the pull
    request's diff; a file that could not be checked gets one on its first line."""
    lines = []
    notebooks = _InNotebook(sources)
    for result in results:
        if result.error is not None:
            lines.append(
                f"::error file={_escape_property(result.filename)},line=1,"
                f"title={_escape_property('torchdevice-lint')}::{_escape_data(result.error.message)}"
            )
        for f in result.findings:
            start, end = notebooks.span(f)
            properties = ",".join(
                [
                    f"file={_escape_property(f.filename)}",
                    f"line={start.row}",
                    f"col={start.column}",
                    f"endLine={end.row}",
                    f"endColumn={end.column}",
                    f"title={_escape_property(f'{f.code} ({f.name})')}",
                ]
            )
            lines.append(f"::error {properties}::{_escape_data(f'{f.code} {_label(f)}')}")
    return "\n".join(lines) + ("\n" if lines else "")


SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


def _artifact_uri(path: str) -> dict:
    """Relative paths stay relative to the checkout (``%SRCROOT%``), as code scanning expects."""
    pure = PurePath(path)
    if pure.is_absolute():
        return {"uri": PurePath(os.path.abspath(path)).as_uri()}
    return {"uri": quote(pure.as_posix()), "uriBaseId": "%SRCROOT%"}


def _sarif_rule(rule) -> dict:
    from .docs import rule_page

    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.what.split(". ")[0].rstrip(".") + "."},
        "fullDescription": {"text": rule.what},
        "help": {"text": rule.why, "markdown": rule_page(rule)},
        "defaultConfiguration": {"level": "error" if rule.default_enabled else "note", "enabled": rule.default_enabled},
        "properties": {"fix-safety": rule.fix_safety.value},
    }


def _sarif_fix(finding: Finding, artifact: dict) -> Optional[dict]:
    if not finding.fix or not finding.fix.edits:
        return None
    replacements = [
        {
            "deletedRegion": {
                "startLine": edit.location.row,
                "startColumn": edit.location.column,
                "endLine": edit.end_location.row,
                "endColumn": edit.end_location.column,
            },
            "insertedContent": {"text": edit.content},
            **({} if edit.cell is None else {"properties": {"cell": edit.cell}}),
        }
        for edit in finding.fix.edits
    ]
    return {
        "description": {"text": f"{finding.fix.message} ({finding.fix.applicability.value})"},
        "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements}],
    }


def sarif(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    """SARIF 2.1.0, as GitHub code scanning and other dashboards ingest it. Columns count
    Unicode code points, as every other format here does."""
    from .. import __version__
    from ..rules import all_rules

    rules = all_rules()
    index = {rule.code: position for position, rule in enumerate(rules)}
    sarif_results = []
    for result in results:
        for f in result.findings:
            artifact = _artifact_uri(f.filename)
            item = {
                "ruleId": f.code,
                "ruleIndex": index[f.code],
                "level": "error",
                "message": {"text": f.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": artifact,
                            "region": {
                                "startLine": f.location.row,
                                "startColumn": f.location.column,
                                "endLine": f.end_location.row,
                                "endColumn": f.end_location.column,
                            },
                        }
                    }
                ],
            }
            if f.cell is not None:  # a notebook's: rows and columns count from the cell's start
                item["properties"] = {"cell": f.cell}
            fix = _sarif_fix(f, artifact)
            if fix is not None:
                item["fixes"] = [fix]
            sarif_results.append(item)
    notifications = [
        {
            "level": "error",
            "message": {"text": result.error.message},
            "locations": [{"physicalLocation": {"artifactLocation": _artifact_uri(result.filename)}}],
        }
        for result in results
        if result.error is not None
    ]
    run = {
        "tool": {
            "driver": {
                "name": "torchdevice-lint",
                "version": __version__,
                "semanticVersion": __version__,
                "rules": [_sarif_rule(rule) for rule in rules],
            }
        },
        "columnKind": "unicodeCodePoints",
        "results": sarif_results,
        "invocations": [
            {"executionSuccessful": not notifications, "toolExecutionNotifications": notifications}
        ],
    }
    log = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [run]}
    return json.dumps(log, indent=2) + "\n"


def junit(results: Sequence[FileResult], sources: Dict[str, str]) -> str:
    """JUnit XML for CI test reports: a suite per file, a failing case per finding, an
    erroring case per file that could not be checked, one passing case per clean file."""
    findings = sum(len(r.findings) for r in results)
    errors = sum(1 for r in results if r.error is not None)
    root = ElementTree.Element("testsuites", name="torchdevice-lint")
    cases = 0
    for result in results:
        suite = ElementTree.SubElement(root, "testsuite", name=result.filename)
        if result.error is not None:
            case = ElementTree.SubElement(suite, "testcase", classname=result.filename, name="check")
            ElementTree.SubElement(case, "error", message=result.error.message).text = str(result.error)
        elif not result.findings:
            ElementTree.SubElement(suite, "testcase", classname=result.filename, name="check")
        for f in result.findings:
            name = f"{f.code} ({f.name}) at {f.position}"
            case = ElementTree.SubElement(suite, "testcase", classname=result.filename, name=name, line=str(f.location.row))
            failure = ElementTree.SubElement(case, "failure", message=f.message, type=f.code)
            failure.text = f"{f.where}: {f.code} {f.message}"
        suite_cases = len(suite)
        cases += suite_cases
        suite.set("tests", str(suite_cases))
        suite.set("failures", str(len(result.findings)))
        suite.set("errors", "1" if result.error is not None else "0")
    root.set("tests", str(cases))
    root.set("failures", str(findings))
    root.set("errors", str(errors))
    ElementTree.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ElementTree.tostring(root, encoding="unicode") + "\n"
