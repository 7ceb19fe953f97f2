"""Names a module takes from the other modules of its project: ``from utils import *`` binding
``torch``, ``from utils import device`` binding the project's device (``project/imports.py``)."""

from pathlib import Path

from torchdevice_lint import api
from torchdevice_lint.app.cache import StoredFacts
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.project.model import Projects

PORTABLE = 'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
HARD = 'import torch\ndevice = torch.device("cuda")\n'
USES_DEVICE = "import torch\nfrom utils import device\n\n\ndef f(x):\n    return x.cuda()\n"


def write(root: Path, files: dict) -> None:
    (root / "setup.py").write_text("")
    for name, code in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(code)


def codes(path: Path, projects=None):
    result = api.engine(projects=projects).check_source(str(path), path.read_text())
    return [finding.code for finding in result.findings]


def fixed(path: Path) -> str:
    engine = api.engine(projects=Projects())
    return fix_source(engine, str(path), path.read_text(), unsafe=True).source


def test_torch_from_a_chain_of_star_imports_is_torch(tmp_path):
    write(tmp_path, {
        "models/__init__.py": "from .base import *\n",
        "models/base.py": "import torch\nimport torch.nn as nn\n",
        "train.py": "from models import *\n\n\ndef sync():\n    torch.cuda.synchronize()\n",
    })
    assert codes(tmp_path / "train.py", Projects()) == ["TDV301"]
    assert codes(tmp_path / "train.py") == []  # alone, `torch` is nobody's


def test_a_star_import_takes_only_what_all_lists(tmp_path):
    write(tmp_path, {
        "utils.py": 'import torch\n__all__ = ["helper"]\n',
        "train.py": 'from utils import *\nfrom mylib import torch\nstate = torch.load("m.pt")\n',
    })
    assert Projects().facts_for(str(tmp_path / "train.py")).imported == {}


def test_star_imports_that_import_each_other_end(tmp_path):
    write(tmp_path, {"a.py": "from b import *\nimport torch\n", "b.py": "from a import *\n"})
    assert Projects().facts_for(str(tmp_path / "b.py")).imported == {"torch": "torch"}


def test_a_portable_device_of_another_module_is_the_one_the_fix_uses(tmp_path):
    write(tmp_path, {"utils.py": PORTABLE, "train.py": USES_DEVICE})
    assert Projects().facts_for(str(tmp_path / "train.py")).imported_devices == {"device": "portable"}
    assert fixed(tmp_path / "train.py").endswith("return x.to(device)\n")


def test_a_hard_cuda_device_of_another_module_is_reported_there_and_never_written(tmp_path):
    write(tmp_path, {"utils.py": HARD, "train.py": USES_DEVICE})
    assert codes(tmp_path / "utils.py", Projects()) == ["TDV102"]
    assert Projects().facts_for(str(tmp_path / "train.py")).imported_devices == {"device": "cuda"}
    assert "x.to(device)" not in fixed(tmp_path / "train.py")


def test_a_device_chosen_by_an_availability_branch_is_portable(tmp_path):
    write(tmp_path, {
        "config.py": 'import torch\nif torch.cuda.is_available():\n    DEVICE = "cuda"\nelse:\n    DEVICE = "cpu"\n',
        "train.py": "from config import DEVICE as device\n",
    })
    assert Projects().facts_for(str(tmp_path / "train.py")).imported_devices == {"device": "portable"}


def test_stored_import_facts_read_back_equal_to_parsed_ones(tmp_path):
    write(tmp_path, {"utils.py": PORTABLE + '__all__ = ["device"]\n', "train.py": "from utils import *\n"})
    store = StoredFacts(tmp_path / "cache")
    cache, prints = store.load()
    first = Projects(cache, prints=prints)
    facts = first.facts_for(str(tmp_path / "train.py"))
    store.save(first.cache, prints)
    cache, prints = StoredFacts(tmp_path / "cache").load()
    again = Projects(cache, prints=prints)
    assert again.facts_for(str(tmp_path / "train.py")) == facts and again.cache.parsed == 0
    assert facts.imported_devices == {"device": "portable"} and facts.imported == {}
