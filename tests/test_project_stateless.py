"""Project classes proven to hold no parameter, buffer or submodule: ``.cuda()`` of one has
nothing to move. Whatever cannot be read for certain stays unproven."""

import ast

import pytest

from torchdevice_lint.project.context import definitions
from torchdevice_lint.project.stateless import module_classes, module_factories, parameterless_classes

HEADER = "import torch.nn as nn\nimport six\n\n"


def proven(source: str, **others: str) -> set:
    modules = {"losses.py": HEADER + source, **{f"{name}.py": text for name, text in others.items()}}
    imports = {"nn": "torch.nn", "six": "six"}
    trees = {path: ast.parse(text) for path, text in modules.items()}
    classes = {path: module_classes(tree, imports) for path, tree in trees.items()}
    callables = {path: [name for name in definitions(tree) if name not in classes[path]] for path, tree in trees.items()}
    return set(parameterless_classes(classes, callables, {path: module_factories(tree, imports) for path, tree in trees.items()}))


def test_a_loss_keeping_numbers_and_its_constant_defaults_is_proven():
    source = "class Loss(nn.Module):\n    eps = 1e-6\n    def __init__(self, scale=0.5):\n        super().__init__()\n        self.scale = scale\n        self.mode = ('sum', -1)\n"
    assert proven(source) == {"Loss"}


def test_a_loss_keeping_a_plain_tensor_is_proven():
    """A tensor assigned to an attribute is not registered: ``Module.cuda()`` leaves it."""
    source = "class Loss(nn.Module):\n    def __init__(self, t):\n        super().__init__()\n        self.thresh = -torch.log(torch.tensor(t)).float()\n"
    assert proven(source) == {"Loss"}


def test_an_f_string_docstring_with_nothing_to_format_is_a_docstring():
    # Julie-tang00/Point-BERT@ce5a6e1 extensions/chamfer_dist/__init__.py:61-66
    source = "class Loss(nn.Module):\n    f\'\'\' Chamfer Distance L1\n    \'\'\'\n    def __init__(self, ignore_zeros=False):\n        super().__init__()\n        self.ignore_zeros = ignore_zeros\n"
    assert proven(source) == {"Loss"}
    assert proven(source.replace("L1", "{nn.Linear(2, 2)}")) == set()


def test_a_subclass_of_a_proven_class_is_proven():
    assert proven("class Base(nn.Module):\n    pass\n\nclass Loss(Base):\n    pass\n") == {"Base", "Loss"}


@pytest.mark.parametrize(
    "source",
    [
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = nn.Linear(2, 2)\n",
        "class Loss(nn.Module):\n    def __init__(self, w):\n        super().__init__()\n        self.inner = nn.CrossEntropyLoss(weight=w)\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = six.Loss()\n",
        "class Loss(nn.Module):\n    def __init__(self, net=None):\n        super().__init__()\n        self.net = net\n",
        "class Loss(nn.Module):\n    def __init__(self, net):\n        super().__init__()\n        self.net = net\n\n    def forward(self, x):\n        return self.net(x)\n",
        "class Loss(nn.Module):\n    def __init__(self, net):\n        super().__init__()\n        self.net = net\n\n    def forward(self, x):\n        return self.net.encode(x)\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer('w', None)\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        setattr(self, 'w', 1)\n",
        "class Loss(nn.Module, metaclass=Meta):\n    pass\n",
        "class Loss(six.Base):\n    pass\n",
        "class Loss(nn.Linear):\n    pass\n",
        "class Loss(nn.Module):\n    weight = nn.Parameter(None)\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.zeros(2))\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.w = torch.zeros(2).requires_grad_()\n",
    ],
    ids=["layer-submodule", "weighted-loss-submodule", "unknown-submodule", "argument-defaulting-to-None", "argument-called", "argument-method-called", "buffer", "setattr", "metaclass", "unknown-base", "layer-base", "class-parameter", "parameter-of-a-tensor", "tensor-method-unknown"],
)
def test_what_may_hold_a_tensor_or_module_is_unproven(source):
    assert proven(source) == set()


def test_a_name_is_proven_only_where_every_definition_of_it_is_empty():
    empty, full = "class Loss(nn.Module):\n    pass\n", "class Loss(nn.Module):\n    def __init__(self):\n        self.l = nn.Linear(1, 1)\n"
    assert proven(empty, other=HEADER + empty) == {"Loss"}
    assert proven(empty, other=HEADER + full) == set()


def test_a_loss_holding_only_empty_submodules_is_proven():
    """wvangansbeke/Unsupervised-Classification@952ec31 losses/losses.py:25-31: ``ConfidenceBasedCE``
    holds a project loss that keeps nothing and an ``nn.Softmax``."""
    source = (
        "class Masked(nn.Module):\n    def __init__(self):\n        super().__init__()\n\n"
        "class Confident(nn.Module):\n    def __init__(self, threshold):\n        super().__init__()\n"
        "        self.loss = Masked()\n        self.softmax = nn.Softmax(dim=1)\n        self.ce = nn.CrossEntropyLoss()\n"
    )
    assert proven(source) == {"Masked", "Confident"}


def test_a_loss_holding_a_project_module_with_a_layer_is_unproven():
    source = (
        "class Head(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(2, 2)\n\n"
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.head = Head()\n"
    )
    assert proven(source) == set()



def test_a_loss_keeping_arguments_it_never_calls_is_proven():
    """HobbitLong/CMC@58d06e9 NCE/NCECriterion.py, leoxiaobin/deep-high-resolution-net.pytorch
    lib/core/loss.py:15-19: numbers and flags handed in, used in arithmetic and tests."""
    source = (
        "class NCECriterion(nn.Module):\n    def __init__(self, n_data, use_weight):\n        super().__init__()\n"
        "        self.n_data = n_data\n        self.use_weight = use_weight\n        self.mse = nn.MSELoss(reduction='mean')\n\n"
        "    def forward(self, x):\n        total = helper(x)\n        if self.use_weight:\n            total = total * 2\n"
        "        return self.mse(total / self.n_data, x)\n"
    )
    assert proven(source) == {"NCECriterion"}


#: wvangansbeke/Unsupervised-Classification@952ec31 utils/common_config.py:14-30: a loss chosen by configuration.
FACTORY = (
    "class SimCLRLoss(nn.Module):\n    def __init__(self, temperature):\n        super().__init__()\n        self.temperature = temperature\n\n"
    "def get_criterion(p):\n    if p['criterion'] == 'simclr':\n        criterion = SimCLRLoss(**p['kwargs'])\n"
    "    elif p['criterion'] == 'ce':\n        criterion = nn.CrossEntropyLoss()\n    else:\n        raise ValueError(p['criterion'])\n    return criterion\n"
)


def test_a_function_returning_only_empty_modules_is_proven_like_a_class():
    assert proven(FACTORY) == {"SimCLRLoss", "get_criterion"}


@pytest.mark.parametrize(
    "changed",
    [
        ("nn.CrossEntropyLoss()", "nn.Linear(2, 2)"),
        ("    return criterion\n", "    return criterion, 1\n"),
        ("    else:\n        raise ValueError(p['criterion'])\n", "    for criterion in p['extra']:\n        pass\n"),
        ("    return criterion\n", "    return criterion\n\nclass Holder:\n    def get_criterion(self):\n        return self.loss\n"),
    ],
    ids=["a-layer", "a-tuple", "another-binding", "a-method-of-the-same-name"],
)
def test_a_function_that_may_return_anything_else_is_unproven(changed):
    assert "get_criterion" not in proven(FACTORY.replace(*changed))
