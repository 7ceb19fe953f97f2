"""Project fingerprints kept between runs: a project whose modules and checkpoint files are as
they were gets its files' fingerprints back without reading or combining its module facts, and
anything that could change the facts makes them computed again."""

import json
import os
import zipfile
from pathlib import Path

from torchdevice_lint.app.cache import StoredFacts
from torchdevice_lint.knowledge.project_facts import calls_digest
from torchdevice_lint.project.model import Projects

OPTIONS = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_mode', type=bool, default=True)\n"
LOADER = "import torch\nstate = torch.load('weights.pt')\n"


def run(tree: Path, cache: Path, path: str = "main.py"):
    """One run as the command line makes it: the model read from the cache directory, the file's
    fingerprint asked for, the model saved back. Returns (fingerprint, the file's project)."""
    store = StoredFacts(cache)
    facts, prints = store.load()
    projects = Projects(facts, prints=prints, named=[str(tree)])
    fingerprint = projects.fingerprint(str(tree / path))
    store.save(projects.cache, prints)
    return fingerprint, projects.of(str(tree / path))


def make_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "setup.py").write_text("")
    (tree / "main.py").write_text(OPTIONS)
    (tree / "load.py").write_text(LOADER)
    return tree


def test_an_unchanged_project_gets_its_fingerprints_back_without_reading_its_modules(tmp_path):
    tree = make_tree(tmp_path)
    first, project = run(tree, tmp_path / "cache")
    assert first and project._modules is not None
    again, project = run(tree, tmp_path / "cache")
    assert again == first and project._modules is None


def test_a_changed_module_makes_the_fingerprints_computed_again(tmp_path):
    tree = make_tree(tmp_path)
    first, _ = run(tree, tmp_path / "cache")
    (tree / "main.py").write_text(OPTIONS.replace("True", "False"))
    again, project = run(tree, tmp_path / "cache")
    assert project._modules is not None and again != first


def test_a_checkpoint_file_that_appears_makes_the_fingerprints_computed_again(tmp_path):
    tree = make_tree(tmp_path)
    first, _ = run(tree, tmp_path / "cache", "load.py")
    with zipfile.ZipFile(tree / "weights.pt", "w") as archive:  # not a torch.save file: still looked at
        archive.writestr("weights/data.pkl", b"")
    _, project = run(tree, tmp_path / "cache", "load.py")
    assert project._modules is not None
    os.utime(tree / "weights.pt", ns=(0, 0))
    _, project = run(tree, tmp_path / "cache", "load.py")
    assert project._modules is not None
    _, project = run(tree, tmp_path / "cache", "load.py")
    assert project._modules is None


def test_an_edited_stored_fingerprint_is_not_believed(tmp_path):
    tree = make_tree(tmp_path)
    first, _ = run(tree, tmp_path / "cache")
    path = StoredFacts(tmp_path / "cache").path
    stored = json.loads(path.read_text())
    for entry, _checksum in stored["projects"].values():
        entry["prints"] = {name: ":forged" for name in entry["prints"]}
    path.write_text(json.dumps(stored))
    again, project = run(tree, tmp_path / "cache")
    assert again == first and project._modules is not None


def test_a_save_keeps_the_module_facts_of_a_project_answered_from_stored_fingerprints(tmp_path):
    tree, other = make_tree(tmp_path), tmp_path / "other"
    other.mkdir()
    (other / "setup.py").write_text("")
    (other / "main.py").write_text(OPTIONS)

    def both(change=None):
        """One run over the two projects, ``change`` done to ``other`` in between."""
        store = StoredFacts(tmp_path / "cache")
        facts, prints = store.load()
        projects = Projects(facts, prints=prints)
        projects.fingerprint(str(tree / "main.py"))
        if change:
            change()
        projects.fingerprint(str(other / "main.py"))
        store.save(projects.cache, prints)
        return projects

    both()
    (other / "main.py").write_text(OPTIONS.replace("True", "False"))
    projects = both()  # tree's answered from what was stored, other's parsed: the run saves
    assert projects.of(str(tree / "main.py"))._modules is None and projects.cache.parsed == 1
    (tree / "load.py").write_text(LOADER + "\n")
    _, project = run(tree, tmp_path / "cache")
    assert project._modules is not None and project.cache.parsed == 1  # main.py's facts were kept


def test_a_save_drops_the_fingerprints_of_project_states_gone(tmp_path):
    tree = make_tree(tmp_path)
    run(tree, tmp_path / "cache")
    (tree / "main.py").write_text(OPTIONS.replace("True", "False"))
    run(tree, tmp_path / "cache")
    stored = json.loads(StoredFacts(tmp_path / "cache").path.read_text())
    assert len(stored["projects"]) == 1


def test_the_calls_digest_reads_content_not_sharing():
    """A call reaching many namesakes shares one record among them: the digest is the same as
    for equal records written apart, and differs where any record does."""
    shared = [1, ["device"], False, [[], [], [], []]]
    together = {"forward@a": (shared,), "forward@b": (shared, shared)}
    apart = {"forward@a": (list(shared),), "forward@b": (list(shared), list(shared))}
    assert calls_digest(together) == calls_digest(apart)
    apart["forward@b"] = (list(shared), [2, ["device"], False, [[], [], [], []]])
    assert calls_digest(together) != calls_digest(apart)
    assert calls_digest({"forward@a": (shared, shared)}) != calls_digest({"forward@a": (shared,), "forward@b": (shared,)})
