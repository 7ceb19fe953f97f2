"""`torchdevice-lint server` as an editor meets it: a real subprocess, JSON-RPC over stdio."""

import subprocess
import sys

import pytest
from test_editor import apply_edits

from bench.lsp_client import LspClient, file_uri
from torchdevice_lint.knowledge.torch_releases import binding_expression
from torchdevice_lint.model.settings import Settings

pytest.importorskip("pygls", reason="the language server needs the lsp extra")

BUFFER = 'import torch\nx = torch.ones(1).cuda()\nstate = torch.load("m.pt")\n'


def torchdevice_fix(path, text, *args):
    """What `torchdevice-fix -` prints for the same buffer."""
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
    result = subprocess.run([*command, *args, "--stdin-filename", str(path), "-"], input=text.encode(), capture_output=True)
    return result.stdout.decode()


def cursor(line):
    return {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}


def code_actions(client, uri, line, only=None):
    context = {"diagnostics": [], **({"only": only} if only else {})}
    answer = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": cursor(line), "context": context})
    return answer["result"] or []


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n", encoding="utf-8")
    return tmp_path


@pytest.fixture
def client(project):
    client = LspClient(cwd=project)
    client.initialize(project)
    yield client
    client.close()


def test_a_session_from_initialize_to_exit(project):
    client = LspClient(cwd=project)
    capabilities = client.initialize(project)["result"]["capabilities"]
    assert capabilities["codeActionProvider"]["codeActionKinds"] == ["quickfix", "source.fixAll.torchdevice"]
    assert capabilities["executeCommandProvider"]["commands"] == ["torchdevice.applyFixAll"]

    path = project / "train.py"
    path.write_text(BUFFER, encoding="utf-8")
    uri = client.open(path, BUFFER)
    found = client.diagnostics(uri, version=1)
    assert [(d["code"], d["range"]["start"], d["severity"]) for d in found] == [
        ("TDV101", {"line": 1, "character": 4}, 2),
        ("TDV501", {"line": 2, "character": 8}, 2),
    ]
    assert found[1]["message"].startswith("load-without-map-location: ")

    titles = [a["title"] for a in code_actions(client, uri, 2)]
    assert titles == ["Fix TDV501: Pass `map_location=` that keeps the saved device, or the CPU where CUDA is missing", "Disable TDV501 for this line"]
    assert [a["title"] for a in code_actions(client, uri, 1)] == ["Disable TDV101 for this line"]  # unsafe: off

    [fix_all] = code_actions(client, uri, 0, only=["source.fixAll"])
    assert fix_all["kind"] == "source.fixAll.torchdevice"
    fixed = apply_edits(BUFFER, fix_all["edit"]["changes"][uri])
    assert fixed == torchdevice_fix(path, BUFFER) != BUFFER

    # an edit in the editor: line 2 typed over, incrementally
    client.notify("textDocument/didChange", {
        "textDocument": {"uri": uri, "version": 2},
        "contentChanges": [{"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 26}}, "text": "y = 1"}],
    })
    assert [d["code"] for d in client.diagnostics(uri, version=2)] == ["TDV101"]
    # changes in quick succession are checked once, after the last
    for version, text in ((3, BUFFER), (4, "import torch\n")):
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [{"text": text}]})
    published = client.wait_for("textDocument/publishDiagnostics", lambda p: p["uri"] == uri)
    assert (published["version"], published["diagnostics"]) == (4, [])
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 5}, "contentChanges": [{"text": BUFFER}]})
    client.diagnostics(uri, version=5)
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    assert [d["code"] for d in client.diagnostics(uri)] == ["TDV101", "TDV501"]

    assert path.read_text(encoding="utf-8") == BUFFER  # the server never writes
    assert client.close() == 0


def test_fix_all_command_sends_the_edit_torchdevice_fix_would_write(project):
    client = LspClient(cwd=project)
    client.initialize(project, {"unsafeFixes": True})
    buffers = {
        "crlf.py": BUFFER.replace("\n", "\r\n"),
        "unicode.py": 'import torch\nname = "🔥"; x = torch.ones(1).cuda()\n',
        "amp.py": "import torch\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast(True):\n    pass\n",
    }
    uris = {name: client.open(project / name, text) for name, text in buffers.items()}
    client.open(project / "broken.py", "import torch\nx = torch.ones(1).cuda(\n")
    for uri in uris.values():
        client.diagnostics(uri)
    expected = {name: torchdevice_fix(project / name, text, "--unsafe-fixes") for name, text in buffers.items()}

    # no argument: every open buffer, in one workspace edit; the broken one is left as it is
    answer = client.request("workspace/executeCommand", {"command": "torchdevice.applyFixAll", "arguments": []})
    assert answer["result"].startswith(str(project / "broken.py") + ": error: syntax error at 2:")
    changes = client.server_requests[-1]["params"]["edit"]["changes"]
    assert sorted(changes) == sorted(uris.values())
    for name, text in buffers.items():
        assert apply_edits(text, changes[uris[name]]) == expected[name] != text

    for name, text in buffers.items():
        answer = client.request("workspace/executeCommand", {"command": "torchdevice.applyFixAll", "arguments": [uris[name]]})
        assert answer["result"] is None
        edit = client.server_requests[-1]
        assert edit["method"] == "workspace/applyEdit"
        assert apply_edits(text, edit["params"]["edit"]["changes"][uris[name]]) == expected[name]
        [quick] = [a for a in code_actions(client, uris[name], 1) if a["title"].startswith("Fix ")]
        assert quick["title"].endswith("(unsafe)") or name == "amp.py"
    assert sorted(p.name for p in project.iterdir()) == ["pyproject.toml"]  # nothing written
    client.close()


def test_a_client_that_resolves_gets_the_edit_when_it_picks_the_fix(project):
    client = LspClient(cwd=project)
    client.initialize(project, {"unsafeFixes": True}, resolve=True)
    uri = client.open(project / "a.py", BUFFER)
    client.diagnostics(uri)
    [quick, noqa] = code_actions(client, uri, 1)
    assert quick["title"] == "Fix TDV101: Replace `.cuda()` with `.to(device)` (unsafe)" and "edit" not in quick
    assert "edit" in noqa  # cheap: sent at once
    resolved = client.request("codeAction/resolve", quick)["result"]
    fixed = apply_edits(BUFFER, resolved["edit"]["changes"][uri])
    binding = binding_expression(Settings())
    assert fixed == f'import torch\n\ndevice = {binding}\nx = torch.ones(1).to(device)\nstate = torch.load("m.pt")\n'
    client.close()


def test_noqa_action_silences_the_finding(client, project):
    uri = client.open(project / "a.py", BUFFER)
    client.diagnostics(uri)
    [noqa] = [a for a in code_actions(client, uri, 1) if a["title"] == "Disable TDV101 for this line"]
    text = apply_edits(BUFFER, noqa["edit"]["changes"][uri])
    assert text.splitlines()[1] == "x = torch.ones(1).cuda()  # noqa: TDV101"
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": text}]})
    assert [d["code"] for d in client.diagnostics(uri, version=2)] == ["TDV501"]
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    assert client.diagnostics(uri) == []  # a closed buffer's findings are cleared


def test_the_configuration_is_reloaded_when_pyproject_changes(client, project):
    uri = client.open(project / "a.py", BUFFER)
    assert [d["code"] for d in client.diagnostics(uri)] == ["TDV101", "TDV501"]
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nignore = ["TDV501"]\n', encoding="utf-8")
    client.notify("workspace/didChangeWatchedFiles", {"changes": [{"uri": file_uri(project / "pyproject.toml"), "type": 2}]})
    assert [d["code"] for d in client.diagnostics(uri)] == ["TDV101"]


def test_each_workspace_folder_has_its_own_configuration(client, project):
    (project / "other").mkdir()
    (project / "other" / "pyproject.toml").write_text('[tool.torchdevice-lint]\nignore = ["TDV1"]\n', encoding="utf-8")
    here = client.open(project / "a.py", BUFFER)
    there = client.open(project / "other" / "a.py", BUFFER)
    assert [d["code"] for d in client.diagnostics(here)] == ["TDV101", "TDV501"]
    assert [d["code"] for d in client.diagnostics(there)] == ["TDV501"]


def test_a_syntax_error_is_one_diagnostic_and_the_server_goes_on(client, project):
    uri = client.open(project / "a.py", "import torch\nx = torch.ones(1).cuda(\n")
    [error] = client.diagnostics(uri)
    assert error["severity"] == 1 and error["message"].startswith("syntax error at 2:")
    assert code_actions(client, uri, 1) == []
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [{"text": BUFFER}]})
    assert [d["code"] for d in client.diagnostics(uri, version=2)] == ["TDV101", "TDV501"]


CRASHING_ENGINE = (
    "import sys\n"
    "from torchdevice_lint.engine.engine import Engine\n"
    "real = Engine.analyze\n"
    "def analyze(self, path, source, *args, **kwargs):\n"
    "    if 'BOOM' in source:\n"
    "        raise RuntimeError('engine bug')\n"
    "    return real(self, path, source, *args, **kwargs)\n"
    "Engine.analyze = analyze\n"
    "from torchdevice_lint.cli import lint_main\n"
    "sys.exit(lint_main(['server']))\n"
)


def test_a_crash_is_logged_and_answered_with_an_error(project):
    client = LspClient([sys.executable, "-c", CRASHING_ENGINE], cwd=project)
    client.initialize(project)
    bad = client.open(project / "bad.py", BUFFER + "BOOM = 1\n")
    log = client.wait_for("window/logMessage", lambda p: "engine bug" in p["message"])
    assert log["type"] == 1
    answer = client.request("textDocument/codeAction", {"textDocument": {"uri": bad}, "range": cursor(1), "context": {"diagnostics": []}})
    assert "engine bug" in answer["error"]["message"]
    client.wait_for("window/logMessage", lambda p: p["message"].startswith("internal error (RuntimeError: engine bug)"))
    answer = client.request("workspace/executeCommand", {"command": "torchdevice.applyFixAll", "arguments": [42]})
    assert "needs the URI of an open document" in answer["error"]["message"]

    good = client.open(project / "good.py", BUFFER)  # still serving
    assert [d["code"] for d in client.diagnostics(good)] == ["TDV101", "TDV501"]
    assert client.close() == 0


def test_without_pygls_the_server_says_how_to_install_it():
    hide = "import sys; sys.modules['pygls'] = None; from torchdevice_lint.cli import lint_main; sys.exit(lint_main(['server']))"
    result = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert "pip install 'torchdevice-lint[lsp]'" in result.stderr


def test_the_base_install_never_imports_pygls():
    code = "import sys, torchdevice_lint.cli, torchdevice_lint.app.editor; print('pygls' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
