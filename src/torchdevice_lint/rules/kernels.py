"""Extension kernels built for CUDA only (``CUDAExtension``, ``cpp_extension.load`` of ``.cu``
sources, ``torch.utils.ffi`` with CUDA): one finding at the build, in place of the device findings
in the code that drives the kernel, which the project model finds (``project/kernels.py``)."""

from __future__ import annotations

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import BuildsCudaKernel, Resolved
from ..project.kernels import cuda_class_names
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import string_value
from .support.common import positional
from .support.kernel_examples import (
    ALIASED_FUNCTION, ALIASED_REFUSAL, ALIASED_SETUP, ALIASED_TEST, FFI_BUILD, FFI_FUNCTION, FFI_TEST, JIT_KERNEL_MODULE, JIT_KERNEL_NETWORK,
    KERNEL_FUNCTION, KERNEL_SETUP, KERNEL_TEST, KERNEL_WITH_FALLBACK, NMS_WRAPPERS, NVCC_SETUP,
)

CUDA_BUILDS = (
    *(f"torch.utils.cpp_extension.{name}" for name in ("CUDAExtension", "CppExtension", "load", "load_inline")),
    "torch.utils.ffi.create_extension",
    *(f"{module}.Extension" for module in ("setuptools", "setuptools.extension", "distutils.core", "distutils.extension")),
)


class CudaOnlyExtension(Rule):
    code = "TDV310"
    name = "cuda-only-extension"
    message = "`{}` is a CUDA-only extension kernel (no CPU build, no CPU fallback): {} lines in {} that drive it run only on CUDA"
    what = (
        "Checks for an extension kernel built from CUDA sources only (`CUDAExtension(...)`, "
        "`torch.utils.cpp_extension.load(sources=[..., 'x.cu'])`, a `CppExtension` given `.cu` sources "
        "(`BuildExtension` compiles them with nvcc), `load_inline(cuda_sources=...)`, "
        "a setuptools `Extension(..., sources=['x.cu', ...])` compiled by nvcc, or "
        "`torch.utils.ffi.create_extension(...)` whose `with_cuda` is set wherever the build goes on) "
        "that the project drives from code that cannot run without it: modules that import it "
        "unconditionally (directly or through the project's modules: a program whose network "
        "cannot be imported without the kernel never starts on a machine without CUDA), functions, "
        "methods and autograd Functions that call into it, and the tests of those modules. One finding per kernel, at its build, in place of the device findings in "
        "that code (`.cuda()`, `\"cuda\"`, `torch.cuda` calls, ...): the kernel takes CUDA tensors only, "
        "so they cannot be made portable one by one. A kernel with a CPU build beside it, or whose "
        "callers run native code on the CPU (`if x.device.type == 'cpu':`, not `raise` there), is not reported, and "
        "its callers are judged as usual. A file judged alone (on stdin) has no project: not reported."
    )
    why = (
        "A project that needs CUDA to run at all deserves one clear finding, not forty: the `.cuda()` lines in "
        "front of such a kernel are what it needs; the only portable change is a CPU build or a native fallback."
    )
    offers_fix = False
    fix_safety_note = "There is no fix: a CPU implementation of the kernel is the project's to write."
    # a build through a name bound to the class (``extension = CUDAExtension``) needs its import
    # only a build the project model found CUDA-only (a file without its project has none)
    triggers = BuildsCudaKernel() & (Resolved(CUDA_BUILDS, calls=True) | Resolved(("torch.utils.cpp_extension.CUDAExtension",)))
    valid = (
        # the wrapper falls back to native code on the CPU: the kernel is not CUDA-only
        Valid(KERNEL_WITH_FALLBACK, files={"test_fused.py": "from example import fused_act\n\n\ndef test_cpu():\n    fused_act(torch.randn(4))\n"}),
        # a CPU build of the extension beside the CUDA one
        Valid(
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension, CUDAExtension\n\n"
            "setup(ext_modules=[CppExtension('fused_ops', ['fused.cpp']), CUDAExtension('fused_ops_cuda', ['fused_kernel.cu'])])\n",
            files={"fused.py": KERNEL_FUNCTION},
        ),
        # a project without kernels: nothing to report
        Valid(
            "from setuptools import setup\nfrom torch.utils.cpp_extension import CppExtension\n\n"
            "setup(ext_modules=[CppExtension('fused_ops', ['fused.cpp'])])\n",
            files={"fused.py": KERNEL_FUNCTION, "test_fused.py": KERNEL_TEST},
        ),
        # the build binds the CUDA class where CUDA is found and goes on with the CPU one elsewhere
        Valid(ALIASED_SETUP.format(""), files={"dcn_v2.py": ALIASED_FUNCTION, "test_dcn.py": ALIASED_TEST}),
        # nothing in the project calls the kernel
        Valid(KERNEL_SETUP, files={"train.py": "import torch\nmodel = torch.nn.Linear(2, 2).cuda()\n"}),
        # the setup script judged alone: no project to read
        Valid(KERNEL_SETUP),
        # torch.utils.ffi: the CPU build goes on without CUDA (a C source, with_cuda left false)
        Valid(FFI_BUILD.format(""), files={"dcn.py": FFI_FUNCTION.replace("raise NotImplementedError", "return backend.dcn_forward(x)"), "test_dcn.py": FFI_TEST}),
        # the module building the CUDA kernel chooses by what the machine has, and its caller too
        Valid(
            "import torch\nfrom setuptools import setup, Extension\n\nmodules = [Extension('cpu_nms', ['cpu_nms.pyx'])]\n"
            "if torch.cuda.is_available():\n    modules.append(Extension('gpu_nms', ['nms_kernel.cu', 'gpu_nms.pyx']))\nsetup(ext_modules=modules)\n",
            files={"nms.py": "import torch\nif torch.cuda.is_available():\n    from gpu_nms import gpu_nms\n\n\n"
                   "def nms(dets, thresh):\n    return gpu_nms(dets.cuda(), thresh) if dets.is_cuda else cpu_nms(dets, thresh)\n"},
        ),
    )
    invalid = (
        # the kernel, its autograd Function and its test: one finding, none in the test
        Invalid(KERNEL_SETUP, files={"fused.py": KERNEL_FUNCTION, "test_fused.py": KERNEL_TEST}, offers_fix=False),
        Invalid(
            "import torch\nfrom torch.utils.cpp_extension import load\n\nfused = load(name='fused', sources=['fused.cpp', 'fused_kernel.cu'])\n\n\n"
            "def fused_act(x):\n    return fused.forward(x.cuda())\n",
            files={"train.py": "from example import fused_act\nfused_act(x)\n"},
            offers_fix=False,
        ),
        Invalid(
            "import torch\nimport torch.utils.cpp_extension as extension\n\nops = extension.load_inline('ops', cpp_sources=CPP, cuda_sources=CUDA)\n\n\n"
            "def scale(x):\n    return ops.scale(x.to('cuda'))\n",
            files={"train.py": "from example import scale\nscale(x)\n"},
            offers_fix=False,
        ),
        # torch.utils.ffi, refusing to build without CUDA; its Function refuses CPU tensors (no
        # fallback); the wrapper module named like the kernel is not the kernel
        Invalid(
            FFI_BUILD.format("else:\n    raise ValueError('CUDA is not available')"),
            files={"dcn.py": FFI_FUNCTION, "test_dcn.py": FFI_TEST},
            offers_fix=False,
        ),
        # torch.utils.ffi with no C source but those CUDA adds
        Invalid(
            FFI_BUILD.replace("['src/dcn.c']", "[]").format(""),
            files={"dcn.py": FFI_FUNCTION.replace("        if not x.is_cuda:\n            raise NotImplementedError\n", "")},
            offers_fix=False,
        ),
        # DCNv2: built through a name bound to the CUDA class, with a refusal where CUDA is missing
        Invalid(ALIASED_SETUP.format(ALIASED_REFUSAL), files={"dcn_v2.py": ALIASED_FUNCTION, "test_dcn.py": ALIASED_TEST}, offers_fix=False),
        # built at import by the module named like it, which a network module imports
        Invalid(JIT_KERNEL_MODULE.format("example"), files={"net.py": JIT_KERNEL_NETWORK.replace("ops.deform_attn", "example")}, offers_fix=False),
        # a plain setuptools Extension compiled by nvcc, imported unconditionally
        Invalid(NVCC_SETUP, files={"nms.py": NMS_WRAPPERS}, offers_fix=False),
        # frostinassiky/gtad@6deb5b1 gtad_lib/setup.py:14-20: a CppExtension given a .cu source
        Invalid(KERNEL_SETUP.replace("CUDAExtension", "CppExtension"), files={"fused.py": KERNEL_FUNCTION, "test_fused.py": KERNEL_TEST}, offers_fix=False),
        # imported only where it was built: the autograd Function still cannot run without it
        Invalid(
            KERNEL_SETUP,
            files={"corr.py": "import torch\ntry:\n    import fused_ops\nexcept ImportError:\n    fused_ops = None\n\n\n"
                   "class Corr(torch.autograd.Function):\n    @staticmethod\n    def forward(ctx, x):\n        return fused_ops.corr(x.cuda())\n"},
            offers_fix=False,
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if self.ctx.qualname(node.func) not in CUDA_BUILDS and not (
            isinstance(node.func, cst.Name) and self.ctx.project.cuda_kernels and node.func.value in cuda_class_names(self.ctx.python_tree())
        ):
            return
        named = next((arg.value for arg in node.args if arg.keyword is not None and arg.keyword.value == "name"), None)
        arguments = positional(node)
        written = named if named is not None else arguments[0].value if arguments else None
        name = string_value(written) if isinstance(written, cst.SimpleString) else None
        depending = self.ctx.project.cuda_kernel(self.ctx.path, name) if name else None
        if depending is not None:
            lines, files = depending
            self.report(node, self.message.format(name, lines, f"{files} file" + ("s" if files > 1 else "")))


RULES = (CudaOnlyExtension,)
