"""CUDA-only extension kernels: what one module says of them, and the code of a project that can
only run on CUDA because it drives one.

A project that builds a kernel from ``.cu`` sources (``CUDAExtension`` in ``setup.py``,
``torch.utils.cpp_extension.load(sources=[..., "x.cu"])``, ``load_inline(cuda_sources=...)``)
calls it from autograd Functions, wrappers and test scripts whose ``.cuda()`` cannot be made
portable: the kernel only takes CUDA tensors. That code is one project-level finding at the build
(TDV310), not one per line. A kernel with a CPU build, or whose callers fall back to native code
on the CPU (``if x.device.type == "cpu":``), is not CUDA-only, and its callers are judged as usual.

Each module contributes plain data, cached by content hash with its other facts: the builds it
makes, the modules it imports (other than the standard library's and the big libraries'), the
functions, methods and autograd Functions that call into an imported module, and whether it
tests for the CPU.
"""

from __future__ import annotations

import ast
import sys
from functools import cached_property
from pathlib import PurePath
from typing import Dict, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ..syntax.ast_nodes import child_blocks, dotted_name, file_aliases, keyword_value, last_name, literal_string, nodes_below

EXTENSION_API = "torch.utils.cpp_extension."
#: The callables that build an extension module, and whether the build is CUDA's by itself.
BUILDERS = {"CUDAExtension": True, "CppExtension": False, "load": False, "load_inline": False}
#: Sources compiled by nvcc.
CUDA_SOURCE_SUFFIXES = (".cu", ".cuh")
#: Imports that are never a project's own kernel (kept out of the facts to keep them small).
LIBRARIES = frozenset(getattr(sys, "stdlib_module_names", ())) | {
    "__future__", "torch", "torchvision", "torchaudio", "numpy", "scipy", "PIL", "cv2", "matplotlib", "tqdm",
    "sklearn", "pandas", "yaml", "einops", "timm", "transformers", "tensorboardX", "wandb", "apex", "pytest",
}

#: (first line, last line) of code that can only run on CUDA.
Span = Tuple[int, int]


class KernelReader:
    """Reads one module's kernel facts during the model's walk of its tree: ``roots`` hands the
    walk each top-level piece with the scope it belongs to, ``read_call`` and ``read_test`` take
    the calls and conditions it meets there."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        #: Local name -> [what it names (dotted, relative dots kept), imported under a condition].
        self.imports: Dict[str, list] = {}
        self.builds: List[list] = []
        self.scopes: List[list] = []
        self.tests_cpu = False
        self.end = max((getattr(statement, "end_lineno", 0) or 0 for statement in tree.body), default=0)
        for statement in tree.body:
            self._read_binding(statement, guarded=False)

    def facts(self) -> dict:
        """The plain data kept for the module: empty where it neither builds nor imports a
        possible kernel."""
        if not (self.builds or self.imports):
            return {}
        scopes = [scope for scope in self.scopes if scope[2]]
        return {"builds": self.builds, "imports": self.imports, "scopes": scopes, "tests_cpu": self.tests_cpu, "end": self.end}

    def _read_binding(self, statement: ast.stmt, guarded: bool) -> None:
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                self._import(alias.asname or alias.name.split(".")[0], alias.name if alias.asname else alias.name.split(".")[0], guarded)
        elif isinstance(statement, ast.ImportFrom):
            prefix = "." * statement.level + (f"{statement.module}." if statement.module else "")
            for alias in statement.names:
                if alias.name != "*":
                    self._import(alias.asname or alias.name, prefix + alias.name, guarded)
        elif isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            built = self.built_module(statement.value)
            if built is not None:
                self.imports[statement.targets[0].id] = [built, guarded]  # ``fused = load("fused", ...)``
        elif not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in child_blocks(statement):
                for inner in block:
                    self._read_binding(inner, guarded=True)

    def _import(self, local: str, dotted: str, guarded: bool) -> None:
        if dotted.lstrip(".").split(".")[0] not in LIBRARIES:
            self.imports[local] = [dotted, guarded]

    def built_module(self, value: ast.expr) -> Optional[str]:
        """The name of the module a build call makes (``load("fused", ...)`` -> ``fused``)."""
        if not isinstance(value, ast.Call) or last_name(value.func) not in BUILDERS or self._builder(value) is None:
            return None
        return literal_string(keyword_value(value, "name") or (value.args[0] if value.args else None))

    @cached_property
    def aliases(self) -> Dict[str, str]:
        """The module's imports, read once a call is named like a build."""
        return file_aliases(self.tree.body)

    def _builder(self, call: ast.Call) -> Optional[str]:
        dotted = dotted_name(call.func)
        if dotted is None:
            return None
        head, dot, rest = dotted.partition(".")
        resolved = self.aliases.get(head, "") + dot + rest
        leaf = resolved[len(EXTENSION_API):] if resolved.startswith(EXTENSION_API) else None
        return leaf if leaf in BUILDERS else None

    def roots(self) -> Iterator[Tuple[ast.AST, Optional[list], str]]:
        """Each top-level piece of the tree with the scope it is read for (None: no scope of its
        own): a function, each method of a class, or a whole autograd Function; and the
        definition it belongs to (``f``, ``Class.method``, ``Class``; empty at module level)."""
        for statement in self.tree.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield statement, self._scope(statement), statement.name
            elif isinstance(statement, ast.ClassDef) and not any(last_name(base) == "Function" for base in statement.bases):
                yield from ((part, None, "") for part in (*statement.bases, *statement.keywords, *statement.decorator_list))
                for inner in statement.body:
                    if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        yield inner, self._scope(inner), f"{statement.name}.{inner.name}"
                    else:
                        yield inner, None, ""
            elif isinstance(statement, ast.ClassDef):
                yield statement, self._scope(statement), statement.name
            else:
                yield statement, None, ""

    def _scope(self, definition: ast.AST) -> list:
        decorators = getattr(definition, "decorator_list", ())
        first = min([definition.lineno, *(decorator.lineno for decorator in decorators)])
        scope = [first, getattr(definition, "end_lineno", definition.lineno) or definition.lineno, []]
        self.scopes.append(scope)
        return scope

    def read_call(self, call: ast.Call, scope: Optional[list]) -> None:
        """A build, or a call into an imported module (``fused.forward(x)``) from ``scope``. Asked
        of every call of every module: the callee's own name is looked at before anything else."""
        func = call.func
        builder = self._builder(call) if last_name(func) in BUILDERS else None
        if builder is not None:
            self._read_build(call, builder)
            return
        if scope is not None and self.imports:
            while type(func) is ast.Attribute:
                func = func.value
            if type(func) is ast.Name and func.id in self.imports and func.id not in scope[2]:
                scope[2].append(func.id)

    def _read_build(self, call: ast.Call, builder: str) -> None:
        name = self.built_module(call)
        if name is None:
            return
        if builder == "load_inline":
            sources = keyword_value(call, "cuda_sources")
            cuda = sources is not None and not (isinstance(sources, ast.Constant) and sources.value is None)
        elif builder == "load":
            sources = keyword_value(call, "sources") or (call.args[1] if len(call.args) > 1 else None)
            names = [literal_string(node) for node in nodes_below(sources)] if sources is not None else []
            if not any(names):
                return  # sources computed elsewhere: what they build is unknown
            cuda = any(name and name.endswith(CUDA_SOURCE_SUFFIXES) for name in names)
        else:
            cuda = BUILDERS[builder]
        self.builds.append([name, cuda, call.lineno])

    def read_test(self, test: ast.expr) -> None:
        """A condition that sends the CPU elsewhere: ``x.device.type == "cpu"``, ``x.is_cuda``,
        ``torch.cuda.is_available()``."""
        if self.tests_cpu:
            return
        for node in nodes_below(test):
            if isinstance(node, ast.Constant) and node.value in ("cpu", "cuda"):
                self.tests_cpu = True
            elif isinstance(node, ast.Attribute) and node.attr in ("is_cuda", "is_available"):
                self.tests_cpu = True


def well_formed(kernels: object) -> bool:
    """Whether stored kernel facts have the shape ``KernelReader.facts`` gives them."""
    if kernels == {}:
        return True
    if not isinstance(kernels, dict) or set(kernels) != {"builds", "imports", "scopes", "tests_cpu", "end"}:
        return False
    builds, imports, scopes = kernels["builds"], kernels["imports"], kernels["scopes"]
    return (
        isinstance(builds, list) and all(_shaped(build, (str, bool, int)) for build in builds)
        and isinstance(imports, dict) and all(isinstance(local, str) and _shaped(bound, (str, bool)) for local, bound in imports.items())
        and isinstance(scopes, list) and all(_shaped(scope, (int, int, list)) and all(isinstance(n, str) for n in scope[2]) for scope in scopes)
        and isinstance(kernels["tests_cpu"], bool) and isinstance(kernels["end"], int)
    )


def _shaped(value: object, kinds: tuple) -> bool:
    return isinstance(value, list) and len(value) == len(kinds) and all(isinstance(part, kind) for part, kind in zip(value, kinds))


def short_name(dotted: str) -> str:
    """``pkg._C`` and ``._C`` -> ``_C``: what an importer and a build agree on."""
    return dotted.rsplit(".", 1)[-1]


class CudaOnlyCode:
    """A project's CUDA-only kernels and the code that exists only to drive them: ``spans`` (the
    lines of that code by module path) and ``builds`` (for each module that builds such a
    kernel: its name -> [lines that depend on it, files they are in])."""

    def __init__(self, modules: Mapping[str, dict]) -> None:
        self.spans: Dict[str, Tuple[Span, ...]] = {}
        self.builds: Dict[str, Dict[str, list]] = {}
        kernels = _cuda_only_kernels(modules)
        if not kernels:
            return
        users = {path: _uses(facts, kernels) for path, facts in modules.items() if facts}
        kernels -= {kernel for path, used in users.items() if modules[path]["tests_cpu"] for kernel in used}
        driving: Dict[str, Dict[str, List[Span]]] = {kernel: {} for kernel in kernels}
        whole: Dict[str, str] = {}  # module stem -> the kernel it cannot be imported without
        for path, used in users.items():
            for kernel, locals_ in used.items():
                if kernel in kernels:
                    spans = _driving_spans(modules[path], locals_)
                    driving[kernel].setdefault(path, []).extend(spans)
                    if spans == [(1, modules[path]["end"])]:
                        whole[PurePath(path).stem] = kernel
        for path, facts in modules.items():
            kernel = _tested_kernel(path, facts, whole) if path not in users or not users[path] else None
            if kernel is not None:
                driving[kernel].setdefault(path, []).append((1, facts["end"]))
        merged: Dict[str, List[Span]] = {}
        for kernel, spans_by_path in driving.items():
            joined = {path: _merged(spans) for path, spans in spans_by_path.items()}
            lines = sum(last - first + 1 for spans in joined.values() for first, last in spans)
            for path, spans in joined.items():
                merged.setdefault(path, []).extend(spans)
            for path, facts in modules.items():
                for name, cuda, _ in facts.get("builds", ()) if lines else ():
                    if cuda and short_name(name) == kernel:
                        self.builds.setdefault(path, {})[kernel] = [lines, len(joined)]
        self.spans = {path: tuple(_merged(spans)) for path, spans in merged.items()}


def _cuda_only_kernels(modules: Mapping[str, dict]) -> Set[str]:
    """The kernels built from CUDA sources only: no CPU build of the name in the project, nor any
    CPU build in the module that builds it (``psamask_cpu`` beside ``psamask_gpu``), and no module
    of the project of that name (a wrapper ``correlation.py`` beside a ``correlation`` kernel
    could not be told from it)."""
    cuda, cpu = set(), set()
    for facts in modules.values():
        builds = facts.get("builds", ())
        cpu_beside = any(not built_for_cuda for _, built_for_cuda, _ in builds)
        for name, built_for_cuda, _ in builds:
            (cuda if built_for_cuda and not cpu_beside else cpu).add(short_name(name))
    stems = {PurePath(path).stem for path in modules}
    return cuda - cpu - stems


def _uses(facts: dict, kernels: Set[str]) -> Dict[str, List[str]]:
    """Kernel -> the module's local names bound to it."""
    used: Dict[str, List[str]] = {}
    for local, (dotted, _) in facts["imports"].items():
        if short_name(dotted) in kernels:
            used.setdefault(short_name(dotted), []).append(local)
    return used


def _driving_spans(facts: dict, locals_: Iterable[str]) -> List[Span]:
    """The whole module where it binds the kernel unconditionally (it cannot be imported without
    it), else the functions, methods and autograd Functions that call into it."""
    locals_ = list(locals_)
    if any(not facts["imports"][local][1] for local in locals_):
        return [(1, facts["end"])]
    return [(first, last) for first, last, receivers in facts["scopes"] if any(local in receivers for local in locals_)]


def _is_test(path: str) -> bool:
    """A module of tests, by its file name or its folder's."""
    file = PurePath(path)
    return file.name.startswith("test") or file.name.endswith("_test.py") or file.parent.name in ("test", "tests")


def _tested_kernel(path: str, facts: dict, whole: Mapping[str, str]) -> Optional[str]:
    """The kernel a test module exists for: it imports, unconditionally, a module that cannot be
    imported without the kernel (``whole``: by module name)."""
    if not facts or not whole or not _is_test(path):
        return None
    for dotted, guarded in facts["imports"].values():
        kernel = next((whole[part] for part in dotted.lstrip(".").split(".")[-2:] if part in whole), None)
        if kernel is not None and not guarded:
            return kernel
    return None


def _merged(spans: Iterable[Span]) -> List[Span]:
    joined: List[Span] = []
    for first, last in sorted(spans):
        if joined and first <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(last, joined[-1][1]))
        else:
            joined.append((first, last))
    return joined
