"""The engine's shared machinery: import aliases, guards, suppressions, selection, pre-filter."""

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.model.settings import ConfigError, Settings
from torchdevice_lint.rules import all_rules


def codes(source, **settings):
    result = api.engine(Settings(**settings)).check_source("example.py", source)
    assert result.error is None, result.error
    return [f.code for f in result.findings]


@pytest.mark.parametrize(
    "source",
    [
        "import torch as th\nth.cuda.synchronize()\n",
        "from torch import cuda\ncuda.synchronize()\n",
        "from torch.cuda import synchronize as sync\nsync()\n",
        "import torch.cuda as tc\ntc.synchronize()\n",
        "def late():\n    torch.cuda.synchronize()\n\nimport torch\n",
        "try:\n    import torch\nexcept ImportError:\n    torch = None\ntorch.cuda.synchronize()\n",
    ],
)
def test_aliases_resolve_to_torch(source):
    assert codes(source) == ["TDV301"]


@pytest.mark.parametrize(
    "source",
    [
        "from numba import cuda\ncuda.synchronize()\n",
        "import cupy\ncupy.cuda.Device(0).synchronize()\n",
        "torch.cuda.synchronize()\n",  # torch never imported: not ours to judge
    ],
)
def test_look_alikes_are_not_torch(source):
    assert codes(source) == []


GUARDED = [
    "if torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
    "if not torch.cuda.is_available():\n    pass\nelse:\n    torch.cuda.synchronize()\n",
    "if torch.accelerator.is_available():\n    torch.cuda.synchronize()\n",
    "if torch.cuda.device_count() > 0:\n    torch.cuda.synchronize()\n",
    "if device.type == 'cuda':\n    torch.cuda.synchronize()\n",
    "if str(device).startswith('cuda'):\n    torch.cuda.synchronize()\n",
    "if device != 'cpu':\n    torch.cuda.synchronize()\n",
    "if x.is_cuda:\n    torch.cuda.synchronize()\n",
    "if use_cuda and step % 10 == 0:\n    torch.cuda.synchronize()\n",
    "torch.cuda.is_available() and torch.cuda.synchronize()\n",
    "not torch.cuda.is_available() or torch.cuda.synchronize()\n",
    "def f():\n    if not torch.cuda.is_available():\n        return\n    torch.cuda.synchronize()\n",
    "import pytest\n\n@pytest.mark.skipif(not torch.cuda.is_available(), reason='gpu')\ndef test():\n    torch.cuda.synchronize()\n",
    "import unittest\n\n@unittest.skipUnless(torch.cuda.is_available(), 'gpu')\ndef test():\n    torch.cuda.synchronize()\n",
    "@requires_cuda\ndef test():\n    torch.cuda.synchronize()\n",
    # an opt-out flag derived from availability in this file
    "args.no_cuda = not torch.cuda.is_available()\nif args.no_cuda:\n    pass\nelse:\n    torch.cuda.synchronize()\n",
]


@pytest.mark.parametrize("body", GUARDED)
def test_guarded_code_is_not_reported(body):
    assert codes("import torch\n" + body) == []


@pytest.mark.parametrize("refusal", [
    "assert torch.cuda.is_available(), 'needs a GPU'",
    "if not torch.cuda.is_available():\n        raise SystemError('needs a GPU')",
])
def test_a_refusal_to_run_without_cuda_is_reported_and_exempts_nothing(refusal):
    """The program stops at the refusal on a CPU-only machine; once it goes, the lines after it
    are what stops it, so they are reported as well."""
    source = f"import torch\n\ndef f():\n    {refusal}\n    torch.cuda.synchronize()\n"
    assert codes(source) == ["TDV309", "TDV301"]


UNGUARDED = [
    "if torch.cuda.is_available():\n    pass\nelse:\n    torch.cuda.synchronize()\n",
    # `--no_cuda` parsed elsewhere is a store_true opt-out: off, so CUDA runs by default
    "if args.no_cuda:\n    pass\nelse:\n    torch.cuda.synchronize()\n",
    "if not torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
    "if verbose:\n    torch.cuda.synchronize()\n",
    "def f():\n    if not torch.cuda.is_available():\n        print('no gpu')\n    torch.cuda.synchronize()\n",
    "def f():\n    if torch.cuda.is_available():\n        return\n    torch.cuda.synchronize()\n",
    "torch.cuda.is_available() or torch.cuda.synchronize()\n",
]


@pytest.mark.parametrize("body", UNGUARDED)
def test_unguarded_code_is_reported(body):
    assert codes("import torch\n" + body) == ["TDV301"]


def test_noqa_forms():
    source = (
        "import torch\n"
        "torch.cuda.synchronize()  # noqa\n"
        "torch.cuda.synchronize()  # noqa: TDV301\n"
        "torch.cuda.synchronize()  # noqa: TDV3\n"
        "torch.cuda.synchronize()  # noqa: TDV101\n"
        "torch.cuda.synchronize()  # NOQA:TDV101,TDV301\n"
    )
    result = api.engine(Settings()).check_source("example.py", source)
    assert [(f.code, f.location.row) for f in result.findings] == [("TDV301", 5)]


def test_file_level_noqa():
    assert codes("# torchdevice-lint: noqa\nimport torch\ntorch.cuda.synchronize()\n") == []


def test_selection_most_specific_prefix_wins():
    source = "import torch\nx = torch.ones(1).cuda()\ntorch.load('a')\n"
    assert codes(source, select=("TDV5",)) == ["TDV501"]
    assert codes(source, ignore=("TDV1",)) == ["TDV501"]
    assert codes(source, ignore=("TDV1",), extend_select=("TDV101",)) == ["TDV101", "TDV501"]


def test_per_file_ignores():
    settings = Settings(per_file_ignores={"tests/**/*.py": ("TDV3",)}, root=".")
    engine = api.engine(settings)
    source = "import torch\ntorch.cuda.synchronize()\n"
    assert engine.check_source("tests/unit/test_a.py", source).findings == []
    assert [f.code for f in engine.check_source("src/a.py", source).findings] == ["TDV301"]


def test_first_stage_skips_files_without_candidates_but_reports_their_syntax_errors():
    plain = api.engine(Settings()).check_source("plain.py", "def f(x):\n    return x.cuda_count\n")
    assert plain.error is None and not plain.parsed  # LibCST never saw it
    broken = api.engine(Settings()).check_source("plain.py", "def f(:\n")
    assert broken.error.message == "syntax error at 1:7: invalid syntax"


def test_config_rejects_unknown_keys_and_bad_values():
    with pytest.raises(ConfigError, match="unknown key 'selects'"):
        settings_from_table({"selects": ["TDV1"]})
    with pytest.raises(ConfigError, match="must be a list of strings"):
        settings_from_table({"select": "TDV1"})
    with pytest.raises(ConfigError, match="target-torch-version"):
        settings_from_table({"target-torch-version": "two"})


DATAFLOW_CODES = ("TDV4", "TDV601")
DATAFLOW_EXAMPLES = [
    example.code for rule in all_rules() if rule.code.startswith(DATAFLOW_CODES) for example in rule.invalid + rule.valid
]


def test_dataflow_rules_alone_skip_the_walk_and_report_the_same():
    """Rules that only read the whole module at its end need of the walk only the imports."""
    alone = api.engine(Settings(select=DATAFLOW_CODES))
    among_all = api.engine(Settings(select=("ALL",), extend_select=("TDV6",)))

    def dataflow(engine, source):
        findings = engine.check_source("t.py", source, with_edits=True).findings
        return sorted((f.code, repr(f.location), f.message, repr(f.fix)) for f in findings if f.code.startswith(DATAFLOW_CODES))

    nested_import = "def f():\n    import torch as th\n    x = th.zeros(3).cuda()\n    return x.numpy()\n"
    for source in DATAFLOW_EXAMPLES + [nested_import]:
        assert dataflow(alone, source) == dataflow(among_all, source)
    assert [f[0] for f in dataflow(alone, nested_import)] == ["TDV401"]


def test_checking_a_file_frees_its_trees_without_the_cyclic_collector():
    # a reference cycle through the walk or the findings kept every tree alive until the next
    # full collection: in flake8's process that cost as much as the analysis itself
    import gc

    import libcst as cst

    def live_modules():
        return sum(1 for obj in gc.get_objects() if type(obj) is cst.Module)

    gc.collect()
    gc.disable()
    try:
        before = live_modules()
        result = api.engine().check_source("t.py", "import torch\nx = torch.ones(2).cuda()\ny = x + torch.ones(2)\n")
        after = live_modules()
    finally:
        gc.enable()
    assert {f.code for f in result.findings} == {"TDV101", "TDV402"}
    assert after == before


def test_what_lives_as_long_as_the_process_leaves_the_collectors_generations_with_libcst():
    # full collections in flake8's process kept traversing LibCST's modules and the rules
    import subprocess
    import sys

    script = (
        "import gc\n"
        "start = gc.get_freeze_count()\n"  # not 0 on every Python: 3.12 may start with frozen objects
        "from torchdevice_lint import api\n"
        "engine = api.engine()\n"
        "engine.check_source('plain.py', 'x = 1\\n')\n"
        "before = gc.get_freeze_count()\n"
        "engine.check_source('t.py', 'import torch\\nx = torch.ones(2).cuda()\\n')\n"
        "print(start, before, gc.get_freeze_count())\n"
    )
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    start, before, after = map(int, output.split())
    assert before == start  # a file ruled out by the first stage loads no LibCST and freezes nothing
    assert after - start > 10_000
