"""The README cannot drift from the code: its rule tables list exactly the registry's rules
(name and fix safety included), and its commands come in an order that works."""

import re
from pathlib import Path

from torchdevice_lint.rules import all_rules

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()
ROW = re.compile(r"^\| `(TDV\d{3})` \| ([a-z0-9-]+) \| .* \| ([^|]+) \|$", re.MULTILINE)
SAFETY_WORDS = {"safe": "safe", "unsafe": "unsafe", "display-only": "suggestion"}


def table_after(heading):
    section = README.split(heading, 1)[1].split("\n## ", 1)[0]
    return {code: (name, fix.strip()) for code, name, fix in ROW.findall(section)}


def fix_words(rule) -> str:
    """What the table says of a rule's fix: its safety, or "no fix" for a rule that offers none."""
    return SAFETY_WORDS[rule.fix_safety.value] if rule.offers_fix else "no fix"


def test_rules_table_lists_every_default_rule():
    expected = {r.code: (r.name, fix_words(r)) for r in all_rules() if r.default_enabled}
    assert table_after("## Rules\n") == expected


def test_strict_table_lists_every_opt_in_rule():
    table = table_after("## Strict policy")
    opt_in = {r.code: r for r in all_rules() if not r.default_enabled}
    assert sorted(table) == sorted(opt_in)
    for code, (name, fix) in table.items():
        assert name == opt_in[code].name
        assert fix.startswith(fix_words(opt_in[code])), code


CI_RUN = (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()


def bash_blocks(text):
    return re.findall(r"```bash\n(.*?)```", text, re.DOTALL)


def readme_test_command():
    return next(block.strip() for block in bash_blocks(README) if "pytest" in block)


def test_test_command_comes_after_the_torch_step_with_the_cpu_index():
    torch_step = README.index("pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu")
    assert torch_step < README.index(readme_test_command())


def test_torch_step_pins_the_torch_ci_installs():
    pins = {re.search(r"torch==(\S+)", text).group(1) for text in (README.split("## Quick start", 1)[1], CI_RUN)}
    assert pins == {"2.13.0"}


def test_ci_runs_the_readme_test_command_and_then_the_tests_it_leaves_out():
    command = readme_test_command()
    assert command == """pip install -e '.[test]' && python -m pytest -q -m "not slow\""""
    lines = [line.strip() for line in CI_RUN.splitlines()]
    assert lines.index('python -m pytest -q -m slow') == lines.index(command) + 1


def test_quick_start_prints_what_the_readme_says(monkeypatch, capsys):
    """The quick start's command on the bundled example, run from the repository root."""
    from torchdevice_lint import cli

    monkeypatch.chdir(Path(__file__).resolve().parents[1])
    assert cli.fix_main(["--no-cache", "--diff", "--unsafe-fixes", "examples/"]) == 1
    said = re.search(r"It ends `(.*?)`", README.split("## Quick start", 1)[1]).group(1)
    assert capsys.readouterr().err.splitlines() == [said]


def test_a_finding_without_a_fix_for_the_target_torch_is_explained_as_the_readme_shows(tmp_path, monkeypatch, capsys):
    from torchdevice_lint import cli

    example = Path(__file__).resolve().parents[1] / "examples" / "train.py"
    (tmp_path / "train.py").write_text(example.read_text())
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\nversion = "1"\n\n[project.optional-dependencies]\nruntime = ["torch>=2.0"]\n')
    monkeypatch.chdir(tmp_path)
    assert cli.fix_main(["--no-cache", "--diff", "--unsafe-fixes", "train.py"]) == 1
    shown = re.search(r"```text\n(1 finding remains.*?)```", README, re.DOTALL).group(1)
    assert capsys.readouterr().err.splitlines()[1:] == shown.splitlines()
