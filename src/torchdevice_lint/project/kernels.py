"""CUDA-only extension kernels: what one module says of them, and the code of a project that can
only run on CUDA because it drives one.

A project that builds a kernel from ``.cu`` sources (``CUDAExtension`` in ``setup.py``,
``torch.utils.cpp_extension.load(sources=[..., "x.cu"])``, ``load_inline(cuda_sources=...)``, a
plain setuptools ``Extension(..., sources=["x.cu", ...])`` compiled by nvcc, or torch < 1.0's
``torch.utils.ffi.create_extension`` with ``with_cuda`` set wherever the build goes on) calls it from autograd Functions, wrappers and test scripts whose ``.cuda()`` cannot be made
portable: the kernel only takes CUDA tensors. That code is one project-level finding at the build
(TDV310), not one per line. A kernel with a CPU build, or whose callers fall back to native code
on the CPU (``if x.device.type == "cpu":``, not ``if not x.is_cuda: raise``), is not CUDA-only,
and its callers are judged as usual. A CUDA build beside a CPU build is CUDA-only only where the
module builds it unconditionally (``psamask_gpu`` under ``if torch.cuda.is_available():`` is a choice).

Each module contributes plain data, cached by content hash with its other facts: the builds it
makes, the modules it imports (other than the standard library's and the big libraries'), the
functions, methods and autograd Functions that call into an imported module, and whether it
tests for the CPU.
"""

from __future__ import annotations

import ast
import sys
from functools import cached_property, lru_cache
from pathlib import PurePath
from typing import Dict, FrozenSet, Iterable, Iterator, List, Mapping, Optional, Set, Tuple

from ..knowledge.cst_guards import NVIDIA_ONLY_PACKAGES
from ..syntax.ast_nodes import child_blocks, dotted_name, file_aliases, keyword_value, last_name, literal_string, nodes_below

EXTENSION_API = "torch.utils.cpp_extension."
#: The callables that build an extension module (qualified name -> builder).
BUILDERS = {
    **{EXTENSION_API + name: name for name in ("CUDAExtension", "CppExtension", "load", "load_inline")},
    "torch.utils.ffi.create_extension": "create_extension",
    **{f"{module}.Extension": "Extension" for module in ("setuptools", "setuptools.extension", "distutils.core", "distutils.extension")},
}
#: The builders' own names: a call named otherwise is never a build.
BUILDER_NAMES = frozenset(qualified.rsplit(".", 1)[1] for qualified in BUILDERS)
#: The builders that return the module they build (the others describe a build for setup).
MODULE_BUILDERS = frozenset({"load", "load_inline"})
#: The builders a setup script may bind to a name and call through it (``extension = CppExtension``).
EXTENSION_CLASSES = ("CUDAExtension", "CppExtension")
#: Sources compiled by nvcc, and the objects it makes of them.
CUDA_SOURCE_SUFFIXES = (".cu", ".cuh", ".cu.o")
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
        #: Whether the module imports an extension class it may call through a name of its own.
        self.binds_extension_class = False
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
        if isinstance(statement, (ast.Import, ast.ImportFrom)) and not self.binds_extension_class:
            self.binds_extension_class = any(
                alias.name in EXTENSION_CLASSES or alias.name.endswith("cpp_extension") for alias in statement.names
            ) or (getattr(statement, "module", None) or "").endswith("cpp_extension")
        if isinstance(statement, ast.Import):
            for alias in statement.names:
                self._import(alias.asname or alias.name.split(".")[0], alias.name if alias.asname else alias.name.split(".")[0], guarded)
        elif isinstance(statement, ast.ImportFrom):
            prefix = "." * statement.level + (f"{statement.module}." if statement.module else "")
            for alias in statement.names:
                if alias.name != "*":
                    self._import(alias.asname or alias.name, prefix + alias.name, guarded)
        elif (
            isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
            and isinstance(statement.value, ast.Call)
        ):
            built = self.built_module(statement.value) if last_name(statement.value.func) in MODULE_BUILDERS else None
            if built is not None:
                self.imports[statement.targets[0].id] = [built, guarded]  # ``fused = load("fused", ...)``
        elif isinstance(statement, ast.Try) and statement.handlers and all(map(_reraises, statement.handlers)):
            # ``try: import pointnet2._ext`` whose every handler raises again (facebookresearch/
            # votenet@2f6d6d3 pointnet2/pointnet2_utils.py:25): the module needs the kernel
            for inner in statement.body:
                self._read_binding(inner, guarded)
        elif not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for block in child_blocks(statement):
                for inner in block:
                    self._read_binding(inner, guarded=True)

    def _import(self, local: str, dotted: str, guarded: bool) -> None:
        if dotted.lstrip(".").split(".")[0] not in LIBRARIES:
            self.imports[local] = [dotted, guarded]

    def built_module(self, value: ast.expr) -> Optional[str]:
        """The name of the module a build call makes (``load("fused", ...)`` -> ``fused``)."""
        if not isinstance(value, ast.Call) or last_name(value.func) not in BUILDER_NAMES or self._builder(value.func) is None:
            return None
        return self._module_name(value)

    @staticmethod
    def _module_name(value: ast.Call) -> Optional[str]:
        return literal_string(keyword_value(value, "name") or (value.args[0] if value.args else None))

    @cached_property
    def aliases(self) -> Dict[str, str]:
        """The module's imports, read once a call is named like a build."""
        return file_aliases(self.tree.body)

    def _builder(self, func: ast.expr) -> Optional[str]:
        dotted = dotted_name(func)
        if dotted is None:
            return None
        head, dot, rest = dotted.partition(".")
        return BUILDERS.get(self.aliases.get(head, head) + dot + rest)

    @cached_property
    def builder_names(self) -> Dict[str, str]:
        """Names the module binds to an extension class and builds through (DCNv2's setup.py:
        ``extension = CppExtension``, then ``extension = CUDAExtension`` where CUDA is found,
        ``else: raise``) -> the class the build gets wherever it goes on: ``CUDAExtension``
        where every binding is that, or where the other branch of the one binding it refuses."""
        bound: Dict[str, Set[str]] = {}
        refused: Set[str] = set()
        for node in ast.walk(self.tree):
            if type(node) is ast.Assign and len(node.targets) == 1 and type(node.targets[0]) is ast.Name:
                builder = self._builder(node.value)
                if builder in EXTENSION_CLASSES:
                    bound.setdefault(node.targets[0].id, set()).add(builder)
            elif type(node) is ast.If:
                for branch, other in ((node.body, node.orelse), (node.orelse, node.body)):
                    if other and type(other[-1]) is ast.Raise:
                        refused.update(
                            statement.targets[0].id for statement in branch
                            if type(statement) is ast.Assign and len(statement.targets) == 1
                            and type(statement.targets[0]) is ast.Name and self._builder(statement.value) == "CUDAExtension"
                        )
        return {
            name: "CUDAExtension" if builders == {"CUDAExtension"} or name in refused else "CppExtension"
            for name, builders in bound.items()
        }

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
        scope = [*_lines(definition), []]
        self.scopes.append(scope)
        return scope

    def read_call(self, call: ast.Call, scope: Optional[list]) -> None:
        """A build, or a call into an imported module (``fused.forward(x)``) from ``scope``. Asked
        of every call of every module: the callee's own name is looked at before anything else."""
        func = call.func
        if last_name(func) in BUILDER_NAMES:
            builder = self._builder(func)
        elif self.binds_extension_class and type(func) is ast.Name:
            builder = self.builder_names.get(func.id)
        else:
            builder = None
        if builder is not None:
            self._read_build(call, builder)
            return
        if scope is not None and self.imports:
            while type(func) is ast.Attribute:
                func = func.value
            if type(func) is ast.Name and func.id in self.imports and func.id not in scope[2]:
                scope[2].append(func.id)

    def _read_build(self, call: ast.Call, builder: str) -> None:
        name = self._module_name(call)
        if name is None:
            return
        if builder == "load_inline":
            sources = keyword_value(call, "cuda_sources")
            cuda = sources is not None and not (isinstance(sources, ast.Constant) and sources.value is None)
        elif builder in ("load", "Extension"):
            sources = keyword_value(call, "sources") or (call.args[1] if len(call.args) > 1 else None)
            names = [literal_string(node) for node in nodes_below(sources)] if sources is not None else []
            if not any(names):
                return  # sources computed elsewhere: what they build is unknown
            objects = keyword_value(call, "extra_objects")
            names += [literal_string(node) for node in ast.walk(objects)] if objects is not None else []
            cuda = any(name and name.endswith(CUDA_SOURCE_SUFFIXES) for name in names)
        elif builder == "create_extension":
            cuda = self._needs_cuda(keyword_value(call, "with_cuda"), keyword_value(call, "sources"))
        else:
            cuda = builder == "CUDAExtension"
        self.builds.append([name, cuda, call.lineno, *self._top_level_span(call.lineno)])

    def _top_level_span(self, line: int) -> Span:
        """The lines of the top-level statement (a function, a class, an ``if``) holding ``line``."""
        return next((span for span in map(_lines, self.tree.body) if span[0] <= line <= span[1]), (line, line))

    def _needs_cuda(self, with_cuda: Optional[ast.expr], sources: Optional[ast.expr]) -> bool:
        """Whether a ``create_extension`` build is CUDA's wherever it goes on: ``with_cuda`` is
        true, or bound true in every branch that does not refuse (``else: raise``), or the build
        has no C source but those added where CUDA is there (``sources = []``)."""
        if with_cuda is None:
            return False
        if isinstance(with_cuda, ast.Constant):
            return with_cuda.value is True
        if not isinstance(with_cuda, ast.Name):
            return False
        if _always_true(with_cuda.id, self.tree.body):
            return True
        if isinstance(sources, ast.Name):
            sources = _unconditional_value(sources.id, self.tree.body)
        return isinstance(sources, ast.List) and not sources.elts

    def read_test(self, condition: ast.AST) -> None:
        """A condition (``if``, ``x if test else y``) that sends the CPU elsewhere:
        ``x.device.type == "cpu"``, ``x.is_cuda``, ``torch.cuda.is_available()``; not one that
        only refuses it (``if not x.is_cuda: raise NotImplementedError``)."""
        if self.tests_cpu or _refuses(condition):
            return
        for node in nodes_below(condition.test):
            if isinstance(node, ast.Constant) and node.value in ("cpu", "cuda"):
                self.tests_cpu = True
            elif isinstance(node, ast.Attribute) and node.attr in ("is_cuda", "is_available"):
                self.tests_cpu = True


@lru_cache(maxsize=8)
def cuda_class_names(tree: ast.Module) -> FrozenSet[str]:
    """The names a module binds to ``CUDAExtension`` and builds through (``extension(...)``)."""
    return frozenset(name for name, builder in KernelReader(tree).builder_names.items() if builder == "CUDAExtension")


def _lines(statement: ast.stmt) -> Span:
    """First (its decorators included) and last line of a statement."""
    first = min([statement.lineno, *(decorator.lineno for decorator in getattr(statement, "decorator_list", ()))])
    return first, getattr(statement, "end_lineno", None) or statement.lineno


def _refuses(condition: ast.AST) -> bool:
    """An ``if`` one branch of which only raises: the other is the only way on."""
    return isinstance(condition, ast.If) and any(
        len(branch) == 1 and isinstance(branch[0], ast.Raise) for branch in (condition.body, condition.orelse)
    )


def _assigns_true(name: str, block: Iterable[ast.stmt]) -> bool:
    return any(
        isinstance(statement, ast.Assign) and any(isinstance(target, ast.Name) and target.id == name for target in statement.targets)
        and isinstance(statement.value, ast.Constant) and statement.value.value is True
        for statement in block
    )


def _always_true(name: str, body: Iterable[ast.stmt]) -> bool:
    """Whether the module binds ``name`` true on every path past its top level: unconditionally,
    or in one branch of an ``if`` the other branch of which raises."""
    for statement in body:
        if _assigns_true(name, [statement]):
            return True
        if isinstance(statement, ast.If):
            for branch, other in ((statement.body, statement.orelse), (statement.orelse, statement.body)):
                if _assigns_true(name, branch) and other and isinstance(other[-1], ast.Raise):
                    return True
    return False


def _unconditional_value(name: str, body: Iterable[ast.stmt]) -> Optional[ast.expr]:
    """The value the module first binds ``name`` to at its top level, where no later top-level
    statement adds to it (``sources += [...]`` outside an ``if``; a comprehension over it, such
    as ``[os.path.join(here, f) for f in sources]``, keeps its length)."""
    value = None
    for statement in body:
        if isinstance(statement, ast.Assign) and any(isinstance(target, ast.Name) and target.id == name for target in statement.targets):
            mapped = statement.value
            if isinstance(mapped, ast.ListComp) and len(mapped.generators) == 1 and not mapped.generators[0].ifs:
                iterated = mapped.generators[0].iter
                if isinstance(iterated, ast.Name) and iterated.id == name:
                    continue
            if value is not None:
                return None
            value = statement.value
        elif isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name) and statement.target.id == name:
            return None
    return value


def well_formed(kernels: object) -> bool:
    """Whether stored kernel facts have the shape ``KernelReader.facts`` gives them."""
    if kernels == {}:
        return True
    if not isinstance(kernels, dict) or set(kernels) != {"builds", "imports", "scopes", "tests_cpu", "end"}:
        return False
    builds, imports, scopes = kernels["builds"], kernels["imports"], kernels["scopes"]
    return (
        isinstance(builds, list) and all(_shaped(build, (str, bool, int, int, int)) for build in builds)
        and isinstance(imports, dict) and all(isinstance(local, str) and _shaped(bound, (str, bool)) for local, bound in imports.items())
        and isinstance(scopes, list) and all(_shaped(scope, (int, int, list)) and all(isinstance(n, str) for n in scope[2]) for scope in scopes)
        and isinstance(kernels["tests_cpu"], bool) and isinstance(kernels["end"], int)
    )


def _shaped(value: object, kinds: tuple) -> bool:
    return isinstance(value, list) and len(value) == len(kinds) and all(isinstance(part, kind) for part, kind in zip(value, kinds))


def short_name(dotted: str) -> str:
    """``pkg._C`` and ``._C`` -> ``_C``: the name the rule reports a kernel by."""
    return dotted.rsplit(".", 1)[-1]


def kernel_key(built: str) -> str:
    """What a build names its module (``_ext.dcn_v2``, ``fused_ops``), leading dots aside."""
    return built.lstrip(".")


def names_kernel(dotted: str, kernel: str) -> bool:
    """Whether an import (``._ext.dcn_v2``, ``pkg._C``, ``._C``) names the kernel a build makes:
    the same last name and, where the build names its package (``_ext.dcn_v2``), the same
    package or a relative import from it (``from . import _C``): ``import dcn_v2`` is the
    project's own module beside the ``_ext.dcn_v2`` kernel."""
    head = dotted.rpartition(".")[0]
    if head.strip(".") and head.rsplit(".", 1)[-1] == kernel.rsplit(".", 1)[-1] and names_kernel(head, kernel):
        return True  # a name taken from the kernel (autonomousvision/occupancy_networks@406f794 ``from ._cuda_ext import f``)
    parts, wanted = dotted.split("."), kernel.split(".")
    if parts[-1] != wanted[-1]:
        return False
    if len(wanted) == 1:
        return True
    before = [part for part in parts[:-1] if part]
    return before[-1] == wanted[-2] if before else dotted.startswith(".")


def _reraises(handler: ast.ExceptHandler) -> bool:
    """Whether an ``except`` block raises, at most after messages or behind a bare ``if`` (a
    flag only ``setup.py`` sets): what follows the ``try`` never runs without what it imports."""
    body = handler.body
    last = body[-1]
    raises = type(last) is ast.Raise or (type(last) is ast.If and not last.orelse and type(last.body[-1]) is ast.Raise)
    return raises and all(type(statement) in (ast.Expr, ast.Pass) for statement in body[:-1])


class CudaOnlyCode:
    """A project's CUDA-only kernels and the code that exists only to drive them: ``spans`` (the
    lines of that code by module path) and ``builds`` (for each module that builds such a
    kernel: its name -> [lines that depend on it, files they are in])."""

    def __init__(self, modules: Mapping[str, dict]) -> None:
        self.builds: Dict[str, Dict[str, list]] = {}
        # a module that imports TensorRT (or another NVIDIA-only package) unconditionally
        self.spans: Dict[str, Tuple[Span, ...]] = {
            path: ((1, facts["end"]),) for path, facts in modules.items()
            if facts and any(not guarded and dotted.split(".")[0] in NVIDIA_ONLY_PACKAGES for dotted, guarded in facts["imports"].values())
        }
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
                        whole[_module_name(path)] = kernel
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
                for name, cuda, _, first, last in facts.get("builds", ()) if lines else ():
                    if cuda and kernel_key(name) == kernel:
                        self.builds.setdefault(path, {})[short_name(kernel)] = [lines, len(joined)]
                        # the build's own statement (a refusal beside it, a capability query) is CUDA's too
                        merged.setdefault(path, []).append((first, last))
        for path, spans in self.spans.items():
            merged.setdefault(path, []).extend(spans)
        self.spans = {path: tuple(_merged(spans)) for path, spans in merged.items()}


def _cuda_only_kernels(modules: Mapping[str, dict]) -> Set[str]:
    """The kernels built from CUDA sources only: no CPU build of the name in the project, nor a
    CPU build in the module that builds it where that module chooses by what the machine has
    (``psamask_cpu`` beside ``psamask_gpu`` under ``if torch.cuda.is_available():``), and no
    module of the project an import of that name finds (a wrapper ``correlation.py`` beside a
    ``correlation`` kernel could not be told from it)."""
    cuda, cpu = set(), set()
    for facts in modules.values():
        builds = facts.get("builds", ())
        chosen = facts.get("tests_cpu") and any(not build[1] for build in builds)
        for name, built_for_cuda, *_ in builds:
            (cuda if built_for_cuda and not chosen else cpu).add(kernel_key(name))
    return {kernel for kernel in cuda - cpu if not any(_shadows(path, kernel) for path in modules)}


def _shadows(path: str, kernel: str) -> bool:
    """Whether the module at ``path`` is what an import of the kernel's name finds."""
    file, wanted = PurePath(path), kernel.split(".")
    return file.stem == wanted[-1] and (len(wanted) == 1 or file.parent.name == wanted[-2])


def _uses(facts: dict, kernels: Set[str]) -> Dict[str, List[str]]:
    """Kernel -> the module's local names bound to it."""
    used: Dict[str, List[str]] = {}
    for local, (dotted, _) in facts["imports"].items():
        for kernel in kernels:
            if names_kernel(dotted, kernel):
                used.setdefault(kernel, []).append(local)
    return used


def _driving_spans(facts: dict, locals_: Iterable[str]) -> List[Span]:
    """The whole module where it binds the kernel unconditionally (it cannot be imported without
    it), else the functions, methods and autograd Functions that call into it."""
    locals_ = list(locals_)
    if any(not facts["imports"][local][1] for local in locals_):
        return [(1, facts["end"])]
    return [(first, last) for first, last, receivers in facts["scopes"] if any(local in receivers for local in locals_)]


def _module_name(path: str) -> str:
    """What an import names the module at ``path`` by: a package's ``__init__.py`` by its folder
    (Pang-Yatian/Point-MAE@7445a68 extensions/chamfer_dist/test.py:20 imports the package)."""
    file = PurePath(path)
    return file.parent.name if file.stem == "__init__" else file.stem


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
