"""`torchdevice-fix --unsafe-fixes` on a file full of hazards: the result parses, has no
remaining finding of a fixable rule, and a second run changes nothing."""

from pathlib import Path

import libcst as cst
import pytest

from torchdevice_lint import api
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.model.settings import Settings

HAZARDS = (Path(__file__).parent / "data" / "hazards.py").read_text()


def test_fix_everything_then_nothing_is_left():
    engine = api.engine(Settings())
    before = engine.check_source("hazards.py", HAZARDS).findings
    assert {f.code for f in before} >= {"TDV101", "TDV102", "TDV103", "TDV201", "TDV202", "TDV301", "TDV302", "TDV501"}

    first = fix_source(engine, "hazards.py", HAZARDS, unsafe=True)
    cst.parse_module(first.source)
    compile(first.source, "hazards.py", "exec")
    remaining = engine.check_source("hazards.py", first.source).findings
    assert [f for f in remaining if f.fix and f.fix.applicability != "display-only"] == []

    second = fix_source(engine, "hazards.py", first.source, unsafe=True)
    assert second.source == first.source
    assert not second.applied


def test_fixed_file_runs_on_cpu(tmp_path):
    pytest.importorskip("torch")
    import subprocess
    import sys

    engine = api.engine(Settings())
    fixed = fix_source(engine, "hazards.py", HAZARDS, unsafe=True).source
    script = tmp_path / "hazards.py"
    script.write_text(
        fixed
        + "\nimport torch\n"
        + "out, scaler = train(Net(), torch.ones(3, 4))\n"
        + "print(tuple(out.shape))\n"
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env={"CUDA_VISIBLE_DEVICES": "", "PATH": ""})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "(3, 2)"
