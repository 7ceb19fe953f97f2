"""The pre-commit hooks, run by the real pre-commit. ``try-repo`` builds the hooks' own
virtualenv from a git repository holding this package, installing libcst from the package
index: about 30 s, hence the ``slow`` marker (deselect with ``-m "not slow"``)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from torchdevice_lint import __version__

pytest.importorskip("pre_commit")
if shutil.which("git") is None:
    pytest.skip("pre-commit needs git", allow_module_level=True)

ROOT = Path(__file__).resolve().parent.parent
GIT_IDENTITY = ["-c", "user.name=tests", "-c", "user.email=tests@example.invalid", "-c", "commit.gpgsign=false"]


def git(*args, cwd):
    subprocess.run(["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory):
    """A git repository with the working tree's package, as pre-commit clones a hook repo."""
    repo = tmp_path_factory.mktemp("hook-repo")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(ROOT / "src", repo / "src", ignore=ignore)
    for name in ("pyproject.toml", "README.md", ".pre-commit-hooks.yaml"):
        shutil.copy2(ROOT / name, repo / name)
    git("init", "-q", cwd=repo)
    git("add", ".", cwd=repo)
    git("commit", "-q", "-m", "hooks", cwd=repo)
    git("tag", f"v{__version__}", cwd=repo)  # the tag the README's snippet names
    return repo


@pytest.fixture
def pre_commit_home(tmp_path_factory):
    return tmp_path_factory.mktemp("pre-commit-home")


def pre_commit(*args, cwd, home):
    environment = {**os.environ, "PRE_COMMIT_HOME": str(home), "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pre_commit", *args], cwd=cwd, env=environment, capture_output=True, text=True
    )


def project_with(tmp_path, name, text):
    git("init", "-q", cwd=tmp_path)
    (tmp_path / name).write_text(text)
    git("add", name, cwd=tmp_path)
    return tmp_path / name


def test_manifest_is_valid(pre_commit_home):
    result = pre_commit("validate-manifest", str(ROOT / ".pre-commit-hooks.yaml"), cwd=ROOT, home=pre_commit_home)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_try_repo_lint_hook_fails_and_fix_hook_rewrites(tmp_path, hook_repo, pre_commit_home):
    """Both hooks in one ``try-repo`` run: each run builds the hook environment afresh."""
    hazard = project_with(
        tmp_path, "train.py", 'import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.load_state_dict(torch.load("model.pt"))\n'
    )
    cells = [{"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": source}
             for source in (["!pip install torch"], ["import torch\n", "model = torch.nn.Linear(2, 2).cuda()\n", 'model.load_state_dict(torch.load("m.pt"))'])]
    notebook = project_with(tmp_path, "train.ipynb", json.dumps({"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}, indent=1))
    result = pre_commit("try-repo", str(hook_repo), "--all-files", cwd=tmp_path, home=pre_commit_home)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    # try-repo runs the hooks in id order: the fix first, then the lint on the fixed file.
    fix_report, lint_report = output.split("torchdevice-lint....", 1)
    assert "files were modified by this hook" in fix_report
    assert "Failed" in lint_report and "train.py:2:9: TDV101" in lint_report and "TDV501" not in lint_report
    assert "train.ipynb:cell 2:2:9: TDV101" in lint_report  # the hooks take notebooks (types_or: jupyter)
    assert json.loads(notebook.read_text())["cells"][1]["source"][-1] == 'model.load_state_dict(torch.load("m.pt", map_location="cpu"))'
    # The safe fix is applied; the unsafe one (.cuda() -> a device chosen at run time) is left.
    assert hazard.read_text() == (
        'import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.load_state_dict(torch.load("model.pt", map_location="cpu"))\n'
    )


def readme_snippet():
    """The pre-commit configuration exactly as the README shows it."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("### pre-commit", 1)[1]
    return section.split("```yaml\n", 1)[1].split("```", 1)[0]


def test_readme_snippet_names_this_version():
    assert f"rev: v{__version__}" in readme_snippet()
    assert f"## {__version__}" in (ROOT / "CHANGELOG.md").read_text()


def git_output(*args, cwd):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_readme_rev_is_a_tag_of_this_repository():
    """pre-commit clones the ``rev:`` the snippet names: the tag ``.ci/tag_releases.py``
    makes on the release commit must exist where users clone from."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if git_output("rev-parse", "--is-shallow-repository", cwd=ROOT) == "true":
        pytest.skip("a shallow clone holds no old tags")
    tag = f"v{__version__}"
    if not git_output("tag", "--list", cwd=ROOT):
        # a clone made without tags: the release commit the tag goes on must exist
        released = git_output("log", "--format=%H", "-G", f'^version = "{__version__}"', "--", "pyproject.toml", cwd=ROOT)
        assert released, f"no commit sets version {__version__}"
        return
    assert git_output("tag", "--list", tag, cwd=ROOT) == tag, f"no tag {tag}: run python .ci/tag_releases.py"
    assert f'version = "{__version__}"' in git_output("show", f"{tag}:pyproject.toml", cwd=ROOT).splitlines()


def test_tag_releases_tags_each_changelog_version_on_its_release_commit(tmp_path):
    def release(version, changelog):
        (tmp_path / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{version}"\n')
        (tmp_path / "CHANGELOG.md").write_text(changelog)
        git("add", ".", cwd=tmp_path)
        git("commit", "-q", "-m", version, cwd=tmp_path)
        return git_output("rev-parse", "HEAD", cwd=tmp_path)

    git("init", "-q", cwd=tmp_path)
    first = release("0.1.0", "## 0.1.0\n")
    (tmp_path / "a.py").write_text("")
    git("add", ".", cwd=tmp_path)
    git("commit", "-q", "-m", "work", cwd=tmp_path)
    second = release("0.2.0", "## 0.2.0\n\n## 0.1.0\n")
    release("0.2.0", "## Unreleased\n\n## 0.2.0\n\n## 0.1.0\n")  # later work: not a release
    script = [sys.executable, str(ROOT / ".ci" / "tag_releases.py"), str(tmp_path)]

    assert subprocess.run(script, capture_output=True, text=True, check=True).stdout.splitlines() == [
        f"v0.2.0 -> {second[:12]}", f"v0.1.0 -> {first[:12]}"]
    assert git_output("rev-list", "-n", "1", "v0.2.0", cwd=tmp_path) == second
    assert subprocess.run(script, capture_output=True, text=True, check=True).stdout == ""  # nothing left to tag
    git("tag", "-f", "-a", "v0.1.0", second, "-m", "wrong", cwd=tmp_path)
    wrong = subprocess.run(script, capture_output=True, text=True)
    assert wrong.returncode == 1 and "v0.1.0 points at" in wrong.stderr


@pytest.mark.slow
def test_pre_commit_run_all_files_honours_excludes_and_gitignore(tmp_path, hook_repo, pre_commit_home):
    """``pre-commit run --all-files`` names every tracked file: the hooks' ``--force-exclude``
    keeps vendored code (excluded in pyproject.toml) and a tracked file under a gitignored
    directory out of both hooks."""
    hazards = 'import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nmodel.load_state_dict(torch.load("model.pt"))\n'
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend-exclude = ["vendor/"]\n')
    (tmp_path / ".gitignore").write_text("generated/\n")
    for name in ("train.py", "vendor/lib/third_party.py", "generated/out.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(hazards)
    config = readme_snippet().replace("https://github.com/OWNER/torchdevice-lint", str(hook_repo))
    (tmp_path / ".pre-commit-config.yaml").write_text(config)
    git("add", "-f", ".", cwd=tmp_path)

    result = pre_commit("run", "--all-files", cwd=tmp_path, home=pre_commit_home)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert "train.py:2:9: TDV101" in output
    assert "third_party" not in output and "out.py" not in output
    assert (tmp_path / "train.py").read_text() == hazards.replace('"model.pt"))', '"model.pt", map_location="cpu"))')
    assert (tmp_path / "vendor" / "lib" / "third_party.py").read_text() == hazards
    assert (tmp_path / "generated" / "out.py").read_text() == hazards


@pytest.mark.slow
def test_the_hooks_read_the_configured_baseline(tmp_path, hook_repo, pre_commit_home):
    """``baseline`` in pyproject.toml: the README's hooks pass on what it holds and fail on a
    new hazard alone."""
    old = 'import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n'
    git("init", "-q", cwd=tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nbaseline = "torchdevice-baseline.json"\n')
    (tmp_path / "train.py").write_text(old)
    written = subprocess.run(
        [sys.executable, "-m", "torchdevice_lint", "check", "--write-baseline", "torchdevice-baseline.json", "."],
        cwd=tmp_path, capture_output=True, text=True,
    )
    assert written.returncode == 0, written.stderr
    config = readme_snippet().replace("https://github.com/OWNER/torchdevice-lint", str(hook_repo))
    (tmp_path / ".pre-commit-config.yaml").write_text(config)
    git("add", ".", cwd=tmp_path)
    passed = pre_commit("run", "--all-files", cwd=tmp_path, home=pre_commit_home)
    assert passed.returncode == 0, passed.stdout + passed.stderr

    (tmp_path / "train.py").write_text("# moved down\n\n" + old + "head = torch.nn.Linear(2, 1).cuda()\n")
    failed = pre_commit("run", "--all-files", cwd=tmp_path, home=pre_commit_home)
    output = failed.stdout + failed.stderr
    assert failed.returncode == 1, output
    assert "train.py:5:8: TDV101" in output and "train.py:3:" not in output


def test_every_hook_runs_serially():
    """pre-commit splits the files of a hook that may run in parallel into one batch per core:
    each batch would start its own pool and print its own summary."""
    import yaml  # pre-commit's own dependency

    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert {hook["id"]: hook.get("require_serial") for hook in hooks} == {"torchdevice-lint": True, "torchdevice-fix": True}


@pytest.mark.slow
def test_pre_commit_run_on_many_files_runs_each_hook_once(tmp_path, hook_repo, pre_commit_home):
    """30 files, on a machine with more than one core: one report and one fix summary."""
    git("init", "-q", cwd=tmp_path)
    for index in range(30):
        (tmp_path / f"module_{index:02}.py").write_text("import torch\nx = torch.ones(2)\n")
    (tmp_path / "module_29.py").write_text('import torch\nmodel = torch.nn.Linear(2, 2).cuda()\nstate = torch.load("m.pt")\n')
    config = readme_snippet().replace("https://github.com/OWNER/torchdevice-lint", str(hook_repo))
    (tmp_path / ".pre-commit-config.yaml").write_text(config)
    git("add", ".", cwd=tmp_path)

    result = pre_commit("run", "--all-files", cwd=tmp_path, home=pre_commit_home)
    output = result.stdout + result.stderr
    assert result.returncode == 1, output
    assert output.count("Fixed ") + output.count("Nothing to fix.") == 1, output
    assert output.count("files checked") == 1 and "Found 1 finding in 1 of 30 files checked." in output, output
