"""Serialization: loading checkpoints onto the device they were saved from."""

from __future__ import annotations

import re
from typing import FrozenSet, List, Optional, Tuple

from ..analysis.fixes import Applicability
from ..analysis.lazycst import cst
from ..analysis.lazycst import matchers as m
from ..analysis.prefilter import Triggers
from ..analysis.rule import Invalid, Rule, Valid
from ..analysis.syntax import source_of
from .common import keyword, keyword_arg, positional

LOADERS = {"torch.load", "torch.jit.load"}
SAVERS = {"torch.save", "torch.jit.save"}
#: A string literal that names a file: ``"model.ckpt"``, ``'trainfeat.pth'``.
_FILE_NAME = re.compile(r"^[\w.\-/]*\.\w+$")


def path_keys(path: cst.BaseExpression) -> FrozenSet[str]:
    """What identifies the file a path expression names: its code without spaces, and the
    file names written in it (``os.path.join(args.dump, "feat.pth")`` -> ``feat.pth``)."""
    keys = {re.sub(r"\s+", "", source_of(path))}
    for literal in m.findall(path, m.SimpleString()):
        value = literal.evaluated_value if isinstance(literal, cst.SimpleString) else None
        if isinstance(value, str) and _FILE_NAME.match(value):
            keys.add(value.rsplit("/", 1)[-1])
    return frozenset(keys)


class LoadWithoutMapLocation(Rule):
    code = "TDV501"
    name = "load-without-map-location"
    message = "`{}` without `map_location` restores tensors to the device they were saved on, which raises when a CUDA checkpoint is loaded without CUDA"
    fix_title = "Pass `map_location=`"
    fix_safety = Applicability.SAFE
    what = "Checks for `torch.load(...)` and `torch.jit.load(...)` calls without `map_location`."
    why = (
        "A checkpoint saved from GPU tensors remembers `cuda:N`; loading it on a CPU-only machine "
        "raises `RuntimeError: Attempting to deserialize object on a CUDA device but "
        "torch.cuda.is_available() is False`."
    )
    fix_safety_note = (
        'The fix passes the `device` in scope, or `"cpu"` when there is none: a device, never a '
        'dict such as `{"cuda:0": "cpu"}` that misses checkpoints tagged `cuda:1`. Loading to the '
        "CPU first is what `load_state_dict` needs on every device."
    )
    triggers = Triggers(names=LOADERS)
    valid = (
        Valid('import torch\nstate = torch.load("model.pt", map_location="cpu")\n'),
        Valid('import torch\nstate = torch.load("model.pt", device)\n'),
        Valid("import torch\nstate = torch.load(path, **load_kwargs)\n"),
        Valid("import pickle\nstate = pickle.load(handle)\nimport json\ncfg = json.load(handle)\n"),
        Valid('import torch\nif torch.cuda.is_available():\n    state = torch.load("gpu.pt")\n'),
        # the program reads back a file it writes itself (a cache, features, the best model)
        Valid('import torch\ntorch.save(model.state_dict(), "params.ckpt")\nmodel.load_state_dict(torch.load("params.ckpt"))\n'),
        Valid(
            "import os\nimport torch\n\ndef dump(feats, args):\n"
            '    torch.save(feats.cpu(), os.path.join(args.dump_features, "feat.pth"))\n\n'
            "def restore(args):\n"
            '    return torch.load(os.path.join(args.load_features, "feat.pth"))\n'
        ),
        Valid(
            "import torch\n\nfor epoch in range(3):\n    with open(args.save, 'wb') as f:\n        torch.save(model, f)\n"
            "with open(args.save, 'rb') as f:\n    model = torch.load(f)\n"
        ),
    )
    invalid = (
        Invalid(
            'import torch\nstate = torch.load("model.pt")\n',
            fixed='import torch\nstate = torch.load("model.pt", map_location="cpu")\n',
        ),
        Invalid(
            "import torch\n\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True))\n",
            fixed="import torch\n\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True, map_location=device))\n",
        ),
        Invalid(
            'import torch as th\nscripted = th.jit.load("model.ts")\n',
            fixed='import torch as th\nscripted = th.jit.load("model.ts", map_location="cpu")\n',
        ),
        Invalid(
            "from torch import load\nckpt = load(\n    path,\n)\n",
            fixed='from torch import load\nckpt = load(\n    path,\n    map_location="cpu",\n)\n',
        ),
        # a checkpoint saved by another function (a GPU run) and loaded to resume
        Invalid(
            "import torch\n\ndef test(net):\n    torch.save(net.state_dict(), './ckpt.pth')\n\n"
            "def resume(net):\n    net.load_state_dict(torch.load('./ckpt.pth'))\n",
            fixed="import torch\n\ndef test(net):\n    torch.save(net.state_dict(), './ckpt.pth')\n\n"
            "def resume(net):\n    net.load_state_dict(torch.load('./ckpt.pth', map_location=\"cpu\"))\n",
        ),
        # a file saved by another name is not one the program wrote
        Invalid(
            'import torch\ntorch.save(model, "last.pt")\nmodel = torch.load("best.pt")\n',
            fixed='import torch\ntorch.save(model, "last.pt")\nmodel = torch.load("best.pt", map_location="cpu")\n',
        ),
        # `device` is assigned only below the load: a literal, never the unbound name
        Invalid(
            'import torch\n\nstate = torch.load("model.pt")\ndevice = torch.device("cpu")\n',
            fixed='import torch\n\nstate = torch.load("model.pt", map_location="cpu")\ndevice = torch.device("cpu")\n',
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: (enclosing function or None, keys) of the saves visited so far, i.e. above.
        self._saves_above: List[Tuple[Optional[int], FrozenSet[str]]] = []
        self._cpu_saves: Optional[FrozenSet[str]] = None

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.qualname(node.func)
        if name in SAVERS and len(node.args) > 1:
            self._saves_above.append((self._scope(), self._file_keys(node.args[1].value)))
        if self.ctx.guarded:
            return
        if name not in LOADERS or keyword(node, "map_location") is not None:
            return
        if len(positional(node)) > 1 or any(arg.star for arg in node.args) or not node.args:
            return
        if self._written_by_this_program(self._file_keys(node.args[0].value)):
            return
        device_name = self.ctx.settings.device_name
        location = cst.Name(device_name) if self.ctx.name_bound_here(device_name) else cst.SimpleString('"cpu"')
        new_arg = keyword_arg("map_location", location)

        def replace(updated: cst.Call) -> cst.Call:
            """Append after the last argument, keeping the call's layout: one argument a line
            stays so, and what followed the last argument (its comma, a comment, the line
            break before ``)``) now follows the new one."""
            args = list(updated.args)
            last = args[-1]
            opening = updated.whitespace_before_args
            separator = cst.SimpleWhitespace(" ")
            if isinstance(opening, cst.ParenthesizedWhitespace):  # a line break (no comment) and the same indent
                separator = cst.ParenthesizedWhitespace(indent=opening.indent, last_line=opening.last_line)
                after = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
                if isinstance(after, cst.ParenthesizedWhitespace):
                    # ``path,  # note`` keeps its comma and comment; the new line ends like it did
                    args[-1] = last.with_changes(
                        comma=last.comma.with_changes(whitespace_after=after.with_changes(indent=separator.indent, last_line=separator.last_line))
                    )
                    closing = cst.ParenthesizedWhitespace(indent=after.indent, last_line=after.last_line)
                    return updated.with_changes(args=args + [new_arg.with_changes(comma=cst.Comma(whitespace_after=closing))])
            args[-1] = last.with_changes(
                comma=cst.Comma(whitespace_after=separator), whitespace_after_arg=cst.SimpleWhitespace("")
            )
            added = new_arg.with_changes(comma=last.comma, whitespace_after_arg=last.whitespace_after_arg)
            return updated.with_changes(args=args + [added])

        self.report(node, self.message.format(f"{source_of(node.func)}(...)"), self.make_fix({node: replace}))

    def _written_by_this_program(self, keys: FrozenSet[str]) -> bool:
        """A file this program saves holds what it produced: on this machine when the save
        ran earlier in the same function (the best model reloaded at the end of training),
        and CPU tensors anywhere when the saved value is ``.cpu()``. A checkpoint saved in
        another function (``--resume``) may come from a GPU machine: still reported."""
        scope = self._scope()
        if any(where == scope and keys & saved for where, saved in self._saves_above):
            return True
        if self._cpu_saves is None:
            cpu_keys: set = set()
            if "cpu()" in self.ctx.source:
                for call in m.findall(self.ctx.module, m.Call(args=[m.Arg(), m.Arg(), m.ZeroOrMore()])):
                    if self.ctx.qualname(call.func) in SAVERS and m.findall(
                        call.args[0].value, m.Call(func=m.Attribute(attr=m.Name("cpu")))
                    ):
                        cpu_keys |= path_keys(call.args[1].value)
            self._cpu_saves = frozenset(cpu_keys)
        return bool(keys & self._cpu_saves)

    def _scope(self) -> Optional[int]:
        function = self.ctx.enclosing_function()
        return id(function) if function is not None else None

    def _file_keys(self, target: cst.BaseExpression) -> FrozenSet[str]:
        """``f`` bound by an enclosing ``with open(path, ...) as f`` stands for ``path``."""
        if isinstance(target, cst.Name):
            for ancestor in reversed(self.ctx.stack):
                if isinstance(ancestor, cst.With):
                    for item in ancestor.items:
                        bound = item.asname.name if item.asname else None
                        if isinstance(bound, cst.Name) and bound.value == target.value and isinstance(item.item, cst.Call) and item.item.args:
                            return path_keys(item.item.args[0].value)
        return path_keys(target)


RULES = (LoadWithoutMapLocation,)
