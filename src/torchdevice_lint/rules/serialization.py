"""Serialization: loading checkpoints onto the device they were saved from."""

from __future__ import annotations

import libcst as cst

from ..analysis.fixes import Applicability
from ..analysis.rule import Invalid, Rule, Valid
from ..analysis.syntax import source_of
from .common import keyword, keyword_arg, positional

LOADERS = {"torch.load", "torch.jit.load"}


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
    triggers = ("load",)
    valid = (
        Valid('import torch\nstate = torch.load("model.pt", map_location="cpu")\n'),
        Valid('import torch\nstate = torch.load("model.pt", device)\n'),
        Valid("import torch\nstate = torch.load(path, **load_kwargs)\n"),
        Valid("import pickle\nstate = pickle.load(handle)\nimport json\ncfg = json.load(handle)\n"),
        Valid('import torch\nif torch.cuda.is_available():\n    state = torch.load("gpu.pt")\n'),
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
        # `device` is assigned only below the load: a literal, never the unbound name
        Invalid(
            'import torch\n\nstate = torch.load("model.pt")\ndevice = torch.device("cpu")\n',
            fixed='import torch\n\nstate = torch.load("model.pt", map_location="cpu")\ndevice = torch.device("cpu")\n',
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.guarded:
            return
        name = self.ctx.qualname(node.func)
        if name not in LOADERS or keyword(node, "map_location") is not None:
            return
        if len(positional(node)) > 1 or any(arg.star for arg in node.args) or not node.args:
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


RULES = (LoadWithoutMapLocation,)
