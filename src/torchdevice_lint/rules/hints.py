"""Opt-in hints (TDV9xx): a strict device-agnostic policy for library teams and performance
smells that are not bugs. None runs unless selected (``--extend-select TDV9``)."""

from __future__ import annotations

from typing import NamedTuple, Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Triggers
from ..knowledge.torch_releases import binding_expression, binding_imports, first_release, release_text
from ..model.fixes import Applicability, ImportSpec
from ..syntax.cst_lazy import cst
from .backend_api import RAISING_CUDA_CALLS
from .support.common import display_only, keyword, method_name, target_has


class AcceleratorEquivalent(NamedTuple):
    name: str  # in torch.accelerator; the release that has it: knowledge/torch_releases.py
    #: The value to use where no accelerator exists, when the accelerator call raises there
    #: but the torch.cuda one does not; None: the call has no value worth keeping on CPU.
    cpu_value: Optional[str] = None
    #: Whether ``torch.accelerator.<name>`` raises on a CPU-only machine (measured, torch 2.13).
    raises_without_accelerator: bool = True

    @property
    def qualified(self) -> str:
        return f"torch.accelerator.{self.name}"


ACCELERATOR_EQUIVALENTS = {
    "is_available": AcceleratorEquivalent("is_available", raises_without_accelerator=False),
    "device_count": AcceleratorEquivalent("device_count", raises_without_accelerator=False),
    "synchronize": AcceleratorEquivalent("synchronize"),
    "current_device": AcceleratorEquivalent("current_device_index"),
    "set_device": AcceleratorEquivalent("set_device_index"),
    "current_stream": AcceleratorEquivalent("current_stream"),
    "set_stream": AcceleratorEquivalent("set_stream"),
    "empty_cache": AcceleratorEquivalent("empty_cache"),
    "memory_allocated": AcceleratorEquivalent("memory_allocated", "0"),
    "max_memory_allocated": AcceleratorEquivalent("max_memory_allocated", "0"),
    "memory_reserved": AcceleratorEquivalent("memory_reserved", "0"),
    "max_memory_reserved": AcceleratorEquivalent("max_memory_reserved", "0"),
    "memory_stats": AcceleratorEquivalent("memory_stats", "{}"),
    "reset_peak_memory_stats": AcceleratorEquivalent("reset_peak_memory_stats"),
}

_TARGET_2_9 = {"target-torch-version": "2.9"}
#: LibCST node names (this module is imported before LibCST is).
_SELECTION_TESTS = {"If", "IfExp", "While", "BooleanOperation"}


def _is_lone_statement(ctx, call: cst.Call) -> bool:
    expression, statement, container = ctx.parent(1), ctx.parent(2), ctx.parent(3)
    return (
        isinstance(expression, cst.Expr)
        and expression.value is call
        and isinstance(statement, cst.SimpleStatementLine)
        and len(statement.body) == 1
        and isinstance(container, (cst.IndentedBlock, cst.Module))
    )


class CudaApiWithAcceleratorEquivalent(Rule):
    code = "TDV901"
    name = "cuda-api-with-accelerator-equivalent"
    message = "`torch.cuda.{}()` has a device-agnostic equivalent: `torch.accelerator.{}()`"
    fix_title = "Use `torch.accelerator.{}()`"
    fix_safety = Applicability.UNSAFE
    default_enabled = False
    what = (
        "Checks for every `torch.cuda` call that has a `torch.accelerator` equivalent "
        "(`is_available`, `device_count`, `synchronize`, `current_device`, `set_device`, "
        "`current_stream`, `set_stream`, `empty_cache` and the memory statistics), guarded or not: "
        "the strict policy that projects such as DeepSpeed and vLLM enforce with a grep hook."
    )
    why = (
        "A library that calls `torch.cuda` directly only ever runs its fast path on NVIDIA and ROCm "
        "GPUs; `torch.accelerator` (torch 2.6+) follows whichever accelerator the machine has "
        "(CUDA, XPU, MPS, ...). Unlike the rule it replaces, a reviewer cannot forget it."
    )
    fix_safety_note = (
        "The fix renames the call when `target-torch-version` allows (2.6 for the core functions, 2.7 for "
        "`current_device_index`/`set_device_index`, "
        "2.9 for the memory ones) and is unsafe: on a machine with another accelerator the call "
        "now acts on that one. `torch.accelerator` functions raise without any accelerator where "
        "several `torch.cuda` ones are silent, so an unguarded call is wrapped in "
        "`if torch.accelerator.is_available():` (a lone statement) or given its CPU value "
        "(`... if torch.accelerator.is_available() else 0`). `torch.cuda.is_available()` "
        "selecting a `\"cuda\"` device becomes the configured device expression; where the guarded "
        "code still names CUDA the fix is a suggestion only. Keyword arguments (the "
        "`torch.accelerator` functions take positional ones) also leave a suggestion only. "
        "Unguarded calls that raise on CPU are reported by TDV301 first when it is enabled."
    )
    triggers = Triggers(names=[f"torch.cuda.{leaf}" for leaf in ACCELERATOR_EQUIVALENTS])
    valid = (
        Valid("import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n"),
        Valid("import torch\ntorch.cuda.manual_seed_all(0)\ntorch.cuda.FloatTensor\n"),
        Valid("from numba import cuda\ncuda.synchronize()\nn = cuda.device_count()\n"),
        Valid("import torch\nn = torch.accelerator.device_count()\n"),
        Valid("import torch\nok = torch.cuda.is_available()  # noqa: TDV901 - the CUDA graph path\n"),
    )
    invalid = (
        Invalid(
            "import torch\nif torch.cuda.is_available():\n    torch.cuda.synchronize()\n",
            fixed="import torch\nif torch.accelerator.is_available():\n    torch.accelerator.synchronize()\n",
            count=2,
            config=_TARGET_2_9,
        ),
        Invalid(
            "import torch\ntorch.cuda.empty_cache()\n",
            fixed="import torch\nif torch.accelerator.is_available():\n    torch.accelerator.empty_cache()\n",
            config=_TARGET_2_9,
        ),
        Invalid(
            "import torch\nused = torch.cuda.memory_allocated(0)\n",
            fixed="import torch\nused = torch.accelerator.memory_allocated(0) if torch.accelerator.is_available() else 0\n",
            config=_TARGET_2_9,
        ),
        Invalid(
            'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n',
            fixed='import torch\ndevice = torch.accelerator.current_accelerator() if torch.accelerator.is_available() else torch.device("cpu")\n',
            config=_TARGET_2_9,
        ),
        Invalid(
            "from torch.cuda import device_count\nn = device_count()\n",
            fixed="import torch\n\nn = torch.accelerator.device_count()\n",
            config=_TARGET_2_9,
        ),
        Invalid(
            'import torch\nif torch.cuda.is_available():\n    x = x.to("cuda")\n',
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
            config=_TARGET_2_9,
        ),
        Invalid(
            "import torch\ntorch.cuda.synchronize(device=0)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
            config=_TARGET_2_9,
        ),
        Invalid(
            "import torch\nn = torch.cuda.device_count()\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
            config={"target-torch-version": "2.4"},
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        settings = ctx.settings
        self.tdv301_reports = settings.is_enabled("TDV301", True, settings.ignores_for(ctx.path))

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.qualname(node.func)
        if name is None or not name.startswith("torch.cuda."):
            return
        leaf = name[len("torch.cuda."):]
        equivalent = ACCELERATOR_EQUIVALENTS.get(leaf)
        if equivalent is None:
            return
        if self.tdv301_reports and not self.ctx.guarded and leaf in RAISING_CUDA_CALLS:
            return  # TDV301 reports it; once guarded, this rule renames it
        message = self.message.format(leaf, equivalent.name)
        self.report(node, message, self._fix(node, leaf, equivalent))

    def _fix(self, node: cst.Call, leaf: str, equivalent: AcceleratorEquivalent):
        ctx = self.ctx
        title = self.fix_title.format(equivalent.name)
        if not target_has(ctx, equivalent.qualified):
            since = release_text(first_release(equivalent.qualified))
            return display_only(self, f"{title} (needs `target-torch-version` {since})")
        if any(arg.keyword is not None or arg.star for arg in node.args):
            return display_only(self, f"{title} with positional arguments")
        torch = ctx.torch_reference()
        removable = ()
        if isinstance(node.func, cst.Name):
            local = node.func.value
            removable = (ImportSpec("torch.cuda", leaf, local if local != leaf else None),)
        needs = dict(imports=ctx.torch_imports(), removable_imports=removable)
        if leaf == "is_available":
            return self._availability_fix(node, title, needs)
        renamed = cst.parse_expression(f"{torch}.accelerator.{equivalent.name}")

        def rename(updated: cst.Call) -> cst.Call:
            return updated.with_changes(func=renamed)

        replacements = {node: rename}
        if equivalent.raises_without_accelerator and not ctx.guarded:
            check = cst.parse_expression(f"{torch}.accelerator.is_available()")
            if _is_lone_statement(ctx, node):
                statement = ctx.parent(2)
                replacements[statement] = lambda updated: cst.If(
                    test=check,
                    body=cst.IndentedBlock(body=[updated.with_changes(leading_lines=())]),
                    leading_lines=updated.leading_lines,
                )
            elif equivalent.cpu_value is not None:
                fallback = cst.parse_expression(equivalent.cpu_value)
                replacements[node] = lambda updated: cst.IfExp(
                    test=check, body=rename(updated), orelse=fallback,
                    whitespace_before_if=cst.SimpleWhitespace(" "), whitespace_after_if=cst.SimpleWhitespace(" "),
                    whitespace_before_else=cst.SimpleWhitespace(" "), whitespace_after_else=cst.SimpleWhitespace(" "),
                )
            else:
                return display_only(self, f"{title} under `if torch.accelerator.is_available():`")
        return self.make_fix(replacements, message=title, **needs)

    def _availability_fix(self, node: cst.Call, title: str, needs: dict):
        """``"cuda" if torch.cuda.is_available() else "cpu"`` picks a device: it becomes the
        configured device expression. Elsewhere the check is renamed, unless the code it
        selects still names CUDA (it would then run CUDA code on another accelerator)."""
        ctx = self.ctx
        selection = next(
            (ctx.parent(depth) for depth in range(1, len(ctx.stack)) if type(ctx.parent(depth)).__name__ in _SELECTION_TESTS),
            None,
        )
        if isinstance(selection, cst.IfExp) and selection.test is node and _picks_cuda(selection):
            target = selection
            depth = len(ctx.stack) - 1 - ctx.stack.index(selection)
            outer_arg, outer_call = ctx.parent(depth + 1), ctx.parent(depth + 2)
            if (
                isinstance(outer_arg, cst.Arg)
                and isinstance(outer_call, cst.Call)
                and ctx.qualname(outer_call.func) == "torch.device"
                and len(outer_call.args) == 1
            ):
                target = outer_call
            expression = binding_expression(ctx.settings)
            if "accelerator" not in expression and not ctx.settings.device_expression:
                return display_only(self, "Pick the device with `torch.accelerator` (needs `target-torch-version` 2.6)")
            device = cst.parse_expression(expression)
            imports = list(needs["imports"]) + [s for s in binding_imports(ctx.settings) if s.module != "torch"]
            return self.make_fix(
                {target: lambda _: device},
                message="Use the configured device expression",
                imports=imports,
                removable_imports=needs["removable_imports"],
            )
        if selection is not None and _names_cuda(selection, ctx.qualname):
            return display_only(self, f"{title} once the code it guards no longer names CUDA")
        renamed = cst.parse_expression(f"{ctx.torch_reference()}.accelerator.is_available")
        return self.make_fix({node: lambda updated: updated.with_changes(func=renamed)}, message=title, **needs)


def _is_device_literal(node: cst.BaseExpression, prefix: str) -> bool:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return isinstance(value, str) and value.startswith(prefix)
    return False


def _picks_cuda(selection: cst.IfExp) -> bool:
    return _is_device_literal(selection.body, "cuda") and _is_device_literal(selection.orelse, "cpu")


def _names_cuda(selection: cst.CSTNode, qualname) -> bool:
    """Whether code ties itself to CUDA beyond the calls this rule renames: a ``"cuda"``
    literal, ``.cuda()``, or a ``torch.cuda`` name without an accelerator equivalent."""
    pending = [selection]
    while pending:
        node = pending.pop()
        if isinstance(node, cst.SimpleString) and _is_device_literal(node, "cuda"):
            return True
        if isinstance(node, cst.Attribute):
            name = qualname(node)
            if name is not None and name.startswith("torch.cuda."):
                if name[len("torch.cuda."):] not in ACCELERATOR_EQUIVALENTS:
                    return True
                continue
            if node.attr.value == "cuda":
                return True
        pending.extend(node.children)
    return False


class PinMemoryWithoutGuard(Rule):
    code = "TDV902"
    name = "pin-memory-without-guard"
    hazard_without_cuda = True
    message = "`{}` without a CUDA check: pinning needs an accelerator (it warns or raises on a CPU-only machine)"
    fix_title = "Pin memory only when CUDA is available"
    fix_safety = Applicability.SAFE
    default_enabled = False
    what = (
        "Checks for `pin_memory=True` (a `DataLoader`, a tensor factory) and `tensor.pin_memory()` "
        "outside a CUDA availability check."
    )
    why = (
        "`DataLoader(pin_memory=True)` warns on every CPU-only run, and `torch.empty(..., "
        "pin_memory=True)` or `x.pin_memory()` raise there. Pinning helps only host-to-GPU copies."
    )
    fix_safety_note = (
        "`pin_memory=True` becomes `pin_memory=torch.cuda.is_available()`, and `x.pin_memory()` on a "
        "name becomes `x.pin_memory() if torch.cuda.is_available() else x`: unchanged with CUDA."
    )
    triggers = Triggers(keywords="pin_memory", calls="pin_memory")
    valid = (
        Valid("from torch.utils.data import DataLoader\nimport torch\nloader = DataLoader(ds, pin_memory=torch.cuda.is_available())\n"),
        Valid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, pin_memory=args.pin_memory)\n"),
        Valid("import torch\nif torch.cuda.is_available():\n    x = x.pin_memory()\n"),
        Valid("from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8, pin_memory=False)\n"),
        Valid("import torch\nbuf = torch.empty(4, pin_memory=use_cuda)\n"),
    )
    invalid = (
        Invalid(
            "from torch.utils.data import DataLoader\nloader = DataLoader(ds, batch_size=8, pin_memory=True)\n",
            fixed=(
                "from torch.utils.data import DataLoader\nimport torch\n\n"
                "loader = DataLoader(ds, batch_size=8, pin_memory=torch.cuda.is_available())\n"
            ),
        ),
        Invalid(
            "import torch as th\nbuf = th.empty(1024, pin_memory=True)\n",
            fixed="import torch as th\nbuf = th.empty(1024, pin_memory=th.cuda.is_available())\n",
        ),
        Invalid(
            "import torch\nbatch = batch.pin_memory()\n",
            fixed="import torch\nbatch = batch.pin_memory() if torch.cuda.is_available() else batch\n",
        ),
        Invalid(
            "import torch\n\ndef loader(ds):\n    return torch.utils.data.DataLoader(ds, pin_memory=True, num_workers=2)\n",
            fixed="import torch\n\ndef loader(ds):\n    return torch.utils.data.DataLoader(ds, pin_memory=torch.cuda.is_available(), num_workers=2)\n",
        ),
        Invalid(
            "import torch\nfor batch in loader:\n    send(batch.x.pin_memory())\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        check = cst.parse_expression(f"{self.ctx.torch_reference()}.cuda.is_available()")
        imports = self.ctx.torch_imports()
        argument = keyword(node, "pin_memory")
        if argument is not None and isinstance(argument.value, cst.Name) and argument.value.value == "True":
            fix = self.make_fix({argument: lambda updated: updated.with_changes(value=check)}, imports=imports)
            self.report(argument, self.message.format("pin_memory=True"), fix)
            return
        if method_name(node) != "pin_memory" or node.args:
            return
        receiver = node.func.value
        if not isinstance(receiver, cst.Name):
            self.report(node, self.message.format(".pin_memory()"), display_only(self, self.fix_title))
            return

        def guard(updated: cst.Call) -> cst.IfExp:
            return cst.IfExp(
                test=check, body=updated, orelse=cst.Name(receiver.value),
                whitespace_before_if=cst.SimpleWhitespace(" "), whitespace_after_if=cst.SimpleWhitespace(" "),
                whitespace_before_else=cst.SimpleWhitespace(" "), whitespace_after_else=cst.SimpleWhitespace(" "),
            )

        self.report(node, self.message.format(".pin_memory()"), self.make_fix({node: guard}, imports=imports))


SYNCING_METHODS = ("item", "cpu", "tolist")


class DeviceSyncInLoop(Rule):
    code = "TDV903"
    name = "device-sync-in-loop"
    message = "`.{}()` in a loop copies to the host and waits for the device on every iteration"
    fix_safety = Applicability.DISPLAY_ONLY
    default_enabled = False
    what = (
        "Checks for `.item()`, `.cpu()` and `.tolist()` evaluated on every iteration of a `for` or "
        "`while` loop or a comprehension. Calls under an `if` inside the loop (periodic logging) "
        "are not reported."
    )
    why = (
        "Each call blocks until the GPU has finished all queued work, so a training loop that "
        "logs `loss.item()` every step cannot overlap host and device work. On CPU it costs nothing, "
        "which is why it goes unnoticed until the code runs on a GPU."
    )
    fix_safety_note = "Accumulate on the device (`total += loss.detach()`) and convert once after the loop."
    triggers = Triggers(calls=SYNCING_METHODS)
    valid = (
        Valid("total = 0.0\nfor batch in loader:\n    total += loss_fn(batch).detach()\nprint(total.item())\n"),
        Valid("for step, batch in enumerate(loader):\n    if step % 100 == 0:\n        print(loss.item())\n"),
        Valid("for x in values.cpu():\n    print(x)\n"),
        Valid("def report(x):\n    return x.item()\n\nfor batch in loader:\n    report\n"),
        Valid("for key in table:\n    value = table.items()\n"),
    )
    invalid = (
        Invalid("losses = []\nfor batch in loader:\n    losses.append(model(batch).item())\n"),
        Invalid("while step < total:\n    preds = model(x).argmax(-1).cpu()\n    step += 1\n"),
        Invalid("values = [t.item() for t in tensors]\n"),
        Invalid("while loss.item() > tolerance:\n    loss = step()\n"),
        Invalid("for batch in loader:\n    rows = batch.tolist()\n    for row in rows:\n        print(row)\n"),
    )

    def visit_Call(self, node: cst.Call) -> None:
        method = method_name(node)
        if method not in SYNCING_METHODS or node.args or not self._every_iteration():
            return
        self.report(node, self.message.format(method), display_only(self, "Convert once, after the loop"))

    def _every_iteration(self) -> bool:
        """Whether the node being visited runs once per iteration of an enclosing loop."""
        stack = self.ctx.stack
        for index in range(len(stack) - 2, -1, -1):
            ancestor, child = stack[index], stack[index + 1]
            if isinstance(ancestor, (cst.FunctionDef, cst.Lambda, cst.ClassDef, cst.If, cst.IfExp)):
                return False
            if isinstance(ancestor, cst.For) and child is ancestor.body:
                return True
            if isinstance(ancestor, cst.While) and child in (ancestor.body, ancestor.test):
                return True
            if isinstance(ancestor, (cst.ListComp, cst.SetComp, cst.GeneratorExp)) and child is ancestor.elt:
                return True
            if isinstance(ancestor, cst.DictComp) and child in (ancestor.key, ancestor.value):
                return True
        return False


DATA_PARALLEL = {"torch.nn.DataParallel", "torch.nn.parallel.DataParallel", "torch.nn.parallel.data_parallel.DataParallel"}


class DataParallelUse(Rule):
    code = "TDV904"
    name = "data-parallel"
    message = "`DataParallel` is CUDA-only and slower than `DistributedDataParallel`"
    fix_safety = Applicability.DISPLAY_ONLY
    default_enabled = False
    what = "Checks for constructing `torch.nn.DataParallel`."
    why = (
        "`DataParallel` replicates the model on every forward pass in one process, works only "
        "with CUDA devices, and PyTorch recommends `DistributedDataParallel` even on one machine. "
        "On a CPU-only machine it silently does nothing, so tests never exercise it."
    )
    fix_safety_note = "Moving to `DistributedDataParallel` changes how the program is launched; no automatic fix."
    triggers = Triggers(names=DATA_PARALLEL)
    valid = (
        Valid("import torch\nmodel = torch.nn.parallel.DistributedDataParallel(model, device_ids=[rank])\n"),
        Valid("import torch.nn as nn\nif isinstance(model, nn.DataParallel):\n    model = model.module\n"),
        Valid("from mylib import DataParallel\nmodel = DataParallel(model)\n"),
        Valid('print("DataParallel is deprecated")\n'),
    )
    invalid = (
        Invalid("import torch\nmodel = torch.nn.DataParallel(model)\n"),
        Invalid("import torch.nn as nn\nnet = nn.DataParallel(net, device_ids=[0, 1])\n"),
        Invalid("from torch.nn import DataParallel\nmodel = DataParallel(model)\n"),
        Invalid(
            "import torch\nif torch.cuda.device_count() > 1:\n    model = torch.nn.parallel.DataParallel(model)\n"
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualname(node.func) in DATA_PARALLEL:
            self.report(node, fix=display_only(self, "Use `torch.nn.parallel.DistributedDataParallel`"))


RULES = (CudaApiWithAcceleratorEquivalent, PinMemoryWithoutGuard, DeviceSyncInLoop, DataParallelUse)
