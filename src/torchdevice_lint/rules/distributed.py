"""Distributed set-up that only works on CUDA machines."""

from __future__ import annotations

from typing import FrozenSet, List, Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Triggers
from ..knowledge import cst_distributed as distributed_code
from ..knowledge import cst_guards as guards
from ..knowledge.backends import COLLECTIVES
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import dotted_name, parameters, source_of, string_value
from .support.common import availability_check, keyword, lacking_check, method_name, no_fix_for_target, positional

#: From this torch on, the fix asks torch for the device's own backend instead of choosing
#: between NCCL and gloo: ``get_default_backend_for_device`` came in 2.6 (pytorch#140536), but
#: only the map of 2.8 holds ``"mps"`` (pytorch#149538, merged 2025-03-20; on 2.6 a Mac raises
#: ``Default backend not registered``). ``"cpu:gloo,cuda:nccl"`` is no device-generic form: a
#: CPU-only build of torch 2.13 refuses it (``Distributed package doesn't have NCCL built in``).
DEVICE_BACKEND_SINCE = (2, 8)
#: The backends torch itself registers as a device's default (cuda: nccl, xpu: xccl); Ascend's
#: ``hccl`` is registered by its vendor package, so it keeps the explicit check.
DEVICE_DEFAULTS = frozenset({"nccl", "xccl"})


_RANKED_MODEL = (
    "import torch.distributed as dist\n\n\nclass Model:\n    def __init__(self, local_rank=-1):\n"
    '        if local_rank != -1:\n            dist.init_process_group(backend="nccl")\n'
)
_RANKED_MODEL_FIXED = _RANKED_MODEL.replace(
    "dist\n\n\n", "dist\nimport torch\n\n\n"
).replace('"nccl"', '"nccl" if torch.cuda.is_available() else "gloo"')
_LOCAL_RANK = (
    "import argparse\nfrom example import Model\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--local_rank', type=int)\nargs = parser.parse_args()\n"
)
_LAUNCHED_BRANCH = (
    "import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--local_rank', type=int, default=-1)\nparser.add_argument('--no_cuda', action='store_true')\n"
    "args = parser.parse_args()\nif args.local_rank == -1 or args.no_cuda:\n"
    "    device = torch.device('cuda' if torch.cuda.is_available() and not args.no_cuda else 'cpu')\n"
    "else:\n    torch.distributed.init_process_group(backend='nccl')\n"
)
_ON_CPU = (
    "import argparse\nimport torch.distributed as dist\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--cpu', action='store_true', default=True)\nargs = parser.parse_args()\n\n"
    'def setup(on_cpu):\n    if on_cpu:\n        dist.init_process_group(backend="gloo")\n    else:\n'
    '        dist.init_process_group(backend="nccl")\n\nsetup(args.cpu)\n'
)
_STORE_TRUE = (
    "import argparse\nfrom example import Trainer\nfrom loader import Loader\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--use_gpu', action='store_true')\nopt = parser.parse_args()\n"
)
#: swz30/Restormer@df766d5 basicsr/utils/dist_util.py:10-25: the default of the caller's parameter.
_MMCV_INIT = (
    "import torch\nimport torch.distributed as dist\n\ndef init_dist(launcher, backend={}):\n    if launcher == 'pytorch':\n"
    "        _init_pytorch(backend)\n\ndef _init_pytorch(backend):\n    dist.init_process_group(backend=backend)\n"
)
_SETUP = "import torch\nimport torch.distributed as dist\n\ndef setup(rank, backend={}):\n    dist.init_process_group(backend, rank=rank)\n"


class HardcodedDistributedBackend(Rule):
    code = "TDV303"
    name = "hardcoded-distributed-backend"
    hazard_without_cuda = True
    message = '`{}` makes `init_process_group` use {}, which needs {}: it fails on a CPU-only machine or a Mac'
    fix_title = 'Choose the backend from the device: `"nccl" if torch.cuda.is_available() else "gloo"`'
    fix_safety = Applicability.SAFE
    what = (
        '`torch.distributed.init_process_group(backend="nccl")` (or `"xccl"`, `"hccl"`; keyword or positional), a backend '
        'variable assigned `"nccl"` and passed to it, and a `--backend`/`--dist-backend` option '
        'defaulting to `"nccl"` in a file that starts a process group, without a fallback for '
        "machines without CUDA."
    )
    why = (
        "NCCL runs only between CUDA GPUs: on a CPU-only machine, a Mac or an Intel GPU the process "
        'group fails to start. `gloo` works everywhere; `"cuda:nccl,cpu:gloo"` or a choice made '
        "under `torch.cuda.is_available()` keeps NCCL where it exists. Intel's `\"xccl\"` (XPU) and "
        "Ascend's `\"hccl\"` (NPU) fail the same way without their devices."
    )
    fix_safety_note = (
        'The literal becomes `"nccl" if torch.cuda.is_available() else "gloo"`: CUDA machines keep '
        "NCCL, the others get gloo instead of an error. From `target-torch-version` 2.8 it becomes "
        "`torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator() "
        'if torch.accelerator.is_available() else "cpu")`, which also picks XCCL on an Intel GPU '
        "(the conditional form gives it gloo, which cannot reduce XPU tensors) and gloo on a Mac."
    )
    # a process group is started in the file (the ``--backend`` option counts only there)
    triggers = Triggers(strings=tuple(COLLECTIVES), names="torch.distributed.Backend.NCCL") & Triggers(
        text="init_process_group"
    )
    valid = (
        Valid('import torch.distributed as dist\ndist.init_process_group(backend="gloo")\n'),
        Valid(
            'import torch\nimport torch.distributed as dist\n'
            'dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")\n'
        ),
        Valid(
            'import torch\nimport torch.distributed as dist\nif torch.cuda.is_available():\n'
            '    dist.init_process_group("nccl")\nelse:\n    dist.init_process_group("gloo")\n'
        ),
        Valid('import torch.distributed as dist\ndist.init_process_group(backend="cuda:nccl,cpu:gloo")\n'),
        Valid(
            "import torch\n\ndef init():\n    backend = 'gloo' if not torch.cuda.is_available() else 'nccl'\n"
            "    torch.distributed.init_process_group(backend=backend)\n"
        ),
        # look-alikes: another function, a backend name that is only printed or compared
        Valid('import mylib\nmylib.init_process_group(backend="nccl")\nprint("nccl")\nok = args.backend == "nccl"\n'),
        Valid(
            'import torch.distributed as dist\n\ndef setup(backend):\n    dist.init_process_group(backend=backend)\n'
        ),
        # a worker started once per GPU: without CUDA no worker starts (barlowtwins, 3D-ResNets)
        Valid(
            "import torch\n\ndef main(args):\n    args.ngpus_per_node = torch.cuda.device_count()\n"
            "    torch.multiprocessing.spawn(main_worker, (args,), args.ngpus_per_node)\n\n"
            "def main_worker(gpu, args):\n    torch.distributed.init_process_group(backend='nccl', rank=gpu)\n"
        ),
        # only when the user asks for several GPUs (stylegan2-ada's --gpus)
        Valid(
            "import torch\n\ndef subprocess_fn(rank, args):\n    if args.num_gpus > 1:\n"
            "        torch.distributed.init_process_group(backend='nccl', rank=rank, world_size=args.num_gpus)\n"
        ),
        # ultralytics/yolov3 train.py:322: every call of the helper in the project stands under a CUDA check
        Valid(
            "import torch\n\ndef setup(rank):\n    torch.distributed.init_process_group('nccl', rank=rank)\n",
            files={"train.py": (
                "from example import setup\n\ndef train(device, rank):\n    cuda = device.type != 'cpu'\n"
                "    if cuda and rank != -1:\n        setup(rank)\n"
            )},
        ),
        # zhanghang1989/ResNeSt scripts/torch/train.py:50: the option only reaches the worker mp.spawn starts per GPU
        Valid(
            "import argparse\nimport torch\nimport torch.multiprocessing as mp\n\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--dist-backend', default='nccl')\n\ndef main():\n"
            "    mp.spawn(main_worker, nprocs=torch.cuda.device_count(), args=(parser.parse_args(),))\n\n"
            "def main_worker(gpu, args):\n    torch.distributed.init_process_group(backend=args.dist_backend, rank=gpu)\n",
            files={"launch.py": "from example import main\n\nmain()\n"},
        ),
        # a branch no call in the project takes: every Model() leaves local_rank at -1 (RIFE)
        Valid(_RANKED_MODEL, files={"infer.py": "from example import Model\n\nmodel = Model()\n"}),
        # every call passes an option off by default, and loader.initialize() is another class's
        Valid(
            'import torch.distributed as dist\n\nclass Trainer:\n    def initialize(self, use_gpu=True):\n'
            '        if use_gpu:\n            dist.init_process_group(backend="nccl")\n',
            files={"train.py": _STORE_TRUE + "trainer = Trainer()\ntrainer.initialize(use_gpu=opt.use_gpu)\nloader = Loader()\n"
                   "loader.initialize()\n", "loader.py": "class Loader:\n    def initialize(self):\n        pass\n"},
        ),
        # thunlp/ERNIE@514cbe4 code/run_tacred.py:369,400: only a launcher passes --local_rank, and
        # the project names none (its README runs plain ``python3``)
        Valid(_LAUNCHED_BRANCH, files={"README.md": "python3 example.py --do_train\n"}),
        # WongKinYiu/yolov7@a207844 README.md: one GPU runs ``python train.py``, several a launcher;
        # a machine without a GPU makes the plain run, where --local_rank keeps -1
        Valid(_LAUNCHED_BRANCH, files={"README.md": (
            "python example.py --device 0\npython -m torch.distributed.launch --nproc_per_node 4 example.py --device 0,1,2,3\n"
        )}),
        # biubug6/Pytorch_Retinaface@b984b4b convert_to_onnx.py:21,32: every call passes an option
        # on by default, so the ``else:`` is a call the project does not make
        Valid(_ON_CPU, files={"README.py": "import torch\n"}),
    )
    invalid = (
        # a default that reaches the process group, directly or through the caller's parameter (mmcv's dist_utils)
        Invalid(_MMCV_INIT.format("'nccl'"), fixed=_MMCV_INIT.format("'nccl' if torch.cuda.is_available() else 'gloo'")),
        Invalid(_SETUP.format("'nccl'"), fixed=_SETUP.format("'nccl' if torch.cuda.is_available() else 'gloo'")),
        Invalid(
            _ON_CPU.replace("default=True", "default=False"),
            fixed=_ON_CPU.replace("default=True", "default=False").replace(
                'backend="nccl"', 'backend="nccl" if torch.cuda.is_available() else "gloo"'
            ).replace("dist\n", "dist\nimport torch\n", 1),
            files={"README.py": "import torch\n"},
        ),
        # a launcher (torchrun) may set --local_rank: the caller's value is not known to be off
        Invalid(
            _RANKED_MODEL, fixed=_RANKED_MODEL_FIXED,
            files={"train.py": _LOCAL_RANK + "model = Model(args.local_rank)\n"},
        ),
        # the README starts it with a launcher, which passes --local_rank
        Invalid(
            _LAUNCHED_BRANCH,
            fixed=_LAUNCHED_BRANCH.replace("backend='nccl'", "backend='nccl' if torch.cuda.is_available() else 'gloo'"),
            files={"README.md": "python -m torch.distributed.launch --nproc_per_node=8 example.py\n"},
        ),
        # nobody in the project calls it: whoever does may pass a rank
        Invalid(_RANKED_MODEL, fixed=_RANKED_MODEL_FIXED),
        # one call of the helper in the project is not under the check: it runs on a CPU-only machine
        Invalid(
            'import torch\n\ndef setup(rank):\n    torch.distributed.init_process_group("nccl", rank=rank)\n',
            fixed=(
                'import torch\n\ndef setup(rank):\n'
                '    torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=rank)\n'
            ),
            files={"train.py": "import torch\nfrom example import setup\n\nif torch.cuda.is_available():\n    setup(0)\nsetup(1)\n"},
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group(backend="nccl", init_method="env://")\n',
            fixed=(
                'import torch.distributed as dist\nimport torch\n\n'
                'dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo", init_method="env://")\n'
            ),
        ),
        Invalid(
            'import torch\n\ndef setup(rank, world):\n    torch.distributed.init_process_group("nccl", rank=rank, world_size=world)\n',
            fixed=(
                'import torch\n\ndef setup(rank, world):\n'
                '    torch.distributed.init_process_group("nccl" if torch.cuda.is_available() else "gloo", rank=rank, world_size=world)\n'
            ),
        ),
        Invalid(
            'import torch\nfrom torch.distributed import init_process_group\nBACKEND = "nccl"\n'
            "init_process_group(backend=BACKEND)\n",
            fixed=(
                'import torch\nfrom torch.distributed import init_process_group\n'
                'BACKEND = "nccl" if torch.cuda.is_available() else "gloo"\n'
                "init_process_group(backend=BACKEND)\n"
            ),
        ),
        Invalid(
            "import argparse\nimport torch\nimport torch.distributed as dist\n"
            "parser = argparse.ArgumentParser()\nparser.add_argument('--dist-backend', default='nccl', type=str)\n"
            "args = parser.parse_args()\ndist.init_process_group(backend=args.dist_backend)\n",
            fixed=(
                "import argparse\nimport torch\nimport torch.distributed as dist\n"
                "parser = argparse.ArgumentParser()\n"
                "parser.add_argument('--dist-backend', default='nccl' if torch.cuda.is_available() else 'gloo', type=str)\n"
                "args = parser.parse_args()\ndist.init_process_group(backend=args.dist_backend)\n"
            ),
        ),
        # distributed-only code is where the backend matters: a distributed flag is no guard
        Invalid(
            'import torch\nimport torch.distributed as dist\n\ndef setup(args):\n    if args.distributed:\n'
            '        dist.init_process_group(backend="nccl")\n',
            fixed=(
                'import torch\nimport torch.distributed as dist\n\ndef setup(args):\n    if args.distributed:\n'
                '        dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")\n'
            ),
        ),
        # a guard on another backend does not make NCCL available
        Invalid(
            'import torch\nimport torch.distributed as dist\nif torch.backends.mps.is_available():\n'
            '    pass\nelse:\n    dist.init_process_group(backend="nccl")\n',
            fixed=(
                'import torch\nimport torch.distributed as dist\nif torch.backends.mps.is_available():\n'
                '    pass\nelse:\n    dist.init_process_group(backend="nccl" if torch.cuda.is_available() else "gloo")\n'
            ),
        ),
        Invalid(
            "import torch\n\ndef init_distributed_mode(args):\n    torch.cuda.set_device(args.gpu)\n    args.dist_backend = 'nccl'\n"
            "    torch.distributed.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n",
            fixed=(
                "import torch\n\ndef init_distributed_mode(args):\n    torch.cuda.set_device(args.gpu)\n"
                "    args.dist_backend = 'nccl' if torch.cuda.is_available() else 'gloo'\n"
                "    torch.distributed.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n"
            ),
        ),
        # several processes are not several GPUs: a CPU machine runs them with gloo
        Invalid(
            "import torch\n\ndef setup(rank, args):\n    if args.world_size > 1:\n"
            "        torch.distributed.init_process_group('nccl', rank=rank, world_size=args.world_size)\n",
            fixed=(
                "import torch\n\ndef setup(rank, args):\n    if args.world_size > 1:\n"
                "        torch.distributed.init_process_group('nccl' if torch.cuda.is_available() else 'gloo', rank=rank, world_size=args.world_size)\n"
            ),
        ),
        # one worker per requested process, not per GPU: they start on a CPU machine too
        Invalid(
            "import torch\n\ndef main(args):\n    torch.multiprocessing.spawn(main_worker, (args,), args.world_size)\n\n"
            "def main_worker(rank, args):\n    torch.distributed.init_process_group(backend='nccl', rank=rank)\n",
            fixed=(
                "import torch\n\ndef main(args):\n    torch.multiprocessing.spawn(main_worker, (args,), args.world_size)\n\n"
                "def main_worker(rank, args):\n    torch.distributed.init_process_group(backend='nccl' if torch.cuda.is_available() else 'gloo', rank=rank)\n"
            ),
        ),
        # NVlabs/edm@008a4e5 torch_utils/distributed.py:26: every machine but Windows gets NCCL
        Invalid(
            "import os\nimport torch\n\ndef init():\n    backend = 'gloo' if os.name == 'nt' else 'nccl'\n"
            "    torch.distributed.init_process_group(backend=backend, init_method='env://')\n",
            fixed=(
                "import os\nimport torch\n\ndef init():\n    backend = 'gloo' if os.name == 'nt' else ('nccl' if torch.cuda.is_available() else 'gloo')\n"
                "    torch.distributed.init_process_group(backend=backend, init_method='env://')\n"
            ),
        ),
        # ultralytics/yolov3@97b87b1 train.py:683: a torch built with NCCL says nothing of a GPU
        Invalid(
            'import torch\nimport torch.distributed as dist\ndist.init_process_group(backend="nccl" if dist.is_nccl_available() else "gloo")\n',
            fixed=(
                'import torch\nimport torch.distributed as dist\n'
                'dist.init_process_group(backend=("nccl" if torch.cuda.is_available() else "gloo") if dist.is_nccl_available() else "gloo")\n'
            ),
        ),
        # Intel GPUs' and Ascend NPUs' backends fail the same way without their devices
        Invalid(
            'import torch\ntorch.distributed.init_process_group(backend="xccl")\n',
            fixed='import torch\ntorch.distributed.init_process_group(backend="xccl" if torch.xpu.is_available() else "gloo")\n',
        ),
        Invalid(
            'import torch\nimport torch_npu\ntorch.distributed.init_process_group("hccl")\n',
            fixed=(
                'import torch\nimport torch_npu\n'
                'torch.distributed.init_process_group("hccl" if (hasattr(torch, "npu") and torch.npu.is_available()) else "gloo")\n'
            ),
        ),
        Invalid(
            'import torch.distributed as dist\ndist.init_process_group(backend=dist.Backend.NCCL)\n',
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # a target torch that maps every device to its backend: ask it
        Invalid(
            "import torch\n\ndef setup(rank, world):\n    torch.distributed.init_process_group('nccl', rank=rank, world_size=world)\n",
            fixed=(
                "import torch\n\ndef setup(rank, world):\n    torch.distributed.init_process_group("
                "torch.distributed.get_default_backend_for_device(torch.accelerator.current_accelerator() "
                "if torch.accelerator.is_available() else 'cpu'), rank=rank, world_size=world)\n"
            ),
            config={"target-torch-version": "2.8"},
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._workers: Optional[FrozenSet[str]] = None
        #: The parameter defaults found to reach a process group, reported once the walk is
        #: done: they stand elsewhere in the module, and two starts may share one.
        self._defaults: dict = {}

    def leave_Module(self, original_node: cst.Module) -> None:
        for literal in self._defaults.values():
            self._report(literal, literal)

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.availability_guarded or self._under_several_gpus() or self._in_worker_per_gpu():
            return  # distributed-only code is exactly where the backend matters
        name = self.ctx.qualname(node.func)
        if name == "torch.distributed.init_process_group":
            argument = keyword(node, "backend") or next(iter(positional(node)), None)
            if argument is not None:
                self._check_backend(argument.value)
        elif method_name(node) == "add_argument" and "init_process_group" in self.ctx.source:
            flags = [string_value(arg.value) or "" for arg in positional(node)]
            default = keyword(node, "default")
            if default is not None and any(flag.startswith("--") and "backend" in flag for flag in flags):
                if _device_only_backend(default.value):
                    self._report(default.value, default.value)

    def _under_several_gpus(self) -> bool:
        """Inside ``if args.num_gpus > 1:``: the user asked for several GPUs, NCCL is theirs."""
        stack = self.ctx.stack
        return any(
            isinstance(node, cst.If) and stack[index + 1] is node.body and distributed_code.several_gpus(node.test)
            for index, node in enumerate(stack[:-1])
        )

    def _in_worker_per_gpu(self) -> bool:
        """In a function the file starts once per GPU (``mp.spawn(main_worker,
        nprocs=torch.cuda.device_count())``): no worker runs without CUDA."""
        scopes = [scope for scope in self.ctx.scopes if isinstance(scope, cst.FunctionDef)]
        if not scopes:
            return False
        if self._workers is None:  # once per file: a search of the text per call was quadratic
            spawns = "spawn" in self.ctx.source
            self._workers = guards.spawned_per_gpu(self.ctx.module, self.ctx.qualname) if spawns else frozenset()
        return scopes[0].name.value in self._workers

    def _check_backend(self, value: cst.BaseExpression) -> None:
        if isinstance(value, (cst.Name, cst.Attribute)) and dotted_name(value) is not None:
            assigned = self._assigned_value(dotted_name(value))
            for literal in self._unchecked_literals(assigned) if assigned is not None else ():
                self._report(value, literal, nested=literal is not assigned)
            if assigned is None and isinstance(value, cst.Name):
                for literal in self._parameter_defaults(value.value):
                    self._defaults.setdefault(id(literal), literal)
        else:
            for literal in self._unchecked_literals(value):
                self._report(literal if literal is not value else value, literal, nested=literal is not value)
        if self.ctx.qualname(value) == "torch.distributed.Backend.NCCL":
            message = self.message.format(source_of(value), "NCCL", "CUDA GPUs")
            self.report(value, message, self.make_fix({}, Applicability.DISPLAY_ONLY, self.fix_title))

    def _unchecked_literals(self, value: cst.BaseExpression) -> List[cst.SimpleString]:
        """The device-only backend literals ``value`` may be, but for the arms of a conditional
        that proves the device is there: ``'gloo' if os.name == 'nt' else 'nccl'`` gives NCCL
        to every Linux machine, GPU or not (NVlabs/edm@008a4e5 torch_utils/distributed.py:26)."""
        if isinstance(value, cst.IfExp):
            sign = self.ctx.classify(value.test)
            arms = [arm for arm, proven in ((value.body, guards.POSITIVE), (value.orelse, guards.NEGATIVE)) if sign != proven]
            return [literal for arm in arms for literal in self._unchecked_literals(arm)]
        return [value] if _device_only_backend(value) else []

    def _parameter_defaults(self, name: str) -> List[cst.SimpleString]:
        """The device-only backend a parameter ``name`` of the enclosing function defaults to,
        where nothing in it binds the name again: its own default, or the default of a
        parameter of a top-level function that passes it on (mmcv's ``init_dist(launcher,
        backend='nccl')`` calling ``_init_dist_pytorch(backend)``: swz30/Restormer@df766d5
        basicsr/utils/dist_util.py:10-25, Pang-Yatian/Point-MAE@7445a68 utils/dist_utils.py:9).
        The conditions around that passing call are not read: the start itself was judged."""
        from ..syntax.cst_walk import nodes_of  # it imports LibCST, which only this pass has loaded

        function = self.ctx.enclosing_function()
        if function is None or name in self.ctx.assigned_values(function):
            return []
        param = next((p for p in parameters(function) if p.name.value == name), None)
        if param is None:
            return []
        if param.default is not None:
            return [param.default] if _device_only_backend(param.default) else []
        found = []
        for caller in self.ctx.module.body:
            if not isinstance(caller, cst.FunctionDef) or caller is function:
                continue
            for call in nodes_of(caller, cst.Call):
                if isinstance(call.func, cst.Name) and call.func.value == function.name.value:
                    passed = _passed_to(call, function, param)
                    if isinstance(passed, cst.Name):
                        outer = next((p for p in parameters(caller) if p.name.value == passed.value), None)
                        if outer is not None and _device_only_backend(outer.default):
                            found.append(outer.default)
        return found

    def _assigned_value(self, name: str) -> Optional[cst.BaseExpression]:
        """The value of the only assignment ``name = "nccl"`` (``args.backend = "nccl"``)
        among the statements of the innermost function, or of the module for a global name."""
        function = self.ctx.enclosing_function()
        local = function is not None and ("." in name or name in self.ctx.bound_names(function))
        scope = function if local else self.ctx.module
        values = []
        for statement in scope.body.body if isinstance(scope, cst.FunctionDef) else scope.body:
            if isinstance(statement, cst.SimpleStatementLine):
                for small in statement.body:
                    if isinstance(small, cst.Assign) and any(dotted_name(t.target) == name for t in small.targets):
                        values.append(small.value)
        return values[0] if len(values) == 1 else None

    def _report(self, reported: cst.CSTNode, literal: cst.BaseExpression, nested: bool = False) -> None:
        """``nested``: the literal is an arm of a conditional, so its replacement is parenthesized."""
        text = source_of(literal)
        quote = "'" if text.lstrip("rRuU").startswith("'") else '"'
        collective = COLLECTIVES[_device_only_backend(literal)]
        name, backend, devices = collective.collective_name, collective.name, collective.devices
        message = self.message.format(source_of(reported), name, devices)
        check = availability_check(self.ctx, backend)
        if check is None:  # the target torch has no check for the backend (torch.xpu before 2.4)
            self.report(reported, message + no_fix_for_target(self.ctx, lacking_check(self.ctx, backend)))
            return
        if " and " in check:
            check = f"({check})"
        replacement = cst.parse_expression(f"({text} if {check} else {quote}gloo{quote})" if nested else f"{text} if {check} else {quote}gloo{quote}")
        title = None
        if collective.collective in DEVICE_DEFAULTS and self.ctx.settings.target_version() >= DEVICE_BACKEND_SINCE:
            t = self.ctx.torch_reference()
            replacement = cst.parse_expression(
                f"{t}.distributed.get_default_backend_for_device("
                f"{t}.accelerator.current_accelerator() if {t}.accelerator.is_available() else {quote}cpu{quote})"
            )
            title = "Ask torch for the device's backend: `torch.distributed.get_default_backend_for_device(...)`"
        fix = self.make_fix({literal: lambda _: replacement}, message=title, imports=self.ctx.torch_imports())
        self.report(reported, message, fix)


def _passed_to(call: cst.Call, function: cst.FunctionDef, param: cst.Param) -> Optional[cst.BaseExpression]:
    """The argument ``call`` gives ``param`` of ``function``: by keyword, or by position."""
    named = keyword(call, param.name.value)
    if named is not None:
        return named.value
    ordered = [*function.params.posonly_params, *function.params.params]
    index = next((i for i, p in enumerate(ordered) if p is param), None)
    given = positional(call)
    return given[index].value if index is not None and index < len(given) and not given[index].star else None


def _device_only_backend(node: cst.BaseExpression) -> Optional[str]:
    """``"nccl"``, ``"xccl"`` or ``"hccl"`` written as a literal; None for anything else."""
    value = string_value(node) if isinstance(node, cst.SimpleString) else None
    return value if value in COLLECTIVES else None


RULES = (HardcodedDistributedBackend,)
