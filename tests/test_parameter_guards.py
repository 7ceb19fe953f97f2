"""A branch on a parameter that every call in the project leaves off (``Model()`` with
``local_rank=-1``) is one the user must ask for: its hazards are not reported; a call that may
take it (a literal, an option a launcher sets, ``**kwargs``) or no call at all keeps them
(``knowledge/parameter_guards.py``)."""

from pathlib import Path

import pytest

from tests.project_files import project_findings

MODEL = (
    "import torch\n\n\nclass Model:\n    def __init__(self, net, local_rank=-1, device_ids=None):\n"
    "        self.net = net\n        self.rank = local_rank\n"
    "        if local_rank != -1:\n            self.net = net.cuda()\n\n"
    "    def place(self):\n        if self.rank >= 0:\n            self.net.cuda()\n"
)
RANK_OPTION = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--local_rank', type=int{})\nargs = parser.parse_args()\n"


def lines(root: Path, files: dict, checked: str = "model.py"):
    return [f.location.row for f in project_findings(root, {"model.py": MODEL, **files}, checked)]


def test_a_branch_every_call_leaves_at_its_default_is_not_reported(tmp_path):
    assert lines(tmp_path, {"infer.py": "from model import Model\nModel(None)\nModel(None, device_ids=[0])\n"}) == []


@pytest.mark.parametrize("call", [
    "Model(None, 0)",  # a literal that takes the branch
    "Model(None, local_rank=args.local_rank)",  # what torchrun sets
    "Model(None, *rest)",
    "Model(**settings)",
])
def test_a_call_that_may_take_the_branch_keeps_it_reported(tmp_path, call):
    assert lines(tmp_path, {"train.py": RANK_OPTION.format("") + f"from model import Model\n{call}\n"}) == [9, 13]


def test_a_class_nobody_constructs_keeps_its_branch_reported(tmp_path):
    assert lines(tmp_path, {}) == [9, 13]


def test_a_same_named_class_of_another_module_has_calls_of_its_own(tmp_path):
    files = {
        "other.py": "class Model:\n    def __init__(self, net, local_rank=-1):\n        pass\n",
        "train.py": RANK_OPTION.format("") + "from other import Model\nModel(None, args.local_rank)\n",
        "infer.py": "from model import Model\nModel(None)\n",
    }
    assert lines(tmp_path, files) == []


def test_a_parameter_bound_again_in_the_function_keeps_its_branch(tmp_path):
    rebound = MODEL.replace("        self.net = net\n", "        self.net = net\n        local_rank = int(net)\n", 1)
    assert lines(tmp_path, {"model.py": rebound, "infer.py": "from model import Model\nModel(None)\n"}) == [10, 14]


def test_methods_of_other_classes_are_not_calls_of_this_one(tmp_path):
    trainer = (
        "class Trainer:\n    def initialize(self, net, fast=False):\n        if fast:\n            net.cuda()\n"
    )
    files = {
        "trainer.py": trainer,
        "loader.py": "class Loader:\n    def initialize(self, net, fast):\n        pass\n",
        "train.py": "from trainer import Trainer\nfrom loader import Loader\nTrainer().initialize(None)\n"
                    "loader = Loader()\nloader.initialize(None, True)\nt = Trainer()\nt.initialize(None)\n",
    }
    assert lines(tmp_path, files, "trainer.py") == []
    files["train.py"] += "t.initialize(None, fast=True)\n"
    assert lines(tmp_path, files, "trainer.py") == [4]
