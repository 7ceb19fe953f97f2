"""The fidelity table in docs/simulated-devices.md and its tests cannot drift apart: every row
names tests that exist, and every fidelity test is named by a row."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "simulated-devices.md"
TEST_NAME = re.compile(r"`(test_\w+)`")


def table_rows() -> list:
    section = DOC.read_text().split("## Fidelity table\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| API")]
    return [[cell.strip() for cell in row.strip("|").split(" | ")] for row in rows]


def defined_tests(pattern: str) -> set:
    names = set()
    for path in (ROOT / "tests").glob(pattern):
        tree = ast.parse(path.read_text())
        names.update(node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"))
    return names


def test_every_row_has_six_columns_and_names_tests_that_exist():
    rows = table_rows()
    assert len(rows) >= 30
    existing = defined_tests("test_*.py")
    for row in rows:
        assert len(row) == 6, row
        named = TEST_NAME.findall(row[5])
        assert named, f"row without a test: {row[0]}"
        assert set(named) <= existing, f"{row[0]}: no such test {set(named) - existing}"


def test_every_fidelity_test_is_named_by_a_row():
    named = {name for row in table_rows() for name in TEST_NAME.findall(row[5])}
    assert defined_tests("test_fidelity_[cm]*.py") - named == set()


def test_the_doc_says_no_real_device_ran_the_table():
    assert "No GPU and no Mac was available" in DOC.read_text()
