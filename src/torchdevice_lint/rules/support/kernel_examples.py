"""Example projects of extension kernels that several rules' valid/invalid examples share
(TDV101, TDV201, TDV310...): a CUDA-only build, the code that drives it, its tests and self-tests."""

from __future__ import annotations

from typing import Tuple

from ...engine.rule import Invalid, Valid

KERNEL_SETUP = (
    "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n\n"
    "setup(\n    name='fused',\n    ext_modules=[CUDAExtension('fused_ops', ['fused.cpp', 'fused_kernel.cu'])],\n"
    "    cmdclass={'build_ext': BuildExtension},\n)\n"
)
KERNEL_FUNCTION = (
    "import torch\nimport fused_ops\n\n\nclass FusedAct(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return fused_ops.forward(x)\n"
)
KERNEL_TEST = (
    "import torch\nfrom fused import FusedAct\n\n\ndef test_forward():\n    x = torch.randn(8).cuda()\n"
    "    torch.testing.assert_close(FusedAct.apply(x), torch.relu(x))\n    torch.cuda.synchronize()\n"
)
#: The same kernel behind a wrapper that runs native code on the CPU.
KERNEL_WITH_FALLBACK = (
    "import torch\nfrom torch.utils.cpp_extension import load\n\nfused = load('fused', sources=['fused.cpp', 'fused_kernel.cu'])\n\n\n"
    "def fused_act(x):\n    if x.device.type == 'cpu':\n        return torch.relu(x)\n    return fused.forward(x)\n"
)

#: Code that calls it (``{}``: where a device binding goes, then what moves ``x``).
KERNEL_CALLER = "import torch\nfrom fused_act import fused_act\n\n{}x = torch.randn(4){}\ny = fused_act(x)\n"
#: A model that may run without the CUDA-only kernel (``fused=False``), in the same fashion.
LAYER_USER = (
    "import torch\nfrom fused import FusedAct\n\n{}\nclass Net(torch.nn.Module):\n    def forward(self, x, fused=False):\n"
    "        return FusedAct.apply(x) if fused else torch.relu(x)\n\n\nnet = torch.nn.Sequential(torch.nn.Linear(4, 4), Net()){}\n"
)

#: torch < 1.0's build of a kernel: ``with_cuda`` where CUDA is there, a refusal elsewhere
#: (``{}``: what the build does without CUDA).
FFI_BUILD = (
    "import torch\nfrom torch.utils.ffi import create_extension\n\nsources = ['src/dcn.c']\nwith_cuda = False\n"
    "if torch.cuda.is_available():\n    sources += ['src/dcn_cuda.c']\n    with_cuda = True\n{}\n"
    "ffi = create_extension('_ext.dcn', sources=sources, with_cuda=with_cuda, extra_objects=['src/dcn_kernel.cu.o'])\n"
)
#: Its autograd Function, which refuses CPU tensors: a refusal is no fallback.
FFI_FUNCTION = (
    "import torch\nfrom torch.autograd import Function\nfrom _ext import dcn as backend\n\n\nclass DCNFunction(Function):\n"
    "    def forward(self, x):\n        if not x.is_cuda:\n            raise NotImplementedError\n        return backend.dcn_cuda_forward(x)\n"
)
#: The kernel's test script, which imports the Function's module (named like the kernel).
FFI_TEST = "import torch\nfrom dcn import DCNFunction\n\nx = torch.randn(2, 4).cuda()\ny = DCNFunction()(x)\n"
#: A plain setuptools build whose ``gpu_nms`` is compiled by nvcc, and the module that imports it.
NVCC_SETUP = (
    "from setuptools import setup, Extension\n\nsetup(name='nms', ext_modules=[\n    Extension('cpu_nms', ['cpu_nms.pyx']),\n"
    "    Extension('gpu_nms', ['nms_kernel.cu', 'gpu_nms.pyx'], libraries=['cudart']),\n])\n"
)
NMS_WRAPPERS = (
    "from cpu_nms import cpu_nms\nfrom gpu_nms import gpu_nms\n\n\ndef gpu_nms_wrapper(thresh, device_id):\n"
    "    return lambda dets: gpu_nms(dets, thresh, device_id).cuda()\n"
)
#: DCNv2's build (dbolya/yolact@902073d external/DCNv2/setup.py): the class bound to a name, CUDA's
#: where CUDA is found, a refusal elsewhere; its CPU sources are stubs. ``{}``: what happens without CUDA.
ALIASED_SETUP = (
    "import glob\nimport torch\nfrom setuptools import setup\nfrom torch.utils.cpp_extension import CUDA_HOME, CppExtension, CUDAExtension\n\n\n"
    "def get_extensions():\n    sources = glob.glob('src/*.cpp') + glob.glob('src/cpu/*.cpp')\n    extension = CppExtension\n"
    "    if torch.cuda.is_available() and CUDA_HOME is not None:\n        extension = CUDAExtension\n"
    "        sources += glob.glob('src/cuda/*.cu')\n{}    return [extension('_ext', sources)]\n\n\n"
    "setup(name='DCNv2', ext_modules=get_extensions())\n"
)
ALIASED_REFUSAL = "    else:\n        raise NotImplementedError('Cuda is not available')\n"
ALIASED_FUNCTION = (
    "import torch\nimport _ext as _backend\n\n\nclass DCNv2(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return _backend.dcn_v2_forward(x)\n"
)
ALIASED_TEST = "import torch\nfrom dcn_v2 import DCNv2\n\nx = torch.randn(2, 4).cuda()\ny = DCNv2.apply(x)\n"

#: A CUDA-only kernel's own test script (TDV101 leaves it to TDV310).
KERNEL_TEST_SCRIPT = Valid(KERNEL_FUNCTION + "\n\nx = torch.randn(8).cuda()\ny = FusedAct.apply(x)\n", files={"setup.py": KERNEL_SETUP})
#: The same of a kernel built with ``torch.utils.ffi`` that refuses to build without CUDA.
FFI_TEST_SCRIPT = Valid(
    FFI_FUNCTION + "\n\nx = torch.randn(2, 4).cuda()\ny = DCNFunction()(x)\n",
    files={"build.py": FFI_BUILD.format("else:\n    raise ValueError('CUDA is not available')")},
)
#: The same of DCNv2, built through a name bound to the extension class.
ALIASED_TEST_SCRIPT = Valid(ALIASED_FUNCTION + "\n\nx = torch.randn(2, 4).cuda()\ny = DCNv2.apply(x)\n", files={"setup.py": ALIASED_SETUP.format(ALIASED_REFUSAL)})

#: A model module built on the kernel's Function, with a ``__main__`` self-test (``{}``: the move).
KERNEL_MODEL = (
    "import torch\nfrom fused import FusedAct\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
    "        return FusedAct.apply(x)\n\n\nif __name__ == '__main__':\n    x = torch.randn(8){}\n    print(Net()(x))\n"
)
#: The self-test of a module the project imports exercises the kernel: TDV310's (Yochengliu/Relation-Shape-CNN@6464eb8).
KERNEL_SELF_TEST = Valid(
    KERNEL_MODEL.format(".cuda()"),
    files={"setup.py": KERNEL_SETUP, "fused.py": KERNEL_FUNCTION, "train.py": "from example import Net\nNet()(x)\n"},
)
#: The same where the kernel is built in a folder of its own and the only importer is a Python 2
#: module CPython cannot parse (hszhao/PointWeb@f31fe05 lib/pointops/setup.py,
#: model/pointweb/pointweb_seg.py:74 ``cuda(async=True)``).
NESTED_KERNEL_SELF_TEST = Valid(
    KERNEL_MODEL.format(".cuda()"),
    files={
        "ops/setup.py": KERNEL_SETUP, "ops/fused.py": KERNEL_FUNCTION,
        "seg.py": "from example import Net\n\n\ndef step(x):\n    return Net()(x.cuda(async=True))\n",
    },
)

#: A kernel built at import by the module named like it (cszn/KAIR@fc1732f models/op/deform_attn.py:19):
#: the network module that imports it cannot be imported without CUDA (``{}``: the kernel's name).
JIT_KERNEL_MODULE = (
    "import torch\nfrom torch.utils.cpp_extension import load\n\n"
    "deform_attn_ext = load('{}', sources=['deform_attn.cpp', 'deform_attn_kernel.cu'])\n\n\n"
    "def deform_attn(x):\n    return deform_attn_ext.forward(x)\n"
)
JIT_KERNEL_NETWORK = (
    "import torch\nfrom ops.deform_attn import deform_attn\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n"
    "        return deform_attn(x.cuda())\n"
)
JIT_KERNEL_USER = Valid(JIT_KERNEL_NETWORK, files={"ops/deform_attn.py": JIT_KERNEL_MODULE.format("deform_attn"), "train.py": "from example import Net\nNet()(x)\n"})


#: The kernel's Function where the kernel may be missing: its module imports without it.
OPTIONAL_KERNEL_FUNCTION = KERNEL_FUNCTION.replace("import fused_ops\n", "try:\n    import fused_ops\nexcept ImportError:\n    fused_ops = None\n")


def kernel_callers(device: str) -> Tuple[Invalid, ...]:
    """TDV101's examples beside kernels that are still reported: a caller of a kernel with a CPU
    fallback, and a model that may run without a CUDA-only kernel its Function's module may do
    without; ``device`` is the binding the fix writes."""
    optional = {"setup.py": KERNEL_SETUP, "fused.py": OPTIONAL_KERNEL_FUNCTION}
    return (
        Invalid(KERNEL_CALLER.format("", ".cuda()"), fixed=KERNEL_CALLER.format(device + "\n", ".to(device)"), files={"fused_act.py": KERNEL_WITH_FALLBACK}),
        Invalid(LAYER_USER.format("", ".cuda()"), fixed=LAYER_USER.format(device + "\n", ".to(device)"), files=optional),
        # a module nothing imports: its `__main__` block is a program (with the kernel, on CUDA)
        Invalid(
            KERNEL_MODEL.format(".cuda()"),
            fixed=KERNEL_MODEL.replace("\n\n\nclass", "\n\n" + device + "\n\nclass", 1).format(".to(device)"),
            files=optional,
        ),
    )
#: A program that imports, through its network's module, one that cannot be imported without
#: the kernel: none of its lines runs without CUDA (AllenXiangX/SnowflakeNet@0880ba1
#: completion/train.py); where the network falls back when the kernel is missing, it may.
_KERNEL_PROGRAM = "import torch\nfrom models.net import Net\n\nx = torch.randn(2).cuda()\nprint(Net()(x))\n"
_FALLBACK_NETWORK = JIT_KERNEL_NETWORK.replace(
    "from ops.deform_attn import deform_attn\n", "try:\n    from ops.deform_attn import deform_attn\nexcept ImportError:\n    deform_attn = torch.relu\n",
)
KERNEL_PROGRAM = Valid(_KERNEL_PROGRAM, files={"ops/deform_attn.py": JIT_KERNEL_MODULE.format("deform_attn"), "models/net.py": JIT_KERNEL_NETWORK})


def kernel_program(device: str) -> Invalid:
    """The program where its network may run without the kernel (``device``: the binding the fix adds)."""
    return Invalid(
        _KERNEL_PROGRAM, files={"ops/deform_attn.py": JIT_KERNEL_MODULE.format("deform_attn"), "models/net.py": _FALLBACK_NETWORK},
        fixed=_KERNEL_PROGRAM.replace("from models.net import Net\n", "from models.net import Net\n\n" + device).replace("randn(2).cuda()", "randn(2).to(device)"),
    )

