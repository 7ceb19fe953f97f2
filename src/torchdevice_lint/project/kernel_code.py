"""Where a project's code can only run on CUDA because it drives a CUDA-only extension kernel:
the project-level combination of the modules' kernel facts (``kernels.KernelReader``)."""

from __future__ import annotations

from pathlib import PurePath
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from ..knowledge.cst_guards import NVIDIA_ONLY_PACKAGES
from .kernels import Span


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


class CudaOnlyCode:
    """A project's CUDA-only kernels and the code that exists only to drive them: ``spans`` (the
    lines of that code by module path) and ``builds`` (for each module that builds such a
    kernel: its name -> [lines that depend on it, files they are in])."""

    def __init__(self, modules: Mapping[str, dict], find: Optional[Callable[[str, str], Optional[str]]] = None) -> None:
        """``find``: the path of the project's module an import names from a module (``ImportResolver.find``)."""
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
        driving: Dict[str, Dict[str, List[Span]]] = {kernel: {} for kernel in sorted(kernels)}
        whole: Dict[str, str] = {}  # module stem -> the kernel it cannot be imported without
        binding: Dict[str, str] = {}  # the same by path
        for path, used in users.items():
            for kernel, locals_ in used.items():
                if kernel in kernels:
                    spans = _driving_spans(modules[path], locals_)
                    driving[kernel].setdefault(path, []).extend(spans)
                    if spans == [(1, modules[path]["end"])]:
                        whole[_module_name(path)] = binding[path] = kernel
        for path, kernel in _importing(modules, binding, find).items() if find is not None else ():
            driving[kernel].setdefault(path, []).append((1, modules[path]["end"]))
        for path, facts in modules.items():
            kernel = _tested_kernel(path, facts, whole) if path not in users or not users[path] else None
            if kernel is not None:
                driving[kernel].setdefault(path, []).append((1, facts["end"]))
        for path, (kernel, block) in _self_tests(modules, whole).items():
            driving[kernel].setdefault(path, []).append(block)
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


def _importing(modules: Mapping[str, dict], binding: Mapping[str, str], find: Callable[[str, str], Optional[str]]) -> Dict[str, str]:
    """Path -> the kernel of each module that imports, unconditionally and through the project's
    modules, one that binds a CUDA-only kernel at import: none of its lines runs without CUDA
    (AllenXiangX/SnowflakeNet@0880ba1 completion/train.py -> models/model_completion.py ->
    models/utils.py -> pointnet2_ops: the program needs the kernel to start)."""
    needing = dict(binding)
    grown = True
    while grown:
        grown = False
        for path, facts in modules.items():
            if not facts or path in needing:
                continue
            for dotted, guarded in facts["imports"].values():
                target = None if guarded else find(path, dotted) or (find(path, dotted.rpartition(".")[0]) if dotted.strip(".").count(".") else None)
                if target in needing:
                    needing[path], grown = needing[target], True
                    break
    return {path: kernel for path, kernel in needing.items() if path not in binding}


def _cuda_only_kernels(modules: Mapping[str, dict]) -> Set[str]:
    """The kernels built from CUDA sources only: no CPU build of the name in the project, nor a
    CPU build in the module that builds it where that module chooses by what the machine has
    (``psamask_cpu`` beside ``psamask_gpu`` under ``if torch.cuda.is_available():``), and no
    module of the project an import of that name finds (a wrapper ``correlation.py`` beside a
    ``correlation`` kernel could not be told from it) other than the one that builds it and binds
    what ``load()`` returns (cszn/KAIR@fc1732f models/op/deform_attn.py:19 builds ``deform_attn``)."""
    cuda, cpu = set(), set()
    builders: Dict[str, Set[str]] = {}
    for path, facts in modules.items():
        builds = facts.get("builds", ())
        chosen = facts.get("tests_cpu") and any(not build[1] for build in builds)
        for name, built_for_cuda, *_ in builds:
            (cuda if built_for_cuda and not chosen else cpu).add(kernel_key(name))
            builders.setdefault(kernel_key(name), set()).add(path)
    return {kernel for kernel in cuda - cpu if not any(_shadows(path, kernel) for path in modules if path not in builders[kernel])}


def _shadows(path: str, kernel: str) -> bool:
    """Whether the module at ``path`` is what an import of the kernel's name finds."""
    file, wanted = PurePath(path), kernel.split(".")
    return file.stem == wanted[-1] and (len(wanted) == 1 or file.parent.name == wanted[-2])


def _uses(facts: dict, kernels: Set[str]) -> Dict[str, List[str]]:
    """Kernel -> the module's local names bound to it."""
    used: Dict[str, List[str]] = {}
    for local, (dotted, _) in facts["imports"].items():
        for kernel in sorted(kernels):  # a module may drive two builds of one kernel: the same one wins each run
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
    """A module that tests something by its name or its folder's (``test.py``, ``test_fused.py``,
    ``tests/``): run by hand or by a runner, it exists for what it imports."""
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


def _self_tests(modules: Mapping[str, dict], whole: Mapping[str, str]) -> Dict[str, Tuple[str, Span]]:
    """Path -> (kernel, lines) of the ``__main__`` blocks that exercise a module other modules
    import and that cannot be imported without a CUDA-only kernel, directly or through the
    project's modules (Yochengliu/Relation-Shape-CNN@6464eb8 utils/pointnet2_modules.py:247,
    models/rscnn_ssn_cls.py:100): a self-test of kernel code, not a program of its own."""
    imports = {
        path: [(dotted.lstrip(".").split(".")[-2:], guarded) for dotted, guarded in facts["imports"].values()]
        for path, facts in modules.items() if facts
    }
    imported = {part for found in imports.values() for parts, _ in found for part in parts}
    needing = dict(whole)  # module name -> the kernel it cannot be imported without
    grown = True
    while grown:
        grown = False
        for path, found in imports.items():
            name = _module_name(path)
            kernel = next((needing[part] for parts, guarded in found if not guarded for part in parts if part in needing and part != name), None)
            if kernel is not None and name not in needing:
                needing[name], grown = kernel, True
    return {
        path: (needing[_module_name(path)], (facts["main"][0], facts["main"][1]))
        for path, facts in modules.items()
        if facts and facts["main"] and _module_name(path) in needing and _module_name(path) in imported
    }


def _merged(spans: Iterable[Span]) -> List[Span]:
    joined: List[Span] = []
    for first, last in sorted(spans):
        if joined and first <= joined[-1][1] + 1:
            joined[-1] = (joined[-1][0], max(last, joined[-1][1]))
        else:
            joined.append((first, last))
    return joined
