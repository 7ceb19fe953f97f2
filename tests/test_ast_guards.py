"""The availability checks the first stage reads for certain (``knowledge/ast_guards.py``) are checks for
the batched pass too, whatever the file's imports and user-flag defaults are."""

import ast
import itertools

import libcst as cst
import pytest

from torchdevice_lint.first_stage.facts import parse_facts
from torchdevice_lint.knowledge import cst_guards as guards
from torchdevice_lint.knowledge.ast_guards import sign

CONDITIONS = [
    "torch.cuda.is_available()",
    "th.backends.mps.is_available()",
    "torch.cuda.device_count()",
    "not torch.cuda.is_available()",
    "torch.cuda.is_available() and not args.no_cuda",
    "use_cuda and torch.cuda.is_available() and n > 1",
    "not (torch.cuda.is_available() and fast)",
    "not torch.cuda.is_available() and not torch.backends.mps.is_available()",
    "self.cuda_device is not None",
    "args.gpu is None",
    "args.no_cuda is None",
    "model is not None",
    "torch.cuda.is_available() or fast",
    "use_cuda",
    "args.cuda",
    "device.type == 'cuda'",
    "torch.cuda.is_initialized()",
    "isinstance(x, torch.cuda.FloatTensor)",
    "torch.cuda.device_count() > 1",
    "not use_cuda",
]
#: Ways the batched pass may resolve names and read flag defaults.
QUALNAMES = [lambda node: None, lambda node: "torch.cuda.is_initialized", lambda node: "torch.cuda.is_available"]
FLAG_DEFAULTS = [None, lambda flag: None, lambda flag: True, lambda flag: False]


@pytest.mark.parametrize("condition", CONDITIONS)
def test_a_sign_read_for_certain_is_what_classify_gives_with_any_imports_and_flags(condition):
    certain = sign(ast.parse(condition, mode="eval").body)
    test = cst.parse_expression(condition)
    given = {guards.classify(test, qualname, flags) for qualname, flags in itertools.product(QUALNAMES, FLAG_DEFAULTS)}
    if certain is not None:
        assert given == {certain}


def test_conditions_that_depend_on_flags_or_imports_are_not_read_for_certain():
    for condition in ("use_cuda", "args.cuda", "not use_cuda", "torch.cuda.is_initialized()", "device.type == 'cuda'"):
        assert sign(ast.parse(condition, mode="eval").body) is None


@pytest.mark.parametrize(
    "source, guarded",
    [
        ("if torch.cuda.is_available():\n    x = x.cuda()\n", True),
        ("if not torch.cuda.is_available():\n    raise SystemExit\nelse:\n    x = x.cuda()\n", True),
        ("if a:\n    pass\nelif not torch.cuda.is_available():\n    pass\nelse:\n    x = x.cuda()\n", True),
        ("y = x.cuda() if torch.cuda.is_available() else x\n", True),
        ("ok = torch.cuda.is_available() and n > 0 and x.cuda()\n", True),
        ("def cuda(self):\n    return self.x.cuda()\n", True),
        ("@pytest.mark.skipif(not torch.cuda.is_available(), reason='')\ndef test_f():\n    x.cuda()\n", True),
        ("@requires_gpu\nclass T:\n    def f(self):\n        x.cuda()\n", True),
        ("if not torch.cuda.is_available():\n    x = x.cuda()\n", False),
        ("if torch.cuda.is_available():\n    pass\nx = x.cuda()\n", False),
        ("ok = x.cuda() and torch.cuda.is_available()\n", False),
        ("if use_cuda:\n    x = x.cuda()\n", False),  # a flag: its default decides, in the batched pass
        ("@pytest.mark.skipif(torch.cuda.is_available(), reason='')\ndef test_f():\n    x.cuda()\n", False),
    ],
)
def test_a_candidate_is_guarded_for_certain_only_inside_what_such_a_check_covers(source, guarded):
    facts = parse_facts("import torch\n" + source)
    [call] = facts.calls_named["cuda"]
    assert facts.surely_guarded(call) == guarded
