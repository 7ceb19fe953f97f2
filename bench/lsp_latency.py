"""How long an editor waits for diagnostics after typing in a 3,000-line buffer (issue 14 sets
1 CPU second as the limit). Two buffers: the real file of the pinned corpus (timm) closest to
that length, and a synthetic one packed with hazards (about 280 findings per 1,000 lines; real
code has about 2) as the worst case. For each it prints, measured in one run:

- the language server's CPU seconds from ``didChange`` to ``publishDiagnostics`` (median of
  several edits; the debounce delay is idle time and costs no CPU), read from /proc for the
  server process, and its ratio to the 1 s limit;
- the same text through ``Engine.check_source`` in this process (median), and the ratio of the
  two: what the server adds on top of the engine;
- the CPU seconds of the code actions for a line with a finding (for a client that resolves
  edits lazily, as VS Code and Neovim do), of resolving its quick fix, and of the fix-all action.

    python bench/lsp_latency.py [--lines 3000] [--edits 5]

Linux only (per-process CPU times from /proc). Needs the lsp extra; builds the timm part of the
corpus on first use (bench/corpus.py).
"""

from __future__ import annotations

import ast
import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.corpus import CORPUS_DIR, corpus_files, line_count  # noqa: E402
from bench.lsp_client import LspClient  # noqa: E402
from torchdevice_lint import api
from torchdevice_lint.engine.engine import Engine  # noqa: E402

BLOCK = '''

class Block{n}(nn.Module):
    """A block of a model written for one GPU box."""

    def __init__(self, width={n} + 8):
        super().__init__()
        self.linear = nn.Linear(width, width).cuda()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        mask = torch.ones(x.shape[0], x.shape[1])
        noise = torch.randn(x.shape) * 0.01
        return self.norm(self.linear(x * mask + noise))


def train_{n}(model, loader, epochs=2):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = torch.cuda.amp.GradScaler()
    for epoch in range(epochs):
        for inputs, targets in loader:
            inputs, targets = inputs.cuda(), targets.to("cuda")
            with torch.cuda.amp.autocast():
                loss = nn.functional.mse_loss(model(inputs), targets)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            torch.cuda.synchronize()
        print(epoch, loss.item(), inputs.numpy().mean())
    state = torch.load("checkpoint_{n}.pt")
    model.load_state_dict(state)
    return model
'''


def buffer(lines: int) -> str:
    parts = ["import torch\nfrom torch import nn\n"]
    n = 0
    while sum(part.count("\n") for part in parts) < lines:
        parts.append(BLOCK.format(n=n))
        n += 1
    return "".join(parts)


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as handle:
        fields = handle.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def real_file(lines: int) -> Path:
    return min(corpus_files(["timm"]), key=lambda path: abs(line_count(path) - lines))


def actions(client: LspClient, uri: str, first: int):
    """CPU seconds of the code actions for a line, of resolving its first quick fix, of fix-all."""
    pid = client.process.pid
    line = {"start": {"line": first, "character": 0}, "end": {"line": first, "character": 0}}
    before = cpu_seconds(pid)
    offered = client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": line, "context": {"diagnostics": []}})
    actions_cpu = cpu_seconds(pid) - before
    resolve_cpu = 0.0
    fixes = [action for action in offered["result"] or [] if action["title"].startswith("Fix ")]
    if fixes:
        before = cpu_seconds(pid)
        client.request("codeAction/resolve", fixes[0])
        resolve_cpu = cpu_seconds(pid) - before
    before = cpu_seconds(pid)
    only = {"diagnostics": [], "only": ["source.fixAll"]}
    client.request("textDocument/codeAction", {"textDocument": {"uri": uri}, "range": line, "context": only})
    return actions_cpu, resolve_cpu, cpu_seconds(pid) - before


def change_seconds(client: LspClient, uri: str, pid: int, version: int, edit: dict) -> float:
    """CPU seconds of the server from one didChange to the diagnostics of that version."""
    before = cpu_seconds(pid)
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": version}, "contentChanges": [edit]})
    client.diagnostics(uri, version=version)
    return cpu_seconds(pid) - before


def statement_mid_file(text: str) -> Tuple[int, str]:
    """The 0-based row of a simple statement in the second half of ``text`` and its indentation:
    a line typed before it is a new statement of the same block."""
    rows = text.splitlines()
    simple = sorted(
        node.lineno - 1 for node in ast.walk(ast.parse(text))
        if isinstance(node, (ast.Assign, ast.Expr, ast.Return, ast.AugAssign)) and node.lineno >= len(rows) // 2
    )
    row = simple[0]
    return row, rows[row][: len(rows[row]) - len(rows[row].lstrip())]


def measure(label: str, text: str, edits: int) -> None:
    """Open ``text``, retype one line ``edits`` times, then ask for code actions and fix-all (once
    before the edits too, so one-time imports are not counted)."""
    lines = text.splitlines(keepends=True)
    row = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].strip() and not lines[i].rstrip().endswith(("\\", ",", "(")))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "model.py"
        client = LspClient(cwd=folder)
        client.initialize(folder, {"unsafeFixes": True}, resolve=True)  # as VS Code and Neovim do
        uri = client.open(path, text)
        found = client.diagnostics(uri, version=1)
        pid = client.process.pid
        first_line = found[0]["range"]["start"]["line"] if found else 0
        actions(client, uri, first_line)  # the first use of each imports and builds what it needs
        comment_cpu, code_cpu = [], []
        for version in range(2, edits + 2):
            # a comment typed at the end of a line mid-file: layout only, findings are moved
            end = len(lines[row].rstrip("\r\n"))
            edit = {"range": {"start": {"line": row, "character": end}, "end": {"line": row, "character": end}}, "text": f"  # {version}"}
            comment_cpu.append(change_seconds(client, uri, pid, version, edit))
        statement_row, indent = statement_mid_file(text)
        for version in range(edits + 2, 2 * edits + 2):
            # a line of code typed before a statement mid-file: the program changed
            at = {"line": statement_row, "character": 0}
            edit = {"range": {"start": at, "end": at}, "text": f"{indent}_typed_{version} = {version}\n"}
            code_cpu.append(change_seconds(client, uri, pid, version, edit))
        actions_cpu, resolve_cpu, fix_all_cpu = actions(client, uri, first_line)
        client.close()

    engine = api.engine()
    engine.check_source(str(path), text)  # warm the imports, as the server is warm
    engine_runs = []
    for version in range(edits):
        started = time.process_time()
        engine.check_source(str(path), text + f"# {version}\n")
        engine_runs.append(time.process_time() - started)
    engine_cpu = statistics.median(engine_runs)

    print(f"{label}: {text.count(chr(10))} lines, {len(found)} diagnostics")
    for kind, seconds in (("a comment typed", comment_cpu), ("a line of code typed", code_cpu)):
        change = statistics.median(seconds)
        print(f"  didChange ({kind}) -> publishDiagnostics: {change:.2f} CPU s (median of {len(seconds)}: "
              + ", ".join(f"{c:.2f}" for c in seconds) + f"); ratio to the 0.10 s goal: {change / 0.10:.1f}")
    print(f"  Engine.check_source in process: {engine_cpu:.2f} CPU s (median); server (code typed) / engine: "
          f"{statistics.median(code_cpu) / engine_cpu:.2f}")
    print(f"  code actions for a line with a finding: {actions_cpu:.2f} CPU s; resolving its quick fix: "
          f"{resolve_cpu:.2f} CPU s; fix-all action: {fix_all_cpu:.2f} CPU s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=3000)
    parser.add_argument("--edits", type=int, default=5)
    args = parser.parse_args()
    real = real_file(args.lines)
    # the real file has no finding: a hazard typed at its end gives the actions something to act on
    text = real.read_text(encoding="utf-8") + '\nstate = torch.load("weights.pt")\n'
    measure(f"real ({real.relative_to(CORPUS_DIR)}, plus one torch.load line)", text, args.edits)
    measure("dense (synthetic)", buffer(args.lines), args.edits)
    return 0


if __name__ == "__main__":
    sys.exit(main())
