"""Which files a run checks, as ruff decides it: gitignore patterns (``pathspec``) for
``exclude`` and ``per-file-ignores``, ``.gitignore``/``.ignore`` honoured by default, and
``--force-exclude`` for the names pre-commit passes."""

import json
import os
import subprocess

import pytest

from torchdevice_lint import cli
from torchdevice_lint.app.discovery import discover
from torchdevice_lint.model.settings import Settings, path_matches

HAZARD = "import torch\nx = torch.ones(2).cuda()\n"


def tree(root, *names, text=HAZARD):
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def found(root, *paths, **options):
    files, errors = discover([str(root / p) for p in paths or ["."]], Settings(root=str(root)), **options)
    assert errors == []
    return sorted(os.path.relpath(f, root).replace(os.sep, "/") for f in files)


def lint(capsys, *args):
    code = cli.lint_main(["check", "--no-cache", "--output-format", "concise", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    "pattern, path, expected",
    [
        ("src/*.py", "src/a.py", True),
        ("src/*.py", "src/pkg/deep.py", False),  # fnmatch's `*` crossed the slash
        ("src/**/*.py", "src/pkg/deep.py", True),
        ("tests/", "tests/unit/test_a.py", True),
        ("conftest.py", "deep/down/conftest.py", True),
        ("/conftest.py", "deep/down/conftest.py", False),
        ("!tests/**", "src/a.py", True),  # ruff's negated per-file-ignores key
        ("!tests/**", "tests/a.py", False),
    ],
)
def test_patterns_have_gitignore_semantics(pattern, path, expected):
    assert path_matches(path, pattern) is expected


def test_per_file_ignores_star_stays_in_one_directory(tmp_path, capsys, monkeypatch):
    tree(tmp_path, "src/a.py", "src/pkg/deep.py")
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nper-file-ignores = { "src/*.py" = ["TDV101"] }\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = lint(capsys, ".")
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()] == ["src/pkg/deep.py"]


def test_negated_per_file_ignores_apply_everywhere_else(tmp_path, capsys, monkeypatch):
    tree(tmp_path, "src/a.py", "tests/test_a.py")
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nper-file-ignores = { "!src/**" = ["TDV101"] }\n')
    monkeypatch.chdir(tmp_path)
    _, out, _ = lint(capsys, ".")
    assert [line.split(":")[0] for line in out.splitlines()] == ["src/a.py"]


def test_exclude_negation_reincludes_a_file(tmp_path):
    tree(tmp_path, "gen/a.py", "gen/keep.py", "main.py")
    settings = Settings(root=str(tmp_path), extend_exclude=("gen/*", "!gen/keep.py"))
    files, _ = discover([str(tmp_path)], settings)
    assert sorted(os.path.relpath(f, tmp_path) for f in files) == [os.path.join("gen", "keep.py"), "main.py"]


def test_gitignore_and_ignore_files_are_honoured(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "main.py", "out/gen.py", "notes/scratch.py", "pkg/cache_a.py", "pkg/cache_keep.py", "pkg/m.py")
    (tmp_path / ".gitignore").write_text("out/\ncache_*.py\n!cache_keep.py\n")
    (tmp_path / "notes" / ".ignore").write_text("scratch.py\n")
    assert found(tmp_path) == ["main.py", "pkg/cache_keep.py", "pkg/m.py"]
    assert found(tmp_path, respect_gitignore=False) == [
        "main.py", "notes/scratch.py", "out/gen.py", "pkg/cache_a.py", "pkg/cache_keep.py", "pkg/m.py",
    ]


def test_a_deeper_gitignore_overrides_a_shallower_one(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "a/gen_x.py", "b/gen_y.py")
    (tmp_path / ".gitignore").write_text("gen_*.py\n")
    (tmp_path / "b" / ".gitignore").write_text("!gen_y.py\n")
    assert found(tmp_path) == ["b/gen_y.py"]
    # The repository's ignore files apply when a subdirectory is the path given.
    assert found(tmp_path, "a") == []


def test_ignore_files_above_a_repository_are_not_read(tmp_path):
    (tmp_path / ".gitignore").write_text("*.py\n")  # e.g. a home directory's stray .gitignore
    project = tmp_path / "project"
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    tree(project, "main.py")
    assert found(project) == ["main.py"]


def test_no_respect_gitignore_option(tmp_path, capsys, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "main.py", "build_out/gen.py")
    (tmp_path / ".gitignore").write_text("build_out/\n")
    monkeypatch.chdir(tmp_path)
    assert lint(capsys, ".")[1].count("TDV101") == 1
    assert lint(capsys, "--no-respect-gitignore", ".")[1].count("TDV101") == 2


def test_named_files_are_checked_unless_force_exclude(tmp_path, capsys, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "vendor/lib/v.py", "ignored/i.py", "src/a.py")
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend-exclude = ["vendor/"]\n')
    monkeypatch.chdir(tmp_path)
    names = ["vendor/lib/v.py", "ignored/i.py", "src/a.py"]
    code, out, _ = lint(capsys, *names)
    assert code == 1 and out.count("TDV101") == 3
    code, out, _ = lint(capsys, "--force-exclude", *names)
    assert [line.split(":")[0] for line in out.splitlines()] == ["src/a.py"]


def test_force_exclude_from_the_configuration_and_for_stdin(tmp_path, capsys, monkeypatch):
    tree(tmp_path, "vendor/v.py")
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nextend-exclude = ["vendor"]\nforce-exclude = true\n')
    monkeypatch.chdir(tmp_path)
    assert lint(capsys, "vendor/v.py")[:2] == (0, "")
    monkeypatch.setattr("sys.stdin", open(tmp_path / "vendor" / "v.py"))
    assert lint(capsys, "--stdin-filename", "vendor/v.py", "-")[:2] == (0, "")


def test_show_files_lists_what_would_be_checked(tmp_path, capsys, monkeypatch):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "b.py", "a.py", ".venv/lib/x.py", "skip/s.py")
    (tmp_path / ".gitignore").write_text("skip/\n")
    monkeypatch.chdir(tmp_path)
    code, out, _ = lint(capsys, "--show-files", ".")
    assert code == 0
    assert out.splitlines() == [str(tmp_path / "a.py"), str(tmp_path / "b.py")]


def test_nearest_pyproject_with_a_table_applies_per_file(tmp_path, capsys, monkeypatch):
    """Like ruff: a nested project's table wins for its files; a pyproject.toml without the
    table is passed over."""
    tree(tmp_path, "app/main.py", "libs/inner/code.py", "plain/p.py")
    (tmp_path / "pyproject.toml").write_text('[tool.torchdevice-lint]\nignore = ["TDV101"]\n')
    (tmp_path / "libs" / "inner" / "pyproject.toml").write_text('[tool.torchdevice-lint]\nselect = ["TDV1"]\n')
    (tmp_path / "plain" / "pyproject.toml").write_text('[project]\nname = "plain"\n')
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli.lint_main(["check", "--no-cache", "--output-format", "json", "."]), *capsys.readouterr()
    assert [item["filename"] for item in json.loads(out)] == ["libs/inner/code.py"]
    code, out, _ = lint(capsys, "--show-settings", "libs/inner/code.py")
    assert f'Settings path: "{tmp_path / "libs" / "inner" / "pyproject.toml"}"' in out
    assert 'ignore = []' in out and 'select = ["TDV1"]' in out


def test_a_whitelist_gitignore_is_read_as_git_reads_it(tmp_path):
    """``*``, ``!*/``, ``!*.*`` ignores what has no extension and keeps every folder
    (qiuqiangkong/audioset_tagging_cnn): git lists the Python files, and so does a run, and the
    project model reads them too."""
    from pathlib import Path

    from torchdevice_lint.project.roots import project_files

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "pytorch/main.py", "utils/config.py", "scripts/run", "top.py", "model.pth")
    (tmp_path / ".gitignore").write_text("*\n!*/\n!*.*\n*.pth\n")
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split()
    python = sorted(name for name in listed if name.endswith(".py"))
    assert python == ["pytorch/main.py", "top.py", "utils/config.py"]
    assert found(tmp_path) == python
    assert sorted(p.relative_to(tmp_path).as_posix() for p in project_files(Path(tmp_path))) == python


@pytest.mark.parametrize("patterns", [
    "*\n!*/\n!*.*\n*.pth\n",  # a whitelist: what has an extension, in every folder
    "foo/**\n!foo/keep.py\n",  # what is in foo, not foo: a file in it comes back
    "bar/*\n!bar/sub/\n",  # a folder in an emptied folder comes back
    "/*\n!/foo/\n",  # only one top-level folder kept
    "gen\n!top.py\n",  # a name anywhere, file or folder
])
def test_ignore_files_keep_what_git_keeps(tmp_path, patterns):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    tree(tmp_path, "top.py", "foo/a.py", "foo/keep.py", "bar/y.py", "bar/sub/x.py", "a/gen/b.py", "gen/c.py", "d/e.py")
    (tmp_path / ".gitignore").write_text(patterns)
    listed = subprocess.run(
        ["git", "ls-files", "--others", "--exclude-standard"], cwd=tmp_path, capture_output=True, text=True, check=True,
    ).stdout.split()
    assert found(tmp_path) == sorted(name for name in listed if name.endswith(".py"))
