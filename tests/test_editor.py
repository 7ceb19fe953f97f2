"""The language server's conversions (app/editor.py, no pygls needed): diagnostics, quick fixes,
noqa edits and the fix-all edit, applied the way an editor applies LSP text edits and compared
with what `torchdevice-fix -` prints for the same buffer."""

import io
import re
import sys

import pytest

import torchdevice_lint.app.editor as editor_module
from torchdevice_lint.app.editor import (
    FIX_ALL_KIND,
    MAX_BUFFER_LINES,
    RULE_DOCS,
    Lines,
    Projects,
    check_buffer,
    code_actions,
    diagnostics,
    resolve_action,
)
from torchdevice_lint.cli import fix_main
from torchdevice_lint.rules import all_rules

URI = "file:///project/example.py"
EVERYWHERE = {"start": {"line": 0, "character": 0}, "end": {"line": 10**6, "character": 0}}


def apply_edits(text: str, edits, encoding: str = "utf-16") -> str:
    """What an editor does with LSP text edits: positions are (line, code units) in the
    original text, applied from the last to the first."""
    lines = re.findall(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]*\Z", text)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line))

    def offset(position):
        row = min(position["line"], len(lines) - 1)
        content = re.sub(r"(\r\n|\r|\n)\Z", "", lines[row])
        units, index = 0, 0
        while index < len(content) and units < position["character"]:
            char = content[index]
            units += len(char.encode("utf-8")) if encoding == "utf-8" else (2 if ord(char) > 0xFFFF and encoding == "utf-16" else 1)
            index += 1
        return starts[row] + index

    spans = sorted(((offset(e["range"]["start"]), offset(e["range"]["end"]), e["newText"]) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def write_config(directory, table: dict) -> None:
    def value(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(value(x) for x in v) + "]"
        return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'

    body = "".join(f"{key} = {value(v)}\n" for key, v in table.items())
    (directory / "pyproject.toml").write_text("[tool.torchdevice-lint]\n" + body, encoding="utf-8")


def torchdevice_fix_stdin(path, text: str, monkeypatch, capsys) -> str:
    """What `torchdevice-fix --stdin-filename PATH -` prints for ``text``."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(text.encode("utf-8")), encoding="utf-8"))
    capsys.readouterr()
    fix_main(["--stdin-filename", str(path), "-"])
    return capsys.readouterr().out


def checked_in(directory, text: str, name: str = "example.py", unsafe=None):
    path = directory / name
    engine, error = Projects(unsafe_fixes=unsafe).engine_for(str(path))
    assert error is None
    return check_buffer(engine, path.as_uri(), str(path), text)


def fix_all(checked):
    actions = code_actions(checked, EVERYWHERE, [FIX_ALL_KIND], Lines(checked.text))
    return actions[0]["edit"]["changes"][checked.uri] if actions else []


def quick_fixes(checked):
    return [a for a in code_actions(checked, EVERYWHERE, ["quickfix"], Lines(checked.text)) if a["title"].startswith("Fix ")]


FIXED_EXAMPLES = [
    pytest.param(rule, example, id=f"{rule.code}-{index}")
    for rule in all_rules()
    for index, example in enumerate(rule.invalid)
    if example.fixed is not None
]


@pytest.mark.parametrize("rule, example", FIXED_EXAMPLES)
def test_fix_all_and_quick_fixes_write_what_torchdevice_fix_writes(rule, example, tmp_path, monkeypatch, capsys):
    write_config(tmp_path, {"select": [rule.code], "unsafe-fixes": True, **(example.config or {})})
    # an example without other files stands for code whose project may run on a Mac's GPU, as a
    # file judged without its project is (a project that never names MPS keeps its mixes on the CPU)
    for name, code in (example.files or {"backends.py": 'NAMES = ("mps",)\n'}).items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(code if isinstance(code, bytes) else code.encode())
    expected = torchdevice_fix_stdin(tmp_path / "example.py", example.code, monkeypatch, capsys)
    assert expected == example.fixed

    checked = checked_in(tmp_path, example.code)
    assert apply_edits(example.code, fix_all(checked)) == expected

    if example.count == 1:
        [offered] = quick_fixes(checked)
        assert offered["title"].startswith(f"Fix {rule.code}: ")
        assert apply_edits(example.code, offered["edit"]["changes"][checked.uri]) == expected


BUFFER = 'import torch\nx = torch.ones(1).cuda()\nstate = torch.load("m.pt")\n'


def test_a_diagnostic_names_the_rule_its_page_and_the_exact_range(tmp_path):
    checked = checked_in(tmp_path, BUFFER)
    found = diagnostics(checked, Lines(BUFFER))
    assert [(d["code"], d["range"]) for d in found] == [
        ("TDV101", {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 24}}),
        ("TDV501", {"start": {"line": 2, "character": 8}, "end": {"line": 2, "character": 26}}),
    ]
    first = found[0]
    assert first["message"].startswith("cuda-method-call: `.cuda()`")
    assert "enable unsafeFixes" in first["message"]  # its fix is unsafe, and unsafe fixes are off
    assert first["severity"] == 2 and first["source"] == "torchdevice-lint"


@pytest.mark.skipif(not RULE_DOCS.is_dir(), reason="the rule pages are in a source checkout, not in an installed package")
def test_a_diagnostic_links_to_its_rule_page(tmp_path):
    [first, _] = diagnostics(checked_in(tmp_path, BUFFER), Lines(BUFFER))
    assert first["codeDescription"]["href"] == (RULE_DOCS / "TDV101.md").as_uri()


def test_an_installed_package_gives_no_link_and_writes_no_page(tmp_path, monkeypatch):
    monkeypatch.setattr(editor_module, "RULE_DOCS", tmp_path / "no-docs-folder")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    [first, _] = diagnostics(checked_in(tmp_path, BUFFER), Lines(BUFFER))
    assert "codeDescription" not in first
    assert not (tmp_path / "cache").exists()


def test_a_buffer_over_the_line_limit_is_one_diagnostic_saying_why(tmp_path):
    text = "import torch\n" + "x = torch.ones(1).cuda()\n" * MAX_BUFFER_LINES
    checked = checked_in(tmp_path, text)
    assert checked.analysis is None and checked.findings == []
    [only] = diagnostics(checked, Lines(text))
    assert only["message"] == f"buffer is too large ({MAX_BUFFER_LINES + 2:,} lines, limit {MAX_BUFFER_LINES:,}); not checked"
    assert only["severity"] == 1 and only["range"]["start"] == {"line": 0, "character": 0}
    assert code_actions(checked, EVERYWHERE, None, Lines(text)) == []
    one_long_line = "x = 1  # " + "#" * 5 * 2**20
    assert checked_in(tmp_path, one_long_line).error == "buffer is too large (5.0 MiB, limit 4 MiB); not checked"


def test_ranges_count_utf16_code_units_and_every_line_ending(tmp_path):
    text = 'import torch\r\nname = "🔥é"; x = torch.ones(1).cuda()\r\n'
    found = diagnostics(checked_in(tmp_path, text), Lines(text))
    # "🔥" is two UTF-16 code units: the finding starts at code point 17, code unit 18
    assert found[0]["range"]["start"] == {"line": 1, "character": 18}
    assert diagnostics(checked_in(tmp_path, text), Lines(text, "utf-8"))[0]["range"]["start"] == {"line": 1, "character": 21}
    checked = checked_in(tmp_path, text, unsafe=True)
    assert apply_edits(text, fix_all(checked)).endswith("x = torch.ones(1).to(device)\r\n")


def test_unsafe_fixes_are_offered_only_when_allowed_and_say_so(tmp_path):
    safe_only = [a["title"] for a in quick_fixes(checked_in(tmp_path, BUFFER))]
    assert safe_only == ['Fix TDV501: Pass `map_location=` that keeps the saved device, or the CPU where CUDA is missing']
    with_unsafe = [a["title"] for a in quick_fixes(checked_in(tmp_path, BUFFER, unsafe=True))]
    assert with_unsafe == ["Fix TDV101: Replace `.cuda()` with `.to(device)` (unsafe)", 'Fix TDV501: Pass `map_location=` that keeps the saved device, or the CPU where CUDA is missing']


def test_a_resolving_client_gets_the_same_edit_later(tmp_path):
    checked = checked_in(tmp_path, BUFFER, unsafe=True)
    eager = quick_fixes(checked)
    lazy = [a for a in code_actions(checked, EVERYWHERE, ["quickfix"], Lines(BUFFER), resolve=True) if a["title"].startswith("Fix ")]
    assert [a["title"] for a in lazy] == [a["title"] for a in eager]
    assert all("edit" not in action for action in lazy)
    assert [resolve_action(checked, action, Lines(BUFFER)) for action in lazy] == eager
    stale = {**lazy[0], "data": {**lazy[0]["data"], "code": "TDV501"}}  # the buffer changed since
    assert "edit" not in resolve_action(checked, stale, Lines(BUFFER))


def test_the_project_setting_decides_unless_the_editor_overrides_it(tmp_path):
    write_config(tmp_path, {"unsafe-fixes": True})
    assert len(quick_fixes(checked_in(tmp_path, BUFFER))) == 2
    assert len(quick_fixes(checked_in(tmp_path, BUFFER, unsafe=False))) == 1


def test_a_display_only_suggestion_is_text_not_an_action(tmp_path):
    text = "import torch\nmodel = torch.nn.DataParallel(net)\n"
    write_config(tmp_path, {"extend-select": ["TDV9"]})
    checked = checked_in(tmp_path, text, unsafe=True)
    found = diagnostics(checked, Lines(text))
    suggestion = [d for d in found if "\nSuggestion: " in d["message"]]
    assert suggestion, found
    assert suggestion[0]["severity"] == 3  # an opt-in hint
    titles = [a["title"] for a in code_actions(checked, EVERYWHERE, None, Lines(text))]
    assert not any(title.startswith(f"Fix {suggestion[0]['code']}") for title in titles)
    assert f"Disable {suggestion[0]['code']} for this line" in titles


def noqa(text, tmp_path, code):
    checked = checked_in(tmp_path, text)
    action = next(a for a in code_actions(checked, EVERYWHERE, ["quickfix"], Lines(text)) if a["title"] == f"Disable {code} for this line")
    return apply_edits(text, action["edit"]["changes"][checked.uri])


@pytest.mark.parametrize("line, expected", [
    ('state = torch.load("m.pt")', 'state = torch.load("m.pt")  # noqa: TDV501'),
    ('state = torch.load("m.pt")   ', 'state = torch.load("m.pt")  # noqa: TDV501'),
    ('state = torch.load("m.pt")  # noqa: E501', 'state = torch.load("m.pt")  # noqa: E501, TDV501'),
    ('state = torch.load("m.pt")  # noqa:E501,W291 trailing words', 'state = torch.load("m.pt")  # noqa:E501,W291, TDV501 trailing words'),
    ('state = torch.load("m.pt")  # type: ignore', 'state = torch.load("m.pt")  # type: ignore  # noqa: TDV501'),
])
def test_disable_for_this_line_merges_with_the_noqa_comment_there(line, expected, tmp_path):
    text = f"import torch\n{line}\nprint(state)\n"
    fixed = noqa(text, tmp_path, "TDV501")
    assert fixed == f"import torch\n{expected}\nprint(state)\n"
    assert checked_in(tmp_path, fixed).findings == []


def test_two_findings_of_a_rule_on_a_line_get_one_noqa_action(tmp_path):
    text = "import torch\na, b = torch.ones(1).cuda(), torch.zeros(1).cuda()\n"
    checked = checked_in(tmp_path, text)
    assert len(checked.findings) == 2
    titles = [a["title"] for a in code_actions(checked, EVERYWHERE, None, Lines(text))]
    assert titles == ["Disable TDV101 for this line"]


def test_noqa_goes_on_the_last_line_when_the_first_ends_inside_a_string(tmp_path):
    text = 'import torch\nstate = torch.load("""m\n.pt""")\n'
    assert noqa(text, tmp_path, "TDV501") == 'import torch\nstate = torch.load("""m\n.pt""")  # noqa: TDV501\n'


def test_a_syntax_error_is_one_diagnostic_where_python_stops(tmp_path):
    text = "import torch\nx = torch.ones(1).cuda(\n"
    checked = checked_in(tmp_path, text)
    found = diagnostics(checked, Lines(text))
    assert len(found) == 1
    assert found[0]["severity"] == 1 and found[0]["message"].startswith("syntax error at 2:")
    assert found[0]["range"]["start"]["line"] == 1
    assert code_actions(checked, EVERYWHERE, None, Lines(text)) == []


def test_a_bad_configuration_falls_back_to_the_defaults_and_says_why(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\nselect = 3\n")
    engine, error = Projects().engine_for(str(tmp_path / "example.py"))
    assert "select must be a list of strings" in error
    assert engine.settings.select == ("TDV",)


def test_settings_are_reloaded_after_forget(tmp_path):
    projects = Projects()
    before, _ = projects.engine_for(str(tmp_path / "a.py"))
    assert projects.engine_for(str(tmp_path / "b.py"))[0] is before  # one engine per project
    write_config(tmp_path, {"ignore": ["TDV501"]})
    projects.forget()
    after, _ = projects.engine_for(str(tmp_path / "a.py"))
    assert "TDV501" in after.settings.ignore
