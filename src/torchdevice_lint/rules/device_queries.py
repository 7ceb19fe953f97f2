"""Reading the GPU that is not there: ``torch.version.cuda`` is None on CPU-only and MPS builds of
torch, and ``torch.cuda.device_count()`` is 0 on a machine without a GPU. Code that takes either
for a real value (``int(torch.version.cuda.split(".")[0])``, ``batch // num_gpus``) raises there,
often at import time, which keeps a whole program GPU-only.

Neither is a ``torch.cuda`` call that raises (TDV301): both answer, and the answer breaks the
arithmetic after them. So these rules read the value's own checks (``if torch.version.cuda:``,
``if num_gpus > 0:``, ``x if n else 0``) besides the availability checks every rule reads.
"""

from __future__ import annotations

import ast
from typing import Dict, FrozenSet, List, Optional, Set

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.facts import Facts
from ..first_stage.triggers import Resolved, Triggers, Unguarded
from ..knowledge.cst_guards import NEGATIVE, NEUTRAL, POSITIVE, process_count
from ..knowledge.value_checks import combined, runs_only_if
from ..model.fixes import Applicability
from ..syntax import ast_nodes
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import dotted_name, last_name, source_of
from .support.common import display_only
from .support.device_counts import DEVICE_COUNTS, DeviceCounting, scope_names


def parenthesized(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


CUDA_VERSION = "torch.version.cuda"
#: Calls that raise when handed None where a version string belongs (``int``, ``version.parse``...).
STRING_READERS = frozenset(
    {"int", "float", "len", "tuple", "list", "parse", "parse_version", "Version", "LooseVersion", "StrictVersion",
     "digit_version"}
)
#: Operator node types by name: LibCST is imported only once a file is parsed.
ORDERINGS = frozenset({"LessThan", "LessThanEqual", "GreaterThan", "GreaterThanEqual"})


class CudaVersionNone(Rule):
    code = "TDV304"
    name = "cuda-version-none"
    hazard_without_cuda = True
    message = "`{}` is None on torch builds without CUDA (CPU-only, Mac): {} raises there"
    fix_title = 'Read it as `torch.version.cuda or "0.0"`'
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `torch.version.cuda` (or a name assigned it) used as a string: a method "
        "(`.split`, `.replace`), an index, `int()`/`float()`/`version.parse()`, an ordering "
        "comparison (`>= \"11.0\"`) or `+`, outside `if torch.version.cuda:` (`is not None`, "
        "`x and ...`, `v if torch.version.cuda else None`, an early return) and the availability checks."
    )
    why = (
        "On CPU-only and MPS builds of torch `torch.version.cuda` is None, so "
        "`int(torch.version.cuda.split(\".\")[0])` raises AttributeError; at module level it "
        "stops every import of the file, which keeps the whole program GPU-only (transformer-xl's "
        "`proj_adaptive_softmax.py` reads the CUDA major version this way at import). Not part of "
        "TDV301: reading the value never raises, using it does, so the checks that count are the "
        "value's own (`if torch.version.cuda:`)."
    )
    fix_safety_note = (
        'The value becomes `(torch.version.cuda or "0.0")`: a CUDA build reads its own version as '
        'before; a build without CUDA reads version 0.0, older than every real one, instead of raising.'
    )
    triggers = Resolved([CUDA_VERSION])
    valid = (
        Valid('import torch\nprint("CUDA", torch.version.cuda)\nok = torch.version.cuda is not None\n'),
        # transformers' is_torch_tf32_available (src/transformers/utils/import_utils.py)
        Valid(
            "import torch\n\ndef tf32():\n    if not torch.cuda.is_available() or torch.version.cuda is None:\n"
            "        return False\n    return int(torch.version.cuda.split('.')[0]) >= 11\n"
        ),
        # pytorch/examples distributed/FSDP/utils/environment.py:22-24
        Valid(
            "import torch\nfrom packaging import version\n\ndef bfloat_support():\n    return (\n"
            "        torch.version.cuda\n        and version.parse(torch.version.cuda).release >= (11, 0)\n    )\n"
        ),
        # ray rllib's update_global_seed_if_necessary: the check reads a name bound to the value
        Valid(
            "import torch\ncuda_version = torch.version.cuda\n"
            "if cuda_version is not None and float(torch.version.cuda) >= 10.2:\n    pass\n"
        ),
        Valid('import torch\nmajor = int(torch.version.cuda.split(".")[0]) if torch.version.cuda else 0\n'),
        Valid("import torch\ntry:\n    major = int(torch.version.cuda[0])\nexcept (TypeError, ValueError):\n    major = 0\n"),
        Valid('import torch\nif torch.cuda.is_available():\n    major = torch.version.cuda.split(".")[0]\n'),
    )
    invalid = (
        # the transformer-xl idiom at module level (kimiyoung/transformer-xl@81b1b19,
        # pytorch/utils/proj_adaptive_softmax.py:9-10; copied into thu-coai/LaMemo)
        Invalid(
            "import torch\n\nCUDA_MAJOR = int(torch.version.cuda.split('.')[0])\nCUDA_MINOR = int(torch.version.cuda.split('.')[1])\n",
            fixed=(
                'import torch\n\nCUDA_MAJOR = int((torch.version.cuda or "0.0").split(\'.\')[0])\n'
                'CUDA_MINOR = int((torch.version.cuda or "0.0").split(\'.\')[1])\n'
            ),
            count=2,
        ),
        # a CUDA-extension setup.py reading the toolkit version (nvcc flags)
        Invalid(
            "import torch\ncuda_version = float(torch.version.cuda)\nif cuda_version >= 11:\n    pass\n",
            fixed='import torch\ncuda_version = float(torch.version.cuda or "0.0")\nif cuda_version >= 11:\n    pass\n',
        ),
        Invalid(
            "import torch\nfrom packaging import version\nNEW = version.parse(torch.version.cuda) >= version.parse('11.0')\n",
            fixed='import torch\nfrom packaging import version\nNEW = version.parse(torch.version.cuda or "0.0") >= version.parse(\'11.0\')\n',
        ),
        # a name bound to it, and a wheel tag built from it
        Invalid(
            "import torch\nCUDA = torch.version.cuda\nTAG = 'cu' + CUDA.replace('.', '')\n",
            fixed='import torch\nCUDA = torch.version.cuda\nTAG = \'cu\' + (CUDA or "0.0").replace(\'.\', \'\')\n',
        ),
        # a check on another backend says nothing about this one
        Invalid(
            'import torch\nif torch.version.hip:\n    pass\nelif torch.version.cuda >= "11.8":\n    pass\n',
            fixed='import torch\nif torch.version.hip:\n    pass\nelif (torch.version.cuda or "0.0") >= "11.8":\n    pass\n',
        ),
        Invalid(
            "import torch\nprint(f\"cu{torch.version.cuda.replace('.', '')}\")\n",
            fixed="import torch\nprint(f\"cu{(torch.version.cuda or '0.0').replace('.', '')}\")\n",
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._aliases: Dict[int, FrozenSet[str]] = {}

    def visit_Attribute(self, node: cst.Attribute) -> None:
        if self.ctx.qualname(node) == CUDA_VERSION:
            self._check(node)

    def visit_Name(self, node: cst.Name) -> None:
        if node.value in self._names() or self.ctx.qualname(node) == CUDA_VERSION:
            self._check(node)

    def _names(self) -> FrozenSet[str]:
        return scope_names(self, self._aliases, lambda value: self.ctx.qualname(value) == CUDA_VERSION)

    def _is_version(self, node: cst.BaseExpression) -> bool:
        return self.ctx.qualname(node) == CUDA_VERSION or dotted_name(node) in self._names()

    def _sign(self, test: cst.BaseExpression) -> int:
        parts = combined(test, self._sign)
        if parts is not None:
            return parts
        if self._is_version(test):
            return POSITIVE
        if isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and self._is_version(test.left):
            target = test.comparisons[0]
            if isinstance(target.comparator, cst.Name) and target.comparator.value == "None":
                return POSITIVE if isinstance(target.operator, (cst.IsNot, cst.NotEqual)) else NEGATIVE
        return NEUTRAL

    def _check(self, node: cst.BaseExpression) -> None:
        parent = self.ctx.parent(1)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            return  # ``x.cuda`` named like an alias
        use = self._raising_use(node, parent)
        if use is None or self.ctx.guarded:
            return
        if runs_only_if(self.ctx.stack, self._sign, ("TypeError", "AttributeError")):
            return
        f_string = next((n for n in reversed(self.ctx.stack) if isinstance(n, cst.FormattedString)), None)
        quote = "'" if f_string is not None and '"' in f_string.start else '"'
        needs_parens = not isinstance(parent, cst.Arg)

        def read_or_zero(updated: cst.BaseExpression) -> cst.BaseExpression:
            value = cst.BooleanOperation(updated, cst.Or(), cst.SimpleString(f"{quote}0.0{quote}"))
            return parenthesized(value) if needs_parens else value

        fix = self.make_fix({node: read_or_zero})
        self.report(node, self.message.format(source_of(node), use), fix)

    def _raising_use(self, node: cst.BaseExpression, parent: Optional[cst.CSTNode]) -> Optional[str]:
        """How the code around ``node`` raises on None: ``"`.split()`"``, ``"`int()`"``..."""
        if isinstance(parent, cst.Attribute) and parent.value is node:
            return f"`.{parent.attr.value}`"
        if isinstance(parent, cst.Subscript) and parent.value is node:
            return "indexing it"
        if isinstance(parent, cst.BinaryOperation) and isinstance(parent.operator, cst.Add):
            return "`+`"
        grandparent = self.ctx.parent(2)
        if isinstance(parent, cst.Arg) and isinstance(grandparent, cst.Call) and grandparent.args[0] is parent:
            reader = last_name(grandparent.func)
            return f"`{reader}()`" if reader in STRING_READERS and parent.keyword is None else None
        if isinstance(parent, cst.Comparison) and parent.left is node:
            compared = parent.comparisons[0].operator
        elif isinstance(parent, cst.ComparisonTarget) and parent.comparator is node:
            compared = parent.operator
            if isinstance(compared, (cst.In, cst.NotIn)):
                return "`in`"
        else:
            return None
        return "comparing it" if type(compared).__name__ in ORDERINGS else None


DIVISIONS = frozenset({"Divide", "FloorDivide", "Modulo", "DivideAssign", "FloorDivideAssign", "ModuloAssign"})


_COUNT_CALLS = Resolved(DEVICE_COUNTS, calls=True)
_AST_DIVISIONS = (ast.Div, ast.FloorDiv, ast.Mod)


def count_divisions(facts: Facts) -> List[ast.AST]:
    """Where TDV305 may report, silent behind an availability check: a division, modulo or
    ``divmod`` whose divisor holds a device count call or a name some assignment binds to one.
    The file's tree is walked only where it calls a device count."""
    calls = {id(call) for call in _COUNT_CALLS.matching_calls(facts)}
    if not calls or facts.tree is None:
        return []
    counted = set()
    divisions = []
    for node in ast_nodes.nodes_below(facts.tree):
        kind = type(node)
        if kind is ast.BinOp and type(node.op) in _AST_DIVISIONS:
            divisions.append((node, node.right))
        elif kind is ast.AugAssign and type(node.op) in _AST_DIVISIONS:
            divisions.append((node, node.value))
        elif kind is ast.Call and type(node.func) is ast.Name and node.func.id == "divmod" and len(node.args) == 2:
            divisions.append((node, node.args[1]))
        elif kind in (ast.Assign, ast.AnnAssign, ast.NamedExpr) and node.value is not None and _at_most_count(node.value, calls):
            targets = node.targets if kind is ast.Assign else [node.target]
            counted.update(ast_nodes.dotted_name(target) for target in targets)
    return [
        division for division, divisor in divisions
        if any(id(part) in calls or ast_nodes.dotted_name(part) in counted for part in ast_nodes.nodes_below(divisor))
    ]


def _at_most_count(value: ast.expr, calls: Set[int]) -> bool:
    """A device count call, or ``min()`` of one and other numbers (AbnerHqC/GaitSet@5535943
    model/model.py:101 ``gpu_num = min(torch.cuda.device_count(), batch_size)``): 0 without a GPU."""
    if id(value) in calls:
        return True
    return (
        type(value) is ast.Call and type(value.func) is ast.Name and value.func.id == "min" and not value.keywords
        and any(id(argument) in calls for argument in value.args)
    )


_MMCV_LAUNCHER = (
    "import argparse\nimport torch\n\nparser = argparse.ArgumentParser()\nparser.add_argument('--launcher', default='none')\n"
    "args = parser.parse_args()\nif args.launcher == 'none':\n    batch = 64\nelse:\n    batch = 64 // torch.cuda.device_count()\n"
)
_LAUNCH_README = "python -m torch.distributed.launch --nproc_per_node 8 example.py --launcher pytorch\n"


class DeviceCountDivisor(DeviceCounting, Rule):
    code = "TDV305"
    name = "device-count-divisor"
    hazard_without_cuda = True
    message = "`{}` is 0 on a machine without a GPU (CPU-only, Mac), so {} raises ZeroDivisionError there"
    fix_title = "Divide by `max(1, ...)`"
    fix_safety = Applicability.SAFE
    what = (
        "Checks for `torch.cuda.device_count()` (or `torch.accelerator`/`xpu`/`mps.device_count()`) "
        "as a divisor or modulus, directly or through a name every assignment binds to it "
        "(`per_gpu = batch // num_gpus`, `rank % torch.cuda.device_count()`, `x /= args.n_gpu`, "
        "`divmod(n, num_gpus)`), outside a check of the count (`if num_gpus:`, `if n > 0:`, "
        "`if n == 0: return`, `k // n if n else k`) and the availability checks. Distributed-only code "
        "counts where a CPU can start its process group: not after `init_process_group(\"nccl\")` "
        "(TDV303), nor in a worker spawned once per GPU."
    )
    why = (
        "Without a GPU the count is 0, and the division stops the program with ZeroDivisionError "
        "before anything runs on the CPU. The per-GPU arithmetic of a data-parallel script "
        "usually means the whole batch on a single device. Like TDV304 a rule of its own: "
        "`device_count()` never raises, dividing by its answer does."
    )
    fix_safety_note = (
        "The divisor becomes `max(1, ...)`: with one or more GPUs it is the count as before; "
        "without one the program divides by 1, one device, instead of raising."
    )
    triggers = Unguarded(count_divisions)
    valid = (
        Valid("import torch\nbatch_per_gpu = batch_size * max(1, torch.cuda.device_count())\nn = torch.cuda.device_count()\n"),
        Valid("import torch\nper_gpu = batch // max(1, torch.cuda.device_count())\n"),
        Valid("import torch\nn_gpu = torch.cuda.device_count()\nif n_gpu > 0:\n    per_gpu = batch // n_gpu\n"),
        Valid("import torch\nn = torch.cuda.device_count()\nper_gpu = batch // n if n else batch\n"),
        Valid(
            "import torch\n\ndef steps(total):\n    num_gpus = torch.cuda.device_count()\n    if num_gpus == 0:\n"
            "        raise SystemExit('needs a GPU')\n    return total // num_gpus\n"
        ),
        Valid("import torch\nif torch.cuda.is_available():\n    shard = rank % torch.cuda.device_count()\n"),
        Valid('import torch\nprint("%d GPUs" % torch.cuda.device_count())\n'),
        # the name is reassigned to something that is not a count
        Valid("import torch\nn = torch.cuda.device_count()\nn = max(n, 1)\nper_gpu = batch // n\n"),
        # facebookresearch/swav@06b1b7c src/utils.py:60-68: after a group only NCCL can start (TDV303
        # reports it; once its fix gives gloo the fallback, the fixer's next pass reports this)
        Valid(
            "import os\nimport torch\nimport torch.distributed as dist\n\ndef init_distributed_mode(args):\n"
            "    args.rank = int(os.environ['RANK'])\n"
            "    dist.init_process_group(backend='nccl', init_method=args.dist_url, rank=args.rank)\n"
            "    args.gpu_to_work_on = args.rank % torch.cuda.device_count()\n"
        ),
        # facebookresearch/detr@29901c5 util/misc.py:406-425: the backend a name carries is NCCL's
        Valid(
            "import os\nimport torch\n\ndef init_distributed_mode(args):\n    if 'SLURM_PROCID' in os.environ:\n"
            "        args.rank = int(os.environ['SLURM_PROCID'])\n        args.gpu = args.rank % torch.cuda.device_count()\n"
            "    args.dist_backend = 'nccl'\n"
            "    torch.distributed.init_process_group(backend=args.dist_backend, init_method=args.dist_url)\n"
        ),
        # NVIDIA/tacotron2@185cd24 train.py:27-37: the set-up refuses to run without CUDA (TDV309)
        Valid(
            "import torch\nimport torch.distributed as dist\n\ndef init_distributed(hparams, n_gpus, rank, group_name):\n"
            "    assert torch.cuda.is_available(), 'Distributed mode requires CUDA.'\n"
            "    torch.cuda.set_device(rank % torch.cuda.device_count())\n"
            "    dist.init_process_group(backend=hparams.dist_backend, init_method=hparams.dist_url, world_size=n_gpus, rank=rank)\n"
        ),
        # haofeixu/gmflow@b512343 main.py:137-142: mmcv's ``--launcher none`` runs alone, as the README does
        Valid(_MMCV_LAUNCHER, files={"README.md": "python example.py --eval\n" + _LAUNCH_README}),
        Valid(_MMCV_LAUNCHER.replace("launcher", "distributed").replace("'none'", "'no'"), files={"README.md": "python example.py\n"}),  # aimagelab/mammoth@e75a491 utils/args.py:393
        # a worker started once per GPU never runs without one
        Valid(
            "import torch\nimport torch.distributed as dist\n\ndef worker(rank, args):\n"
            "    dist.init_process_group(backend=args.backend, rank=rank)\n    shard = args.batch // torch.cuda.device_count()\n\n"
            "torch.multiprocessing.spawn(worker, (args,), nprocs=torch.cuda.device_count())\n"
        ),
    )
    invalid = (
        # only a launcher starts it, and asks for the distributed run
        Invalid(_MMCV_LAUNCHER, fixed=_MMCV_LAUNCHER.replace("// torch.cuda.device_count()", "// max(1, torch.cuda.device_count())"), files={"README.md": _LAUNCH_README}),
        Invalid(
            "import torch\nper_gpu = batch_size // torch.cuda.device_count()\n",
            fixed="import torch\nper_gpu = batch_size // max(1, torch.cuda.device_count())\n",
        ),
        Invalid(  # AbnerHqC/GaitSet@5535943 model/model.py:101-102: at most the count, 0 without a GPU
            "import math\nimport torch\nbatch_size = min(requested, 64)\ngpu_num = min(torch.cuda.device_count(), batch_size)\nbatch_per_gpu = math.ceil(batch_size / gpu_num)\n",
            fixed="import math\nimport torch\nbatch_size = min(requested, 64)\ngpu_num = min(torch.cuda.device_count(), batch_size)\nbatch_per_gpu = math.ceil(batch_size / max(1, gpu_num))\n",
        ),
        # the SLURM branch of dino/detr/mae's init_distributed_mode, outside the set-up function
        Invalid(
            "import os\nimport torch\nrank = int(os.environ['SLURM_PROCID'])\ngpu = rank % torch.cuda.device_count()\n",
            fixed="import os\nimport torch\nrank = int(os.environ['SLURM_PROCID'])\ngpu = rank % max(1, torch.cuda.device_count())\n",
        ),
        Invalid(
            "import torch\n\nclass Trainer:\n    def __init__(self, accumulation):\n        self.n_gpu = torch.cuda.device_count()\n"
            "        self.steps = accumulation // self.n_gpu\n",
            fixed=(
                "import torch\n\nclass Trainer:\n    def __init__(self, accumulation):\n        self.n_gpu = torch.cuda.device_count()\n"
                "        self.steps = accumulation // max(1, self.n_gpu)\n"
            ),
        ),
        Invalid(
            "import torch\nopt.num_gpu = torch.cuda.device_count()\nopt.num_iter = int(opt.num_iter / opt.num_gpu)\n",
            fixed="import torch\nopt.num_gpu = torch.cuda.device_count()\nopt.num_iter = int(opt.num_iter / max(1, opt.num_gpu))\n",
        ),
        Invalid(
            "import torch\nworkers = 16\nworkers //= torch.accelerator.device_count()\nnodes, rest = divmod(world, torch.cuda.device_count() * 2)\n",
            fixed=(
                "import torch\nworkers = 16\nworkers //= max(1, torch.accelerator.device_count())\n"
                "nodes, rest = divmod(world, max(1, torch.cuda.device_count() * 2))\n"
            ),
            count=2,
        ),
        # facebookresearch/fairseq@3d262bb examples/textless_nlp/pgslm/eval/cont_metrics.py:488-495:
        # a gloo group starts on a CPU, and there the modulo raises
        Invalid(
            "import torch\n\ndef main(rank, world_size, args):\n    if world_size > 1:\n"
            "        torch.distributed.init_process_group(backend='gloo', init_method='env://', world_size=world_size, rank=rank)\n"
            "        torch.cuda.set_device(rank % torch.cuda.device_count())\n",
            fixed=(
                "import torch\n\ndef main(rank, world_size, args):\n    if world_size > 1:\n"
                "        torch.distributed.init_process_group(backend='gloo', init_method='env://', world_size=world_size, rank=rank)\n"
                "        torch.cuda.set_device(rank % max(1, torch.cuda.device_count()))\n"
            ),
        ),
        # facebookresearch/fairseq@3d262bb fairseq/distributed/utils.py:87-91: under torchrun, whose
        # group takes the user's backend (gloo on a CPU)
        Invalid(
            "import os\nimport torch\n\ndef _infer_torch_distributed_launch_init(cfg):\n"
            "    cfg.distributed_rank = int(os.environ['RANK'])\n    cfg.device_id = cfg.distributed_rank % torch.cuda.device_count()\n\n"
            "def distributed_init(cfg):\n    torch.distributed.init_process_group(backend=cfg.distributed_backend)\n",
            fixed=(
                "import os\nimport torch\n\ndef _infer_torch_distributed_launch_init(cfg):\n"
                "    cfg.distributed_rank = int(os.environ['RANK'])\n    cfg.device_id = cfg.distributed_rank % max(1, torch.cuda.device_count())\n\n"
                "def distributed_init(cfg):\n    torch.distributed.init_process_group(backend=cfg.distributed_backend)\n"
            ),
        ),
    )

    def visit_BinaryOperation(self, node: cst.BinaryOperation) -> None:
        if type(node.operator).__name__ in DIVISIONS and not isinstance(
            node.left, (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString)
        ):
            self._check(node.right, "the modulo" if isinstance(node.operator, cst.Modulo) else "the division")

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        if type(node.operator).__name__ in DIVISIONS:
            self._check(node.value, "the modulo" if isinstance(node.operator, cst.ModuloAssign) else "the division")

    def visit_Call(self, node: cst.Call) -> None:
        if isinstance(node.func, cst.Name) and node.func.value == "divmod" and len(node.args) == 2:
            self._check(node.args[1].value, "`divmod`")

    def _check(self, divisor: cst.BaseExpression, how: str) -> None:
        if not self._counts(divisor) or self.ctx.availability_guarded or not self._runs_without_gpu():
            return
        if runs_only_if(self.ctx.stack, self._sign, ("ZeroDivisionError", "ArithmeticError")):
            return

        def at_least_one(updated: cst.BaseExpression) -> cst.Call:
            bare = updated.with_changes(lpar=[], rpar=[])
            return cst.Call(cst.Name("max"), [cst.Arg(cst.Integer("1")), cst.Arg(bare)])

        fix = self.make_fix({divisor: at_least_one})
        self.report(divisor, self.message.format(source_of(divisor), how), fix)


#: Calls that start ``nprocs`` processes (``torch.multiprocessing.spawn``, ``start_processes``).
SPAWNERS = ("spawn", "start_processes")
#: nerfplusplus's launch (Kai-46/nerfplusplus@ebf2f3e ddp_train_nerf.py:590-597).
_SPAWN_PER_GPU = (
    "import torch\n\ndef train(rank, args):\n    torch.cuda.set_device(rank)\n\n"
    "def main(args):\n    if args.world_size == -1:\n        args.world_size = torch.cuda.device_count()\n"
    "    torch.multiprocessing.spawn(train, args=(args,), nprocs=args.world_size, join=True)\n"
)


class DeviceCountSpawn(DeviceCounting, Rule):
    code = "TDV307"
    name = "device-count-spawn"
    hazard_without_cuda = True
    message = "`{}` is 0 on a machine without a GPU (CPU-only, Mac): `{}` starts no process there, and the program silently does nothing"
    fix_title = "Start one process on the CPU where no GPU is, once the worker picks its own device"
    fix_safety = Applicability.DISPLAY_ONLY
    what = (
        "Checks for `torch.multiprocessing.spawn(worker, nprocs=n)` (or `start_processes`) where `n` is "
        "`torch.cuda.device_count()` or a name the file binds to it (`args.world_size = "
        "torch.cuda.device_count()`), outside a check of the count, the availability checks and code "
        "that only runs distributed (`if args.multiprocessing_distributed:`, off by default)."
    )
    why = (
        "`spawn` with `nprocs=0` returns at once (torch 2.13): the worker never runs, nothing raises, "
        "and the run ends having done nothing (nerfplusplus's `ddp_train_nerf.py` on a Mac). The worker "
        "itself only runs where CUDA is, so its `.to(rank)` and `torch.cuda.set_device(rank)` are not "
        "reported while the count can be 0; counted as `max(1, ...)`, it runs on a CPU, and they are."
    )
    fix_safety_note = (
        "No fix is applied: one process on the CPU runs a worker written for GPUs (`.to(rank)`, "
        "`set_device(rank)`, an NCCL group), which then raises where it did nothing; the worker needs "
        "a device of its own first."
    )
    triggers = Triggers(calls=SPAWNERS)
    valid = (
        Valid("import torch\ntorch.multiprocessing.spawn(train, nprocs=max(1, torch.cuda.device_count()))\n"),
        Valid("import torch\nn = torch.cuda.device_count()\nif n == 0:\n    train(0)\nelse:\n    torch.multiprocessing.spawn(train, nprocs=n)\n"),
        Valid("import torch\nif torch.cuda.is_available():\n    torch.multiprocessing.spawn(train, nprocs=torch.cuda.device_count())\n"),
        Valid("import torch.multiprocessing as mp\nmp.spawn(train, nprocs=4)\n"),
        # pytorch/examples imagenet: only the distributed run, off by default, spawns per GPU
        Valid(
            "import argparse\nimport torch\nimport torch.multiprocessing as mp\n\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--multiprocessing-distributed', action='store_true')\nargs = parser.parse_args()\n"
            "ngpus_per_node = torch.cuda.device_count()\nif args.multiprocessing_distributed:\n"
            "    mp.spawn(main_worker, nprocs=ngpus_per_node, args=(ngpus_per_node, args))\nelse:\n"
            "    main_worker(0, ngpus_per_node, args)\n"
        ),
    )
    invalid = (
        Invalid(_SPAWN_PER_GPU, fixed=None),
        Invalid("import torch.multiprocessing as mp\nimport torch\nmp.spawn(train, (cfg,), torch.cuda.device_count())\n", fixed=None),
        # facebookresearch/barlowtwins@8e8d284 main.py:51,70: an attribute bound to the count
        Invalid("import torch\nargs.ngpus_per_node = torch.cuda.device_count()\ntorch.multiprocessing.spawn(main_worker, (args,), args.ngpus_per_node)\n", fixed=None),
        Invalid("import torch\nimport torch.multiprocessing as mp\nmp.start_processes(run, nprocs=torch.accelerator.device_count(), start_method='fork')\n", fixed=None),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if last_name(node.func) not in SPAWNERS:
            return
        count = process_count(node)
        if count is None or not self._counts(count) or self.ctx.guarded or not self._runs_without_gpu():
            return
        if runs_only_if(self.ctx.stack, self._sign, ()):
            return
        self.report(node, self.message.format(source_of(count), source_of(node.func)), display_only(self, self.fix_title))


RULES = (CudaVersionNone, DeviceCountDivisor, DeviceCountSpawn)
