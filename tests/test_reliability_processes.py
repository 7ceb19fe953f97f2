"""Whole runs in subprocesses: concurrent fixers on one tree, a run stopped by SIGINT, code that
must never be imported, and configuration mistakes."""

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from torchdevice_lint import api
from torchdevice_lint.engine.fixer import fix_source

FIX = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import fix_main; sys.exit(fix_main())"]
CHECK = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())", "check"]

SNIPPETS = (
    "import torch\n\ndef step(model, batch):\n    model.cuda()\n    return model(batch.cuda(non_blocking=True))\n",
    "import torch\nstate = torch.load('ckpt.pt')\nx = torch.zeros(3, device='cuda')\n",
    "import torch as th\n\ndef sync():\n    th.cuda.synchronize()  # wait\n",
    "import torch\nbuf = torch.cuda.FloatTensor([1.0, 2.0])\nwith torch.cuda.amp.autocast():\n    pass\n",
    "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x * torch.ones(3).cuda()\n",
    "import torch\nx = torch.ones(2)\n",  # nothing to fix
)


def make_tree(root: Path, count: int) -> Path:
    for index in range(count):
        package = root / f"pkg{index % 4}"
        package.mkdir(parents=True, exist_ok=True)
        (package / f"module_{index}.py").write_text(f"# file {index}\n" + SNIPPETS[index % len(SNIPPETS)])
    return root


def snapshot(root: Path) -> dict:
    """Every file's bytes; a file renamed away between the listing and its read (a fixer's
    temporary file, while a run is going on) is not part of the tree any more."""
    files = {}
    for path in sorted(root.rglob("*")):
        try:
            files[str(path.relative_to(root))] = path.read_bytes()
        except (FileNotFoundError, IsADirectoryError):
            continue
    return files


def expected_fix(text: str) -> bytes:
    return fix_source(api.engine(), "x.py", text, unsafe=True).source.encode()


def test_concurrent_fixers_give_the_result_of_one(tmp_path):
    single = make_tree(tmp_path / "single", 40)
    shared = tmp_path / "shared"
    shutil.copytree(single, shared)
    one = subprocess.run(FIX + ["--unsafe-fixes", str(single)], capture_output=True, text=True)
    assert one.returncode in (0, 1), one.stderr

    runs = [subprocess.Popen(FIX + ["--unsafe-fixes", str(shared)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(4)]
    outputs = [run.communicate(timeout=600) for run in runs]

    for run, (_, err) in zip(runs, outputs):
        assert run.returncode in (0, 1), err
        assert "Traceback" not in err and ": error: " not in err
    assert snapshot(shared) == snapshot(single)
    assert snapshot(single) != snapshot(make_tree(tmp_path / "original", 40))


def test_sigint_leaves_every_file_old_or_new(tmp_path):
    tree = make_tree(tmp_path / "tree", 300)
    originals = snapshot(tree)
    fixed = {name: expected_fix(content.decode()) for name, content in originals.items()}
    run = subprocess.Popen(FIX + ["--unsafe-fixes", str(tree)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while snapshot(tree) == originals and run.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    run.send_signal(signal.SIGINT)
    _, err = run.communicate(timeout=120)

    assert run.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    after = snapshot(tree)
    assert sorted(after) == sorted(originals), "a temporary file was left behind"
    assert all(after[name] in (originals[name], fixed[name]) for name in after)
    changed = [name for name in after if after[name] != originals[name]]
    still_to_fix = [name for name in after if after[name] == originals[name] != fixed[name]]
    assert changed and still_to_fix, "the signal should land in the middle of the run"


def test_checked_code_is_never_imported_or_executed(tmp_path):
    marker = tmp_path / "executed"
    payload = f"import pathlib\npathlib.Path({str(marker)!r}).write_text(__name__)\n"
    tree = tmp_path / "tree"
    tree.mkdir()
    # Modules the tool itself imports: a tool that put the checked tree on sys.path would run them.
    for name in ("libcst", "torch", "typing_extensions", "conftest", "setup", "__main__", "sitecustomize"):
        (tree / f"{name}.py").write_text(payload + "import torch\nx = torch.ones(2).cuda()\n")
    (tree / "__init__.py").write_text(payload)
    (tree / "pyproject.toml").write_text("[tool.torchdevice-lint]\nselect = ['TDV']\n")
    scripts = Path(sys.executable).parent
    console_scripts = [scripts / "torchdevice-lint", scripts / "torchdevice-fix"]
    if not all(script.exists() for script in console_scripts):
        pytest.skip("console scripts are not installed next to this interpreter")

    check = subprocess.run([str(console_scripts[0]), "check", "."], cwd=tree, capture_output=True, text=True)
    fix = subprocess.run([str(console_scripts[1]), "--unsafe-fixes", "."], cwd=tree, capture_output=True, text=True)

    assert check.returncode == 1, check.stderr
    assert fix.returncode in (0, 1), fix.stderr
    assert ".to(device)" in (tree / "torch.py").read_text()
    assert not marker.exists()


def test_in_process_check_leaves_sys_modules_alone(tmp_path, capsys):
    from torchdevice_lint import cli

    module = tmp_path / "side_effect_module_7f3a.py"
    module.write_text("raise SystemExit('imported!')\nimport torch\nx = torch.ones(2).cuda()\n")
    before = set(sys.modules)
    assert cli.lint_main(["check", str(module)]) == 1
    assert cli.fix_main(["--unsafe-fixes", str(module)]) == 0
    capsys.readouterr()
    assert "side_effect_module_7f3a" not in set(sys.modules) - before
    assert ".to(device)" in module.read_text()


@pytest.mark.parametrize(
    "table, message",
    [
        ("selct = ['TDV1']", "unknown key 'selct' in [tool.torchdevice-lint]"),
        ("[tool.torchdevice-lint.lint]\nselect = ['TDV1']", "unknown key 'lint' in [tool.torchdevice-lint]"),
        ("unsafe-fixes = 'yes'", "unsafe-fixes must be true or false"),
        ("target-torch-version = 'latest'", "target-torch-version must look like '2.4'"),
    ],
)
@pytest.mark.parametrize("command", [CHECK, FIX], ids=["check", "fix"])
def test_configuration_mistakes_are_one_line_and_exit_2(tmp_path, command, table, message):
    header = "" if table.startswith("[") else "[tool.torchdevice-lint]\n"
    (tmp_path / "pyproject.toml").write_text(header + table + "\n")
    (tmp_path / "a.py").write_text("import torch\nx = torch.ones(2).cuda()\n")
    result = subprocess.run(command + ["a.py"], cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert message in line and "pyproject.toml" in line
    assert (tmp_path / "a.py").read_text() == "import torch\nx = torch.ones(2).cuda()\n"
