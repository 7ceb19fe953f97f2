"""Which device a fix writes, and when (engine/devices.py): a name only where it is bound to a
device when the line runs, ``x.device`` only for a value known to be a tensor, the module-level
binding only where the name is free, and one device convention per file (issues 27 and 30)."""

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.inference.tensors import TensorFacts
from torchdevice_lint.syntax.ast_parse import compile_python

INLINE = 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'
CUDA_OR_CPU = 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'


def fixed(source, **config):
    settings = settings_from_table({"unsafe-fixes": True, **config})
    return api.fix_source(source, "example.py", settings, unsafe=True).source


# -- a binding named like the device that holds something else (issue 30) ---------------------
@pytest.mark.parametrize(
    "binding",
    [
        "class device:\n    pass\n",
        "import device\n",
        "from utils import device\n",
        "def device():\n    return 'cpu'\n",
        "device = get_device()\n",
        "for device in ('cpu',):\n    pass\n",
    ],
    ids=["class", "module", "imported", "function", "unknown-value", "loop-target"],
)
def test_a_device_name_bound_to_something_else_is_neither_used_nor_rebound(binding):
    source = f"import torch\n{binding}\n\ndef run(x):\n    return x.cuda()\n"
    assert fixed(source) == source.replace("x.cuda()", f"x.to({INLINE})")


@pytest.mark.parametrize("name", ["torch", "\uff54\uff4f\uff52\uff43\uff48", "print", "np"])
def test_a_configured_device_name_the_file_already_uses_is_not_bound(name):
    source = "import torch\nimport numpy as np\nprint(np.zeros(1))\nx = torch.ones(2).cuda()\n"
    assert fixed(source, **{"device-name": name}) == source.replace(".cuda()", f".to({INLINE})")


def test_a_free_configured_name_gets_the_binding():
    source = "import torch\nx = torch.ones(2).cuda()\n"
    assert fixed(source, **{"device-name": "dev"}) == f"import torch\n\ndev = {INLINE}\nx = torch.ones(2).to(dev)\n"


def test_a_name_a_star_import_may_bring_is_not_bound_over_it():
    source = "import torch\nfrom settings import *\nprint(device)\nx = torch.ones(2).cuda()\n"
    assert fixed(source) == source.replace(".cuda()", f".to({INLINE})")


# -- bound when the line runs -------------------------------------------------------------------
def test_a_module_level_device_assigned_below_the_function_is_not_reused():
    source = (
        "import torch\n\n\ndef run(x):\n    return x.cuda()\n\n\n"
        'device = torch.device("cpu")\n'
    )
    assert "device = torch.device(\"cuda\"" in fixed(source)


def test_a_device_assigned_above_on_every_path_is_reused():
    source = 'import torch\n\ndef run(x, device=None):\n    device = device or torch.device("cpu")\n    return x.cuda()\n'
    assert fixed(source) == source.replace("x.cuda()", "x.to(device)")


def test_a_device_assigned_on_one_branch_only_is_not_reused():
    source = (
        "import torch\n\ndef run(x, fast):\n    if fast:\n        device = torch.device('cpu')\n"
        "    return x.cuda()\n"
    )
    assert fixed(source) == source.replace("x.cuda()", f"x.to({INLINE})")


def test_a_default_argument_runs_where_the_def_stands():
    source = "import torch\n\ndef run(x, device, mask=torch.ones(2).cuda()):\n    return x\n"
    assert fixed(source) == f"import torch\n\ndevice = {INLINE}\n\ndef run(x, device, mask=torch.ones(2).to(device)):\n    return x\n"


def test_a_class_attribute_named_device_is_not_seen_by_methods():
    source = "import torch\n\nclass Net:\n    device = 'cpu'\n\n    def run(self, x):\n        return x.cuda()\n"
    assert fixed(source) == f"import torch\n\ndevice = {INLINE}\n\n" + source[len("import torch\n\n"):].replace("x.cuda()", "x.to(device)")


# -- one convention per file (issue 27) ---------------------------------------------------------
def test_a_file_that_places_on_cuda_behind_its_own_check_keeps_cuda_or_cpu():
    source = (
        "import torch\n\nuse_cuda = torch.cuda.is_available()\n\n\ndef load(x):\n    return x.cuda()\n\n\n"
        "def main(model):\n    if use_cuda:\n        model = model.cuda()\n    return model\n"
    )
    assert f"device = {CUDA_OR_CPU}\n" in fixed(source)


def test_a_device_the_file_defines_falls_back_to_the_cpu_in_such_a_file():
    source = (
        "import torch\n\ndevice = torch.device('cuda:0')\n"
        "x = torch.ones(2).cuda() if torch.cuda.is_available() else torch.ones(2)\n"
    )
    assert "torch.device('cuda:0' if torch.cuda.is_available() else 'cpu')" in fixed(source)


def test_a_file_that_also_picks_mps_keeps_the_mps_choice():
    source = (
        "import torch\n\nuse_mps = torch.backends.mps.is_available()\n\n\ndef load(x):\n    return x.cuda()\n\n\n"
        "def main(model):\n    if torch.cuda.is_available():\n        model = model.cuda()\n    return model\n"
    )
    assert f"device = {INLINE}\n" in fixed(source)


# -- x.device only for a known tensor --------------------------------------------------------------
def known_tensors(source, line):
    tree = compile_python(source)
    function = next(node for node in tree.body if hasattr(node, "args"))
    facts = TensorFacts(function, lambda node: None)
    statement = next(s for s in facts.statements if s.lineno == line)
    return set(facts.at(statement))


def test_tensor_facts_read_annotations_evidence_and_assignments():
    source = (
        "def f(a: Tensor, b: 'torch.Tensor', c: Optional[Tensor], d, e, n: int, g: Tensor = None):\n"
        "    d.size(0)\n"
        "    h = d.view(-1) * 2\n"
        "    e = e[0]\n"
        "    return a\n"
    )
    assert known_tensors(source, 5) == {"a", "b", "d", "h"}


def test_tensor_facts_keep_only_what_every_path_knows():
    source = (
        "def f(x, y, z):\n"
        "    if z:\n        x.dim()\n        y.dim()\n    else:\n        x.dim()\n"
        "    for item in z:\n        y = item\n"
        "    return x\n"
    )
    assert known_tensors(source, 9) == {"x"}
