"""TDV905: every backend API outside the platform layer, the policy the torch.cuda hooks of
DeepSpeed, vLLM, llm-compressor, LMCache and vllm-omni enforce; and the migration page's
configurations, which bench/hooks.py measures on those projects' own code."""

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from bench import hooks
from torchdevice_lint import api
from torchdevice_lint.app.config import SettingsResolver, settings_from_table
from torchdevice_lint.model.settings import ConfigError

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "migrating-from-hooks.md"
SOURCE = textwrap.dedent(
    """\
    import torch
    import torch as th
    from torch import cuda
    from torch.cuda import Stream  # an import is not a use

    # torch.cuda.synchronize() in a comment
    doc = "torch.cuda.empty_cache() in a string"
    if torch.cuda.is_available():
        cuda.synchronize()
    th.xpu.empty_cache()
    s: Stream = Stream()
    n = torch.accelerator.device_count()
    """
)


def reported(source=SOURCE, path="pkg/model.py", **table):
    settings = settings_from_table({"select": ["TDV905"], **table}, root=".")
    return [(f.location.row, f.message.split("`")[1]) for f in api.check_source(source, path, settings).findings]


def test_every_use_through_any_alias_guarded_or_not_and_nothing_in_comments_or_strings():
    assert reported() == [
        (8, "torch.cuda.is_available"), (9, "torch.cuda.synchronize"), (10, "torch.xpu.empty_cache"),
        (11, "torch.cuda.Stream"), (11, "torch.cuda.Stream"),
    ]


def test_banned_backend_apis_names_what_is_banned():
    assert reported(**{"banned-backend-apis": ["torch.cuda.synchronize", "torch.xpu"]}) == [
        (9, "torch.cuda.synchronize"), (10, "torch.xpu.empty_cache"),
    ]
    assert reported("import torch\ntorch.cpu.synchronize()\n", **{"banned-backend-apis": ["torch.cpu"]}) == [
        (2, "torch.cpu.synchronize")
    ]
    assert reported("import torch\ntorch.cpu.synchronize()\n") == []  # the CPU is no accelerator


@pytest.mark.parametrize("name", ["torch.backends.cudnn", "cuda", "torch.cuda..x", "vllm.platforms"])
def test_a_banned_name_outside_the_device_modules_is_a_config_error(name):
    with pytest.raises(ConfigError, match="banned-backend-apis: .* is not a name in torch.cuda, torch.mps"):
        settings_from_table({"banned-backend-apis": [name]})


def test_allowed_backend_paths_are_gitignore_patterns_from_the_pyproject(tmp_path):
    project = tmp_path / "project"
    (project / "vllm" / "platforms" / "cuda").mkdir(parents=True)
    (project / "vllm" / "worker").mkdir()
    (project / "pyproject.toml").write_text(
        '[tool.torchdevice-lint]\nextend-select = ["TDV905"]\n'
        'allowed-backend-paths = ["/vllm/platforms/", "*_cuda.py", "!/vllm/platforms/cuda/leak.py"]\n'
    )
    files = {
        "vllm/platforms/cuda/impl.py": [], "vllm/platforms/cuda/leak.py": ["TDV905"],
        "vllm/worker/model_runner.py": ["TDV905"], "vllm/worker/graph_cuda.py": [],
    }
    for name in files:
        (project / name).write_text("import torch\nn = torch.cuda.device_count()\n")
    resolver = SettingsResolver()
    for name, expected in files.items():
        path = str(project / name)
        assert [f.code for f in api.check_source((project / name).read_text(), path, resolver(path)).findings] == expected, name


def test_flake8_reads_the_platform_layer_from_the_pyproject(tmp_path):
    pytest.importorskip("flake8")
    (tmp_path / "platforms").mkdir()
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nallowed-backend-paths = ["platforms/"]\n')
    for name in ("platforms/cuda.py", "worker.py"):
        (tmp_path / name).write_text("import torch\nn = torch.cuda.device_count()\n")
    result = subprocess.run([sys.executable, "-m", "flake8", "--select", "TDV905", "."],
                            cwd=tmp_path, capture_output=True, text=True)
    assert [line.split(":")[0] for line in result.stdout.splitlines()] == ["./worker.py"]


def test_the_documented_escape_migration_turns_ignore_cuda_into_noqa(tmp_path):
    """DeepSpeed's `#ignore-cuda`: the page's commands, run as written."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nbanned-backend-apis = ["torch.cuda"]\n')
    (tmp_path / "engine.py").write_text(
        "import torch\n"
        "free = torch.cuda.mem_get_info()  #ignore-cuda\n"
        "# torch.cuda.graphs are CUDA only  #ignore-cuda\n"
    )
    commands = DOCS.read_text().split("`#ignore-cuda` escapes", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    environment = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"}
    subprocess.run(["bash", "-c", commands], cwd=tmp_path, check=True, env=environment)
    assert (tmp_path / "engine.py").read_text() == (
        "import torch\nfree = torch.cuda.mem_get_info()  # noqa: TDV905\n# torch.cuda.graphs are CUDA only\n"
    )
    check = run_check("--select", "TDV905,TDV900", ".", cwd=tmp_path)
    assert check.returncode == 0, check.stdout


def run_check(*args, cwd):
    command = [sys.executable, "-c", "import sys; from torchdevice_lint.cli import lint_main; sys.exit(lint_main())", "check"]
    return subprocess.run(command + list(args), cwd=cwd, capture_output=True, text=True)


# -- the migration page ---------------------------------------------------------------------------
PROJECTS = hooks.load_projects()


@pytest.mark.parametrize("project", PROJECTS, ids=[p.name for p in PROJECTS])
def test_each_section_holds_a_configuration_that_loads_and_the_pins(project):
    table = hooks.tomllib.loads(hooks.configuration(project.name))["tool"]["torchdevice-lint"]
    settings = settings_from_table(table)
    assert settings.is_enabled("TDV905", False)
    pins = DOCS.read_text().split("## Pins", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in pins.splitlines() if line.startswith(f"| {project.name} |"))
    assert project.repo in row and project.commit in row and project.hook.split(",")[0].split()[0] in row


def test_the_replayed_hook_and_the_rule_compare_line_by_line(tmp_path):
    """bench/hooks.py on a small tree: each kind of difference is counted where it belongs."""
    (tmp_path / "accelerator").mkdir()
    (tmp_path / "accelerator" / "cuda_accelerator.py").write_text("import torch\ntorch.cuda.synchronize()\n")
    (tmp_path / "engine.py").write_text(
        "import torch\nimport torch as th\n"
        "torch.cuda.synchronize()\n"  # both
        "# torch.cuda is CUDA only\n"  # the hook alone: a comment
        "n = torch.cuda.device_count()  #ignore-cuda\n"  # the rule alone: escaped
        "th.cuda.empty_cache()\n"  # the rule alone: an alias
    )
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
                           "source": ["import torch\n", "torch.cuda.synchronize()\n"]}],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "demo.ipynb").write_text(json.dumps(notebook))  # the hooks read .py files: left out
    deepspeed = next(p for p in PROJECTS if p.name == "DeepSpeed")
    project = hooks.replace(deepspeed, folder=tmp_path.name)
    comparisons = {c.code: c for c in hooks.compare(project, tmp_path.parent)}
    tdv905 = comparisons["TDV905"]
    assert tdv905.hook == {("engine.py", 3), ("engine.py", 4)}
    assert tdv905.tool == {("engine.py", 3), ("engine.py", 5), ("engine.py", 6)}
    assert tdv905.hook_only == {"comments": 1}
    assert tdv905.tool_only == {"escaped": 1, "alias": 1}


def results_table(text):
    return [line for line in text.splitlines() if re.match(r"\| (DeepSpeed|vLLM|llm-compressor|LMCache|vllm-omni) \|", line)]


@pytest.mark.slow
@pytest.mark.skipif(not all(p.root(hooks.DEFAULT_ROOT).is_dir() for p in PROJECTS), reason="the hooks' checkouts are not here")
def test_the_page_shows_what_the_bench_measures_on_the_projects_own_code():
    measured = subprocess.run([sys.executable, "bench/hooks.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    page = DOCS.read_text().split("## How it compares", 1)[1].split("--corpus", 1)[0]
    assert results_table(page) == results_table(measured)
