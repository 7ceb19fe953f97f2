"""Legacy typed CUDA tensors: ``torch.cuda.FloatTensor`` and friends."""

from __future__ import annotations

import ast
from typing import Dict, List, Optional, Set, Tuple

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.facts import Facts
from ..first_stage.triggers import Placed, Resolved, Triggers, Unguarded
from ..model.fixes import Applicability
from ..syntax.ast_nodes import dotted_name, last_name, nodes_below
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name as method_or_name, parameter_names, source_of
from .support.common import (
    CUDA_TENSOR_NAMES, LEGACY_TENSOR_DTYPES, display_only, keyword_arg, legacy_cuda_tensor, may_meet_mps,
    may_name_cuda_tensor_type, method_name, no_fix_for_target, positional, target_has,
)
from .support.examples import DEVICE


def _dtype(ctx, leaf: str) -> cst.BaseExpression:
    return cst.parse_expression(f"{ctx.torch_reference()}.{LEGACY_TENSOR_DTYPES[leaf]}")


#: A class whose flag comes from its callers (TDV201's project example).
_LOSS = (
    "import torch\n\n\nclass Loss:\n    def __init__(self, use_gpu=False):\n        self.use_gpu = use_gpu\n\n"
    "    def forward(self):\n        if self.use_gpu:\n            return {}\n        return torch.FloatTensor([1.0])\n"
)

_BEAM = (
    "import torch\n\n\nclass Beam:\n    def __init__(self, size, cuda=True):\n        self.tt = {}\n"
    "        self.scores = self.tt.FloatTensor(size).zero_()\n"
)


_WAVEGLOW = "import torch\nif spect.type() == 'torch.cuda.HalfTensor':\n    audio = torch.cuda.HalfTensor(spect.size(0)).normal_()\n"


_LEGACY = Resolved(CUDA_TENSOR_NAMES)
_CUDA_MODULE = Resolved(("torch.cuda",))
#: A file that may hold a legacy CUDA tensor type at all: the name, or ``self.tt = torch.cuda``
#: with a typed call, or the type's name in a string.
_MAY_NAME_ONE = _LEGACY | (_CUDA_MODULE & Triggers(calls=tuple(LEGACY_TENSOR_DTYPES))) | Placed(may_name_cuda_tensor_type)


def legacy_sites(facts: Facts) -> List[ast.AST]:
    """Where TDV201 and TDV202 may report, both silent where ``ctx.guarded`` holds: a call of a
    legacy type; an alias of one (``Tensor = torch.cuda.FloatTensor``, then ``Tensor(n)``) or
    of ``torch.cuda`` (``self.tt = torch.cuda``); a ``.type(...)`` or ``isinstance`` call given
    one, its name in a string, or a name some assignment binds to one. The file's tree is walked
    only where ``_MAY_NAME_ONE`` matches."""
    if facts.tree is None or not _MAY_NAME_ONE.matches(facts):
        return []

    def legacy(node: ast.AST) -> bool:
        dotted = dotted_name(node)
        return dotted is not None and _LEGACY.resolves(dotted, facts)

    def named(node: ast.AST) -> bool:
        if type(node) is ast.IfExp:
            return named(node.body) and named(node.orelse)
        return legacy(node) or (type(node) is ast.Constant and node.value in CUDA_TENSOR_NAMES)

    sites: List[ast.AST] = []
    checks: List[Tuple[ast.Call, list]] = []
    aliases: Set[str] = set()  # names bound to a legacy type (TDV202's ``_names_cuda_types``)
    for node in nodes_below(facts.tree):
        kind = type(node)
        if kind is ast.Call:
            if legacy(node.func):
                sites.append(node)
            elif last_name(node.func) in ("type", "isinstance"):
                checks.append((node, [*node.args, *(keyword.value for keyword in node.keywords)]))
        elif kind in (ast.Assign, ast.AnnAssign, ast.NamedExpr) and node.value is not None:
            if named(node.value):
                sites.append(node)
                targets = node.targets if kind is ast.Assign else [node.target]
                aliases.update(target.id for target in targets if type(target) is ast.Name)
            elif _CUDA_MODULE.resolves(dotted_name(node.value) or "", facts):
                sites.append(node)
    sites.extend(
        call for call, arguments in checks
        if any(named(argument) or (type(argument) is ast.Name and argument.id in aliases) for argument in arguments)
    )
    return sites


class LegacyCudaTensorConstructor(Rule):
    code = "TDV201"
    name = "legacy-cuda-tensor-constructor"
    hazard_without_cuda = True
    message = "`torch.cuda.{}(...)` creates a CUDA tensor unconditionally and raises without CUDA"
    fix_title = "Create the tensor with `dtype=` and `device=`"
    fix_safety = Applicability.UNSAFE
    what = "Checks for calls of the legacy typed CUDA tensor classes, such as `torch.cuda.FloatTensor(3)`."
    why = (
        "The typed constructors are deprecated and CUDA-only: `torch.cuda.FloatTensor(3)` raises "
        "`TypeError` on a CPU-only machine. `torch.tensor`/`torch.empty` with `dtype=` and "
        "`device=` do the same on any device."
    )
    fix_safety_note = (
        "Literal data becomes `torch.tensor(data, ...)` and sizes (integers, `len(...)`, "
        "`x.size(n)`, `x.shape[n]`) `torch.empty(sizes, ...)`; any other argument is ambiguous "
        "(data or size) and gets no automatic fix."
    )
    triggers = Unguarded(legacy_sites)
    valid = (
        Valid("import torch\nx = torch.FloatTensor([1.0, 2.0])\n"),
        Valid("import torch\nx = torch.cuda.FloatTensor(3) if torch.cuda.is_available() else torch.zeros(3)\n"),
        Valid("import torch\nTensorType = torch.cuda.FloatTensor if use_cuda else torch.FloatTensor\n"),
        Valid("from mylib.cuda import FloatTensor\nx = FloatTensor(3)\n"),
        Valid("import torch\nx = torch.zeros(3, dtype=torch.float32)\n"),
        Valid("import torch\nif torch.cuda.is_available():\n    Tensor = torch.cuda.FloatTensor\nx = Tensor(3)\n"),
        # the function's own alias does not leak into the module, where a guarded one is used
        Valid(
            "import torch\n\ndef sample(n):\n    Tensor = torch.cuda.FloatTensor\n    return n\n\n"
            "Tensor = torch.cuda.FloatTensor if cuda else torch.FloatTensor\nvalid = Tensor(4, 1)\n"
        ),
        # OpenNMT's beam: the module chosen by the flag (nlpyang/PreSumm@70b810e src/translate/beam.py:29)
        Valid(_BEAM.format("torch.cuda if cuda else torch")),
        # only a CUDA half tensor takes the branch (WaveGlow, xcmyz/FastSpeech@1e1a61b glow.py:265)
        Valid(_WAVEGLOW),
    )
    invalid = (
        Invalid(  # its else branch runs on every tensor that is no CUDA half tensor
            _WAVEGLOW + "else:\n    audio = torch.cuda.FloatTensor(spect.size(0)).normal_()\n",
            fixed=_WAVEGLOW.replace("torch\n", "torch\n\n" + DEVICE, 1) + "else:\n    audio = torch.empty(spect.size(0), dtype=torch.float32, device=device).normal_()\n",
        ),
        # an alias of a typed CUDA tensor, called later: the call raises
        Invalid(
            "import torch\nTensor = torch.cuda.FloatTensor\n\ndef noise(batch, device):\n    return Tensor(len(batch), 100).normal_()\n",
            fixed="import torch\nTensor = torch.cuda.FloatTensor\n\ndef noise(batch, device):\n    return torch.empty(len(batch), 100, dtype=torch.float32, device=device).normal_()\n",
        ),
        Invalid(
            "import torch\nx = torch.cuda.FloatTensor([1.0, 2.0])\n",
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "x = torch.tensor([1.0, 2.0], dtype=torch.float32, device=device)\n"
            ),
        ),
        Invalid(
            "import torch\n\ndef buf(device):\n    return torch.cuda.LongTensor(4, 5)\n",
            fixed="import torch\n\ndef buf(device):\n    return torch.empty(4, 5, dtype=torch.int64, device=device)\n",
        ),
        Invalid(
            "from torch.cuda import ByteTensor\nimport torch\ndevice = 'cpu'\nmask = ByteTensor()\n",
            fixed="from torch.cuda import ByteTensor\nimport torch\ndevice = 'cpu'\nmask = torch.tensor([], dtype=torch.uint8, device=device)\n",
        ),
        Invalid(
            "import torch as th\ndevice = th.device('cpu')\nx = th.cuda.HalfTensor((1, 2))\n",
            fixed="import torch as th\ndevice = th.device('cpu')\nx = th.tensor((1, 2), dtype=th.float16, device=device)\n",
        ),
        Invalid(
            "import torch\n\ndef counts(docs, vocab, device):\n    return torch.cuda.FloatTensor(len(docs), vocab.shape[0]).zero_()\n",
            fixed="import torch\n\ndef counts(docs, vocab, device):\n    return torch.empty(len(docs), vocab.shape[0], dtype=torch.float32, device=device).zero_()\n",
        ),
        Invalid(
            "import torch\nx = torch.cuda.FloatTensor(sizes)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # from other modules: the fix uses the portable device utils.py defines
        Invalid(
            "import torch\nfrom utils import device\nones = torch.cuda.FloatTensor([1.0])\n",
            fixed="import torch\nfrom utils import device\nones = torch.tensor([1.0], dtype=torch.float32, device=device)\n",
            files={"utils.py": 'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'},
        ),
        # `use_gpu` is what every caller passes: train.py's `args.cuda`, on by default
        Invalid(
            _LOSS.format("torch.cuda.FloatTensor([1.0])"),
            fixed=_LOSS.format("torch.tensor([1.0], dtype=torch.float32, device=device)").replace(
                "\n\n\n", '\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "mps" '
                'if torch.backends.mps.is_available() else "cpu")\n\n\n', 1
            ),
            files={"train.py": "import argparse\nfrom example import Loss\nparser = argparse.ArgumentParser()\n"
                   "parser.add_argument('--cuda', default=True)\nargs = parser.parse_args()\nLoss(args.cuda).forward()\n"},
        ),
        # ... and always CUDA (salesforce/CodeT5@7de7f69 CodeT5/models.py:291-297)
        Invalid(_BEAM.format("torch.cuda"), applicability=Applicability.DISPLAY_ONLY),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: ``Tensor = torch.cuda.FloatTensor`` bound outside any guard, by scope (the
        #: enclosing function, or None): (scope, alias) -> class name. A later assignment of
        #: anything else to the name ends the alias.
        self.aliases: Dict[Tuple[Optional[int], str], str] = {}
        #: ``self.tt = torch.cuda`` bound outside any guard, by class: (class, attribute). The
        #: beam search of OpenNMT's lineage then writes ``self.tt.FloatTensor(size)``.
        self.cuda_modules: Set[Tuple[int, str]] = set()

    def _scope(self) -> Optional[int]:
        function = self.ctx.enclosing_function()
        return id(function) if function is not None else None

    def visit_Assign(self, node: cst.Assign) -> None:
        leaf = legacy_cuda_tensor(self.ctx, node.value)
        plain = leaf is not None and not self.ctx.guarded and isinstance(node.value, (cst.Name, cst.Attribute))
        for target in node.targets:
            if isinstance(target.target, cst.Name):
                key = (self._scope(), target.target.value)
                if plain:
                    self.aliases[key] = leaf
                else:
                    self.aliases.pop(key, None)
            attribute = self._own_attribute(target.target)
            if attribute is not None:
                if not self.ctx.guarded and self.ctx.qualname(node.value) == "torch.cuda":
                    self.cuda_modules.add(attribute)
                else:
                    self.cuda_modules.discard(attribute)

    def _own_attribute(self, node: cst.BaseExpression) -> Optional[Tuple[int, str]]:
        """(class, ``x``) for ``self.x`` inside a class's method."""
        klass = self.ctx.enclosing_class()
        if klass is None or not (isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self"):
            return None
        return id(klass), node.attr.value

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded or isinstance(node.func, cst.SimpleString):
            return
        leaf = legacy_cuda_tensor(self.ctx, node.func)
        if leaf is None and isinstance(node.func, cst.Name):
            leaf = self.aliases.get((self._scope(), node.func.value)) or self.aliases.get((None, node.func.value))
        if leaf is None and isinstance(node.func, cst.Attribute) and node.func.attr.value in LEGACY_TENSOR_DTYPES:
            leaf = node.func.attr.value if self._own_attribute(node.func.value) in self.cuda_modules else None
        if leaf is None:
            return
        message = self.message.format(leaf)
        dtype_name = f"torch.{LEGACY_TENSOR_DTYPES[leaf]}"
        if not target_has(self.ctx, dtype_name):
            self.report(node, message + no_fix_for_target(self.ctx, dtype_name))
            return
        args = positional(node)
        keywords = [a for a in node.args if a.keyword is not None]
        if keywords or len(args) != len(node.args):
            factory = None
        elif not args:
            factory, data = "tensor", [cst.Arg(cst.List([]))]
        elif len(args) == 1 and isinstance(args[0].value, (cst.List, cst.Tuple)):
            factory, data = "tensor", [cst.Arg(args[0].value)]
        elif all(_is_size(a.value) for a in args):
            factory, data = "empty", [cst.Arg(a.value) for a in args]
        else:
            factory = None
        if factory is None:
            self.report(node, message, display_only(self, "Use `torch.tensor(data, ...)` or `torch.empty(size, ...)` with `dtype=` and `device=`"))
            return
        choice = self.ctx.device_expression()
        function, dtype = cst.parse_expression(f"{self.ctx.torch_reference()}.{factory}"), _dtype(self.ctx, leaf)

        def new_call(_: cst.CSTNode) -> cst.Call:
            return cst.Call(func=function, args=data + [keyword_arg("dtype", dtype), keyword_arg("device", choice.expression())])

        fix = self.make_fix(
            {node: new_call}, imports=self.ctx.torch_imports() + choice.imports(), needs_device_binding=choice.needs_binding
        )
        self.report(node, message, fix)


def _is_size(node: cst.BaseExpression) -> bool:
    """Arguments that can only be a size: ``3``, ``len(x)``, ``x.size(0)``, ``x.shape[1]``."""
    if isinstance(node, cst.Integer):
        return True
    if isinstance(node, cst.Call):
        func = node.func
        return (isinstance(func, cst.Name) and func.value == "len") or (
            isinstance(func, cst.Attribute) and func.attr.value in {"size", "numel", "dim"}
        )
    return (
        isinstance(node, cst.Subscript)
        and isinstance(node.value, cst.Attribute)
        and node.value.attr.value == "shape"
    )


_HALF_CHECK = "import torch\n\ndef attend(q):\n    return q.float() if isinstance(q, torch.cuda.HalfTensor) else q\n"


class CudaTensorTypeCast(Rule):
    code = "TDV202"
    name = "cuda-tensor-type-cast"
    hazard_without_cuda = True
    message = "`{}` pins the tensor to CUDA: the cast raises without CUDA"
    message_check = "`{}` is true only for CUDA tensors: on MPS or XPU the code takes the branch meant for the CPU"
    message_passed = "`{}` holds a CUDA tensor type, and `{}` is given it: what it casts or builds with it raises without CUDA"
    fix_title = "Cast with `.to(device=..., dtype=...)`"
    fix_safety = Applicability.UNSAFE
    what = (
        "Checks for `.type(torch.cuda.FloatTensor)`, `.type(\"torch.cuda.FloatTensor\")` and "
        "`isinstance(x, torch.cuda.FloatTensor)`, and a name bound to a CUDA tensor type that a call is given "
        "(`dtype = torch.cuda.FloatTensor`, then `normalize(batch, dtype)`)."
    )
    why = (
        "`.type(torch.cuda.XTensor)` converts to a CUDA tensor and raises on a CPU-only machine; "
        "`isinstance(x, torch.cuda.XTensor)` silently takes the CPU branch everywhere but CUDA."
    )
    fix_safety_note = (
        "The cast becomes `.to(device=device, dtype=...)` with the device chosen at run time. "
        "`isinstance` checks get a suggestion only: whether the code meant the dtype or the device "
        "cannot be known."
    )
    triggers = Unguarded(legacy_sites)
    valid = (
        Valid("import torch\ny = x.type(torch.FloatTensor)\n"),
        Valid("import torch\nok = isinstance(x, torch.Tensor)\n"),
        Valid("import torch\nif torch.cuda.is_available():\n    y = x.type(torch.cuda.FloatTensor)\n"),
        Valid('import torch\nname = x.type()\nprint(name == "torch.cuda.FloatTensor")\n'),
        Valid("import torch\ny = x.type(dtype)\n"),
        # rampasek/GraphGPS@2801570 graphgps/layer/performer_layer.py:212: a project that never
        # picks MPS has its tensors on CUDA or the CPU, where the check is right
        Valid(_HALF_CHECK, files={"run.py": "import torch\n"}),
        # ozan-oktay/Attention-Gated-Networks@eee4881 models/networks_other.py:524, in a file that also calls .cuda()
        Valid(_HALF_CHECK + "\nnet = build().cuda()\n", files={"run.py": "import torch\n"}),
        # a name bound to a CUDA type in one branch only
        Valid("import torch\n\ndef run(imgs, cuda):\n    tensor_type = torch.FloatTensor\n    if cuda:\n        tensor_type = torch.cuda.FloatTensor\n    return imgs.type(tensor_type)\n"),
        Valid("import torch\ndtype = torch.cuda.FloatTensor if torch.cuda.is_available() else torch.FloatTensor\nbatch = normalize(seq, dtype)\n"),
        Valid("import torch\ndtype = torch.cuda.FloatTensor\nok = isinstance(x, dtype)\n"),
        Valid("import torch\ndtype = torch.cuda.FloatTensor\n\n\ndef load(seq, dtype=None):\n    return normalize(seq, dtype)\n"),
    )
    invalid = (
        Invalid(
            "import torch\n\ndef cast(x, device):\n    return x.type(torch.cuda.FloatTensor)\n",
            fixed="import torch\n\ndef cast(x, device):\n    return x.to(device=device, dtype=torch.float32)\n",
        ),
        Invalid(
            'import torch\ny = x.type("torch.cuda.LongTensor")\n',
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "y = x.to(device=device, dtype=torch.int64)\n"
            ),
        ),
        Invalid(
            "import torch\nfrom torch.cuda import DoubleTensor\ndevice = 'cpu'\ny = x.type(dtype=DoubleTensor)\n",
            fixed="import torch\nfrom torch.cuda import DoubleTensor\ndevice = 'cpu'\ny = x.to(device=device, dtype=torch.float64)\n",
        ),
        Invalid(
            "import torch\nif isinstance(x, torch.cuda.FloatTensor):\n    pass\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid(_HALF_CHECK, fixed=None, applicability=Applicability.DISPLAY_ONLY, files={"run.py": "import torch\nfrom example import attend\ndevice = 'mps'\nattend(torch.zeros(2, device=device))\n"}),
        # the type chosen first, then cast to (Megvii-BaseDetection/YOLOX@6ddff48 yolox/evaluators/coco_evaluator.py:135,162)
        Invalid(
            "import torch\n\ndef run(imgs, half):\n    tensor_type = torch.cuda.HalfTensor if half else torch.cuda.FloatTensor\n"
            "    return imgs.type(tensor_type)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # edenton/svg@3f19f0b generate_svg_lp.py:39, then utils.py:72 ``x.type(dtype)`` for every batch
        Invalid(
            "import torch\nimport utils\n\ndtype = torch.cuda.FloatTensor\n\n\ndef batches(loader):\n"
            "    for sequence in loader:\n        yield utils.normalize_data(sequence, dtype)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        Invalid("import torch\ndtype = torch.cuda.FloatTensor\ny = x.type(dtype)\n", fixed=None, applicability=Applicability.DISPLAY_ONLY),
        Invalid(
            "import torch\ndevice = 'cpu'\ny = x.type(torch.cuda.HalfTensor, non_blocking=True)\n",
            fixed="import torch\ndevice = 'cpu'\ny = x.to(device=device, dtype=torch.float16, non_blocking=True)\n",
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        self._meets_mps: Optional[bool] = None

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded or not node.args:
            return
        if method_name(node) == "type":
            self._check_cast(node)
        elif isinstance(node.func, cst.Name) and node.func.value == "isinstance" and len(node.args) == 2:
            leaf = legacy_cuda_tensor(self.ctx, node.args[1].value)
            if leaf is not None and self._may_meet_mps():
                dtype = LEGACY_TENSOR_DTYPES[leaf]
                suggestion = f"Check `x.dtype == torch.{dtype}` and, if the device matters, `x.device.type`"
                self.report(node, self.message_check.format(source_of(node)), display_only(self, suggestion))

    def _may_meet_mps(self) -> bool:
        """The check is wrong only on MPS or XPU: a project that never picks either takes the
        CPU branch exactly where the tensor is on the CPU. Not counted: MPS that the fixes of
        the file's ``.cuda()`` bring in, whose CPU branch (typically the one without
        ``data_parallel``) runs there too."""
        if self._meets_mps is None:
            self._meets_mps = may_meet_mps(self.ctx, through_fixes=False)
        return self._meets_mps

    def visit_Assign(self, node: cst.Assign) -> None:
        """``dtype = torch.cuda.FloatTensor`` that a call other than a check is given, in the
        scope of the binding (a module-level one: where no function binds the name itself)."""
        if self.ctx.guarded or len(node.targets) != 1 or not isinstance(node.targets[0].target, cst.Name):
            return
        name = node.targets[0].target.value
        function = self.ctx.enclosing_function()
        scope = function if function is not None else self.ctx.module
        if not self._bound_to_cuda_types(name, scope):
            return
        given = next(iter(self._calls_given(name, scope)), None)
        if given is not None:
            suggestion = "Bind a dtype in place of the tensor type and cast with `.to(device, dtype)`"
            self.report(node, self.message_passed.format(name, source_of(given.func)), display_only(self, suggestion))

    def _calls_given(self, name: str, scope: cst.CSTNode) -> List[cst.Call]:
        """The calls in ``scope`` that are given the name as an argument, but for checks
        (``isinstance``, ``issubclass``) and casts (``.type``, reported themselves); not in a
        nested function that binds the name itself."""
        from ..syntax.cst_walk import nodes_of  # read-only: LibCST's own walk would rebuild the tree

        shadowed = {
            id(call) for inner in nodes_of(scope, cst.FunctionDef)
            if inner is not scope and self._binds(inner, name)
            for call in nodes_of(inner, cst.Call)
        }
        return [
            call for call in nodes_of(scope, cst.Call)
            if id(call) not in shadowed and method_or_name(call.func) not in ("isinstance", "issubclass", "type")
            and any(isinstance(arg.value, cst.Name) and arg.value.value == name for arg in call.args)
        ]

    def _binds(self, function: cst.FunctionDef, name: str) -> bool:
        """Whether the function has ``name`` as a parameter or assigns it."""
        return name in parameter_names(function) or name in self.ctx.assigned_values(function)

    def _names_cuda_types(self, value: cst.BaseExpression) -> bool:
        """A name the cast reads from its function, or, where the function binds no such name,
        from the module, that holds a CUDA tensor type (``_bound_to_cuda_types``)."""
        if not isinstance(value, cst.Name):
            return False
        function = self.ctx.enclosing_function()
        local = function is not None and self._binds(function, value.value)
        return self._bound_to_cuda_types(value.value, function if local else self.ctx.module)

    def _bound_to_cuda_types(self, name: str, scope: cst.CSTNode) -> bool:
        """``tensor_type = torch.cuda.HalfTensor if half else torch.cuda.FloatTensor`` in
        ``scope``, and nothing else bound to the name (Megvii-BaseDetection/YOLOX@6ddff48
        yolox/evaluators/coco_evaluator.py:135,162)."""
        bound = self.ctx.assigned_values(scope).get(name)
        return bool(bound) and all(
            binding is not None and all(
                legacy_cuda_tensor(self.ctx, arm) is not None
                for arm in ((binding.body, binding.orelse) if isinstance(binding, cst.IfExp) else (binding,))
            )
            for binding in bound
        )

    def _check_cast(self, node: cst.Call) -> None:
        target = node.args[0]
        if target.keyword is not None and target.keyword.value != "dtype":
            return
        leaf = legacy_cuda_tensor(self.ctx, target.value)
        if leaf is None:
            if self._names_cuda_types(target.value):
                suggestion = "Choose a dtype in place of the tensor type and cast with `.to(device, dtype)`"
                self.report(node, self.message.format(source_of(node)), display_only(self, suggestion))
            return
        dtype_name = f"torch.{LEGACY_TENSOR_DTYPES[leaf]}"
        if not target_has(self.ctx, dtype_name):
            self.report(node, self.message.format(source_of(node)) + no_fix_for_target(self.ctx, dtype_name))
            return
        choice = self.ctx.device_expression()
        dtype = _dtype(self.ctx, leaf)

        def replace(updated: cst.Call) -> cst.Call:
            rest = [a.with_changes(comma=cst.MaybeSentinel.DEFAULT) for a in updated.args[1:]]
            return updated.with_changes(
                func=updated.func.with_changes(attr=cst.Name("to")),
                args=[
                    keyword_arg("device", choice.expression()),
                    keyword_arg("dtype", dtype),
                ]
                + rest,
            )

        fix = self.make_fix(
            {node: replace}, imports=self.ctx.torch_imports() + choice.imports(), needs_device_binding=choice.needs_binding
        )
        self.report(node, self.message.format(source_of(node)), fix)


RULES = (LegacyCudaTensorConstructor, CudaTensorTypeCast)
