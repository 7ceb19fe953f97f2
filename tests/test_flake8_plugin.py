"""The flake8 plugin reports exactly what `torchdevice-lint check` reports, and flake8's own
`--select` and `# noqa` apply to it."""

import subprocess
import sys

from torchdevice_lint import api
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.rules import all_rules


def flake8(*args, cwd):
    result = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TDV", "--format", "%(path)s:%(row)d:%(col)d:%(code)s", *args],
        cwd=cwd, capture_output=True, text=True,
    )
    assert result.returncode in (0, 1), result.stderr
    return sorted(result.stdout.split())


def test_plugin_and_check_agree_on_every_rule_example(tmp_path):
    """Each example is a project of its own (its folder, with the example's other files), as
    flake8 meets it in a repository: the plugin reads the same project facts as ``check``."""
    engine = api.engine(Settings(), projects=api.Projects())
    expected = []
    for rule in all_rules():
        if not rule.default_enabled:
            continue
        for kind in ("valid", "invalid"):
            for index, example in enumerate(getattr(rule, kind)):
                folder = tmp_path / f"{rule.code}_{kind}_{index}"
                for name, code in {"pyproject.toml": "", **(example.files or {}), "example.py": example.code}.items():
                    (folder / name).parent.mkdir(parents=True, exist_ok=True)
                    write = (folder / name).write_bytes if isinstance(code, bytes) else (folder / name).write_text
                    write(code)
                for path in sorted(folder.rglob("*.py")):
                    shown = "./" + path.relative_to(tmp_path).as_posix()
                    for f in engine.check_source(str(path), path.read_text()).findings:
                        expected.append(f"{shown}:{f.location.row}:{f.location.column}:{f.code}")
    assert expected
    assert flake8(".", cwd=tmp_path) == sorted(expected)


def test_flake8_noqa_and_select(tmp_path):
    (tmp_path / "model.py").write_text(
        "import torch\na = torch.ones(1).cuda()  # noqa: TDV101\nb = torch.ones(1).cuda()\nc = torch.load('x.pt')\n"
    )
    assert flake8("model.py", cwd=tmp_path) == ["model.py:3:5:TDV101", "model.py:4:5:TDV501"]
    only_load = subprocess.run(
        [sys.executable, "-m", "flake8", "--select", "TDV501", "model.py"], cwd=tmp_path, capture_output=True, text=True
    )
    assert [line.split()[1] for line in only_load.stdout.splitlines()] == ["TDV501"]
