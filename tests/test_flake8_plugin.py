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
    engine = api.engine(Settings())
    expected = []
    for rule in all_rules():
        if not rule.default_enabled:
            continue
        for kind in ("valid", "invalid"):
            for index, example in enumerate(getattr(rule, kind)):
                name = f"{rule.code}_{kind}_{index}.py"
                (tmp_path / name).write_text(example.code)
                for f in engine.check_source(name, example.code).findings:
                    expected.append(f"./{name}:{f.location.row}:{f.location.column}:{f.code}")
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
