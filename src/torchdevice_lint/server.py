"""``torchdevice-lint server``: a Language Server Protocol server over stdio (pygls, the ``lsp``
extra), a thin front end like ``cli.py``: diagnostics as the buffer changes, a quick fix and a
noqa action per finding, ``source.fixAll.torchdevice``. It reads buffers from the editor and
``pyproject.toml`` files from disk and never writes a file: edits go back to the editor.
Notebooks come as LSP 3.17 notebook documents: their code cells are checked together, and
each cell gets its own diagnostics and code actions.

What is computed lives in ``app/editor.py`` (LSP JSON, no pygls); this module keeps the open
buffers' results, debounces changes, reloads settings and turns JSON into lsprotocol types.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import traceback
from typing import Any, Dict, List, Optional
from urllib.parse import unquote

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from . import __version__
from .app.editor import (
    FIX_ALL_KIND,
    Checked,
    CheckedNotebook,
    Lines,
    Projects,
    check_buffer,
    check_notebook,
    code_actions,
    diagnostics,
    fixed_buffer,
    notebook_code_actions,
    notebook_diagnostics,
    notebook_fix_all,
    resolve_action,
    text_edits,
    uri_to_path,
)
from .project.roots import PROJECT_FILE_PATTERNS, is_project_file

#: Seconds of quiet after a change before the buffer is checked again.
DEBOUNCE_SECONDS = 0.2
FIX_ALL_COMMAND = "torchdevice.applyFixAll"

logger = logging.getLogger("torchdevice_lint.server")
_converter = get_converter()


class TorchdeviceServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__(
            "torchdevice-lint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
            notebook_document_sync=types.NotebookDocumentSyncOptions(
                notebook_selector=[types.NotebookDocumentFilterWithCells(cells=[types.NotebookCellLanguage(language="python")])],
            ),
        )
        self.projects = Projects()
        self.checked: Dict[str, Checked] = {}
        self.notebooks: Dict[str, CheckedNotebook] = {}
        self.pending: Dict[str, asyncio.TimerHandle] = {}
        #: Whether the editor asked for ``shutdown`` before ``exit``: the exit status is 0 if so, else 1.
        self.shut_down = False

    def report_server_error(self, error: Exception, source: Any) -> None:
        """Every failure, a request's included, goes to the editor's log; pygls has already
        answered a failed request with an error response."""
        detail = str(error) if isinstance(error, JsonRpcException) else f"{error.__class__.__name__}: {error}"
        self.log(f"internal error ({detail}); please report this as a bug", types.MessageType.Error)

    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        logger.log(logging.ERROR if kind == types.MessageType.Error else logging.INFO, message)
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    # -- buffers ------------------------------------------------------------------------------
    def path_of(self, uri: str) -> str:
        """The buffer's file, or a name in the first workspace folder for an unsaved one."""
        path = uri_to_path(uri)
        if path is None:
            root = uri_to_path(self.workspace.root_uri or "") or os.getcwd()
            path = os.path.join(root, os.path.basename(uri.rstrip("/")) or "untitled.py")
        return path

    def checked_for(self, uri: str) -> Checked:
        """The buffer's current result, recomputed only when its text or settings changed."""
        text = self.workspace.get_text_document(uri).source
        path = self.path_of(uri)
        engine, error = self.projects.engine_for(path)
        current = self.checked.get(uri)
        if current is None or current.text != text or current.engine is not engine:
            if error is not None and (current is None or current.engine is not engine):
                message = f"{error}; using the default settings"
                self.window_show_message(types.ShowMessageParams(type=types.MessageType.Error, message=message))
            current = check_buffer(engine, uri, path, text, current)
            self.checked[uri] = current
        return current

    def lines(self, text: str) -> Lines:
        encoding = self.workspace.position_encoding
        return Lines(text, getattr(encoding, "value", encoding) or "utf-16")

    def is_python(self, uri: str) -> bool:
        """An open Python buffer (not closed since, nor a pyproject.toml the editor sends too,
        nor a notebook's cell: those are checked with their notebook)."""
        document = self.workspace.text_documents.get(uri)
        return (
            document is not None and (document.language_id == "python" or uri.endswith((".py", ".pyi")))
            and self.workspace.get_notebook_document(cell_uri=uri) is None
        )

    # -- notebooks ----------------------------------------------------------------------------
    def notebook_for(self, uri: str) -> Optional[CheckedNotebook]:
        """The checked notebook of a notebook or cell URI, recomputed when a cell or the
        settings changed; None for a URI of neither."""
        notebook = self.workspace.get_notebook_document(notebook_uri=uri) or self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is None:
            return None
        cells = []
        for number, cell in enumerate(notebook.cells, start=1):
            document = self.workspace.text_documents.get(unquote(cell.document))  # pygls keys them unquoted
            if cell.kind == types.NotebookCellKind.Code and document is not None and document.language_id in (None, "python"):
                cells.append((number, cell.document, document.source))
        path = self.path_of(notebook.uri)
        engine, _ = self.projects.engine_for(path)
        current = self.notebooks.get(notebook.uri)
        texts = [(number, text) for number, _, text in cells]
        if current is None or current.checked.engine is not engine or [(c.number, c.source) for c in current.cells.cells] != texts \
                or sorted(current.uris.items()) != sorted((number, cell_uri) for number, cell_uri, _ in cells):
            current = check_notebook(engine, notebook.uri, path, cells, current)
            self.notebooks[notebook.uri] = current
        return current

    def publish_notebook(self, uri: str) -> None:
        try:
            checked = self.notebook_for(uri)
            found = notebook_diagnostics(checked, self.lines) if checked is not None else {}
        except Exception as error:  # noqa: BLE001 - one notebook's bug must not stop the server
            self.log("".join(traceback.format_exception(type(error), error, error.__traceback__)), types.MessageType.Error)
            return
        for cell_uri, cell_diagnostics in found.items():
            document = self.workspace.text_documents.get(unquote(cell_uri))
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                uri=cell_uri, version=document.version if document else None,
                diagnostics=_converter.structure(cell_diagnostics, List[types.Diagnostic]),
            ))

    def publish(self, uri: str) -> None:
        """Check the buffer and publish its diagnostics; a failure is logged, never raised, so
        the server keeps serving the other buffers."""
        self.pending.pop(uri, None)
        notebook = self.workspace.get_notebook_document(notebook_uri=uri) or self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            self.publish_notebook(notebook.uri)
            return
        if not self.is_python(uri):
            return
        document = self.workspace.text_documents[uri]
        try:
            checked = self.checked_for(uri)
            found = diagnostics(checked, self.lines(checked.text))
        except Exception as error:  # noqa: BLE001 - one buffer's bug must not stop the server
            self.log("".join(traceback.format_exception(type(error), error, error.__traceback__)), types.MessageType.Error)
            return
        found = _converter.structure(found, List[types.Diagnostic])
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, version=document.version, diagnostics=found))

    def publish_later(self, uri: str) -> None:
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = asyncio.get_running_loop().call_later(DEBOUNCE_SECONDS, self.publish, uri)

    def reload_settings(self) -> None:
        self.projects.forget()
        for uri in [*self.workspace.notebook_documents, *self.workspace.text_documents]:
            if self.workspace.get_notebook_document(cell_uri=uri) is None:
                self.publish(uri)


server = TorchdeviceServer()


@server.feature(types.INITIALIZE)
def initialize(ls: TorchdeviceServer, params: types.InitializeParams) -> None:
    options = params.initialization_options or {}
    unsafe = options.get("unsafeFixes") if isinstance(options, dict) else None
    ls.projects = Projects(unsafe_fixes=unsafe if isinstance(unsafe, bool) else None)


@server.feature(types.SHUTDOWN)
def shutdown(ls: TorchdeviceServer, params: None) -> None:
    for pending in ls.pending.values():
        pending.cancel()
    ls.pending.clear()
    ls.shut_down = True


@server.feature(types.INITIALIZED)
def initialized(ls: TorchdeviceServer, params: types.InitializedParams) -> None:
    """Ask the editor to report changes to any project file: pyproject.toml, requirements,
    setup files, conda environments (where it can watch files)."""
    workspace = ls.client_capabilities.workspace
    watched = workspace.did_change_watched_files if workspace else None
    if watched is not None and watched.dynamic_registration:
        watchers = [types.FileSystemWatcher(glob_pattern=pattern) for pattern in PROJECT_FILE_PATTERNS]
        ls.client_register_capability(types.RegistrationParams(registrations=[types.Registration(
            id="torchdevice-lint-project-files",
            method=types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            register_options=types.DidChangeWatchedFilesRegistrationOptions(watchers=watchers),
        )]))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: TorchdeviceServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: TorchdeviceServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.publish_later(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: TorchdeviceServer, params: types.DidSaveTextDocumentParams) -> None:
    if is_project_file(params.text_document.uri):
        ls.reload_settings()  # for editors that do not watch files
    else:
        ls.publish(params.text_document.uri)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: TorchdeviceServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    pending = ls.pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    ls.checked.pop(uri, None)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


@server.feature(types.NOTEBOOK_DOCUMENT_DID_OPEN)
def notebook_did_open(ls: TorchdeviceServer, params: types.DidOpenNotebookDocumentParams) -> None:
    ls.publish(params.notebook_document.uri)


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CHANGE)
def notebook_did_change(ls: TorchdeviceServer, params: types.DidChangeNotebookDocumentParams) -> None:
    ls.publish_later(params.notebook_document.uri)
    structure = params.change.cells.structure if params.change.cells else None
    for closed in (structure.did_close or []) if structure else []:  # a deleted cell keeps no diagnostics
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=closed.uri, diagnostics=[]))


@server.feature(types.NOTEBOOK_DOCUMENT_DID_CLOSE)
def notebook_did_close(ls: TorchdeviceServer, params: types.DidCloseNotebookDocumentParams) -> None:
    uri = params.notebook_document.uri
    pending = ls.pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    ls.notebooks.pop(uri, None)
    for cell in params.cell_text_documents:
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=cell.uri, diagnostics=[]))


@server.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)
def did_change_watched_files(ls: TorchdeviceServer, params: types.DidChangeWatchedFilesParams) -> None:
    if any(is_project_file(change.uri) for change in params.changes):
        ls.reload_settings()


@server.feature(
    types.TEXT_DOCUMENT_CODE_ACTION,
    types.CodeActionOptions(code_action_kinds=[types.CodeActionKind.QuickFix, FIX_ALL_KIND], resolve_provider=True),
)
def code_action(ls: TorchdeviceServer, params: types.CodeActionParams) -> Optional[List[types.CodeAction]]:
    only = [str(getattr(kind, "value", kind)) for kind in params.context.only or []]
    request_range = _converter.unstructure(params.range)
    notebook = ls.notebook_for(params.text_document.uri)
    if notebook is not None:
        actions = notebook_code_actions(notebook, params.text_document.uri, request_range, only or None, ls.lines)
        return _converter.structure(actions, List[types.CodeAction]) or None
    checked = ls.checked_for(params.text_document.uri)
    text_document = ls.client_capabilities.text_document
    support = text_document.code_action.resolve_support if text_document and text_document.code_action else None
    resolve = support is not None and "edit" in support.properties
    actions = code_actions(checked, request_range, only or None, ls.lines(checked.text), resolve)
    return _converter.structure(actions, List[types.CodeAction]) or None


@server.feature(types.CODE_ACTION_RESOLVE)
def resolve_code_action(ls: TorchdeviceServer, params: types.CodeAction) -> types.CodeAction:
    action = _converter.unstructure(params)
    uri = (action.get("data") or {}).get("uri")
    if not isinstance(uri, str) or uri not in ls.workspace.text_documents:
        return params
    checked = ls.checked_for(uri)
    return _converter.structure(resolve_action(checked, action, ls.lines(checked.text)), types.CodeAction)


@server.command(FIX_ALL_COMMAND)
def apply_fix_all(ls: TorchdeviceServer, *arguments: Any) -> Optional[str]:
    """Ask the editor to apply, as one workspace edit, every applicable fix to the open buffer
    given by its URI (or ``{"uri": ...}``), or to every open Python buffer when no argument is
    given. Returns the errors that left buffers unchanged, if any."""
    notebooks = list(ls.workspace.notebook_documents)
    if arguments:
        target = arguments[0]
        uri = target.get("uri") if isinstance(target, dict) else target
        if not isinstance(uri, str) or (uri not in ls.workspace.text_documents and uri not in notebooks):
            raise ValueError(f"{FIX_ALL_COMMAND} needs the URI of an open document, got {target!r}")
        owner = ls.workspace.get_notebook_document(notebook_uri=uri) or ls.workspace.get_notebook_document(cell_uri=uri)
        notebooks = [owner.uri] if owner is not None else []
        uris = [] if notebooks else [uri]
    else:
        uris = [uri for uri in ls.workspace.text_documents if ls.is_python(uri)]
    changes, errors = {}, []
    for uri in notebooks:
        changes.update(notebook_fix_all(ls.notebook_for(uri), ls.lines))
    for uri in uris:
        checked = ls.checked_for(uri)
        fixed, error = fixed_buffer(checked)
        if error is not None:
            errors.append(error)
        elif fixed != checked.text:
            changes[uri] = text_edits(checked.text, fixed, ls.lines(checked.text))
    if changes:
        ls.workspace_apply_edit(types.ApplyWorkspaceEditParams(
            label="torchdevice-lint: fix all",
            edit=_converter.structure({"changes": changes}, types.WorkspaceEdit),
        ))
    return "\n".join(errors) or None


def serve() -> int:
    """Serve one editor over stdin/stdout until it sends ``exit`` (or closes stdin). Logs go to
    stderr. The exit status is 0 after a ``shutdown`` request, else 1, as LSP asks (pygls's own
    ``sys.exit`` ends inside its event loop, which swallows the status)."""
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="%(name)s: %(levelname)s: %(message)s")
    server.start_io()
    return 0 if server.shut_down else 1
