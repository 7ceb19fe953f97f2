"""The flags a ruff user reaches for, with ruff's meaning: ``--exit-zero``, ``--output-file``,
``--quiet``, ``--statistics``, ``--show-settings``, ``--add-noqa``, ``python -m``, findings in
file order in every format, and the configuration errors ruff raises."""

import json
import subprocess
import sys

import pytest

from torchdevice_lint import api, cli
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.app.output import FORMATS, render, sorted_results
from torchdevice_lint.model.settings import ConfigError, Settings

HAZARDS = (
    "import torch\n"
    "model = torch.nn.Linear(2, 2).cuda()\n"
    "state = torch.load('m.pt')\n"
    "x = torch.ones(2).cuda()\n"
)


def lint(capsys, *args):
    code = cli.lint_main(["check", "--no-cache", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.torchdevice-lint]\n")
    (tmp_path / "train.py").write_text(HAZARDS)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_exit_zero_reports_but_succeeds(project, capsys):
    code, out, _ = lint(capsys, "--exit-zero", "--output-format", "concise", "train.py")
    assert code == 0 and out.count("train.py:") == 3
    (project / "broken.py").write_text("import torch\nx = torch.ones(2).cuda(\n")
    assert lint(capsys, "--exit-zero", "broken.py")[0] == 2  # errors are still errors


def test_output_file_gets_the_report_and_stdout_stays_empty(project, capsys):
    code, out, err = lint(capsys, "--output-format", "json", "-o", "reports/lint.json", "train.py")
    assert code == 1 and out == ""
    assert [item["code"] for item in json.loads((project / "reports" / "lint.json").read_text())] == ["TDV101", "TDV501", "TDV101"]
    assert "Found 3 findings" in err


def test_quiet_prints_findings_only(project, capsys):
    code, out, err = lint(capsys, "-q", "--output-format", "concise", "train.py")
    assert code == 1 and out.count("\n") == 3 and err == ""


def test_statistics_counts_per_rule(project, capsys):
    code, out, err = lint(capsys, "--statistics", "train.py")
    assert code == 1
    assert out.splitlines() == ["2\tTDV101\t[ ] cuda-method-call", "1\tTDV501\t[*] load-without-map-location"]
    code, out, _ = lint(capsys, "--statistics", "--output-format", "json", "train.py")
    assert json.loads(out)[1] == {"code": "TDV501", "name": "load-without-map-location", "count": 1, "fixable": True}


def test_show_settings_names_the_file_and_values(project, capsys):
    (project / "pyproject.toml").write_text('[tool.torchdevice-lint]\nignore = ["TDV501"]\ntarget-torch-version = "2.7"\n')
    code, out, _ = lint(capsys, "--show-settings", "--extend-select", "TDV9", "train.py")
    assert code == 0
    assert out.splitlines()[:2] == [
        f'Resolved settings for: "{project / "train.py"}"',
        f'Settings path: "{project / "pyproject.toml"}"',
    ]
    assert 'ignore = ["TDV501"]' in out and 'extend-select = ["TDV9"]' in out
    assert 'device-expression = "torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device(\\"cpu\\")"' in out
    assert "target-torch-source = " in out and "[tool.torchdevice-lint] target-torch-version" in out


def test_add_noqa_marks_each_line_then_the_run_is_clean(project, capsys):
    (project / "more.py").write_text(
        "import torch\n"
        "y = torch.ones(2).cuda()  # noqa: E501\n"
        "z = torch.ones(2).cuda() if flag else torch.load(\n"
        "    'm.pt')\n"
        "text = '''\n"
        "''' + str(torch.ones(1).cuda())\n"
    )
    code, _, err = lint(capsys, "--add-noqa", ".")
    assert code == 0 and "Added 6 noqa directives." in err
    assert (project / "train.py").read_text() == (
        "import torch\n"
        "model = torch.nn.Linear(2, 2).cuda()  # noqa: TDV101\n"
        "state = torch.load('m.pt')  # noqa: TDV501\n"
        "x = torch.ones(2).cuda()  # noqa: TDV101\n"
    )
    assert (project / "more.py").read_text() == (
        "import torch\n"
        "y = torch.ones(2).cuda()  # noqa: E501, TDV101\n"
        "z = torch.ones(2).cuda() if flag else torch.load(  # noqa: TDV101, TDV501\n"
        "    'm.pt')\n"
        "text = '''\n"
        "''' + str(torch.ones(1).cuda())  # noqa: TDV101\n"
    )
    assert lint(capsys, ".")[0] == 0


def test_python_dash_m_runs_both_commands(project):
    lint_run = subprocess.run([sys.executable, "-m", "torchdevice_lint", "check", "--output-format", "concise", "train.py"],
                              capture_output=True, text=True)
    assert lint_run.returncode == 1 and "train.py:2:9: TDV101" in lint_run.stdout
    fix_run = subprocess.run([sys.executable, "-m", "torchdevice_lint", "fix", "--diff", "train.py"], capture_output=True, text=True)
    assert fix_run.returncode == 1 and "map_location" in fix_run.stdout


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_every_format_lists_findings_in_file_order(name):
    engine = api.engine(Settings())
    second = engine.check_source("b.py", HAZARDS)
    first = engine.check_source("a.py", "import torch\ny = torch.load('x.pt')\n")
    # Workers and the cache may hand results back in any order, findings too.
    shuffled = [second, first]
    second.findings.reverse()
    text = render(name, sorted_results(shuffled), {"a.py": "", "b.py": HAZARDS})
    positions = [text.find(marker) for marker in ("a.py", "b.py")]
    assert -1 not in positions and positions == sorted(positions), name
    rows = [f.location.row for r in sorted_results(shuffled) for f in r.findings]
    assert rows == [2, 2, 3, 4]


def test_engine_findings_are_in_file_order():
    source = "import torch\na = torch.load(torch.ones(2).cuda())\n"
    findings = api.engine(Settings()).check_source("x.py", source).findings
    assert [(f.location.row, f.location.column) for f in findings] == sorted((f.location.row, f.location.column) for f in findings)


def test_unknown_codes_in_per_file_ignores_are_a_configuration_error(tmp_path, capsys, monkeypatch):
    with pytest.raises(ConfigError, match=r"per-file-ignores 'tests/\*\*': unknown rule code or prefix 'TDV999'"):
        settings_from_table({"per-file-ignores": {"tests/**": ["TDV301", "TDV999"]}})
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nper-file-ignores = { "x.py" = ["E501"] }\n')
    (tmp_path / "x.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = lint(capsys, "x.py")
    assert code == 2 and "unknown rule code or prefix 'E501'" in err


@pytest.mark.parametrize("key", ["select", "extend-select", "ignore"])
def test_unknown_codes_in_the_selection_are_a_configuration_error(key):
    with pytest.raises(ConfigError, match=rf"{key}: unknown rule code or prefix 'TDV77'"):
        settings_from_table({key: ["TDV1", "TDV77"]})


@pytest.mark.parametrize("directive", ["# torchdevice-lint: noqa: TDV101", "# ruff: noqa: TDV1", "# flake8: noqa: TDV101,TDV2"])
def test_file_level_noqa_with_codes_turns_those_codes_off(directive):
    findings = api.engine(Settings()).check_source("x.py", f"{directive}\n{HAZARDS}").findings
    assert [f.code for f in findings] == ["TDV501"]


def test_unused_noqa_is_reported_only_where_nothing_was_suppressed():
    source = (
        "import torch\n"
        "a = torch.ones(2).cuda()  # noqa: TDV101\n"  # used
        "b = torch.ones(2)  # noqa: TDV101, E501\n"  # TDV101 unused; E501 is another tool's
        "c = torch.ones(2)  # noqa\n"  # bare: may serve flake8
    )
    engine = api.engine(settings_from_table({"extend-select": ["TDV900"]}))
    findings = engine.check_source("x.py", source).findings
    assert [(f.code, f.location.row, f.location.column, f.message) for f in findings] == [
        ("TDV900", 3, 20, "Unused `noqa` directive (unused: TDV101)")
    ]
    assert api.engine(Settings()).check_source("x.py", source).findings == []  # opt-in
