"""Edits that change only comments and layout: the server moves the last analysis's findings
instead of running the engine, and what it publishes equals a fresh full analysis byte for byte."""

import json
import random

from test_editor_edits import TYPED, joined_fixtures

from torchdevice_lint.app.editor import Lines, Projects, check_buffer, code_actions, diagnostics

#: Layout an editing session types: comments, blank lines, a directive, a line broken in brackets.
LAYOUT = ["  # why", "\n", "\n# a note\n", "  # noqa: TDV301", "  # torchdevice-lint: noqa"]


def edited(text: str, chance: random.Random) -> str:
    """A comment or blank line typed at a random line (mostly), else a statement typed, a line
    deleted or duplicated: every text still parses."""
    lines = text.splitlines(keepends=True)
    row = chance.randrange(1, len(lines) - 1)
    line = lines[row]
    kind = chance.randrange(10)
    if kind < 6:
        typed = chance.choice(LAYOUT)
        if typed.startswith("  #") and line.strip() and not line.rstrip().endswith("\\") and '"""' not in line and "'''" not in line:
            lines[row] = line.rstrip("\n") + typed + "\n"
        elif not typed.startswith("  #"):
            lines.insert(row, typed.lstrip("\n") if lines[row - 1].endswith("\n") and typed != "\n" else typed)
    elif kind < 8 and line.strip() and line.count("(") == line.count(")") and not line.rstrip().endswith((":", ",", "\\", "(")):
        indent = line[: len(line) - len(line.lstrip())]
        lines.insert(row, indent + chance.choice(TYPED) + "\n")
    elif kind == 8 and line.strip() == "":
        del lines[row]
    else:
        lines[row] = line.replace(", ", ",  ", 1)  # spaces in a call or a list
    return "".join(lines)


def published(checked) -> str:
    return json.dumps(diagnostics(checked, Lines(checked.text)), sort_keys=True)


def test_diagnostics_after_random_edits_equal_a_fresh_full_analysis(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    path = str(tmp_path / "train.py")
    chance, projects, checked, moved, compared = random.Random(7), Projects(), None, 0, 0
    text = joined_fixtures()
    for _ in range(50):
        candidate = edited(text, chance)
        try:
            compile(candidate, path, "exec")
        except SyntaxError:
            continue
        text = candidate
        engine, _ = projects.engine_for(path)
        checked = check_buffer(engine, "file://open", path, text, checked)
        fresh_engine, _ = Projects().engine_for(path)
        fresh = check_buffer(fresh_engine, "file://fresh", path, text)
        assert published(checked) == published(fresh), text
        compared += 1
        moved += checked.analysis is None and checked.base is not checked
    assert compared > 30 and moved > 12  # most edits were layout, and their findings were moved


def test_a_moved_buffer_is_analysed_when_its_fixes_are_asked_for(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    path = str(tmp_path / "train.py")
    projects = Projects(unsafe_fixes=True)
    engine, _ = projects.engine_for(path)
    text = joined_fixtures()
    first = check_buffer(engine, "file://open", path, text)
    row = first.findings[-1][1].location.row
    lines = text.splitlines(keepends=True)
    lines.insert(row - 1, "# typed above the last finding\n")
    moved = check_buffer(engine, "file://open", path, "".join(lines), first)
    assert moved.analysis is None and moved.findings[-1][0] is None
    whole = {"start": {"line": 0, "character": 0}, "end": {"line": len(lines), "character": 0}}
    fresh = check_buffer(Projects(unsafe_fixes=True).engine_for(path)[0], "file://open", path, moved.text)
    assert code_actions(moved, whole, None, Lines(moved.text)) == code_actions(fresh, whole, None, Lines(fresh.text))
    assert moved.analysis is not None and moved.base is moved
