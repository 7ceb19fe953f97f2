"""The formats added for CI services (gitlab, json-lines, rdjson), the JSON output's published
schema checked against real output, and code frames whose carets land under the finding."""

import json
from pathlib import Path

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.output import full, render
from torchdevice_lint.model.settings import Settings

jsonschema = pytest.importorskip("jsonschema")

SCHEMA = json.loads((Path(__file__).resolve().parents[1] / "docs" / "json-output.schema.json").read_text())
SOURCE = (
    "import torch\n"
    "model = torch.nn.Linear(2, 2).cuda()\n"
    "state = torch.load('m.pt')\n"
    "torch.cuda.synchronize()\n"
)
# The state is used as loaded: the safe fix keeps each tensor's saved device where it exists.
KEEPS_SAVED_DEVICE = 'lambda storage, location: storage if location.startswith("cuda") and not torch.cuda.is_available() else None'


@pytest.fixture
def results():
    engine = api.engine(Settings(extend_select=("TDV9",)))
    return [engine.check_source("pkg/train.py", SOURCE, with_edits=True)]


def test_json_output_matches_the_published_schema(results):
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    document = json.loads(render("json", results, {}))
    assert {item["fix"]["applicability"] for item in document if item["fix"]} >= {"safe", "unsafe"}
    jsonschema.validate(document, SCHEMA)


def test_schema_rejects_what_breaks_the_contract(results):
    item = json.loads(render("json", results, {}))[0]
    for broken in ({**item, "location": {"row": 0, "column": 1}}, {**item, "fix": {"applicability": "maybe"}},
                   {key: value for key, value in item.items() if key != "end_location"}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate([broken], SCHEMA)


def test_json_lines_has_one_schema_item_per_line(results):
    lines = render("json-lines", results, {}).splitlines()
    items = [json.loads(line) for line in lines]
    assert items == json.loads(render("json", results, {}))
    finding = {"$ref": "#/$defs/finding", "$defs": SCHEMA["$defs"]}
    for item in items:
        jsonschema.validate(item, finding)


def test_gitlab_code_quality_report(results):
    report = json.loads(render("gitlab", results, {}))
    first = report[0]
    assert first["check_name"] == "TDV101" and first["severity"] == "major"
    assert first["location"] == {"path": "pkg/train.py", "positions": {"begin": {"line": 2, "column": 9},
                                                                        "end": {"line": 2, "column": 37}}}
    assert first["description"].startswith("TDV101 `.cuda()`")
    assert len({item["fingerprint"] for item in report}) == len(report)
    # The fingerprint follows the finding, not its line: code inserted above keeps it.
    shifted = api.engine(Settings(extend_select=("TDV9",))).check_source("pkg/train.py", "# comment\n" + SOURCE)
    assert [i["fingerprint"] for i in json.loads(render("gitlab", [shifted], {}))] == [i["fingerprint"] for i in report]


def test_rdjson_for_reviewdog_carries_fixes_as_suggestions(results):
    report = json.loads(render("rdjson", results, {}))
    assert report["source"] == {"name": "torchdevice-lint"}
    load = next(d for d in report["diagnostics"] if d["code"]["value"] == "TDV501")
    assert load["location"] == {"path": "pkg/train.py", "range": {"start": {"line": 3, "column": 9},
                                                                  "end": {"line": 3, "column": 27}}}
    assert load["suggestions"] == [{"range": {"start": {"line": 3, "column": 1}, "end": {"line": 4, "column": 1}},
                                    "text": f"state = torch.load('m.pt', map_location={KEEPS_SAVED_DEVICE})\n"}]


def frame_carets(source, code="TDV101"):
    results = [api.engine(Settings()).check_source("x.py", source)]
    lines = full(results, {"x.py": source}).splitlines()
    shown = next(i for i, line in enumerate(lines) if line.rstrip().endswith(code) and "^" in line)
    return lines[shown - 1].split("| ", 1)[1], lines[shown].split("| ", 1)[1]


def test_caret_lands_under_the_finding_on_a_tab_indented_line():
    code_line, carets = frame_carets("import torch\nif ok:\n\tmodel = net.cuda()\n")
    start = code_line.index("net.cuda()")
    assert carets.index("^") == start and carets.count("^") == len("net.cuda()")


def test_caret_lands_under_the_finding_after_wide_characters():
    code_line, carets = frame_carets("import torch\nlabel = '日本語'; x = net.cuda()\n")
    # Each of the three wide characters takes two terminal columns.
    assert carets.index("^") == code_line.index("net.cuda()") + 3
    assert carets.count("^") == len("net.cuda()")
