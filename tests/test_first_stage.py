"""The first stage is sound: a rule it rules out for a file never has a finding there.

Every rule runs on every rule example and on real files *without* the first stage; whatever it
reports, its triggers must match that file's facts. The first stage also owns what CPython's
parser decides: syntax errors for every file (nesting LibCST cannot survive is
tests/test_reliability_hostile.py's), and findings are the same with and without it.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.engine.batched import analyze_module
from torchdevice_lint.first_stage.facts import parse_facts
from torchdevice_lint.first_stage.triggers import EVERY_FILE
from torchdevice_lint.rules import all_rules
from torchdevice_lint.syntax.ast_parse import Unparsable

RULES = all_rules()
REPO = Path(__file__).resolve().parents[1]
REAL_CODE_ROOTS = [
    Path(os.environ.get("TORCHDEVICE_REALCODE_ROOT", "/work/eval/repos")),
    REPO / "bench" / "corpus",
]


def run_unfiltered(path: str, source: str, config: dict = None):
    """(codes reported by the rules run without the first stage, those of them whose
    triggers the file lacks)."""
    settings = settings_from_table({"select": ["TDV"], **(config or {})})
    facts = parse_facts(source)
    analysis = analyze_module(path, source, RULES, settings)
    reported = {raw.rule.code: type(raw.rule) for raw in analysis.ctx.findings}
    return sorted(reported), sorted(code for code, rule in reported.items() if not rule.triggers.matches(facts))


EXAMPLES = [
    pytest.param(example, id=f"{rule.code}-{kind}-{index}")
    for rule in RULES
    for kind in ("valid", "invalid")
    for index, example in enumerate(getattr(rule, kind))
]


@pytest.mark.parametrize("example", EXAMPLES)
def test_every_rule_example_passes_the_first_stage_for_every_rule_that_reports_on_it(example):
    reported, unmatched = run_unfiltered("example.py", example.code, example.config)
    assert unmatched == []


ALL_RULES = {"select": [rule.code for rule in RULES]}  # the opt-in rules too


def findings_in_full(source: str, config: dict = None):
    settings = settings_from_table({**ALL_RULES, **(config or {})})
    result = api.engine(settings).check_source("example.py", source, with_edits=True)
    return result.error, [(f.code, repr(f.location), repr(f.end_location), f.message, repr(f.fix)) for f in result.findings]


@pytest.mark.parametrize("example", EXAMPLES)
def test_findings_are_the_same_with_and_without_the_first_stage(example, monkeypatch):
    """Guards and suppressions read the whole file (a distributed set-up, a GPU-gated
    ``__main__``, flag defaults, ``# noqa``): running fewer rules, or only the dataflow ones
    (which skip the walk), must not change what any rule reports."""
    with_first_stage = findings_in_full(example.code, example.config)
    for rule in RULES:
        monkeypatch.setattr(rule, "triggers", EVERY_FILE)
    assert findings_in_full(example.code, example.config) == with_first_stage


def test_invalid_examples_are_candidates_for_their_own_rule(tmp_path):
    for rule in RULES:
        for index, example in enumerate(rule.invalid):
            if not example.files:
                assert rule.triggers.matches(parse_facts(example.code)), (rule.code, example.code)
                continue
            # in its project: the names other modules bring count (``from utils import *``)
            folder = tmp_path / f"{rule.code}-{index}"
            for name, code in {**example.files, "example.py": example.code}.items():
                (folder / name).parent.mkdir(parents=True, exist_ok=True)
                (folder / name).write_bytes(code) if isinstance(code, bytes) else (folder / name).write_text(code)
            engine = api.engine(settings_from_table({"select": [rule.code]}), rules=[rule], projects=api.Projects())
            assert engine.rules_for(str(folder / "example.py"), example.code) == [rule], (rule.code, example.code)


@pytest.mark.slow
@pytest.mark.parametrize("root", REAL_CODE_ROOTS, ids=["realcode", "corpus"])
def test_real_files_with_findings_pass_the_first_stage(root):
    """On the 26 projects of bench/realcode.py and on the pinned corpus of bench/corpus.py
    (``.ci/run`` downloads it), every rule runs without the first stage on every file."""
    files = sorted(root.rglob("*.py"))
    if not files:
        pytest.skip(f"no real code checked out at {root}")
    unsound, with_findings = {}, 0
    for path in files:
        source = path.read_text(encoding="utf-8", errors="replace")
        try:
            reported, unmatched = run_unfiltered(str(path), source)
        except (Unparsable, RecursionError):
            continue
        with_findings += bool(reported)
        if unmatched:
            unsound[str(path)] = unmatched
    assert unsound == {}
    assert with_findings > 0


def test_facts_see_through_import_aliases():
    facts = parse_facts("from torch.cuda import synchronize as sync\nsync()\n")
    [rule] = [r for r in RULES if r.code == "TDV301"]
    assert rule.triggers.matches(facts)
    assert not rule.triggers.matches(parse_facts("import numba\nnumba.synchronize()\n"))


def test_facts_reach_code_in_every_kind_of_container():
    source = (
        "global_name = {**defaults, 'key': torch.cuda.synchronize}\n"
        "def f(x, *, device='cuda:0'):\n    global counter\n    return [y.cuda() for y in x if y]\n"
        "print(f'{torch.load(path)!r:>10}')\n"
    )
    facts = parse_facts(source)
    assert {"defaults", "synchronize", "path"} <= facts.identifiers
    assert {"cuda", "load", "print"} <= facts.calls
    assert "cuda:0" in facts.placed_strings and "key" in facts.strings


@pytest.mark.skipif(sys.version_info < (3, 10), reason="match statements need Python 3.10")
def test_facts_reach_code_in_match_statements():
    facts = parse_facts("match command:\n    case {'to': target}:\n        model.to(target)\n")
    assert {"command", "model"} <= facts.identifiers and "to" in facts.calls
    assert ("to", "target") in facts.first_arguments


_DATASET = "import torch\n{imports}\n\n\nclass Digits({base}):\n    def __init__(self, path):\n        self.data = torch.load(path)\n"
_GAN_TENSOR = (  # eriklindernoren/PyTorch-GAN@36d3c77 implementations/gan/gan.py:35,115,129
    "import torch\ncuda = True if torch.cuda.is_available() else False\n"
    "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nvalid = Tensor(4, 1).fill_(1.0)\nreal = imgs.type(Tensor)\n"
)


@pytest.mark.parametrize(
    "code, source, reported",
    [
        ("TDV104", "import torch\nx = x.to(device)\ngpu = torch.device('cuda')\n", False),
        ("TDV104", "import torch\nx = x.to(True)\n", False),  # a bool is no integer, to ast or LibCST
        ("TDV104", "import torch\nx = torch.ones(2, device=Rank.device)\ny = count(0)\n", False),
        ("TDV104", "import torch\nx = x.to(0)\n", True),
        ("TDV104", "import torch\nx = x.to(args.local_rank)\n", True),
        ("TDV104", "import torch\nx = torch.ones(2, device=rank)\n", True),
        ("TDV104", "import torch\ngpu = torch.device(gpu_id)\n", True),
        ("TDV104", "from torch import device as dev\ngpu = dev(0)\n", True),
        ("TDV104", "import torch\nx = x.to(*moves, GPU)\n", True),
        # comparisons only ask where a tensor is: diffusers does this in most files
        ("TDV105", 'import torch\nif x.device.type == "mps":\n    y = 1\nok = backend in ("mps", "xpu")\n', False),
        ("TDV105", 'import torch\nx = x.to("mps")\n', True),
        ("TDV105", 'import torch\ndevice = "mps" if fast else "cpu"\n', True),
        ("TDV105", 'import torch\n\ndef f(x, device="xpu:0"):\n    return x.to(device)\n', True),
        ("TDV105", 'import torch\ntorch.set_default_device("mps")\n', True),
        ("TDV105", 'import torch\nx = torch.ones(2, device=f"xpu:{rank}")\n', True),
        ("TDV105", "import torch\nx = x.npu()\n", True),
        # an argument that is no device: a string method's, a dict look-up's, a function named
        # like a backend
        ("TDV105", 'import torch\nif str(device).startswith("mps"):\n    y = 1\nwarn("npu_processor")\n', False),
        ("TDV105", 'import torch\nname = os.environ.get("DEVICE", "mps")\nhint = "mps"\n', False),
        ("TDV105", 'from torch import device as dev\nd = dev("mps")\n', True),
        ("TDV105", 'import torch\nargs.eval_device = "mps"\n', True),
        ("TDV105", 'import torch\np.add_argument("--device", default="xpu")\n', True),
        # names resolved through the imports, as the rules do: a file naming torch, cuda and
        # device or init somewhere (most model files) has no backend call for it
        ("TDV301", "import torch\nx = torch.zeros(2, device=device)\nif torch.cuda.is_available():\n    y = 1\n", False),
        ("TDV301", "import numpy as torch\ntorch.cuda.synchronize()\n", False),
        ("TDV301", "import torch as th\nth.cuda.synchronize()\n", True),
        ("TDV301", "from torch.cuda import synchronize as sync\nsync()\n", True),
        ("TDV301", "import numpy as np\n\ndef f():\n    import torch as np\n    np.cuda.synchronize()\n", True),
        ("TDV501", 'import torch\nstate = torch.load(path, map_location="cpu")\nstate = torch.load(path, device)\n', False),
        ("TDV501", "import torch\nstate = torch.load(*paths)\nstate = torch.load(**options)\n", False),
        ("TDV501", "import torch\nstate = torch.load(path)\n", True),
        ("TDV501", "from torch import load\nstate = load(f=path)\n", True),
        ("TDV501", "import torch\nstate = torch.load(path, map_location=location)\nlocation = None\n", True),
        # a map_location never set to None; a dataset's own files (lucidrains/denoising-diffusion-pytorch@
        # faed4db repaint.py:1067; eriklindernoren/PyTorch-GAN@36d3c77 implementations/cogan/mnistm.py:45)
        ("TDV501", "import torch\ndevice = torch.device('cpu')\nstate = torch.load(path, map_location=device)\n", False),
        ("TDV501", _DATASET.format(base="data.Dataset", imports="import torch.utils.data as data"), False),
        ("TDV501", _DATASET.format(base="Dataset", imports="from torch.utils.data import Dataset"), False),
        ("TDV501", _DATASET.format(base="Dataset", imports="from mylib import Dataset"), True),
        ("TDV501", _DATASET.format(base="data.Dataset", imports="import torch.utils.data as data\nimport mylib as data"), True),
        ("TDV501", _DATASET.format(base="data.Dataset", imports="import torch.utils.data as data") + "state = torch.load(path)\n", True),
        ("TDV102", 'import torch\nif x.device.type == "cuda":\n    y = 1\n', False),
        ("TDV102", 'import torch\nx = x.to("cuda")\n', True),
        ("TDV102", 'import torch\nname = os.environ.get("TORCH_DEVICE", "cuda")\nkind = "cuda_graph"\n', False),
        ("TDV102", 'import torch\nstate = torch.load(path, "cuda:0")\n', True),
        ("TDV102", 'import torch\nmodel = Net(map_location="cuda")\n', True),
        ("TDV102", 'import torch\n\ndef f(x, *, target_device="cuda"):\n    return x.to(target_device)\n', True),
        # candidates that availability checks cover for certain (knowledge/ast_guards.py): no LibCST for them
        ("TDV101", "import torch\nif torch.cuda.is_available():\n    x = x.cuda()\n", False),
        ("TDV101", "import torch\ny = x.cuda() if torch.cuda.is_available() else x\nz = torch.cuda.is_available() and w.cuda()\n", False),
        ("TDV101", "import torch\n\nclass M:\n    def cuda(self):\n        return self.net.cuda()\n", False),
        ("TDV101", "import torch\nif not torch.cuda.is_available():\n    x = x.cuda()\n", True),
        ("TDV101", "import torch\nif torch.cuda.is_available() or fast:\n    x = x.cuda()\n", True),
        ("TDV101", "import torch\nif torch.cuda.is_available():\n    x = x.cuda()\ny = y.cuda()\n", True),
        ("TDV102", 'import torch\nif not torch.cuda.is_available():\n    raise ValueError\nelse:\n    q = torch.randn(2, device="cuda")\n', False),
        ("TDV102", 'import torch\nif torch.cuda.is_available():\n    pass\nelse:\n    q = torch.randn(2, device="cuda")\n', True),
        ("TDV301", "import torch\ndev = torch.cuda.current_device() if torch.cuda.is_available() else None\nif self.cuda_device is not None:\n    torch.cuda.set_device(self.cuda_device)\n", False),
        ("TDV301", "import torch\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='')\ndef test_sync():\n    torch.cuda.synchronize()\n", False),
        ("TDV301", "import torch\nif self.cuda_device is None:\n    torch.cuda.set_device(0)\n", True),
        # names the module binds to a check, or whose words decide (ast_guards.module_name_signs), and tensors' flags
        ("TDV101", "import torch\ncuda = True if torch.cuda.is_available() else False\nif cuda:\n    g.cuda()\n", False),
        ("TDV101", "import torch\nif x.is_cuda:\n    y = y.cuda()\n", False),
        ("TDV101", "import torch\nuse_cuda = True\nif use_cuda:\n    g.cuda()\n", True),
        # PyTorch-GAN: a legacy type chosen by such a flag, then used as a cast
        ("TDV201", _GAN_TENSOR, False),
        ("TDV202", _GAN_TENSOR, False),
        ("TDV201", "import torch\nTensor = torch.cuda.FloatTensor\nz = Tensor(2)\n", True),
        ("TDV201", "import torch\n\nclass Beam:\n    def __init__(self):\n        self.tt = torch.cuda\n\n    def f(self):\n        return self.tt.FloatTensor(3)\n", True),
        ("TDV202", "import torch\nif torch.cuda.is_available():\n    y = x.type(torch.cuda.FloatTensor)\n", False),
        ("TDV202", "import torch\n\ndef f(x, half):\n    t = torch.cuda.HalfTensor if half else torch.cuda.FloatTensor\n    return x.type(t)\n", True),
        # a bare name's call takes a device only where it is imported as one (``autocast`` is not)
        ("TDV102", "from torch.amp import autocast\n\n@autocast('cuda', enabled=False)\ndef f(x):\n    return x\n", False),
        ("TDV102", "from torch import device as dev\ngpu = dev('cuda')\n", True),
        ("TDV102", "from torch import load\nstate = load(path, 'cuda:0')\n", True),
        # a check that refuses nothing; a count that divides nothing, or only behind a check
        ("TDV309", "import torch\nif torch.cuda.is_available() and not args.disable_cuda:\n    device = 'cuda'\n", False),
        ("TDV309", "import sys\nimport torch\nif not torch.cuda.is_available():\n    sys.exit('needs a GPU')\n", True),
        ("TDV305", "import torch\nprint(torch.cuda.device_count())\nsteps = total // n\n", False),
        ("TDV305", "import torch\nif torch.cuda.is_available():\n    shard = rank % torch.cuda.device_count()\n", False),
        ("TDV305", "import torch\nopt.num_gpu = torch.cuda.device_count()\nopt.num_iter = int(opt.num_iter / opt.num_gpu)\n", True),
        ("TDV201", "import torch\nx = torch.zeros(3)\nname = 'cuda'\n", False),
        ("TDV201", "import torch as th\nx = th.cuda.FloatTensor(3)\n", True),
        ("TDV202", 'import torch\n"""Works like torch.cuda.FloatTensor."""\n', False),
        ("TDV202", 'import torch\ny = x.type("torch.cuda.FloatTensor")\n', True),
        # every part of ``torch.cpu.amp.autocast`` is in the file, none of it resolves to it
        # (lucidrains/denoising-diffusion-pytorch@faed4db denoising_diffusion_pytorch.py:13,775)
        ("TDV302", "import torch\nfrom torch.amp import autocast\n\n@autocast('cuda', enabled=False)\ndef f(x):\n    return x.cpu()\n", False),
        ("TDV302", "from torch.cuda import amp\nscaler = amp.GradScaler()\n", True),
        ("TDV302", "import torch\n\n@torch.cuda.amp.custom_fwd\ndef forward(ctx, x):\n    return x\n", True),
        ("TDV302", "from torch.backends.cuda import sdp_kernel\nwith sdp_kernel(enable_math=False):\n    pass\n", True),
        ("TDV304", "import torch\nv = torch.version.git_version.split('.')\n", False),
        ("TDV304", "from torch.version import cuda\nmajor = cuda.split('.')[0]\n", True),
        ("TDV305", "import torch\nn = len(devices)\nper_device = batch // n\n", False),
        ("TDV305", "import torch as th\nn_gpu = th.cuda.device_count()\nper_gpu = batch // n_gpu\n", True),
        ("TDV306", "import torch\nms = start.elapsed_time(end)\n", False),
        (
            "TDV306",
            "from torch.cuda import Event\na, b = Event(enable_timing=True), Event(enable_timing=True)\n"
            "a.record()\nb.record()\nms = a.elapsed_time(b)\n",
            True,
        ),
    ],
)
def test_narrow_triggers_pass_the_first_stage_where_their_rule_reports_and_nowhere_else(code, source, reported):
    trigger = next(rule for rule in RULES if rule.code == code).triggers
    assert trigger.matches(parse_facts(source)) == reported
    assert (code in run_unfiltered("example.py", source)[0]) == reported


def test_a_file_no_rule_can_fire_on_is_not_parsed_with_libcst():
    engine = api.engine()
    result = engine.check_source("plain.py", "import json\n\ndef load(path):\n    return json.load(open(path))\n")
    assert result.error is None and not result.parsed


def test_syntax_errors_are_reported_for_files_without_candidates():
    result = api.engine().check_source("plain.py", "def f(:\n    pass\n")
    assert result.error.message == "syntax error at 1:7: invalid syntax"


def run_cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "torchdevice_lint.cli", *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def test_checking_a_file_without_candidates_never_imports_libcst(tmp_path):
    (tmp_path / "plain.py").write_text("import os\n\nprint(os.getcwd())\n")
    probe = (
        "import sys\nfrom torchdevice_lint import cli\n"
        "code = cli.lint_main(['check', '--no-cache', 'plain.py'])\n"
        "print(code, 'libcst' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "0 False", result.stderr


def test_checking_never_imports_libcst_matchers(tmp_path):
    """Importing ``libcst.matchers`` costs more CPU than LibCST itself: a script with a user flag
    and a checkpoint (flag defaults, TDV501's saved files) is checked without it."""
    (tmp_path / "train.py").write_text(
        "import argparse\nimport torch\n\np = argparse.ArgumentParser()\np.add_argument('--cuda', action='store_true')\n"
        "args = p.parse_args()\nif args.cuda:\n    x = torch.ones(2).cuda()\n"
        "torch.save(x.cpu(), 'a.pt')\ny = torch.load('a.pt')\nz = torch.load('b.pt')\n"
    )
    probe = (
        "import sys\nfrom torchdevice_lint import cli\n"
        "code = cli.lint_main(['check', '--no-cache', 'train.py'])\n"
        "print(code, 'libcst' in sys.modules, 'libcst.matchers' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.stdout.splitlines()[-1] == "1 True False", result.stderr
