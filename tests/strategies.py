"""Hypothesis strategies for PyTorch-flavoured programs that mix the hazards the rules fix.

Random programs (hypothesmith) almost never call ``.cuda()`` or ``torch.load``, so the fixer's
interesting paths need programs built from the hazards themselves: every spelling of each hazard,
under different import aliases, inside functions, ``forward`` methods, decorated definitions,
loops, ``with`` and ``try`` blocks, behind availability guards, nested in each other's arguments,
split over lines and followed by comments. Every generated program is valid Python.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List

from hypothesis import strategies as st

INDENTS = ("    ", "  ", "\t")
RECEIVERS = ("x", "model", "batch", "self.weight", "inputs[0]", "net.encoder", "(a + b)", "f(x)")
COMMENTS = ("", "  # move to GPU", "  # noqa: E501", "  # TODO: cuda", "  # noqa", "  # noqa: TDV101")


@dataclass(frozen=True)
class Imports:
    """How the generated module spells torch and the names it imported from it."""

    lines: tuple
    torch: str  # "torch", "th", or "" when torch itself is not imported
    from_cuda: tuple  # names imported from torch.cuda: FloatTensor, synchronize...
    from_amp: tuple  # names imported from torch.cuda.amp


@st.composite
def imports(draw) -> Imports:
    lines: List[str] = []
    torch = draw(st.sampled_from(["torch", "th", ""]))
    if torch == "torch":
        lines.append("import torch")
    elif torch == "th":
        lines.append("import torch as th")
    if draw(st.booleans()):
        lines.append("import torch.nn as nn")
    from_cuda = tuple(draw(st.lists(st.sampled_from(["FloatTensor", "LongTensor", "synchronize"]), unique=True, max_size=2)))
    if from_cuda:
        lines.append(f"from torch.cuda import {', '.join(from_cuda)}")
    from_amp = tuple(draw(st.lists(st.sampled_from(["autocast", "GradScaler"]), unique=True, max_size=2)))
    if from_amp:
        lines.append(f"from torch.cuda.amp import {', '.join(from_amp)}")
    if draw(st.booleans()):
        lines.insert(0, draw(st.sampled_from(['"""A training script."""', "from __future__ import annotations", "#!/usr/bin/env python"])))
    if not lines:
        lines.append("import os")
    return Imports(tuple(lines), torch, from_cuda, from_amp)


def _torch(env: Imports) -> str:
    return env.torch or "torch"  # "torch" unimported: still valid code, names an unknown global


@st.composite
def hazard_expression(draw, env: Imports, depth: int = 0) -> str:
    """One expression containing a hazard (possibly several, nested)."""
    t = _torch(env)
    receiver = draw(st.sampled_from(RECEIVERS))
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        receiver = draw(hazard_expression(env, depth + 1))
    cuda_literal = draw(st.sampled_from(['"cuda"', "'cuda:0'", '"cuda:1"', 'f"cuda:{rank}"']))
    choices = [
        f"{receiver}.cuda()",
        f"{receiver}.cuda(0)",
        f"{receiver}.cuda(non_blocking=True)",
        f"{receiver}.cuda(device=1)",
        f"{receiver}.to({cuda_literal})",
        f"{receiver}.to({t}.device({cuda_literal}))",
        f"{receiver}.to({cuda_literal}, non_blocking=True)",
        f"{t}.zeros(3, device={cuda_literal})",
        f"{t}.ones(2, 3, dtype={t}.float16, device={cuda_literal})",
        f"{t}.cuda.FloatTensor(3)",
        f"{t}.cuda.LongTensor([1, 2])",
        f"{t}.cuda.HalfTensor()",
        f"{t}.cuda.FloatTensor(sizes)",
        f"{receiver}.type({t}.cuda.FloatTensor)",
        f'{receiver}.type("torch.cuda.LongTensor")',
        f"isinstance({receiver}, {t}.cuda.FloatTensor)",
        f'{t}.load("ckpt.pt")',
        f"{t}.load(path, weights_only=True)",
        f"{t}.jit.load(path)",
        f"{t}.load(\n        path,\n    )",
        f"{t}.cuda.amp.GradScaler()",
        f"{t}.cuda.amp.GradScaler(enabled=use_amp)",
        f"{t}.cuda.current_device()",
        f"{t}.cuda.get_device_name(0)",
        f"{t}.cuda.Event(enable_timing=True)",
        f"{receiver}.to({t}.device({cuda_literal}) if {t}.cuda.is_available() else 'cpu')",
        f"({receiver}.cuda() if {t}.cuda.is_available() else {receiver})",
        f"{receiver}.cuda() if use_cuda else {receiver}",
        f"model({receiver}.cuda(),\n        {t}.zeros(1, device={cuda_literal}))",
    ]
    choices += [f"{name}(3)" for name in env.from_cuda if name.endswith("Tensor")]
    choices += ["GradScaler()" for name in env.from_amp if name == "GradScaler"]
    return draw(st.sampled_from(choices))


@st.composite
def statement_lines(draw, env: Imports, in_function: bool) -> List[str]:
    """One simple statement (a line, sometimes continued over lines), with a comment."""
    t = _torch(env)
    expression = draw(hazard_expression(env))
    kind = draw(st.integers(0, 11))
    if kind == 0:
        line = expression
    elif kind == 1 and in_function:
        line = f"return {expression}"
    elif kind == 2:
        line = f"{t}.cuda.synchronize()"
    elif kind == 3:
        line = f"{t}.cuda.set_device(local_rank)"
    elif kind == 4:
        line = draw(st.sampled_from([f'{t}.set_default_device("cuda")', f"{t}.set_default_tensor_type({t}.cuda.FloatTensor)"]))
    elif kind == 5:
        line = draw(st.sampled_from(['device = "cuda"', f'device = {t}.device("cuda:0")', 'dev: str = "cuda"']))
    elif kind == 6 and "synchronize" in env.from_cuda:
        line = "synchronize()"
    elif kind == 7:
        line = f"state = {t}.load(f, map_location={draw(st.sampled_from(['device', repr('cpu'), 'None']))})"
    elif kind == 8:
        line = f"y = {expression}; z = {t}.cuda.synchronize()"
    else:
        line = f"{draw(st.sampled_from(['y', 'out', 'self.buf', 'a, b']))} = {expression}"
    return (line + draw(st.sampled_from(COMMENTS))).split("\n")


def _indent(lines: List[str], indent: str) -> List[str]:
    return [indent + line if line.strip() else line for line in lines]


@st.composite
def block(draw, env: Imports, indent: str, depth: int, in_function: bool) -> List[str]:
    """A non-empty list of statements, each a list of lines relative to the block."""
    t = _torch(env)
    lines: List[str] = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.integers(0, 9)) if depth < 3 else 0
        if kind <= 3:
            lines += draw(statement_lines(env, in_function))
        elif kind == 4:
            test = draw(st.sampled_from([
                f"{t}.cuda.is_available()", f"not {t}.cuda.is_available()", "args.cuda",
                'device.type == "cuda"', "x.is_cuda", "rank == 0", f"{t}.cuda.device_count() > 1",
            ]))
            lines.append(f"if {test}:")
            lines += _indent(draw(block(env, indent, depth + 1, in_function)), indent)
            if draw(st.booleans()):
                lines.append("else:")
                lines += _indent(draw(block(env, indent, depth + 1, in_function)), indent)
        elif kind == 5:
            lines.append(draw(st.sampled_from(["for x in loader:", "while running:", f"with {t}.no_grad():", f"with {t}.cuda.amp.autocast():"])))
            lines += _indent(draw(block(env, indent, depth + 1, in_function)), indent)
        elif kind == 6:
            lines.append("try:")
            lines += _indent(draw(block(env, indent, depth + 1, in_function)), indent)
            lines.append("except RuntimeError:  # no GPU")
            lines += _indent(["pass"], indent)
        elif kind == 7 and in_function:
            lines += [f"if not {t}.cuda.is_available():", indent + "return None"]
            lines += draw(block(env, indent, depth + 1, in_function))
        elif kind == 8:
            lines += draw(function(env, indent, depth + 1))
        else:
            lines.append(draw(st.sampled_from(["", "# a comment line", "pass", "x = compute(x)  # cuda later"])))
            lines += draw(statement_lines(env, in_function))
    return lines


@st.composite
def function(draw, env: Imports, indent: str, depth: int) -> List[str]:
    t = _torch(env)
    decorators = draw(st.lists(st.sampled_from([
        f"@{t}.no_grad()", f"@{t}.cuda.amp.autocast()", "@staticmethod", "@functools.lru_cache(maxsize=None)",
        f'@pytest.mark.skipif(not {t}.cuda.is_available(), reason="needs a GPU")', "@requires_cuda",
    ]), max_size=2))
    name = draw(st.sampled_from(["step", "train", "evaluate", "helper"]))
    params = draw(st.sampled_from(["", "x", "model, x", "x, device", 'x, device="cuda"', "*args, **kwargs", "x, /, *, rank=0"]))
    lines = decorators + [f"def {name}({params}):"]
    if draw(st.booleans()):
        lines.append(indent + '"""Docstring mentioning .cuda()."""')
    return lines + _indent(draw(block(env, indent, depth + 1, True)), indent)


@st.composite
def module_class(draw, env: Imports, indent: str) -> List[str]:
    t = _torch(env)
    base = "nn.Module" if "import torch.nn as nn" in env.lines else f"{t}.nn.Module"
    lines = [f"class Net({base}):"]
    lines += _indent(["def __init__(self):", indent + "super().__init__()"], indent)
    lines += _indent(draw(block(env, indent, 2, True)), indent * 2)
    lines.append("")
    lines += _indent([draw(st.sampled_from(["def forward(self, x):", "def forward(self, x, mask=None):", "def forward(self):"]))], indent)
    lines += _indent(draw(block(env, indent, 2, True)), indent * 2)
    return lines


@st.composite
def programs(draw) -> str:
    """A whole module: imports, optional module-level device, definitions and statements."""
    env = draw(imports())
    indent = draw(st.sampled_from(INDENTS))
    lines = list(env.lines)
    if draw(st.integers(0, 3)) == 0:
        lines.append(draw(st.sampled_from([
            f'device = {_torch(env)}.device("cuda" if {_torch(env)}.cuda.is_available() else "cpu")',
            'device = "cpu"',
        ])))
    for _ in range(draw(st.integers(1, 4))):
        lines += [""] * draw(st.integers(0, 2))
        kind = draw(st.integers(0, 3))
        if kind == 0:
            lines += draw(function(env, indent, 0))
        elif kind == 1:
            lines += draw(module_class(env, indent))
        else:
            lines += draw(block(env, indent, 0, False))
    newline = draw(st.sampled_from(["\n", "\n", "\r\n"]))
    text = newline.join(lines)
    return text + (newline if draw(st.integers(0, 4)) else "")
