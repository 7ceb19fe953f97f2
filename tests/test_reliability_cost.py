"""A long function costs what the same lines cost at module level: linear time in its length and
number of findings (issue 30). Measured as CPU-second ratios within one run."""

import json

import pytest

from tests.cpu_time import least_cpu_seconds
from torchdevice_lint import cli


def function_of(lines):
    return "import torch\n\ndef build():\n" + "".join(f"    x{i} = torch.zeros(3).cuda()\n" for i in range(lines))


def cpu_seconds(tmp_path, capsys, lines, output_format):
    script = tmp_path / f"long{lines}.py"
    script.write_text(function_of(lines))

    def check():
        code = cli.lint_main(["check", "--no-cache", "--output-format", output_format, str(script)])
        out = capsys.readouterr().out
        assert code == 1
        if output_format == "json":
            findings = json.loads(out)
            assert len(findings) == lines and all(f["fix"]["edits"] for f in findings)

    return least_cpu_seconds(check)


@pytest.mark.parametrize(
    "output_format, small",
    [
        ("concise", 800),  # 0.1.3: about 8x (a scan of the function per finding to place it)
        ("json", 250),  # 0.1.3: about 13x (the whole function compiled per finding's edit)
    ],
)
def test_a_long_function_costs_linear_time_in_its_length(tmp_path, capsys, output_format, small):
    cpu_seconds(tmp_path, capsys, 50, output_format)  # warm up
    short, long = cpu_seconds(tmp_path, capsys, small, output_format), cpu_seconds(tmp_path, capsys, 4 * small, output_format)
    # Linear is 4x.
    assert long / short < 6, (short, long)
