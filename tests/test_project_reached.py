"""Code nothing runs is not reported (``project/reached.py``): a function or method no running
code calls or names, in a module that is part of the program. Whatever may call it unseen keeps
it checked: a name, a string, an alias, a test runner, a README, a package's users."""

from pathlib import Path

from torchdevice_lint.model.settings import Settings
from tests.project_files import project_findings

LOADER = "import torch\n\n\ndef load_checkpoint(path):\n    return torch.load(path).cuda()\n\n\ndef train():\n    return 1\n"
TRAIN = "from utils import train\ntrain()\n"


def codes(root: Path, files: dict, checked: str = "utils.py", unreached: bool = False):
    return [f.code for f in project_findings(root, files, checked, Settings(check_unreached=unreached))]


def test_a_helper_nothing_calls_is_not_reported(tmp_path):
    assert codes(tmp_path, {"utils.py": LOADER, "train.py": TRAIN}) == []


def test_the_setting_reports_it(tmp_path):
    assert codes(tmp_path, {"utils.py": LOADER, "train.py": TRAIN}, unreached=True) == ["TDV501", "TDV101"]


def test_a_call_from_running_code_reports_it(tmp_path):
    files = {"utils.py": LOADER, "train.py": TRAIN + "from utils import load_checkpoint\nload_checkpoint('a.pt')\n"}
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_call_only_from_unreached_code_does_not(tmp_path):
    # LTH14/mar@fe470ac: ddim_sample_loop nothing calls, then the loop only it calls
    sampler = (
        "import torch\n\n\nclass Diffusion:\n    def sample(self, n):\n        return torch.randn(n)\n\n"
        "    def ddim(self, n):\n        return self.ddim_loop(n)\n\n    def ddim_loop(self, n):\n        return torch.randn(n).cuda()\n"
    )
    files = {"diffusion.py": sampler, "train.py": "from diffusion import Diffusion\nDiffusion().sample(2)\n"}
    assert codes(tmp_path, files, "diffusion.py") == []
    files["train.py"] += "Diffusion().ddim(2)\n"
    assert codes(tmp_path, files, "diffusion.py") == ["TDV101"]


def test_a_name_used_as_a_value_or_a_string_may_run_unseen(tmp_path):
    for use in ("hooks = [load_checkpoint]\n", "name = 'load_checkpoint'\n"):
        files = {"utils.py": LOADER + use, "train.py": TRAIN}
        assert codes(tmp_path, files) == ["TDV501", "TDV101"], use


def test_a_call_through_an_import_alias_reaches_it(tmp_path):
    # Pang-Yatian/Point-MAE@7445a68 tools/__init__.py: from .runner_pretrain import run_net as pretrain_run_net
    files = {"utils.py": LOADER, "train.py": TRAIN + "from utils import load_checkpoint as load\nload('a.pt')\n"}
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_method_of_a_value_does_not_reach_a_function_of_its_name(tmp_path):
    # p0p4k/vits2_pytorch@1f4f379 infer_onnx.py:45: an ONNX session's ``model.run(...)``
    for call in ("model = Net()\nmodel.load_checkpoint('a.pt')\n", "self.net.load_checkpoint('a.pt')\n",
                 "Net().load_checkpoint('a.pt')\n"):
        assert codes(tmp_path, {"utils.py": LOADER, "train.py": TRAIN + call}) == [], call
    for call in ("import utils\nutils.load_checkpoint('a.pt')\n", "def main():\n    import utils as u\n    u.load_checkpoint('a.pt')\n\n\nmain()\n"):
        assert codes(tmp_path, {"utils.py": LOADER, "train.py": TRAIN + call}) == ["TDV501", "TDV101"], call


def test_a_reexport_counts_only_where_something_takes_it(tmp_path):
    # ankanbhunia/Handwriting-Transformers@fbc66bf models/model.py:15 imports prepare_z_y and
    # to_device from util/util.py, and neither it nor anything importing it calls them
    models = "from utils import load_checkpoint\n\n\nclass Net:\n    pass\n"
    files = {"utils.py": LOADER, "models.py": models, "train.py": TRAIN + "from models import Net\nNet()\n"}
    assert codes(tmp_path, files) == []
    for taken in ("from models import load_checkpoint\nload_checkpoint('a.pt')\n", "import models\nmodels.load_checkpoint('a.pt')\n",
                  "from models import *\nload_checkpoint('a.pt')\n", "from models import load_checkpoint as load\nhooks = [load]\n"):
        files["train.py"] = TRAIN + taken
        assert codes(tmp_path, files) == ["TDV501", "TDV101"], taken
    # through a module that star-imports the re-exporting one
    files["api.py"] = "from models import *\n"
    files["train.py"] = TRAIN + "from api import load_checkpoint\nload_checkpoint('a.pt')\n"
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_module_cpython_cannot_parse_may_call_anything_it_names(tmp_path):
    files = {"utils.py": LOADER, "train.py": TRAIN, "old.py": "from utils import *\nprint load_checkpoint('a.pt')\n"}
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_the_readme_naming_it_keeps_it(tmp_path):
    files = {"utils.py": LOADER, "train.py": TRAIN, "README.md": "Resume with `load_checkpoint(path)`.\n"}
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_package_others_install_keeps_its_functions(tmp_path):
    files = {"utils.py": LOADER, "train.py": TRAIN, "pyproject.toml": "[project]\nname = 'utils'\n"}
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_module_nothing_imports_is_someone_elses_to_call(tmp_path):
    assert codes(tmp_path, {"utils.py": LOADER}) == ["TDV501", "TDV101"]


def test_tests_are_called_by_their_runner(tmp_path):
    test = "import torch\nimport utils\n\n\ndef test_cuda():\n    assert torch.zeros(1).cuda().sum() == 0\n"
    assert codes(tmp_path, {"utils.py": LOADER, "train.py": TRAIN, "test_utils.py": test}, "test_utils.py") == ["TDV101"]


def test_a_helper_of_a_test_module_runs_only_when_something_calls_it(tmp_path):
    # Shen-Lab/GraphCL@b4d7501 adversarialRobustness_Component/code/common/test.py:36: gpu_test()
    test = "import torch\nimport utils\n\n\ndef gpu_test():\n    return torch.zeros(1).cuda()\n\n\nutils.train()\n"
    files = {"utils.py": LOADER, "train.py": TRAIN, "test.py": test}
    assert codes(tmp_path, files, "test.py") == []
    files["test_common.py"] = files.pop("test.py") + "\n\ndef test_gpu():\n    assert gpu_test().sum() == 0\n"
    assert codes(tmp_path, files, "test_common.py") == ["TDV101"]


EVALUATION = (
    "import torch\n\n\nclass Test:\n    def save(self):\n        return torch.zeros(1).cuda()\n\n"
    "    def show(self):\n        return torch.ones(1).cuda()\n\n\nif __name__ == '__main__':\n    Test().save()\n"
)


def test_a_script_named_test_is_no_runners_module(tmp_path):
    # weijun88/F3Net@eecace3 src/test.py:34: pytest collects test_*.py, not an evaluation's test.py
    files = {"test.py": EVALUATION, "utils.py": LOADER}
    assert [f.location.row for f in project_findings(tmp_path, files, "test.py", Settings())] == [6]  # save's, not show's


def test_a_readme_naming_a_script_runs_what_it_calls(tmp_path):
    files = {"test.py": EVALUATION, "utils.py": LOADER, "README.md": "Evaluate with `python test.py`.\n"}
    assert [f.location.row for f in project_findings(tmp_path, files, "test.py", Settings())] == [6]


def test_methods_of_a_class_with_bases_may_be_called_by_its_framework(tmp_path):
    model = "import torch\nimport lightning\n\n\nclass Net(lightning.LightningModule):\n    def training_step(self):\n        return torch.zeros(1).cuda()\n"
    assert codes(tmp_path, {"net.py": model, "train.py": "from net import Net\nNet()\n"}, "net.py") == ["TDV101"]


def test_nn_module_calls_only_its_own_hooks(tmp_path):
    # yuqinie98/PatchTST@204c21e layers/AutoCorrelation.py:87 time_delay_agg_full, which nothing calls
    model = (
        "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x.cuda()\n\n"
        "    def full(self, x):\n        return x.cuda()\n"
    )
    files = {"net.py": model, "train.py": "from net import Net\nNet()\n"}
    assert [f.location.row for f in project_findings(tmp_path, files, "net.py", Settings())] == [6]  # forward's


LOSSES = (
    "import torch\n\n\nclass FocalLoss(torch.nn.Module):\n    weight = torch.ones(1).cuda()\n\n"
    "    def forward(self, x):\n        return x * torch.ones(1).cuda()\n\n\nclass Loss:\n    def __call__(self, x):\n        return x\n"
)


def test_a_class_nothing_constructs_leaves_its_methods_out_not_its_own_statements(tmp_path):
    # WongKinYiu/yolov7@a207844 utils/loss.py: ComputeLossBinOTA, APLoss nothing builds
    files = {"loss.py": LOSSES, "train.py": "from loss import Loss\nLoss()(1)\n"}
    assert [f.location.row for f in project_findings(tmp_path, files, "loss.py", Settings())] == [5]


def test_a_module_listing_names_may_build_any_class(tmp_path):
    registry = "import importlib\n\nMODELS = vars(importlib.import_module('loss'))\n"
    files = {"loss.py": LOSSES, "train.py": "from loss import Loss\nLoss()(1)\n", "registry.py": registry}
    assert [f.location.row for f in project_findings(tmp_path, files, "loss.py", Settings())] == [5, 8]


def test_a_readme_naming_a_module_keeps_only_the_definitions_it_names(tmp_path):
    # xi-jia/LKU-Net@30c5555 Readme.md:53 "class `LK_encoder` in Models.py": a file to edit
    files = {"utils.py": LOADER, "train.py": TRAIN, "README.md": "Our helpers: see `utils.py`.\n"}
    assert codes(tmp_path, files) == []
    files["README.md"] = "Resume with `load_checkpoint` from utils.py.\n"
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_call_commented_out_is_a_step_its_author_runs(tmp_path):
    # xy-guo/MVSNet_pytorch@e0f2ae3 eval.py:302 "# step1. save all the depth maps", "# save_depth()"
    script = EVALUATION.replace("    Test().save()\n", "    # Test().show()\n    Test().save()\n")
    assert [f.location.row for f in project_findings(tmp_path, {"test.py": script, "utils.py": LOADER}, "test.py", Settings())] == [6, 9]


def test_an_assignment_commented_out_is_code_taken_out(tmp_path):
    # xi-jia/LKU-Net@30c5555 LKU-Net_2D_OASIS/train.py:119 "# diff_transform = DiffeomorphicTransform(...)"
    files = {"utils.py": LOADER, "train.py": TRAIN + "# state = load_checkpoint('best.pth')\n"}
    assert codes(tmp_path, files) == []
    files["train.py"] = TRAIN + "# load_checkpoint('best.pth')\n"  # a step its author runs by uncommenting
    assert codes(tmp_path, files) == ["TDV501", "TDV101"]


def test_a_call_reaches_the_namesake_its_imports_bring(tmp_path):
    # xi-jia/LKU-Net@30c5555: each experiment's folder has its own Models.py, star-imported by its
    # scripts; one folder's script builds the transform, another's never does
    models = "import torch\n\n\nclass Transform(torch.nn.Module):\n    def forward(self, x):\n        return x.cuda()\n"
    script = "from Models import *\n\n\ndef train():\n    return {}\n\n\nif __name__ == '__main__':\n    train()\n"
    files = {"a/Models.py": models, "a/train.py": script.format("Transform()"), "b/Models.py": models, "b/train.py": script.format("1")}
    (tmp_path / ".git").mkdir()  # one project holding both folders
    assert codes(tmp_path, files, "a/Models.py") == ["TDV101"]
    assert codes(tmp_path, files, "b/Models.py") == []
