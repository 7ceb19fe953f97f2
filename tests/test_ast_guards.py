"""The availability checks the first stage reads for certain (``knowledge/ast_guards.py``) are checks for
the batched pass too, whatever the file's imports and user-flag defaults are."""

import ast
import itertools

import libcst as cst
import pytest

from torchdevice_lint.api import check_source
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
    "prefetch_mode == 'cuda'",
    "args.device != 'cpu'",
    "'cuda:0' == dev",
    "x.device.type == 'cpu'",
    "mode == 'mps'",
    "torch.cuda.is_initialized()",
    "isinstance(x, torch.cuda.FloatTensor)",
    "torch.cuda.device_count() > 1",
    "not use_cuda",
    "x.is_cuda",
    "not batch.is_xpu",
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
    for condition in ("use_cuda", "args.cuda", "not use_cuda", "torch.cuda.is_initialized()"):
        assert sign(ast.parse(condition, mode="eval").body) is None


def test_a_value_compared_with_a_device_string_is_the_device_in_use():
    # Restormer's CUDAPrefetcher is built only under ``elif prefetch_mode == 'cuda':``
    # (swz30/Restormer@df766d5 basicsr/train.py:195), as the batched pass reads it
    for condition, expected in (("prefetch_mode == 'cuda'", guards.POSITIVE), ("args.device != 'cpu'", guards.POSITIVE), ("x.device.type == 'cpu'", guards.NEGATIVE)):
        assert sign(ast.parse(condition, mode="eval").body) == expected
    assert sign(ast.parse("mode == 'mps'", mode="eval").body) is None  # other backends: the LibCST pass's to read


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
        # a bare flag: the module's bindings decide, as in the batched pass
        ("if use_cuda:\n    x = x.cuda()\n", True),  # bound nowhere here: no default makes it run
        ("use_cuda = True\nif use_cuda:\n    x = x.cuda()\n", False),
        ("use_cuda = False\nif use_cuda:\n    x = x.cuda()\n", True),
        ("use_cuda = args.cuda\nif use_cuda:\n    x = x.cuda()\n", False),  # the option's default: the project's
        ("def f(x, use_cuda=True):\n    if use_cuda:\n        x = x.cuda()\n", False),
        ("def f(x, use_cuda):\n    return x\nif use_cuda:\n    x = x.cuda()\n", False),  # a parameter somewhere
        ("cuda = True if torch.cuda.is_available() else False\nif cuda:\n    x = x.cuda()\n", True),
        ("ok = torch.cuda.is_available()\ny = x.cuda() if ok else x\n", True),
        ("ok = torch.cuda.is_available()\nok = True\ny = x.cuda() if ok else x\n", False),
        ("if use_amp:\n    x = x.cuda()\n", False),  # a CUDA feature's flag may be on by default
        ("if not no_cuda:\n    x = x.cuda()\n", True),
        ("if x.is_cuda:\n    x = x.cuda()\n", True),
        ("@pytest.mark.skipif(torch.cuda.is_available(), reason='')\ndef test_f():\n    x.cuda()\n", False),
    ],
)
def test_a_candidate_is_guarded_for_certain_only_inside_what_such_a_check_covers(source, guarded):
    facts = parse_facts("import torch\n" + source)
    [call] = facts.calls_named["cuda"]
    assert facts.surely_guarded(call) == guarded


@pytest.mark.parametrize("source", [
    "if use_cuda:\n    x = x.cuda()\n",
    "use_cuda = True\nif use_cuda:\n    x = x.cuda()\n",
    "use_cuda = False\nif use_cuda:\n    x = x.cuda()\n",
    "def f(x, use_cuda=True):\n    if use_cuda:\n        x = x.cuda()\n",
    "cuda = True if torch.cuda.is_available() else False\nif cuda:\n    x = x.cuda()\n",
    "if use_amp:\n    x = x.cuda()\n",
    "if not no_cuda:\n    x = x.cuda()\n",
    "if x.is_cuda:\n    x = x.cuda()\n",
])
def test_what_is_guarded_for_certain_is_guarded_for_the_batched_pass(source):
    source = "import torch\n" + source
    facts = parse_facts(source)
    [call] = facts.calls_named["cuda"]
    reported = any(finding.code == "TDV101" for finding in check_source(source, "example.py").findings)
    if facts.surely_guarded(call):
        assert not reported
