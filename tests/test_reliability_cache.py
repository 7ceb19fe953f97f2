"""The result cache deletes only what it provably wrote (issue 30): its directory must be new,
empty or tagged by it, and pruning there touches only the files it names itself."""

import os
import time

import pytest

from torchdevice_lint import cli

HAZARD = "import torch\nx = torch.ones(2).cuda()\n"
TWO_MONTHS = 60 * 24 * 3600


def users_folder(path):
    """A folder of the user's own results: names the cache's pruning used to match, and old."""
    path.mkdir()
    for index in range(12):
        (path / f"results-{index}.json").write_text(f'{{"run": {index}}}')
    (path / "notes.txt").write_text("mine")
    for item in path.iterdir():
        os.utime(item, (time.time() - TWO_MONTHS,) * 2)
    return {item.name: item.read_text() for item in path.iterdir()}


def contents(path):
    return {item.name: item.read_text() for item in path.iterdir()}


@pytest.mark.parametrize("how", ["--cache-dir", "TORCHDEVICE_LINT_CACHE_DIR"])
@pytest.mark.parametrize("main", [cli.lint_main, cli.fix_main], ids=["check", "fix"])
def test_a_folder_of_the_users_files_is_refused_as_the_cache_and_kept_whole(tmp_path, monkeypatch, capsys, how, main):
    before = users_folder(tmp_path / "results")
    (tmp_path / "a.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    options = ["--cache-dir", "results"] if how == "--cache-dir" else []
    if how != "--cache-dir":
        monkeypatch.setenv(how, "results")
    code = main((["check"] if main is cli.lint_main else ["--unsafe-fixes"]) + options + ["a.py"])
    out, err = capsys.readouterr()
    assert contents(tmp_path / "results") == before  # 0.1.3 deleted all but the newest 7, or all of them
    assert code == 2 and out == ""
    [line] = err.splitlines()
    assert "cache directory 'results' is not torchdevice-lint's" in line
    assert (tmp_path / "a.py").read_text() == HAZARD


def test_pruning_deletes_only_what_the_cache_wrote(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    assert cli.lint_main(["check", "--cache-dir", "cache", "a.py"]) == 1
    [written] = (tmp_path / "cache").glob("results-*.json")
    dropped_in = {"results-backup.json": "{}", "results-0123456789abcdef0123.json.bak": "{}", "readme.txt": "mine"}
    for name, text in dropped_in.items():
        (tmp_path / "cache" / name).write_text(text)
    for item in (tmp_path / "cache").iterdir():
        os.utime(item, (time.time() - TWO_MONTHS,) * 2)
    # other settings: another cache file, and the old ones are pruned
    assert cli.lint_main(["check", "--cache-dir", "cache", "--select", "TDV1", "a.py"]) == 1
    capsys.readouterr()
    left = contents(tmp_path / "cache")
    assert not (tmp_path / "cache" / written.name).exists()  # its own old file went
    assert {name: left.get(name) for name in dropped_in} == dropped_in  # 0.1.3 deleted results-backup.json


def test_a_planted_tag_proves_nothing(tmp_path, monkeypatch, capsys):
    tag = tmp_path / "tag"
    tag.write_text("Signature: 8a477f597d28d172789f06886806bc55\n# torchdevice-lint result cache\n")
    before = users_folder(tmp_path / "results")
    (tmp_path / "results" / "CACHEDIR.TAG").symlink_to(tag)
    (tmp_path / "a.py").write_text(HAZARD)
    monkeypatch.chdir(tmp_path)
    assert cli.lint_main(["check", "--cache-dir", "results", "a.py"]) == 2
    assert "is not torchdevice-lint's" in capsys.readouterr().err
    assert {name: text for name, text in contents(tmp_path / "results").items() if name != "CACHEDIR.TAG"} == before


def test_a_new_or_empty_directory_becomes_the_cache(tmp_path, monkeypatch, capsys):
    (tmp_path / "a.py").write_text(HAZARD)
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    for directory in ("empty", "new/nested"):
        assert cli.lint_main(["check", "--cache-dir", directory, "a.py"]) == 1
        assert cli.lint_main(["check", "--cache-dir", directory, "a.py"]) == 1  # tagged: its own now
        names = sorted(item.name for item in (tmp_path / directory).iterdir())
        assert names[:2] == [".gitignore", "CACHEDIR.TAG"] and names[2].startswith("results-") and len(names) == 3
