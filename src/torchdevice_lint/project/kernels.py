"""CUDA-only extension kernels: what one module says of them, and the code of a project that can
only run on CUDA because it drives one.

A project that builds a kernel from ``.cu`` sources (``CUDAExtension`` in ``setup.py``,
``torch.utils.cpp_extension.load(sources=[..., "x.cu"])``, a ``CppExtension`` given ``.cu`` sources
(``BuildExtension`` compiles them with nvcc), ``load_inline(cuda_sources=...)``, a
plain setuptools ``Extension(..., sources=["x.cu", ...])`` compiled by nvcc, or torch < 1.0's
``torch.utils.ffi.create_extension`` with ``with_cuda`` set wherever the build goes on) calls it from autograd Functions, wrappers and test scripts whose ``.cuda()`` cannot be made
portable: the kernel only takes CUDA tensors. That code is one project-level finding at the build
(TDV310), not one per line. A kernel with a CPU build, or whose callers fall back to native code
on the CPU (``if x.device.type == "cpu":``, not ``if not x.is_cuda: raise``), is not CUDA-only,
and its callers are judged as usual. A CUDA build beside a CPU build is CUDA-only only where the
module builds it unconditionally (``psamask_gpu`` under ``if torch.cuda.is_available():`` is a choice).

Each module contributes plain data, cached by content hash with its other facts: the builds it
makes, the modules it imports (other than the standard library's and the big libraries', and
functions that import one and return it: a lazy getter), the functions, methods and autograd
Functions that call into an imported module, whether it tests for the CPU, and where its ``__main__``
block is. ``kernel_code.py``
combines them for the project.
"""

from __future__ import annotations

import ast
import sys
from functools import cached_property, lru_cache
from typing import Dict, FrozenSet, Iterable, Iterator, List, Optional, Set, Tuple

from ..syntax.ast_nodes import block_statements, child_blocks, dotted_name, file_aliases, is_main_check, keyword_value, last_name, literal_string, nodes_below

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
        #: The lines of the ``if __name__ == "__main__":`` block, ``[]`` where there is none.
        self.main_block: List[int] = []
        for statement in tree.body:
            self._read_binding(statement, guarded=False)
            if isinstance(statement, ast.If) and is_main_check(statement.test):
                self.main_block = [statement.lineno, statement.end_lineno or statement.lineno]

    def facts(self) -> dict:
        """The plain data kept for the module: empty where it neither builds nor imports a
        possible kernel."""
        if not (self.builds or self.imports):
            return {}
        scopes = [scope for scope in self.scopes if scope[2]]
        return {
            "builds": self.builds, "imports": self.imports, "scopes": scopes, "tests_cpu": self.tests_cpu,
            "end": self.end, "main": self.main_block,
        }

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
        elif isinstance(statement, ast.Try) and statement.handlers and all(
            _reraises(handler) or self._rebuilds(handler, _imported_names(statement.body)) for handler in statement.handlers
        ):
            # ``try: import pointnet2._ext`` whose every handler raises again (facebookresearch/
            # votenet@2f6d6d3 pointnet2/pointnet2_utils.py:25) or builds it from CUDA sources
            # (AllenXiangX/SnowflakeNet@0880ba1 models/pointnet2_ops_lib/pointnet2_ops/pointnet2_utils.py:7-33):
            # the module needs the kernel
            for inner in statement.body:
                self._read_binding(inner, guarded)
        elif isinstance(statement, ast.FunctionDef):
            imported = _returned_import(statement)
            if imported is not None:
                self._import(statement.name, imported, guarded)  # ``get_backend()`` returns the kernel
        elif not isinstance(statement, (ast.AsyncFunctionDef, ast.ClassDef)):
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
            if type(func) is ast.Call:  # ``get_backend().near_far_from_aabb(...)``
                func = func.func
            if type(func) is ast.Name and func.id in self.imports and func.id not in scope[2]:
                scope[2].append(func.id)

    def _read_build(self, call: ast.Call, builder: str) -> None:
        name = self._module_name(call)
        cuda = self._builds_cuda(call, builder) if name is not None else None
        if cuda is not None:
            self.builds.append([name, cuda, call.lineno, *self._top_level_span(call.lineno)])

    def _builds_cuda(self, call: ast.Call, builder: str) -> Optional[bool]:
        """Whether a build compiles CUDA code; None where its sources are computed out of sight."""
        if builder == "load_inline":
            sources = keyword_value(call, "cuda_sources")
            return sources is not None and not (isinstance(sources, ast.Constant) and sources.value is None)
        if builder in ("load", "Extension", "CppExtension"):
            sources = keyword_value(call, "sources") or (call.args[1] if len(call.args) > 1 else None)
            if isinstance(sources, ast.Name):  # ``sources=_ext_sources``, globbed once (erikwijmans/Pointnet2_PyTorch's pointnet2_utils.py)
                sources = self._only_value(sources.id)
            names = [literal_string(node) for node in nodes_below(sources)] if sources is not None else []
            with_cuda = keyword_value(call, "with_cuda")
            if builder == "load" and isinstance(with_cuda, ast.Constant) and with_cuda.value is True:
                return True
            if not any(names) and builder != "CppExtension":
                return None  # sources computed elsewhere: what they build is unknown
            objects = keyword_value(call, "extra_objects")
            names += [literal_string(node) for node in ast.walk(objects)] if objects is not None else []
            return any(name and name.endswith(CUDA_SOURCE_SUFFIXES) for name in names)
        if builder == "create_extension":
            return self._needs_cuda(keyword_value(call, "with_cuda"), keyword_value(call, "sources"))
        return builder == "CUDAExtension"

    def _only_value(self, name: str) -> Optional[ast.expr]:
        """The value of the one assignment anywhere in the module that binds ``name``."""
        values = [
            node.value for node in ast.walk(self.tree) if type(node) is ast.Assign
            and any(type(target) is ast.Name and target.id == name for target in node.targets)
        ]
        return values[0] if len(values) == 1 else None

    def _rebuilds(self, handler: ast.ExceptHandler, names: Set[str]) -> bool:
        """Whether an ``except`` block binds each of ``names`` to a CUDA build of its own (a
        prebuilt kernel's import, else compiled on the spot: no CPU fallback)."""
        built = {
            target.id for statement in handler.body if type(statement) is ast.Assign and type(statement.value) is ast.Call
            and last_name(statement.value.func) in BUILDER_NAMES and self._builder(statement.value.func) is not None
            and self._builds_cuda(statement.value, self._builder(statement.value.func))
            for target in statement.targets if type(target) is ast.Name
        }
        return bool(names) and names <= built

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
        only refuses it (``if not x.is_cuda: raise NotImplementedError``) or moves it to CUDA
        (``if not rays_o.is_cuda: rays_o = rays_o.cuda()``, ashawkey/stable-dreamfusion@5550b91
        raymarching/raymarching.py:46)."""
        if self.tests_cpu or _refuses(condition) or _moves_to_cuda(condition):
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


def _returned_import(function: ast.FunctionDef) -> Optional[str]:
    """What a function that imports a module and returns it names (a lazy kernel getter:
    ashawkey/stable-dreamfusion@5550b91 raymarching/raymarching.py:14-24, ``import _raymarching as
    _backend`` or ``from .backend import _backend``, kept in a global and returned)."""
    imported: Dict[str, str] = {}
    kept: Dict[str, str] = {}
    returned: List[str] = []
    for node in block_statements(function.body):  # statements only: imports, bindings, returns
        if isinstance(node, ast.Import):  # the first import of a name (the ``try`` body's) is kept
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name.split(".")[0], alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            prefix = "." * node.level + (f"{node.module}." if node.module else "")
            for alias in node.names:
                imported.setdefault(alias.asname or alias.name, prefix + alias.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) and isinstance(node.value, ast.Name):
            kept[node.targets[0].id] = node.value.id
        elif isinstance(node, ast.Return) and isinstance(node.value, ast.Name):
            returned.append(node.value.id)
    names = [imported.get(kept.get(name, name)) for name in returned]
    return names[0] if names and None not in names and names[0].lstrip(".").split(".")[0] not in LIBRARIES else None


def _moves_to_cuda(condition: ast.AST) -> bool:
    """An ``if`` without ``else`` whose body only moves values with ``.cuda()``."""
    return isinstance(condition, ast.If) and not condition.orelse and all(
        isinstance(statement, (ast.Assign, ast.Expr)) and isinstance(statement.value, ast.Call)
        and isinstance(statement.value.func, ast.Attribute) and statement.value.func.attr == "cuda"
        for statement in condition.body
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


def _imported_names(body: Iterable[ast.stmt]) -> Set[str]:
    """The local names the imports of a block bind."""
    return {
        alias.asname or alias.name.split(".")[0] if type(statement) is ast.Import else alias.asname or alias.name
        for statement in body if type(statement) in (ast.Import, ast.ImportFrom) for alias in statement.names
    }


def _reraises(handler: ast.ExceptHandler) -> bool:
    """Whether an ``except`` block raises, at most after messages or behind a bare ``if`` (a
    flag only ``setup.py`` sets): what follows the ``try`` never runs without what it imports."""
    body = handler.body
    last = body[-1]
    raises = type(last) is ast.Raise or (type(last) is ast.If and not last.orelse and type(last.body[-1]) is ast.Raise)
    return raises and all(type(statement) in (ast.Expr, ast.Pass) for statement in body[:-1])
