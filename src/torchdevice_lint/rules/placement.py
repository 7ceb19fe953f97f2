"""Placement: code that pins tensors, modules or the default device to CUDA."""

from __future__ import annotations

from typing import Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Placed, Unguarded
from ..inference.vocabulary import is_parameterless_module
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name, source_of, string_value
from .common import (
    availability_check,
    built_string,
    display_only,
    fresh_args,
    is_cuda_string,
    is_keyword,
    may_name_cuda,
    method_name,
    names_cuda_device,
    positional,
)

_KEPT_CUDA_KEYWORDS = {"non_blocking", "memory_format"}
_BINDING = 'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'


class CudaMethodCall(Rule):
    code = "TDV101"
    name = "cuda-method-call"
    message = "`.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)"
    fix_title = "Replace `.cuda()` with `.to(device)`"
    fix_safety = Applicability.UNSAFE
    what = "Checks for `.cuda()` calls on tensors and modules, with any arguments."
    why = (
        "`.cuda()` raises `AssertionError: Torch not compiled with CUDA enabled` on a CPU-only "
        "machine and ignores other accelerators. Moving to a device chosen once at start-up "
        "keeps the code runnable everywhere."
    )
    fix_safety_note = (
        "The fix moves to the `device` in scope (or the input's device inside `forward`, or a "
        "module-level `device` it defines), which may differ from the CUDA device `.cuda(N)` named."
    )
    triggers = Unguarded(lambda facts: facts.calls_named.get("cuda", ()))
    valid = (
        Valid("import torch\nx = torch.ones(2)\nif torch.cuda.is_available():\n    x = x.cuda()\n"),
        Valid("import torch\nx = torch.ones(2)\nx = x.cuda() if torch.cuda.is_available() else x\n"),
        Valid("def main(args, model):\n    if args.cuda:\n        model.cuda()\n"),
        Valid("print(args.cuda)\nuse = args.cuda and True\n"),
        Valid("import torch\n\nclass Wrapper:\n    def cuda(self):\n        self.model.cuda()\n        return super().cuda()\n"),
        Valid("import torch\n\ndef f(x):\n    if not torch.cuda.is_available():\n        return x\n    return x.cuda()\n"),
        Valid("import torch\nx = torch.ones(2)\nx = x.cuda()  # noqa: TDV101\n"),
        Valid("import torch.nn as nn\ncriterion = nn.CrossEntropyLoss().cuda(args.gpu)\n"),
        # a module's own function named `cuda`, the module name bound only in another function
        Valid("import kernels\n\ndef build():\n    kernels = load()\n\ndef run(x):\n    return kernels.cuda(x)\n"),
        # an opt-in flag (off by default) and a flag derived from availability are guards
        Valid(
            'import argparse\np = argparse.ArgumentParser()\np.add_argument("--cuda", action="store_true")\n'
            "args = p.parse_args()\nif args.cuda:\n    model.cuda()\n"
        ),
        Valid(
            'import torch\np.add_argument("--no-cuda", action="store_true")\nargs = p.parse_args()\n'
            "args.cuda = not args.no_cuda and torch.cuda.is_available()\nif args.cuda:\n    model.cuda()\n"
        ),
        # only runs in a multi-process run, whose backend (TDV303) is the hazard
        Valid("import torch\n\ndef all_reduce_mean(x):\n    if get_world_size() > 1:\n        x = torch.tensor(x).cuda()\n    return x\n"),
        # only a tensor already on CUDA takes this branch (TDV202 reports the check itself)
        Valid(
            "import torch\n\ndef pad(out, zeros):\n    if isinstance(out.data, torch.cuda.FloatTensor):\n"
            "        zeros = zeros.cuda()\n    return torch.cat([out.data, zeros], dim=1)\n"
        ),
        # a function that calls a collective (it raises without a process group) is distributed
        Valid(
            "import torch\nimport torch.distributed as dist\n\ndef sync_loss(loss):\n"
            "    total = loss.detach().cuda()\n    dist.all_reduce(total)\n    return total\n"
        ),
        # the project's options: `--cuda` (an integer, 0 by default) parsed in another module
        Valid(
            "def build(args, model):\n    if args.cuda > 0:\n        model.cuda()\n",
            files={"opts.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--cuda', type=int, default=0)\n"},
        ),
    )
    invalid = (
        Invalid(
            "import torch\nx = torch.ones(2).cuda()\n",
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "x = torch.ones(2).to(device)\n"
            ),
        ),
        Invalid(
            "import torch\n\ndef run(model, batch, device):\n    model.cuda()\n    return model(batch.cuda(non_blocking=True))\n",
            fixed="import torch\n\ndef run(model, batch, device):\n    model.to(device)\n    return model(batch.to(device, non_blocking=True))\n",
            count=2,
        ),
        Invalid(
            "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        mask = torch.ones(3).cuda(0)\n        return x * mask\n",
            fixed="import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        mask = torch.ones(3).to(x.device)\n        return x * mask\n",
        ),
        Invalid(
            "def load(model):\n    return model.cuda()\n",
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n\n'
                "def load(model):\n    return model.to(device)\n"
            ),
        ),
        Invalid(
            "import torch as th\ndevice = th.device('cpu')\nmodel = th.nn.Linear(2, 2).cuda(device=0)\n",
            fixed="import torch as th\ndevice = th.device('cpu')\nmodel = th.nn.Linear(2, 2).to(device)\n",
        ),
        Invalid(
            "import torch\nx = torch.ones(2).cuda(**options)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # a `device` bound only later (here in the __main__ block) is not reused: NameError
        Invalid(
            "import torch\n\n\ndef run(x):\n    return x.cuda()\n\n\n"
            'if __name__ == "__main__":\n    device = torch.device("cpu")\n    run(torch.ones(2))\n',
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n\n'
                "def run(x):\n    return x.to(device)\n\n\n"
                'if __name__ == "__main__":\n    device = torch.device("cpu")\n    run(torch.ones(2))\n'
            ),
        ),
        # a local `device` assigned below hides any module-level one: the expression is written
        Invalid(
            "import torch\n\n\ndef run(x):\n    x = x.cuda()\n    device = x.device\n    return x, device\n",
            fixed=(
                "import torch\n\n\ndef run(x):\n"
                '    x = x.to(torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"))\n'
                "    device = x.device\n    return x, device\n"
            ),
        ),
        # a flag that picks the GPU unless told otherwise is not an availability check
        Invalid(
            "import torch\n\ndef totensor(data, device, cuda=True):\n    if cuda:\n        data = data.cuda()\n    return data\n",
            fixed="import torch\n\ndef totensor(data, device, cuda=True):\n    if cuda:\n        data = data.to(device)\n    return data\n",
        ),
        Invalid(
            'import torch\np.add_argument("--use_cuda", default=True, type=bool)\nargs = p.parse_args()\n'
            "if args.use_cuda:\n    model.cuda()\n",
            fixed=(
                'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                'p.add_argument("--use_cuda", default=True, type=bool)\nargs = p.parse_args()\n'
                "if args.use_cuda:\n    model.to(device)\n"
            ),
        ),
        # a look-alike of a collective (a strategy's own barrier) is no process group
        Invalid(
            "import torch\n\ndef fit(strategy, model):\n    strategy.barrier()\n    model.cuda()\n",
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n'
                "def fit(strategy, model):\n    strategy.barrier()\n    model.to(device)\n"
            ),
        ),
        # an imported module's name rebound to a model (awd-lstm's `model = model.RNNModel(...)`)
        Invalid(
            "import torch\nimport model\n\nmodel = model.RNNModel(3)\nmodel.cuda()\n",
            fixed=(
                "import torch\nimport model\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "\nmodel = model.RNNModel(3)\nmodel.to(device)\n"
            ),
        ),
        # a helper named like a distributed setup may serve single-GPU runs: not a guard
        Invalid(
            "import torch\n\ndef train(args, model):\n    init_distributed_mode(args)\n    model.cuda()\n",
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n'
                "def train(args, model):\n    init_distributed_mode(args)\n    model.to(device)\n"
            ),
        ),
        # code before the imports: torch is not imported a second time
        Invalid(
            '__author__ = "someone"\nimport torch\n\nx = torch.ones(2).cuda()\n',
            fixed=(
                '__author__ = "someone"\nimport torch\n\n'
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n'
                "x = torch.ones(2).to(device)\n"
            ),
        ),
        # `--gpu_mode` defaults to True in main.py: the branch runs on a CPU-only machine
        Invalid(
            "import torch\n\n\nclass GAN:\n    def __init__(self, args, G):\n        self.gpu_mode = args.gpu_mode\n"
            "        self.G = G\n        if self.gpu_mode:\n            self.G.cuda()\n",
            fixed=(
                "import torch\n\n" + _BINDING + "\n\n\nclass GAN:\n    def __init__(self, args, G):\n"
                "        self.gpu_mode = args.gpu_mode\n        self.G = G\n        if self.gpu_mode:\n            self.G.to(device)\n"
            ),
            files={"main.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_mode', type=bool, default=True)\n"},
        ),
        # `use_gpu()` only tests `--gpu_ids`, which defaults to "0" in options.py
        Invalid(
            "import torch\n\n\nclass Pix2Pix:\n    def use_gpu(self):\n        return len(self.opt.gpu_ids) > 0\n\n"
            "    def prepare(self, x):\n        if self.use_gpu():\n            x = x.cuda()\n        return x\n",
            fixed=(
                "import torch\n\n" + _BINDING + "\n\n\nclass Pix2Pix:\n    def use_gpu(self):\n        return len(self.opt.gpu_ids) > 0\n\n"
                "    def prepare(self, x):\n        if self.use_gpu():\n            x = x.to(device)\n        return x\n"
            ),
            files={"options.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_ids', type=str, default='0')\n"},
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if method_name(node) == "cuda" and not self.ctx.guarded:
            report_device_method(self, node, self.message)


def report_device_method(rule: Rule, node: cst.Call, message: str) -> None:
    """``x.cuda()``, ``x.xpu()``...: replaced by ``x.to(device)``, keeping ``non_blocking``."""
    receiver = node.func.value
    if rule.ctx.qualname(receiver) is not None and not (
        isinstance(receiver, cst.Name) and rule.ctx.rebinds_import(receiver.value)
    ):
        return  # a module or class attribute (``numba.cuda(...)``), not a tensor method
    if isinstance(receiver, cst.Call) and _parameterless(rule.ctx.qualname(receiver.func), receiver):
        return  # ``nn.CrossEntropyLoss().cuda()`` has nothing to move: it never raises
    method = node.func.attr.value
    if any(arg.star for arg in node.args):
        rule.report(node, message, display_only(rule, f"Replace `.{method}(...)` with `.to(device, ...)`"))
        return
    avoid = receiver.value if isinstance(receiver, cst.Name) else None
    choice = rule.ctx.device_expression(avoid=avoid)
    device = choice.expression()

    def replace(updated: cst.Call) -> cst.Call:
        kept = [a for a in updated.args if a.keyword is not None and a.keyword.value in _KEPT_CUDA_KEYWORDS]
        return updated.with_changes(
            func=updated.func.with_changes(attr=cst.Name("to")),
            args=[cst.Arg(device)] + fresh_args(kept),
        )

    rule.report(node, message, rule.make_fix({node: replace}, needs_device_binding=choice.needs_binding))


def _parameterless(name: Optional[str], call: cst.Call) -> bool:
    return name is not None and name.startswith("torch.nn.") and is_parameterless_module(
        name.rsplit(".", 1)[-1], [arg.keyword.value if arg.keyword is not None else None for arg in call.args]
    )


def _names_a_device(target: cst.BaseExpression) -> bool:
    name = last_name(target)
    return name is not None and "device" in name.lower()


class HardcodedCudaDevice(Rule):
    code = "TDV102"
    name = "hardcoded-cuda-device"
    message = "hard-coded CUDA device `{}`: it raises on a machine without CUDA (CPU-only, a Mac)"
    fix_title = "Use a device chosen at run time"
    fix_safety = Applicability.UNSAFE
    what = (
        'Checks for `"cuda"`/`"cuda:N"` literals (and f-strings such as `f"cuda:{rank}"`) used as '
        "a device: in `.to(...)`, a `device=` or `map_location=` argument, `torch.device(...)`, "
        "or a value assigned to a device variable, parameter default or `--device` option."
    )
    why = (
        '`x.to("cuda")` and `torch.zeros(2, device="cuda")` raise on a CPU-only machine. One arm '
        "of an availability check (`\"cuda\" if torch.cuda.is_available() else \"cpu\"`) is fine."
    )
    fix_safety_note = (
        'A literal used as a device becomes the `device` in scope (or a module-level one the fix '
        'defines); a literal that defines a device becomes `"cuda" if torch.cuda.is_available() '
        'else "mps" if torch.backends.mps.is_available() else "cpu"` (a Mac gets its GPU, not '
        'the CPU). Either may pick another GPU than `"cuda:N"` named.'
    )
    triggers = Unguarded(Placed(may_name_cuda, as_device=True).literals)
    valid = (
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'),
        # a comparison with a CUDA device only asks where a tensor is
        Valid('import torch\nif attr.device != torch.device("cuda"):\n    attr = attr.to(torch.float32)\n'),
        Valid('print("using cuda")\nif args.device == "cuda":\n    pass\n'),
        Valid('import torch\n\ndef f(x):\n    if x.device.type == "cuda":\n        return x.to("cuda:0")\n    return x\n'),
        Valid('import torch\ndevice = torch.device("cpu" if not torch.cuda.is_available() else "cuda")\n'),
        Valid('import torch\nwith torch.autocast("cuda"):\n    pass\nbackend = "cuda"\n'),
        Valid('import torch\nx = torch.ones(2)\nif x.is_cuda:\n    y = torch.zeros(2, device="cuda")\n'),
        Valid('import torch\ndev = "cuda" if torch.cuda.is_available() else "cpu"\nx = torch.ones(1).to(dev)\n'),
        # built strings that are no device: a message, a name
        Valid('import torch\nprint("cuda: {} MB".format(mb))\nlog(tag="cuda:" + name)\nx = torch.ones(1).to("cuda_{}".format(i) and dev)\n'),
        Valid(
            'import torch\nimport torch.distributed as dist\n\ndef all_gather(data):\n'
            '    if dist.get_world_size() == 1:\n        return [data]\n    return torch.ByteTensor(data).to("cuda")\n'
        ),
    )
    invalid = (
        Invalid(
            'import torch\nx = torch.ones(2).to("cuda")\n',
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "x = torch.ones(2).to(device)\n"
            ),
        ),
        Invalid(
            'import torch\ndevice = torch.device("cuda:0")\n',
            fixed='import torch\ndevice = torch.device("cuda:0" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n',
        ),
        Invalid(
            'import torch\n\ndef make(n, device):\n    return torch.zeros(n, device="cuda")\n',
            fixed='import torch\n\ndef make(n, device):\n    return torch.zeros(n, device=device)\n',
        ),
        Invalid(
            'import torch\n\ndef make(n, device="cuda"):\n    return torch.zeros(n, device=device)\n',
            fixed='import torch\n\ndef make(n, device="cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"):\n    return torch.zeros(n, device=device)\n',
        ),
        Invalid(
            'import torch\ndevice = "cpu"\nx = torch.ones(1).to(torch.device(f"cuda:{rank}"))\n',
            fixed='import torch\ndevice = "cpu"\nx = torch.ones(1).to(device)\n',
        ),
        Invalid(
            "import torch\n\ndef noise(shape, device='cuda'):\n    return torch.randn(shape, device=device)\n",
            fixed="import torch\n\ndef noise(shape, device='cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'):\n    return torch.randn(shape, device=device)\n",
        ),
        Invalid(
            'import torch\n\ndef quantize(w, device=None):\n    device = device or torch.device("cuda")\n    return w.to(device)\n',
            fixed='import torch\n\ndef quantize(w, device=None):\n    device = device or torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n    return w.to(device)\n',
        ),
        Invalid(
            'import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument("--device", default="cuda")\n',
            fixed='import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument("--device", default="cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n',
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n',
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                'state = torch.load("ckpt.pt", map_location=device)\n'
            ),
        ),
        # a device string built at run time (hifi-gan, swav)
        Invalid(
            "import torch\n\ndef train(rank):\n    device = torch.device('cuda:{:d}'.format(rank))\n",
            fixed=(
                "import torch\n\ndef train(rank):\n    device = torch.device('cuda:{:d}'.format(rank) if torch.cuda.is_available() "
                "else 'mps' if torch.backends.mps.is_available() else 'cpu')\n"
            ),
        ),
        Invalid(
            'import torch\n\ndef restore(path, gpu, device):\n    return torch.load(path, map_location="cuda:" + str(gpu))\n',
            fixed='import torch\n\ndef restore(path, gpu, device):\n    return torch.load(path, map_location=device)\n',
        ),
        # `--no_cuda` is off by default: the else arm, CUDA, is what runs (3D-ResNets)
        Invalid(
            'import torch\np.add_argument("--no_cuda", action="store_true")\nopt = p.parse_args()\n'
            'opt.device = torch.device("cpu" if opt.no_cuda else "cuda")\n',
            fixed=(
                'import torch\np.add_argument("--no_cuda", action="store_true")\nopt = p.parse_args()\n'
                'opt.device = torch.device("cpu" if opt.no_cuda else ("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"))\n'
            ),
        ),
        # `opt.cuda = not opt.no_cuda`: a user flag that picks CUDA by default, not a check
        Invalid(
            'import torch\np.add_argument("-no_cuda", "--no_cuda", action="store_true")\nopt = p.parse_args()\n'
            "opt.cuda = not opt.no_cuda\ndevice = torch.device('cuda' if opt.cuda else 'cpu')\n",
            fixed=(
                'import torch\np.add_argument("-no_cuda", "--no_cuda", action="store_true")\nopt = p.parse_args()\n'
                "opt.cuda = not opt.no_cuda\ndevice = torch.device(('cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu') if opt.cuda else 'cpu')\n"
            ),
        ),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._check(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._check(node)

    def _check(self, literal: cst.BaseExpression) -> None:
        if self.ctx.guarded:
            return
        ctx = self.ctx
        depth, holder = 1, literal
        if not self.names_device(literal):
            template = built_string(ctx, literal, self.names_template)
            if template is None:
                return
            # `"cuda:{}".format(rank)`, `"cuda:" + str(rank)`: the built string is the literal
            literal, depth = template
            holder = literal
        # `"cuda" if opt.cuda else "cpu"`, `"cpu" if opt.no_cuda else "cuda"` (a condition that is
        # no guard: a guard's arm is not visited as unguarded) is used like the literal
        while isinstance(ctx.parent(depth), cst.IfExp) and holder in (ctx.parent(depth).body, ctx.parent(depth).orelse):
            holder, depth = ctx.parent(depth), depth + 1
        parent = ctx.parent(depth)
        if isinstance(parent, cst.Arg) and isinstance(ctx.parent(depth + 1), cst.Call):
            call = ctx.parent(depth + 1)
            usage = self._argument_usage(call, parent)
            if usage == "device-call" and isinstance(ctx.parent(depth + 2), (cst.Comparison, cst.ComparisonTarget)):
                return  # `x.device != torch.device("cuda")` only asks; constructing it is silent
            if usage == "device-call":
                self._report_device_call(literal, call)
            elif usage == "use":
                self._report(literal, literal, inline=False)
            elif usage == "define":
                self._report(literal, literal, inline=True)
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is holder:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if any(_names_a_device(t) for t in targets):
                self._report(literal, literal, inline=True)
        elif isinstance(parent, cst.Param) and parent.default is holder and "device" in parent.name.value.lower():
            self._report(literal, literal, inline=True)

    def names_device(self, literal: cst.BaseExpression) -> bool:
        return is_cuda_string(literal)

    def names_template(self, head: str) -> bool:
        """Whether a string built from a template that starts with ``head`` names a device."""
        return names_cuda_device(head, True)

    def message_for(self, literal: cst.BaseExpression, text: str) -> str:
        return self.message.format(text)

    def availability_for(self, literal: cst.BaseExpression) -> Optional[str]:
        """The check a literal that defines a device is guarded with; None: no fix."""
        return availability_check(self.ctx)

    def fallback_for(self, quote: str) -> str:
        """Where a device defined by the literal goes when its backend is missing: MPS (from
        torch 1.12), then the CPU."""
        mps = availability_check(self.ctx, "mps")
        return f"{quote}mps{quote} if {mps} else {quote}cpu{quote}" if mps else f"{quote}cpu{quote}"

    def _argument_usage(self, call: cst.Call, arg: cst.Arg) -> Optional[str]:
        name = self.ctx.qualname(call.func)
        if name is not None and (name.startswith("torch.cuda.") or name == "torch.set_default_device"):
            return None  # reported by the more specific TDV301 / TDV103
        if name == "torch.device":
            return "device-call" if arg is (positional(call) or [None])[0] or is_keyword(arg, "type") else None
        method = method_name(call)
        if method == "cuda":
            return None  # TDV101
        if is_keyword(arg, "device") or is_keyword(arg, "map_location"):
            return "use"
        if method == "to" and positional(call) and arg is positional(call)[0]:
            return "use"
        if name in {"torch.load", "torch.jit.load"} and len(positional(call)) > 1 and arg is positional(call)[1]:
            return "use"
        if is_keyword(arg, "default") and method == "add_argument":
            flags = [string_value(a.value) for a in positional(call)]
            if any(flag and "device" in flag for flag in flags):
                return "define"
        return None

    def _report_device_call(self, literal: cst.BaseExpression, call: cst.Call) -> None:
        """``torch.device("cuda")``: defining a device keeps the call and guards the literal;
        using one in place replaces the whole call by the device chosen at run time."""
        if self._defines_device():
            self._report(literal, literal, inline=True)
        else:
            self._report(literal, call, inline=False)

    def _defines_device(self) -> bool:
        """Whether the statement being visited binds a device (``device = device or
        torch.device("cuda")``, a parameter default): writing the run-time ``device`` there
        would refer to the name being defined."""
        for depth in range(1, len(self.ctx.stack)):
            ancestor = self.ctx.parent(depth)
            if isinstance(ancestor, cst.Assign):
                return any(_names_a_device(t.target) for t in ancestor.targets)
            if isinstance(ancestor, cst.AnnAssign):
                return _names_a_device(ancestor.target)
            if isinstance(ancestor, cst.Param):
                return True
            if isinstance(ancestor, (cst.BaseStatement, cst.BaseSmallStatement, cst.Lambda)):
                return False
        return False

    def _report(self, literal: cst.BaseExpression, replaced: cst.CSTNode, inline: bool) -> None:
        text = source_of(literal)
        message = self.message_for(literal, text)
        check = self.availability_for(literal)
        if inline and check is None:
            fix = display_only(self, self.fix_title)
        elif inline:
            quote = "'" if text.lstrip("rRbBuUfF").startswith("'") else '"'
            guarded = cst.parse_expression(f"{text} if {check} else {self.fallback_for(quote)}")
            if isinstance(self.ctx.parent(), cst.IfExp):  # an arm of another conditional
                guarded = guarded.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
            fix = self.make_fix({replaced: lambda _: guarded}, imports=self.ctx.torch_imports())
        else:
            choice = self.ctx.device_expression()
            device = choice.expression()
            fix = self.make_fix({replaced: lambda _: device}, needs_device_binding=choice.needs_binding)
        self.report(literal, message, fix)


RULES = (CudaMethodCall, HardcodedCudaDevice)
