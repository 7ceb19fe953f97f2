"""A minimal LSP client speaking JSON-RPC to ``torchdevice-lint server`` over its stdio, for the
tests and the latency benchmark: requests wait for their answer, notifications from the server
are queued to be awaited by method."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

SERVER_COMMAND = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main(['server']))"]


def file_uri(path) -> str:
    return Path(path).resolve().as_uri()


class LspClient:
    def __init__(self, command: Optional[List[str]] = None, cwd=None) -> None:
        self.process = subprocess.Popen(
            command or SERVER_COMMAND, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        self.next_id = 0
        self.answers: Dict[int, "queue.Queue[dict]"] = {}
        self.notifications: "queue.Queue[dict]" = queue.Queue()
        self.seen: List[dict] = []  # notifications taken from the queue but not yet asked for
        self.server_requests: List[dict] = []  # workspace/applyEdit, client/registerCapability...
        self.lock = threading.Lock()
        threading.Thread(target=self._read, daemon=True).start()

    # -- wire -----------------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode("utf-8")
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while True:
                header = stream.readline()
                if not header:
                    return
                if header in (b"\r\n", b"\n"):
                    break
                name, _, value = header.decode("ascii").partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            message = json.loads(stream.read(length))
            if "id" in message and "method" in message:  # a request from the server
                with self.lock:
                    self.server_requests.append(message)
                self._send({"id": message["id"], "result": {"applied": True} if message["method"] == "workspace/applyEdit" else None})
            elif "id" in message:
                self.answers.setdefault(message["id"], queue.Queue()).put(message)
            else:
                self.notifications.put(message)

    # -- API ------------------------------------------------------------------------------------
    def request(self, method: str, params: Any = None, timeout: float = 300) -> dict:
        """The whole response message (``result`` or ``error``)."""
        with self.lock:
            self.next_id += 1
            number = self.next_id
            self.answers.setdefault(number, queue.Queue())
        self._send({"id": number, "method": method, "params": params})
        return self.answers[number].get(timeout=timeout)

    def notify(self, method: str, params: Any = None) -> None:
        self._send({"method": method, "params": params})

    def wait_for(self, method: str, accept: Callable[[dict], bool] = lambda params: True, timeout: float = 60) -> dict:
        """The params of the next notification ``method`` that ``accept`` takes."""
        for index, message in enumerate(self.seen):
            if message["method"] == method and accept(message.get("params")):
                return self.seen.pop(index)["params"]
        while True:
            message = self.notifications.get(timeout=timeout)
            if message["method"] == method and accept(message.get("params")):
                return message["params"]
            self.seen.append(message)

    def initialize(self, root, options: Optional[dict] = None, resolve: bool = False, notebooks: bool = False) -> dict:
        """``resolve``: the client resolves code actions' edits lazily, as VS Code and Neovim do;
        ``notebooks``: it syncs notebook documents (LSP 3.17), as VS Code does."""
        code_action = {"codeActionLiteralSupport": {"codeActionKind": {"valueSet": ["quickfix", "source"]}}}
        if resolve:
            code_action.update(resolveSupport={"properties": ["edit"]}, dataSupport=True)
        capabilities = {
            "workspace": {"didChangeWatchedFiles": {"dynamicRegistration": True}, "applyEdit": True},
            "textDocument": {"codeAction": code_action},
            **({"notebookDocument": {"synchronization": {}}} if notebooks else {}),
        }
        answer = self.request("initialize", {
            "processId": None,
            "rootUri": file_uri(root),
            "workspaceFolders": [{"uri": file_uri(root), "name": Path(root).name}],
            "capabilities": capabilities,
            "initializationOptions": options or {},
        })
        self.notify("initialized", {})
        return answer

    def open(self, path, text: str, version: int = 1) -> str:
        uri = file_uri(path)
        self.notify("textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": "python", "version": version, "text": text}})
        return uri

    def diagnostics(self, uri: str, version: Optional[int] = None, timeout: float = 60) -> List[dict]:
        params = self.wait_for(
            "textDocument/publishDiagnostics",
            lambda p: p["uri"] == uri and (version is None or p.get("version") == version),
            timeout,
        )
        return params["diagnostics"]

    def close(self) -> int:
        """shutdown, exit, and the server's exit status."""
        if self.process.poll() is None:
            self.request("shutdown")
            self.notify("exit")
        try:
            return self.process.wait(timeout=30)
        finally:
            self.process.stdin.close()
            self.process.stdout.close()
            self.process.stderr.close()
