"""Fix targets proven per torch release: one table holds every torch name a fix may write with the
first release that has it. Every rule's fixes, run at targets from 1.8 to 2.15, write only names
of the table that the target has; the installed torch (2.13.0) has every name the table dates at
or before it; the fixer refuses a result that slips."""

from functools import lru_cache

import pytest

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.engine.fixer import fix_source, verify_target
from torchdevice_lint.knowledge.torch_releases import (
    DEVICE_BINDINGS,
    FIRST_RELEASE,
    NEWEST_RELEASE,
    device_binding,
    has,
    torch_names,
)
from torchdevice_lint.model.fixes import FixError
from torchdevice_lint.model.settings import Settings, parse_version
from torchdevice_lint.rules import all_rules

#: What a fix may write changes only at a release of the table, so checking each such release
#: and the newest covers every target the table speaks for.
TARGETS = tuple(f"{major}.{minor}" for major, minor in sorted(set(FIRST_RELEASE.values()) | {NEWEST_RELEASE}))
MISSING = object()
MONOREPO_TRAIN = (
    "import torch\n\nscaler = torch.cuda.amp.GradScaler()\nwith torch.cuda.amp.autocast():\n    x = torch.zeros(3).cuda()\n"
)


def every_example_source():
    sources = [MONOREPO_TRAIN]
    for rule in all_rules():
        sources.extend(example.code for example in rule.invalid)
    return sources


@lru_cache(maxsize=None)
def written_at(target):
    """Each torch name the fixes write at ``target`` (absent from the source they fix), with a
    source that makes a fix write it."""
    engine = api.engine(settings_from_table({"extend-select": ["TDV9"], "target-torch-version": target}))
    written = {}
    for source in every_example_source():
        fixed = fix_source(engine, "example.py", source, unsafe=True).source
        for name in torch_names(fixed) - torch_names(source):
            written.setdefault(name, source)
    return written


@pytest.mark.parametrize("target", TARGETS)
def test_no_fix_writes_a_name_its_target_torch_lacks(target):
    written = written_at(target)
    assert written, "the fixes wrote no torch name at all: nothing was checked"
    unknown = sorted(name for name in written if name not in FIRST_RELEASE)
    assert unknown == [], f"fixes write names the release table does not hold: {unknown}"
    too_new = {name: FIRST_RELEASE[name] for name in written if not has(parse_version(target), name)}
    assert too_new == {}


def test_newer_targets_get_the_newer_names():
    """The sweep above is not vacuous: the same examples write ``torch.accelerator`` and
    ``torch.amp.GradScaler`` at 2.9, and neither at 1.8."""
    modern, old = written_at("2.9"), written_at("1.8")
    assert {"torch.accelerator.current_accelerator", "torch.accelerator.memory_allocated", "torch.amp.GradScaler"} <= set(modern)
    assert not any(name.startswith(("torch.accelerator.", "torch.amp.", "torch.backends.mps")) for name in old)


def test_the_installed_torch_has_every_name_the_table_dates_at_or_before_it():
    torch = pytest.importorskip("torch")
    installed = parse_version(torch.__version__.split("+")[0])
    assert installed <= NEWEST_RELEASE
    missing = []
    for name, since in FIRST_RELEASE.items():
        if since <= installed:
            value = torch
            for part in name.split(".")[1:]:
                value = getattr(value, part, MISSING)  # ``torch.version.cuda`` is None on a CPU build
            if value is MISSING:
                missing.append(name)
    assert missing == []


def test_names_that_no_release_has_are_not_in_the_table():
    """Another tool's fixer wrote these; they never existed."""
    torch = pytest.importorskip("torch")
    for name in ("get_device_name", "manual_seed_all"):
        assert not hasattr(torch.accelerator, name)
        assert f"torch.accelerator.{name}" not in FIRST_RELEASE


@pytest.mark.parametrize(
    "target, binding",
    [
        ((0, 3), None),
        ((0, 4), 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'),
        ((1, 8), 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'),
        ((1, 11), 'torch.device("cuda" if torch.cuda.is_available() else "cpu")'),
        ((1, 12), 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'),
        ((2, 5), 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'),
        ((2, 6), 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'),
        (NEWEST_RELEASE, 'torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")'),
    ],
)
def test_the_device_binding_is_the_newest_form_the_target_has(target, binding):
    assert device_binding(target) == binding
    assert all(has(target, name) for name in torch_names(binding or ""))


def test_every_binding_runs_on_the_installed_torch():
    torch = pytest.importorskip("torch")
    for binding in DEVICE_BINDINGS:
        assert isinstance(eval(binding, {"torch": torch}), torch.device)


def test_torch_names_follow_imports_and_leave_vendor_modules_out():
    code = (
        "import torch as th\nfrom torch import amp\n"
        "x = th.amp.autocast('cuda')\ny = amp.GradScaler('cuda')\n"
        "z = hasattr(th, 'npu') and th.npu.is_available()\nw = th.device('cpu').type\n"
    )
    assert torch_names(code) == {"torch.amp.autocast", "torch.amp.GradScaler", "torch.device"}


def test_the_fixer_refuses_a_result_that_names_what_the_target_lacks():
    before = "import torch\nscaler = torch.cuda.amp.GradScaler()\n"
    after = 'import torch\nscaler = torch.amp.GradScaler("cuda")\n'
    with pytest.raises(FixError, match="torch.amp.GradScaler.*target torch 2.2 lacks"):
        verify_target(before, after, Settings(target_torch_version="2.2"))
    verify_target(before, after, Settings(target_torch_version="2.3"))


def test_a_torch_older_than_torch_device_gets_no_device_fix_and_the_reason():
    """``torch>=0.3`` (old research code pins it): no device can be written at all."""
    engine = api.engine(settings_from_table({"target-torch-version": "0.3"}))
    [finding] = engine.check_source("train.py", "import torch\nx = torch.ones(2).cuda()\n").findings
    assert finding.fix is None
    assert finding.message.endswith("no fix for the target torch 0.3: `torch.device` needs torch 0.4 "
                                    "(set `target-torch-version`, or require a newer torch)")


@pytest.mark.parametrize(
    "source, fixed",
    [
        ("import torch\nx = torch.ones(2).cuda()\n",
         'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\nx = torch.ones(2).to(device)\n'),
        ('import torch\ndevice = torch.device("cuda:0")\n',
         'import torch\ndevice = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")\n'),
    ],
)
def test_before_1_12_a_device_falls_back_to_the_cpu_without_naming_mps(source, fixed):
    """TDV101's binding and TDV102's fallback on torch 1.8, where ``torch.backends.mps`` does
    not exist yet."""
    engine = api.engine(settings_from_table({"target-torch-version": "1.8"}))
    assert fix_source(engine, "train.py", source, unsafe=True).source == fixed


def test_a_guard_is_a_name_too_a_target_without_it_gets_a_suggestion():
    """TDV301 guards ``torch.accelerator.synchronize()`` with ``torch.accelerator.is_available()``
    only where the target torch has it (2.6); on 2.5 the finding keeps a suggestion."""
    source = "import torch\ntorch.accelerator.synchronize()\n"
    old, new = (api.engine(settings_from_table({"select": ["TDV301"], "target-torch-version": v})) for v in ("2.5", "2.6"))
    [finding] = old.check_source("train.py", source).findings
    assert finding.fix.applicability.value == "display-only"
    assert fix_source(old, "train.py", source, unsafe=True).source == source
    assert fix_source(new, "train.py", source, unsafe=True).source == (
        "import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n"
    )
