"""The device inference behind TDV401-403, beyond the rules' own examples: what it must not
report (precision first) and the corner cases of its joins, loops and fixes."""

import ast

import libcst as cst
import pytest

from torchdevice_lint import api
from torchdevice_lint.engine.fixer import fix_source
from torchdevice_lint.first_stage.facts import parse_facts
from torchdevice_lint.inference import infer_tree
from torchdevice_lint.model.settings import Settings
from torchdevice_lint.rules import rule_by_code
from torchdevice_lint.syntax.ast_parse import compile_python
from torchdevice_lint.syntax.positions import cst_nodes_at, statement_first_lines

CODES = ("TDV401", "TDV402", "TDV403")


def codes(source):
    engine = api.engine(Settings(select=CODES), rules=[rule_by_code(code) for code in CODES])
    result = engine.check_source("t.py", source)
    assert result.error is None
    return [f.code for f in result.findings]


def fixed(source):
    engine = api.engine(Settings(select=CODES), rules=[rule_by_code(code) for code in CODES])
    return fix_source(engine, "t.py", source, unsafe=True).source


@pytest.mark.parametrize(
    "source",
    [
        # the same tensor moved back inside the loop: unknown at the head
        "import torch\nx = torch.ones(2).cuda()\nfor _ in range(3):\n    x = x.cpu()\nx.numpy()\n",
        # an exception may leave the try body before the move
        "import torch\nx = torch.ones(2)\ntry:\n    x = x.cuda()\nexcept RuntimeError:\n    pass\nx.numpy()\n",
        # a default device set anywhere in the file makes every factory's device unknown
        'import torch\ntorch.set_default_device("cuda")\nx = torch.ones(3).cuda()\ny = x + torch.ones(3)\n',
        # factories under `with torch.device(...)` are created there
        'import torch\nwith torch.device("cuda"):\n    m = torch.ones(3)\nx = torch.ones(3).cuda() + m\n',
        # `torch.tensor(name)` may be a scalar
        "import torch\n\ndef f(x, value):\n    return x.cuda() * torch.tensor(value)\n",
        # python scalars, shapes and `.item()` are not tensors
        "import torch\n\ndef f(x):\n    x = x.cuda()\n    n = x.size(0)\n    return x * n + x.sum().item()\n",
        # dtype casts are not moves; `.to(other)` follows the other tensor
        "import torch\n\ndef f(x):\n    y = x.cuda()\n    z = torch.ones(3).to(y)\n    return y + z.to(torch.float16)\n",
        # a module handed to an unknown call may have been moved there
        "import torch\nfrom torch import nn\nm = nn.Linear(3, 3)\nsetup(m)\nm(torch.ones(3).cuda())\n",
        # a plain attribute assigned outside __init__ is not stuck on the CPU
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = torch.ones(3)\n\n    def forward(self, x):\n        return x * self.w\n\nmodel = M()\nmodel.w = model.w.cuda()\n",
        # a class that overrides `_apply` moves its own attributes
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.w = torch.ones(3)\n\n    def _apply(self, fn):\n        self.w = fn(self.w)\n        return super()._apply(fn)\n\n"
        "    def forward(self, x):\n        return x * self.w\n",
        # a device variable pointing at the CPU
        'import torch\ndevice = "cpu"\nx = torch.ones(3).to(device)\nx.numpy()\ny = x + torch.ones(3)\n',
        # `cpu` as a parameter default: the caller's choice is not known to be a GPU
        'import torch\n\ndef f(x, device="cpu"):\n    return x.to(device).numpy()\n',
        # a function with a Tensor-annotated parameter is not forward: its inputs may be on the CPU
        "import torch\n\ndef pad(x: torch.Tensor):\n    return torch.cat([x, torch.zeros(3)])\n",
        # forward's first parameter annotated as something else
        "import torch\nfrom torch import nn\n\nclass G(nn.Module):\n    def forward(self, shape: tuple):\n        return torch.zeros(shape) + torch.ones(3)\n",
    ],
)
def test_not_reported(source):
    assert codes(source) == []


def test_0dim_cpu_partner_is_legal_but_1dim_is_not():
    head = "import torch\n\ndef f(x):\n    x = x.cuda()\n"
    assert codes(head + "    return x + torch.tensor(1.0) + torch.zeros(())\n") == []
    assert codes(head + "    return x + torch.tensor([1.0])\n") == ["TDV402"]


def test_loop_carried_device_value_reaches_numpy():
    source = "import torch\nx = torch.zeros(2).cuda()\nwhile cond():\n    x = torch.relu(x)\nprint(x.numpy())\n"
    assert codes(source) == ["TDV401"]


def test_break_path_joins_into_after_loop():
    source = (
        "import torch\nx = torch.zeros(2).cuda()\nfor b in batches:\n    if b:\n        x = b\n        break\n"
        "print(x.numpy())\n"
    )
    assert codes(source) == []


def test_stuck_attribute_reported_in_every_method_using_it_with_a_device_tensor():
    source = (
        "import torch\n\nclass Runner:\n    def __init__(self, device):\n        self.device = device\n"
        "        self.mean = torch.tensor([0.5, 0.5])\n\n    def step(self, x):\n"
        "        x = x.to(self.device)\n        return x - self.mean\n"
    )
    assert codes(source) == ["TDV402"]


def test_numpy_fix_composes_with_factory_fix():
    source = "import torch\n\ndef f(x):\n    x = x.cuda()\n    y = x + torch.ones(3)\n    return y.numpy()\n"
    assert sorted(codes(source)) == ["TDV401", "TDV402"]
    assert fixed(source) == (
        "import torch\n\ndef f(x):\n    x = x.cuda()\n    y = x + torch.ones(3, device=x.device)\n"
        "    return y.detach().cpu().numpy()\n"
    )


def test_fix_is_not_written_where_the_device_tensor_does_not_exist_yet():
    source = "import torch\n\ndef f(x):\n    m = torch.ones(3)\n    x = x.cuda()\n    return x * m\n"
    engine = api.engine(Settings(select=CODES), rules=[rule_by_code(code) for code in CODES])
    [finding] = engine.check_source("t.py", source).findings
    assert finding.fix.applicability == "display-only"


def test_factory_shared_by_two_operations_is_reported_once():
    source = (
        "import torch\nfrom torch import nn\n\nclass P(nn.Module):\n    def forward(self, x):\n"
        "        pos = torch.arange(4)\n        return x + pos, x * pos\n"
    )
    assert codes(source) == ["TDV403"]


def findings(source):
    engine = api.engine(Settings(select=CODES), rules=[rule_by_code(code) for code in CODES])
    result = engine.check_source("t.py", source)
    assert result.error is None
    return [(f.code, f.location.row, f.location.column, f.end_location.row, f.end_location.column) for f in result.findings]


# The inference runs on CPython's tree; the rules report on LibCST's, found by kind and range.
def test_findings_after_non_ascii_text_are_placed_in_characters():
    source = 'import torch\nlabel = "é"; x = torch.ones(3).cuda(); y = x + torch.ones(3)  # 温度\nprint(x.numpy())\n'
    assert findings(source) == [("TDV402", 2, 44, 2, 61), ("TDV401", 3, 7, 3, 16)]


def test_parenthesised_and_multi_line_operations_are_found():
    source = (
        "import torch\n\ndef f(x):\n    x = x.cuda()\n    return ((x\n            + torch.ones(\n                3)))\n"
    )
    assert findings(source) == [("TDV402", 5, 14, 7, 19)]
    assert "torch.ones(\n                3, device=x.device)" in fixed(source)


def test_first_stage_skips_libcst_when_the_inference_finds_nothing():
    source = "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def forward(self, x):\n        return x + torch.ones(3, device=x.device)\n"
    engine = api.engine(Settings(select=CODES), rules=[rule_by_code(code) for code in CODES])
    assert engine.rules_for("t.py", source) == []
    assert engine.rules_for("t.py", source.replace(", device=x.device", "")) == [rule_by_code("TDV403")]


def _unlocated(source):
    """Nodes the inference reports that ``cst_nodes_at`` does not find in LibCST's tree, with
    the statements placed by CPython's tree and without (every statement generated)."""
    tree = compile_python(source)
    nodes = parse_facts(source, tree).inferred().reported_nodes()
    module = cst.parse_module(source)
    missing = []
    for first_lines in (statement_first_lines(module, tree), None):
        located = cst_nodes_at(module, source, nodes, first_lines)
        missing += [ast.dump(node)[:80] for node in nodes if id(node) not in located]
    return missing


INFERENCE_RULES = [rule_by_code(code) for code in ("TDV401", "TDV402", "TDV403", "TDV601")]


@pytest.mark.parametrize(
    "source",
    [example.code for rule in INFERENCE_RULES for example in (*rule.valid, *rule.invalid)]
    + [
        # a form feed is no line break for either parser; a semicolon joins two statements
        "import torch\n\x0c\nx = torch.ones(3).cuda(); y = x + torch.ones(3)\n",
        # decorators, a comment and a string with a line break inside the statement
        'import torch\n\n@decorate\ndef f(x):\n    x = x.cuda()  # é\n    s = """a\nb"""\n    x += torch.ones(3)\n    return x.numpy()\n',
        # the same operation twice on one line, and one without a trailing newline
        "import torch\nx = torch.ones(2).cuda()\ny, z = x + torch.ones(2), x + torch.ones(2)\nx.numpy()",
    ],
)
def test_every_node_the_inference_reports_is_found_in_the_libcst_tree(source):
    assert _unlocated(source) == []


def inference_events(inference):
    """What an inference found, by position: its events and the CPU sides of its mixes."""
    place = lambda node: (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset)  # noqa: E731
    return (
        sorted(place(event.call) for event in inference.numpy_calls),
        sorted((place(mix.node), sorted(place(o) for side in mix.cpu_sides for o in side.value.origins or ())) for mix in inference.mixes),
        sorted(place(call) for call in inference.float64_calls),
        len(inference.factory_sites),
    )


@pytest.mark.parametrize(
    "source",
    [example.code for rule in INFERENCE_RULES for example in (*rule.valid, *rule.invalid)]
    + [
        # forward holds no seed: the CPU tensor comes from __init__'s class facts
        "import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.mask = torch.ones(3, 3)\n\n    def forward(self, x):\n        return x.cuda() * self.mask\n",
        # the same through a "cpu" string in __init__ and a move in the method
        'import torch\nfrom torch import nn\n\nclass M(nn.Module):\n    def __init__(self):\n        super().__init__()\n'
        '        self.device = "cpu"\n        self.w = nn.Parameter(torch.zeros(3))\n\n    def forward(self, x):\n        return x.to(self.device) + self.w\n',
        # a CPU module built in the method, called with a device tensor
        "import torch\nfrom torch import nn\n\ndef f(x):\n    m = nn.Linear(3, 3)\n    return m(x.cuda())\n",
        # a module class of the file, and a nested function
        "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    pass\n\ndef outer(x):\n    def inner(y):\n        return Net()(y.cuda())\n    return inner(x)\n",
        # seeds in a decorator and a default, on the module body and in a class body
        'import torch\n\n@wrap("cpu")\ndef f(x, device="cpu"):\n    return x.to(device).cuda().numpy()\n\nclass C:\n    t = torch.ones(3)\n\ny = torch.ones(3).cuda() + C.t\n',
        # float64 by name, by string, by method
        "import torch\nfrom torch import float64\n\ndef f(x):\n    a = x.cuda().to(float64)\n    b = x.cuda().type('torch.DoubleTensor')\n    return a, b, x.cuda().double()\n",
        # one-line definitions, and seeds on the lines around them
        "import torch\ndef f(x): return x.cuda().numpy()\nz = torch.ones(3).cuda(); w = z + torch.ones(3)\n",
    ],
)
def test_functions_without_seeds_are_skipped_without_changing_the_inference(source):
    """The walk skips every function that holds no seed (``FileAnalysis.seeds``): what it finds
    is what walking every function finds."""
    facts = parse_facts(source)
    walking_all = infer_tree(facts.tree, source, facts.seeds, facts.dotted_calls, walk_every_function=True)
    assert inference_events(facts.inferred()) == inference_events(walking_all)
