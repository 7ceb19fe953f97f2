"""The language server's promises to the editor (issue 30): the exit status LSP asks for, no file
written, and an answer to every request while a huge buffer is open. A real subprocess."""

import sys
import time

import pytest

from bench.lsp_client import LspClient

pytest.importorskip("pygls", reason="the language server needs the lsp extra")

#: The server as an installed package runs it: no docs folder beside the package.
INSTALLED_SERVER = [sys.executable, "-c", (
    "import pathlib, sys; import torchdevice_lint.app.editor as editor; editor.RULE_DOCS = pathlib.Path('/no-docs-folder'); "
    "from torchdevice_lint.cli import lint_main; sys.exit(lint_main(['server']))"
)]
BUFFER = 'import torch\nx = torch.ones(1).cuda()\nstate = torch.load("m.pt")\n'


@pytest.fixture
def project(tmp_path):
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "pyproject.toml").write_text("[tool.torchdevice-lint]\n", encoding="utf-8")
    return tmp_path / "project"


@pytest.fixture
def started():
    """Start servers; any still running at the end (a failed test) is killed."""
    clients = []

    def start(project, command=None):
        client = LspClient(command, cwd=project)
        clients.append(client)
        client.initialize(project)
        return client

    yield start
    for client in clients:
        if client.process.poll() is None:
            client.process.kill()
            client.process.wait()


def code_actions(client, uri, line, timeout=60):
    cursor = {"start": {"line": line, "character": 0}, "end": {"line": line, "character": 0}}
    params = {"textDocument": {"uri": uri}, "range": cursor, "context": {"diagnostics": []}}
    return client.request("textDocument/codeAction", params, timeout=timeout)


def test_exit_without_shutdown_ends_the_server_with_status_1(project, started):
    client = started(project)
    client.notify("exit")
    assert client.process.wait(timeout=30) == 1


def test_exit_after_shutdown_ends_the_server_with_status_0(project, started):
    client = started(project)
    assert client.request("shutdown", timeout=30)["result"] is None
    client.notify("exit")
    assert client.process.wait(timeout=30) == 0


def test_a_session_with_diagnostics_writes_nothing_into_the_user_cache(project, tmp_path, monkeypatch, started):
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))  # the server inherits it
    client = started(project, INSTALLED_SERVER)
    uri = client.open(project / "train.py", BUFFER)
    assert [d["code"] for d in client.diagnostics(uri)] == ["TDV101", "TDV501"]
    assert code_actions(client, uri, 2)["result"]
    assert client.close() == 0
    assert list(cache.rglob("*")) == []
    assert sorted(path.name for path in project.iterdir()) == ["pyproject.toml"]


def test_a_100000_line_buffer_is_not_checked_and_requests_are_answered_promptly(project, started):
    client = started(project)
    huge = "import torch\n" + "x = torch.ones(1).cuda()\n" * 100_000
    start = time.monotonic()
    uri = client.open(project / "huge.py", huge)
    [only] = client.diagnostics(uri, timeout=30)
    assert only["message"] == "buffer is too large (100,002 lines, limit 20,000); not checked"
    assert code_actions(client, uri, 1, timeout=30)["result"] is None  # nothing checked, nothing to fix
    assert client.request("shutdown", timeout=30)["result"] is None
    assert time.monotonic() - start < 15
    client.notify("exit")
    assert client.process.wait(timeout=30) == 0
