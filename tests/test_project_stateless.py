"""Project classes proven to hold no parameter, buffer or submodule: ``.cuda()`` of one has
nothing to move. Whatever cannot be read for certain stays unproven."""

import ast

import pytest

from torchdevice_lint.project.stateless import module_classes, parameterless_classes

HEADER = "import torch.nn as nn\nimport six\n\n"


def proven(source: str, **others: str) -> set:
    modules = {"losses.py": HEADER + source, **{f"{name}.py": text for name, text in others.items()}}
    classes = {path: module_classes(ast.parse(text), {"nn": "torch.nn", "six": "six"}) for path, text in modules.items()}
    return set(parameterless_classes(classes, {path: [] for path in modules}))


def test_a_loss_keeping_numbers_and_its_constant_defaults_is_proven():
    source = "class Loss(nn.Module):\n    eps = 1e-6\n    def __init__(self, scale=0.5):\n        super().__init__()\n        self.scale = scale\n        self.mode = ('sum', -1)\n"
    assert proven(source) == {"Loss"}


def test_a_subclass_of_a_proven_class_is_proven():
    assert proven("class Base(nn.Module):\n    pass\n\nclass Loss(Base):\n    pass\n") == {"Base", "Loss"}


@pytest.mark.parametrize(
    "source",
    [
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.inner = nn.MSELoss()\n",
        "class Loss(nn.Module):\n    def __init__(self, net=None):\n        super().__init__()\n        self.net = net\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.register_buffer('w', None)\n",
        "class Loss(nn.Module):\n    def __init__(self):\n        super().__init__()\n        setattr(self, 'w', 1)\n",
        "class Loss(nn.Module, metaclass=Meta):\n    pass\n",
        "class Loss(six.Base):\n    pass\n",
        "class Loss(nn.Linear):\n    pass\n",
        "class Loss(nn.Module):\n    weight = nn.Parameter(None)\n",
    ],
    ids=["submodule", "argument-defaulting-to-None", "buffer", "setattr", "metaclass", "unknown-base", "layer-base", "class-parameter"],
)
def test_what_may_hold_a_tensor_or_module_is_unproven(source):
    assert proven(source) == set()


def test_a_name_is_proven_only_where_every_definition_of_it_is_empty():
    empty, full = "class Loss(nn.Module):\n    pass\n", "class Loss(nn.Module):\n    def __init__(self):\n        self.l = nn.Linear(1, 1)\n"
    assert proven(empty, other=HEADER + empty) == {"Loss"}
    assert proven(empty, other=HEADER + full) == set()
