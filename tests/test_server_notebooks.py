"""The language server with a notebook open, as VS Code's Jupyter support drives it: LSP 3.17
``notebookDocument/*`` notifications, diagnostics and code actions per cell."""

import pytest
from test_editor import apply_edits
from test_server import code_actions

from bench.lsp_client import LspClient, file_uri

pytest.importorskip("pygls", reason="the language server needs the lsp extra")

CELLS = [
    (2, "!pip install -q torch\n%load_ext autoreload"),  # markdown is cell 1
    (1, "# Train\nNotes."),
    (2, "import torch\nimport torch.nn as nn"),
    (2, "%%time\nmodel = nn.Linear(2, 2).cuda()\nstate = torch.load('w.pt')"),
]


@pytest.fixture
def session(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n", encoding="utf-8")
    client = LspClient(cwd=tmp_path)
    capabilities = client.initialize(tmp_path, options={"unsafeFixes": True}, notebooks=True)["result"]["capabilities"]
    notebook_uri = file_uri(tmp_path / "train.ipynb")
    cells = [(kind, f"vscode-notebook-cell:{tmp_path / 'train.ipynb'}#W{index}sZmlsZQ%3D%3D", text)
             for index, (kind, text) in enumerate(CELLS)]
    client.notify("notebookDocument/didOpen", {
        "notebookDocument": {"uri": notebook_uri, "notebookType": "jupyter-notebook", "version": 1,
                             "cells": [{"kind": kind, "document": uri} for kind, uri, _ in cells]},
        "cellTextDocuments": [{"uri": uri, "languageId": "python" if kind == 2 else "markdown", "version": 1, "text": text}
                              for kind, uri, text in cells],
    })
    yield client, capabilities, notebook_uri, [uri for _, uri, _ in cells]
    client.close()


def test_the_server_announces_notebook_sync_for_python_cells(session):
    _, capabilities, _, _ = session
    assert capabilities["notebookDocumentSync"]["notebookSelector"] == [{"cells": [{"language": "python"}]}]


def test_each_code_cell_gets_its_own_diagnostics_at_cell_positions(session):
    client, _, _, uris = session
    assert client.diagnostics(uris[0], version=1) == []  # the shell escape and magic are masked
    assert client.diagnostics(uris[2], version=1) == []
    found = client.diagnostics(uris[3], version=1)
    assert [(d["code"], d["range"]["start"]) for d in found] == [
        ("TDV101", {"line": 1, "character": 8}),
        ("TDV501", {"line": 2, "character": 8}),
    ]


def test_a_quick_fix_in_one_cell_adds_the_device_to_the_cell_that_imports_torch(session):
    client, _, _, uris = session
    client.diagnostics(uris[3], version=1)
    [fix] = [a for a in code_actions(client, uris[3], 1) if a["title"].startswith("Fix TDV101")]
    changes = fix["edit"]["changes"]
    assert sorted(changes) == sorted([uris[2], uris[3]])
    assert apply_edits(CELLS[3][1], changes[uris[3]]).splitlines()[1] == "model = nn.Linear(2, 2).to(device)"
    assert apply_edits(CELLS[2][1], changes[uris[2]]).splitlines()[-1].startswith("device = torch.device(")


def test_disable_for_this_line_edits_the_cell_line(session):
    client, _, _, uris = session
    client.diagnostics(uris[3], version=1)
    [noqa] = [a for a in code_actions(client, uris[3], 2) if a["title"] == "Disable TDV501 for this line"]
    assert apply_edits(CELLS[3][1], noqa["edit"]["changes"][uris[3]]).splitlines()[2] == "state = torch.load('w.pt')  # noqa: TDV501"


def test_fix_all_rewrites_the_cells_and_keeps_the_magics(session):
    client, _, _, uris = session
    client.diagnostics(uris[3], version=1)
    [fix_all] = code_actions(client, uris[3], 0, only=["source.fixAll"])
    changes = fix_all["edit"]["changes"]
    assert uris[0] not in changes
    fixed = apply_edits(CELLS[3][1], changes[uris[3]])
    assert fixed.startswith("%%time\nmodel = nn.Linear(2, 2).to(device)\n")
    assert "map_location=" in fixed


def test_a_cell_edit_is_checked_again_and_published_per_cell(session):
    client, _, notebook_uri, uris = session
    client.diagnostics(uris[3], version=1)
    client.notify("notebookDocument/didChange", {
        "notebookDocument": {"uri": notebook_uri, "version": 2},
        "change": {"cells": {"textContent": [{
            "document": {"uri": uris[3], "version": 2},
            "changes": [{"range": {"start": {"line": 2, "character": 0}, "end": {"line": 2, "character": 26}}, "text": "pass"}],
        }]}},
    })
    assert [d["code"] for d in client.diagnostics(uris[3], version=2)] == ["TDV101"]
