"""Devices named by constants that only hold with CUDA: a CUDA default device
(``torch.set_default_device("cuda")``), a program that refuses to run without CUDA
(``assert torch.cuda.is_available()``) and placement by integer
index (``.to(0)``, ``.to(local_rank)``, ``torch.device(0)``, ``device=0``).

An integer device means "accelerator number N". On a CPU-only build of torch 2.13 each of these
raises ``RuntimeError: Cannot access accelerator device when none is available.`` (constructing
``torch.device(0)`` included); so does ``DistributedDataParallel``'s ``device_ids=[...]`` for a module
on the CPU, whatever it holds (``knowledge/device_indices.py``). ``nn.DataParallel`` ignores
``device_ids`` without a GPU and is left alone.
"""

from __future__ import annotations

from typing import Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.facts import INTEGER
from ..first_stage.triggers import Arguments, Refusal, Resolved, Triggers
from ..knowledge.cst_guards import NEGATIVE, NEUTRAL, POSITIVE, flag_name_sign, is_main_check, names_cuda, refuses
from ..knowledge.flags import mentions_availability
from ..knowledge.device_indices import INDEX_NAMES, ddp_device_ids, integer_device
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name, source_of
from .support.common import (
    availability_check, display_only, guard_statement_fix, is_cuda_string, keyword, legacy_cuda_tensor, method_name,
    positional,
)
from .support.kernel_examples import ALIASED_FUNCTION, ALIASED_REFUSAL, ALIASED_SETUP


class CudaDefaultDevice(Rule):
    code = "TDV103"
    name = "cuda-default-device"
    hazard_without_cuda = True
    message = "`{}` makes every new tensor a CUDA tensor, so tensor creation raises without CUDA"
    fix_title = "Only set the CUDA default when CUDA is available"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `torch.set_default_tensor_type(torch.cuda.*Tensor)` and "
        '`torch.set_default_device("cuda")`.'
    )
    why = (
        "After either call every factory (`torch.zeros`, `torch.tensor`, ...) creates CUDA "
        "tensors; on a CPU-only machine the call itself or the first factory raises."
    )
    fix_safety_note = "The fix wraps the call in `if torch.cuda.is_available():`; CUDA machines behave as before."
    triggers = Triggers(names=("torch.set_default_tensor_type", "torch.set_default_device"))
    valid = (
        Valid("import torch\ntorch.set_default_tensor_type(torch.FloatTensor)\n"),
        Valid('import torch\nif torch.cuda.is_available():\n    torch.set_default_device("cuda")\n'),
        Valid('import torch\ntorch.set_default_device("cpu")\n'),
        Valid("import torch\ntorch.set_default_dtype(torch.float64)\n"),
    )
    invalid = (
        Invalid(
            "import torch\ntorch.set_default_tensor_type(torch.cuda.FloatTensor)\n",
            fixed="import torch\nif torch.cuda.is_available():\n    torch.set_default_tensor_type(torch.cuda.FloatTensor)\n",
        ),
        Invalid(
            'import torch\n\ndef setup():\n    torch.set_default_tensor_type("torch.cuda.HalfTensor")\n',
            fixed='import torch\n\ndef setup():\n    if torch.cuda.is_available():\n        torch.set_default_tensor_type("torch.cuda.HalfTensor")\n',
        ),
        Invalid(
            'import torch as th\nth.set_default_device("cuda:0")  # all new tensors on GPU\n',
            fixed='import torch as th\nif th.cuda.is_available():\n    th.set_default_device("cuda:0")  # all new tensors on GPU\n',
        ),
        Invalid(
            'from torch import set_default_device\nset_default_device("cuda")\n',
            fixed='from torch import set_default_device\nimport torch\n\nif torch.cuda.is_available():\n    set_default_device("cuda")\n',
        ),
        Invalid(
            'import torch\nok = torch.set_default_device("cuda") or True\n',
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded or not node.args:
            return
        name = self.ctx.qualname(node.func)
        value = node.args[0].value
        if name == "torch.set_default_tensor_type":
            hazard = legacy_cuda_tensor(self.ctx, value) is not None
        elif name == "torch.set_default_device":
            hazard = is_cuda_string(value) or (
                isinstance(value, cst.Call)
                and self.ctx.qualname(value.func) == "torch.device"
                and bool(value.args)
                and is_cuda_string(value.args[0].value)
            )
        else:
            return
        if not hazard:
            return
        message = self.message.format(source_of(node))
        fix = guard_statement_fix(self, node, self.fix_title) or display_only(
            self, "Call it only under `if torch.cuda.is_available():`"
        )
        self.report(node, message, fix)


CUDA_AVAILABILITY = ("torch.cuda.is_available", "torch.cuda.device_count", "torch.accelerator.is_available")


#: A helper whose GPU branch only a call passing ``gpu_ids`` reaches, and a model file calling it.
INIT_NET = (
    "import torch\n\n\ndef init_net(net, gpu_ids=[]):\n    if len(gpu_ids) > 0:\n"
    "        assert torch.cuda.is_available()\n        net = torch.nn.DataParallel(net, gpu_ids)\n    return net\n"
)
INIT_NET_CALLER = (
    "import torch\nfrom example import init_net\n\n\nclass Net(torch.nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n        {call}\n"
)
#: A refusal when the user asks for CUDA, ``{0}``: how ``--cuda`` is declared, ``{1}``: the refusal.
_ASSERT_ASKED = "assert not params.cuda or torch.cuda.is_available()\n"
_RAISE_ASKED = "if params.cuda and not torch.cuda.is_available():\n    raise RuntimeError('no GPU')\n"
_ASKED = (
    "import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--cuda', {0})\n"
    "params = parser.parse_args()\n{1}model = torch.nn.Linear(2, 2)\n"
)
_ON = "type=bool, default=True"


class CudaRequired(Rule):
    code = "TDV309"
    name = "cuda-required"
    hazard_without_cuda = True
    message = "`{}` refuses to run without CUDA, so the program stops on a CPU-only machine or a Mac"
    fix_title = "Remove the refusal and let the program pick its device"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for a program that refuses to run without CUDA: `assert torch.cuda.is_available()`, "
        "`if not torch.cuda.is_available(): raise ...` or `sys.exit()`, and `else: raise` after an "
        "availability check, outside code that only runs where CUDA was asked for."
    )
    why = (
        "The refusal is the first thing a CPU-only machine or a Mac meets, and it hides the rest: "
        "the other device hazards of the program are reported as well (the refusal exempts nothing), "
        "so that fixing them all leaves a program that runs everywhere."
    )
    fix_safety_note = (
        "The fix removes the refusal (an `else: raise` is only pointed out). It is unsafe: the "
        "program then runs on whatever device it finds, which is the point once its other hazards are fixed."
    )
    triggers = Refusal(Resolved(CUDA_AVAILABILITY, calls=True))
    valid = (
        Valid("import torch\n\ndef f(x):\n    if not torch.cuda.is_available():\n        return x\n    return x.cuda()\n"),
        Valid("import torch\nimport pytest\n\ndef test_kernel():\n    if not torch.cuda.is_available():\n        pytest.skip('needs CUDA')\n"),
        # the user asked for CUDA: refusing then is the right message
        Valid("import torch\n\ndef setup(args):\n    if args.cuda:\n        assert torch.cuda.is_available(), 'asked for --cuda'\n"),
        Valid("import torch\nassert x.is_cuda\n"),
        # another backend's availability is not a refusal to run without CUDA
        Valid("import torch.distributed as dist\n\ndef rank():\n    if not dist.is_available():\n        raise RuntimeError('needs distributed')\n"),
        # facebookresearch/ConvNeXt@048efce optim_factory.py:130-131: an option the user chose needs CUDA
        Valid("import torch\n\ndef create_optimizer(opt_lower):\n    if 'fused' in opt_lower:\n        assert has_apex and torch.cuda.is_available(), 'APEX and CUDA required'\n"),
        # the build of a CUDA-only kernel the project drives refuses without CUDA: TDV310 reports the kernel
        Valid(ALIASED_SETUP.format(ALIASED_REFUSAL), files={"dcn_v2.py": ALIASED_FUNCTION}),
        # the user asks for CUDA with --cuda, off by default
        Valid(_ASKED.format("action='store_true'", _ASSERT_ASKED)), Valid(_ASKED.format("action='store_true'", _RAISE_ASKED)),
        # shunsukesaito/PIFu@f0a9c99 lib/net_util.py:254-266: every call leaves gpu_ids empty
        Valid(INIT_NET, files={"model.py": INIT_NET_CALLER.format(call="init_net(self)")}),
    )
    invalid = (
        Invalid(
            "import torch\nassert torch.cuda.is_available(), 'needs a GPU'\nmodel = make()\n",
            fixed="import torch\nmodel = make()\n",
        ),
        Invalid(
            "import torch\nif __name__ == '__main__':\n    assert torch.cuda.is_available()\n    main()\n",
            fixed="import torch\nif __name__ == '__main__':\n    main()\n",
        ),
        Invalid(
            "import sys\nimport torch\n\ndef main():\n    if not torch.cuda.is_available():\n        sys.exit('no GPU')\n    run()\n",
            fixed="import sys\nimport torch\n\ndef main():\n    run()\n",
        ),
        Invalid(
            "import torch\n\ndef check():\n    if torch.cuda.device_count() == 0:\n        raise RuntimeError('no GPU')\n",
            fixed="import torch\n\ndef check():\n    pass\n",
        ),
        Invalid(
            "import torch\n\ndef set_model(model):\n    if torch.cuda.is_available():\n        model = model.cuda()\n"
            "    else:\n        raise NotImplementedError('This code requires GPU')\n    return model\n",
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # facebookresearch/MUSE@3159355 supervised.py:31,60: --cuda is on by default
        Invalid(_ASKED.format(_ON, _ASSERT_ASKED), fixed=_ASKED.format(_ON, "")),
        Invalid(_ASKED.format(_ON, _RAISE_ASKED), fixed=_ASKED.format(_ON, "")),
        # a call asks for a GPU: the branch runs and refuses there
        Invalid(
            INIT_NET,
            files={"model.py": INIT_NET_CALLER.format(call="init_net(self, gpu_ids=[0])")},
            fixed=INIT_NET.replace("        assert torch.cuda.is_available()\n", ""),
        ),
    )

    def visit_Assert(self, node: cst.Assert) -> None:
        if not self.ctx.availability_guarded and not self._conditional() and self._checks_availability(self._at_defaults(node.test), POSITIVE):
            statement = self.ctx.parent(1)
            self.report(node, self.message.format(f"assert {source_of(node.test)}"), self._removal(statement, 1))

    def visit_If(self, node: cst.If) -> None:
        if self.ctx.availability_guarded or self._conditional():
            return
        shown = f"if {source_of(node.test)}: ..."
        if node.orelse is None and self._checks_availability(self._at_defaults(node.test), NEGATIVE) and refuses(node.body):
            self.report(node, self.message.format(shown), self._removal(node, 0))
        elif isinstance(node.orelse, cst.Else) and self._checks_availability(node.test, POSITIVE) and refuses(node.orelse.body):
            self.report(node.orelse, self.message.format(f"{shown} else: raise"), display_only(self, "Remove the `else` that refuses to run without CUDA"))

    def _conditional(self) -> bool:
        """Inside a branch of its function that a condition other than CUDA's availability
        decides (``if 'fused' in opt: assert ...``): a feature the user chose needs CUDA, which is
        the right message; the program itself still runs without it."""
        from ..syntax.cst_walk import nodes_of

        stack = self.ctx.stack
        for index in range(len(stack) - 2, -1, -1):
            ancestor = stack[index]
            if isinstance(ancestor, (cst.FunctionDef, cst.Module)):
                return False
            if not isinstance(ancestor, cst.If) or stack[index + 1] is not ancestor.body:
                continue  # the ``else`` of an unrelated test is the usual path
            test = ancestor.test
            about_devices = mentions_availability(test) or is_main_check(test) or any(
                names_cuda(last_name(name) or "") or flag_name_sign(last_name(name) or "") != NEUTRAL
                for name in nodes_of(test, cst.Name, cst.Attribute)
            )
            if not about_devices:
                return True
        return False

    def _at_defaults(self, test: cst.BaseExpression) -> cst.BaseExpression:
        """The part of ``test`` that decides it where its option keeps its default:
        ``not params.cuda or torch.cuda.is_available()`` with ``--cuda`` on by default is
        ``torch.cuda.is_available()`` (facebookresearch/MUSE@3159355 supervised.py:31,60); with
        the option off by default, or unknown, the test stays whole (the user asked for CUDA)."""
        if not isinstance(test, cst.BooleanOperation):
            return test
        deciding = isinstance(test.operator, cst.Or)  # the value of a side that decides alone
        for option, other in ((test.left, test.right), (test.right, test.left)):
            negated = isinstance(option, cst.UnaryOperation) and isinstance(option.operator, cst.Not)
            flag = option.expression if negated else option
            default = self.ctx.flag_default(flag) if isinstance(flag, (cst.Name, cst.Attribute, cst.Subscript)) else None
            if default is not None and not mentions_availability(flag) and (default != negated) is not deciding:
                return other
        return test

    def _checks_availability(self, test: cst.BaseExpression, sign: int) -> bool:
        from ..syntax.cst_walk import nodes_of  # LibCST: imported once a file is parsed

        return self.ctx.classify(test) == sign and mentions_availability(test) and any(
            self.ctx.qualname(call.func) in CUDA_AVAILABILITY for call in nodes_of(test, cst.Call)
        )

    def _removal(self, statement: cst.CSTNode, depth: int):
        """Remove the statement (``pass`` where it is the only one of its block)."""
        if statement is None or (depth and not isinstance(statement, cst.SimpleStatementLine)) or (
            depth and len(statement.body) != 1
        ):
            return None
        block = self.ctx.parent(depth + 1)
        alone = isinstance(block, cst.IndentedBlock) and len(block.body) == 1

        def remove(updated: cst.CSTNode):
            if alone:
                return cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=updated.leading_lines)
            return cst.RemovalSentinel.REMOVE

        return self.make_fix({statement: remove})


_INIT_NET = "import torch\n\ndef init_net(net, gpu_ids=[]):\n    if len(gpu_ids) > 0:\n        net.to({})\n    return net\n"
_GPU_IDS = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_ids', type=str, default='{}')\n"
_DDP = "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n"
_SWAV = "import torch\nimport torch.nn as nn\n\ndef main(args):\n    init_distributed_mode(args)\n    model = nn.parallel.DistributedDataParallel(model, device_ids={})\n"


class HardcodedDeviceIndex(Rule):
    code = "TDV104"
    name = "hardcoded-device-index"
    hazard_without_cuda = True
    message = "integer device `{}` names an accelerator: it raises on a CPU-only machine"
    fix_title = "Fall back to the CPU when no accelerator is available"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for integers used as a device: `.to(0)`, `.to(local_rank)`, `torch.device(0)`, "
        "`torch.ones(2, device=rank)`. A variable counts when its name says it is an index "
        "(`rank`, `local_rank`, `gpu`, `gpu_id`, `device_id`...), and an element of a list that "
        "a command-line option of the project fills with GPU indices by default (`net.to(opt.gpu_ids[0])` "
        "with `--gpu_ids` defaulting to `\"0\"`). Also checks for `DistributedDataParallel(..., "
        "device_ids=[...])` outside code that only runs distributed."
    )
    why = (
        "An integer device is the index of an accelerator. Without one, torch raises "
        "`RuntimeError: Cannot access accelerator device when none is available.`, even when "
        "only constructing `torch.device(0)`. `DistributedDataParallel` given `device_ids` "
        "raises `ValueError` for a module on the CPU, whatever the list holds."
    )
    fix_safety_note = (
        "The fix keeps the index where an accelerator is available and uses the CPU elsewhere: "
        '`.to(rank if torch.accelerator.is_available() else "cpu")` for target torch 2.6 and '
        "later, `torch.cuda.is_available()` below (a Mac then runs on the CPU). `device_ids` "
        "becomes `None` without CUDA (what a CPU module needs)."
    )
    # what ``_device_argument``, ``integer_device`` and ``_device_ids`` look at, as the first stage sees it
    triggers = Arguments(INDEX_NAMES | {INTEGER}, calls=("device", "to"), keywords="device", indexed=True) | Triggers(
        keywords="device_ids"
    )
    valid = (
        Valid('import torch\nx = torch.ones(2).to("cpu")\ny = x.to(torch.float16)\n'),
        Valid("import torch\nif torch.cuda.is_available():\n    x = torch.ones(2).to(0)\n"),
        Valid("import torch\nmodel = torch.nn.DataParallel(model, device_ids=[0])\n"),
        Valid("import torch\nx = torch.ones(2).to(device)\ny = x.to(rank_dtype)\n"),
        Valid("import torch\nx = torch.ones(2, device=device)\nn = count(device=0)\n"),
        Valid("import torch\nif args.distributed:\n    model = model.to(args.gpu)\n"),
        Valid("import torch\nx = torch.ones(2).to(0)  # noqa: TDV104\n"),
        # the program exits unless GPUs are there, or spawns one process per GPU
        Valid(
            "import sys\nimport torch\n\ndef enough_gpus(n=2):\n    return torch.cuda.is_available() and torch.cuda.device_count() >= n\n\n"
            "def demo(rank):\n    model = Net().to(rank)\n\n"
            'if __name__ == "__main__":\n    if not enough_gpus(2):\n        sys.exit()\n    demo(0)\n'
        ),
        Valid(
            "import torch\nimport torch.multiprocessing as mp\n\nclass Trainer:\n    def __init__(self, model, gpu_id):\n"
            "        self.model = model.to(gpu_id)\n\n"
            'if __name__ == "__main__":\n    world_size = torch.cuda.device_count()\n    mp.spawn(main, nprocs=world_size)\n'
        ),
        # an index list whose option does not default to GPUs (-1: the CPU), or no option at all
        Valid(_INIT_NET.format("gpu_ids[0]"), files={"options.py": _GPU_IDS.format("-1")}),
        Valid("import torch\n\ndef place(net, ids):\n    return net.to(ids[0])\n"),
        # DDP inside a process group's code, or with no device_ids
        Valid(_DDP + "\ndef main(args):\n    if args.distributed:\n        model = DDP(model, device_ids=[args.gpu])\n"),
        Valid(_DDP + "model = DDP(model, device_ids=None)\n"),
    )
    invalid = (
        Invalid(
            "import torch\nx = torch.ones(2).to(0)\n",
            fixed='import torch\nx = torch.ones(2).to(0 if torch.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch\n\ndef train(model, batch, local_rank):\n    return model(batch.to(local_rank))\n",
            fixed='import torch\n\ndef train(model, batch, local_rank):\n    return model(batch.to(local_rank if torch.cuda.is_available() else "cpu"))\n',
        ),
        Invalid(
            "import torch\ndevice = torch.device(0)\n",
            fixed='import torch\ndevice = torch.device(0 if torch.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch as th\nmask = th.zeros(4, device=self.gpu_id)\n",
            fixed='import torch as th\nmask = th.zeros(4, device=self.gpu_id if th.cuda.is_available() else "cpu")\n',
        ),
        Invalid(
            "import torch\nmodel = model.to(device=0, dtype=torch.float16)\n",
            fixed='import torch\nmodel = model.to(device=0 if torch.cuda.is_available() else "cpu", dtype=torch.float16)\n',
        ),
        Invalid(
            "import torch\nx = torch.ones(2).to(local_rank)\n",
            fixed='import torch\nx = torch.ones(2).to(local_rank if torch.accelerator.is_available() else "cpu")\n',
            config={"target-torch-version": "2.6"},
        ),
        Invalid(
            "from torch import device\ndev = device(1)\n",
            fixed='from torch import device\nimport torch\n\ndev = device(1 if torch.cuda.is_available() else "cpu")\n',
        ),
        # pix2pix-style options: --gpu_ids defaults to "0", so the default run moves to GPU 0
        Invalid(
            _INIT_NET.format("gpu_ids[0]"), fixed=_INIT_NET.format('gpu_ids[0] if torch.cuda.is_available() else "cpu"'),
            files={"options/base_options.py": _GPU_IDS.format("0"), "train.py": "from example import init_net\nnet = init_net(build(), opt.gpu_ids)\n"},
        ),
        # DistributedDataParallel on the only path of the script (the helper also serves one GPU)
        Invalid(_SWAV.format("[args.gpu_to_work_on]"), fixed=_SWAV.format("[args.gpu_to_work_on] if torch.cuda.is_available() else None")),
        # jind11/TextFooler@6a56cb1 BERT/extract_features.py:245-246: output_device raises as well
        Invalid(
            _SWAV.format("[args.local_rank],\n        output_device=args.local_rank"),
            fixed=_SWAV.format(
                "[args.local_rank] if torch.cuda.is_available() else None,\n"
                "        output_device=args.local_rank if torch.cuda.is_available() else None"
            ),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        device_ids = ddp_device_ids(node, self.ctx.qualname)
        if device_ids is not None:
            self._report_device_ids(node, device_ids)
            return
        index = self._device_argument(node)
        if index is None:
            return
        # with torch.accelerator (2.6) an integer is an index of the current accelerator (MPS, XPU... too)
        check = cst.parse_expression(availability_check(self.ctx, "accelerator") or availability_check(self.ctx, "cuda"))

        def fall_back(updated: cst.BaseExpression) -> cst.BaseExpression:
            return cst.IfExp(test=check, body=updated, orelse=cst.SimpleString('"cpu"'))

        fix = self.make_fix({index: fall_back}, imports=self.ctx.torch_imports())
        self.report(index, self.message.format(source_of(index)), fix)

    def _device_argument(self, call: cst.Call) -> Optional[cst.BaseExpression]:
        args = positional(call)
        name = self.ctx.qualname(call.func)
        project = self.ctx.project
        if name == "torch.device":
            return args[0].value if len(args) == 1 and integer_device(args[0].value, project) else None
        for arg in call.args:
            if arg.keyword is not None and arg.keyword.value == "device" and integer_device(arg.value, project):
                torch_call = name is not None and name.startswith("torch.")
                return arg.value if torch_call or method_name(call) is not None else None
        if method_name(call) == "to" and args and integer_device(args[0].value, project):
            return args[0].value
        return None

    def _report_device_ids(self, call: cst.Call, device_ids: cst.BaseExpression) -> None:
        """One finding at ``device_ids``; its fix also clears an ``output_device`` given beside
        it, which raises the same ``ValueError`` for a CPU module (for any index but 0)."""
        check = availability_check(self.ctx, "cuda")
        given = keyword(call, "output_device")
        output_device = given.value if given is not None and not (isinstance(given.value, cst.Name) and given.value.value == "None") else None
        fix = None
        if check is not None:
            test = cst.parse_expression(check)

            def without_cuda(updated: cst.BaseExpression) -> cst.BaseExpression:
                return cst.IfExp(test=test, body=updated, orelse=cst.Name("None"))

            replaced = {device_ids: without_cuda, **({output_device: without_cuda} if output_device is not None else {})}
            fix = self.make_fix(replaced, imports=self.ctx.torch_imports())
        shown = f"`device_ids={source_of(device_ids)}`" + (f" and `output_device={source_of(output_device)}`" if output_device is not None else "")
        verb = "name" if output_device is not None else "names"
        self.report(device_ids, f"{shown} {verb} a GPU: `DistributedDataParallel` raises `ValueError` for a module on the CPU", fix)


RULES = (CudaDefaultDevice, CudaRequired, HardcodedDeviceIndex)
