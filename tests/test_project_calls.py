"""A parameter whose every caller in the project passes the same option has that option's
default (``MultiBoxLoss(..., args.cuda)`` with ``--cuda`` on by default): a condition on it
is no availability check (``knowledge/flags.py``, ``ProjectFacts.passed_default``)."""

from pathlib import Path

from tests.project_files import project_findings

LOSS = (
    "import torch\n\n\nclass Loss:\n    def __init__(self, use_gpu=True):\n        self.use_gpu = use_gpu\n\n"
    "    def forward(self, x):\n        if self.use_gpu:\n            x = x.cuda()\n        return x\n"
)
OPTION = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--cuda', default={})\nargs = parser.parse_args()\n"


def codes(root: Path, files: dict, checked: str = "loss.py"):
    return [f.code for f in project_findings(root, {"loss.py": LOSS, **files}, checked)]


def test_a_flag_every_caller_passes_on_by_default_is_no_guard(tmp_path):
    assert codes(tmp_path, {"train.py": OPTION.format(True) + "from loss import Loss\nLoss(args.cuda)\n"}) == ["TDV101"]


def test_a_flag_every_caller_passes_off_by_default_still_guards(tmp_path):
    assert codes(tmp_path, {"train.py": OPTION.format(False) + "from loss import Loss\nLoss(args.cuda)\n"}) == []


def test_one_caller_passing_something_else_keeps_the_guard(tmp_path):
    files = {
        "train.py": OPTION.format(True) + "from loss import Loss\nLoss(args.cuda)\n",
        "evaluate.py": "import torch\nfrom loss import Loss\nLoss(torch.cuda.is_available())\n",
    }
    assert codes(tmp_path, files) == []


def test_each_caller_reads_the_option_its_own_script_parses(tmp_path):
    files = {
        "train.py": OPTION.format(True) + "from loss import Loss\nLoss(use_gpu=args.cuda)\n",
        "demo.py": OPTION.format(False) + "\n\ndef run(net, cuda, x):\n    if cuda:\n        x = x.cuda()\n    return net(x)\n\n\nrun(None, args.cuda, 1)\n",
    }
    assert codes(tmp_path, files) == ["TDV101"]
    assert codes(tmp_path, files, "demo.py") == []


def test_a_call_through_a_module_of_a_namespace_package_reaches_the_class(tmp_path):
    """mk-minchul/AdaFace@c60eaa7 face_alignment/align.py:4,10: ``from face_alignment import
    mtcnn`` (a folder with no ``__init__``), then ``mtcnn.MTCNN(device='cuda:0')``: the only
    construction passes the device, so the class's ``'cuda:0'`` default never takes effect."""
    (tmp_path / "face_alignment").mkdir()
    mtcnn = "import torch\n\n\nclass MTCNN:\n    def __init__(self, device='cuda:0'):\n        self.device = torch.device(device)\n"
    align = "from face_alignment import mtcnn\nmodel = mtcnn.MTCNN(device='cpu')\n"
    files = {"face_alignment/mtcnn.py": mtcnn, "face_alignment/align.py": align}
    assert [f.code for f in project_findings(tmp_path, files, "face_alignment/mtcnn.py")] == []
    files["face_alignment/align.py"] = "from face_alignment import mtcnn\nmodel = mtcnn.MTCNN()\n"
    assert [f.code for f in project_findings(tmp_path, files, "face_alignment/mtcnn.py")] == ["TDV102"]
