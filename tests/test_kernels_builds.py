"""Kernels built the older ways: torch < 1.0's ``torch.utils.ffi.create_extension`` and a plain
setuptools ``Extension`` compiled by nvcc, laid out as research projects lay them out."""

from pathlib import Path
from typing import Dict, List

from torchdevice_lint import api
from torchdevice_lint.project.model import Projects

FFI_BUILD = (
    "import os\nimport torch\nfrom torch.utils.ffi import create_extension\n\nsources = ['src/dcn_v2.c']\nwith_cuda = False\n"
    "extra_objects = []\nif torch.cuda.is_available():\n    sources += ['src/dcn_v2_cuda.c']\n"
    "    extra_objects += ['src/cuda/dcn_v2_im2col_cuda.cu.o']\n    with_cuda = True\n{}\n"
    "here = os.path.dirname(__file__)\nsources = [os.path.join(here, name) for name in sources]\n"
    "ffi = create_extension('_ext.dcn_v2', sources=sources, with_cuda=with_cuda, extra_objects=extra_objects)\n"
)
REFUSAL = "else:\n    raise ValueError('CUDA is not available')"
FUNCTION = (
    "import torch\nfrom torch.autograd import Function\nfrom ._ext import dcn_v2 as _backend\n\n\nclass DCNv2Function(Function):\n"
    "    def forward(self, input):\n        if not input.is_cuda:\n            raise NotImplementedError\n"
    "        return _backend.dcn_v2_cuda_forward(input)\n"
)
MODULE = "from torch import nn\nfrom .dcn_v2_func import DCNv2Function\n\n\nclass DCNv2(nn.Module):\n    def forward(self, x):\n        return DCNv2Function()(x)\n"
TEST = (
    "import torch\nfrom dcn_v2 import DCNv2\nfrom dcn_v2_func import DCNv2Function\n\n"
    "x = torch.randn(2, 4).cuda()\nlayer = DCNv2().cuda()\ny = DCNv2Function()(x)\n"
)


def codes(root: Path, files: Dict[str, str]) -> Dict[str, List[str]]:
    """Each file's finding codes, the project checked as the CLI checks it."""
    (root / "setup.py").write_text("")
    for name, code in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(code)
    projects = Projects()
    found = {}
    for name in files:
        result = api.engine(projects=projects).check_source(str(root / name), files[name])
        found[name] = [finding.code for finding in result.findings]
    return found


def dcn_project(build: str) -> Dict[str, str]:
    return {"DCNv2/__init__.py": "", "DCNv2/build.py": build, "DCNv2/dcn_v2_func.py": FUNCTION, "DCNv2/dcn_v2.py": MODULE, "DCNv2/test.py": TEST}


def test_an_ffi_build_that_refuses_without_cuda_is_one_finding_for_its_function_and_test(tmp_path):
    found = codes(tmp_path, dcn_project(FFI_BUILD.format(REFUSAL)))  # TDV309: the refusal itself
    assert found == {"DCNv2/__init__.py": [], "DCNv2/build.py": ["TDV309", "TDV310"], "DCNv2/dcn_v2_func.py": [], "DCNv2/dcn_v2.py": [], "DCNv2/test.py": []}


def test_an_ffi_build_with_a_cpu_source_and_optional_cuda_leaves_its_test_reported(tmp_path):
    found = codes(tmp_path, dcn_project(FFI_BUILD.format("")))
    assert found["DCNv2/build.py"] == [] and "TDV101" in found["DCNv2/test.py"]


def test_an_ffi_build_of_cuda_sources_only_is_cuda_only_without_a_refusal(tmp_path):
    build = FFI_BUILD.format("").replace("['src/dcn_v2.c']", "[]")
    assert codes(tmp_path, dcn_project(build))["DCNv2/build.py"] == ["TDV310"]


def test_a_function_that_falls_back_on_the_cpu_is_not_a_refusal(tmp_path):
    files = dcn_project(FFI_BUILD.format(REFUSAL))
    files["DCNv2/dcn_v2_func.py"] = FUNCTION.replace("raise NotImplementedError", "return input.relu()")
    found = codes(tmp_path, files)
    assert "TDV310" not in found["DCNv2/build.py"] and "TDV101" in found["DCNv2/test.py"]


SETUP = (
    "from setuptools import setup\nfrom distutils.extension import Extension\n\next_modules = [\n"
    "    Extension('cpu_nms', ['cpu_nms.pyx']),\n    Extension('gpu_nms', ['nms_kernel.cu', 'gpu_nms.pyx'], libraries=['cudart']),\n]\n"
    "setup(name='nms', ext_modules=ext_modules)\n"
)
NMS = "from .cpu_nms import cpu_nms\nfrom .gpu_nms import gpu_nms\n\n\ndef gpu_nms_wrapper(thresh, device_id):\n    return lambda dets: gpu_nms(dets, thresh, device_id)\n"


def test_an_nvcc_extension_imported_unconditionally_is_reported_at_its_build(tmp_path):
    found = codes(tmp_path, {"nms/__init__.py": "", "nms/setup_linux.py": SETUP, "nms/nms.py": NMS})
    assert found["nms/setup_linux.py"] == ["TDV310"]


def test_an_nvcc_extension_built_only_where_cuda_is_there_beside_a_cpu_one_is_a_choice(tmp_path):
    setup = SETUP.replace("ext_modules = [", "import torch\next_modules = [").replace(
        "    Extension('gpu_nms'", "]\nif torch.cuda.is_available():\n    ext_modules += [Extension('gpu_nms'"
    ).replace("'cudart']),\n]", "'cudart'])]")
    found = codes(tmp_path, {"nms/__init__.py": "", "nms/setup_linux.py": setup, "nms/nms.py": NMS})
    assert found["nms/setup_linux.py"] == []


POINTNET_SETUP = (
    "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n\n"
    "setup(name='pointnet2', ext_modules=[CUDAExtension(name='pointnet2._ext', sources=['src/ball_query.cu'])],\n"
    "      cmdclass={'build_ext': BuildExtension})\n"
)
POINTNET_UTILS = (
    "import builtins\n\ntry:\n    import pointnet2._ext as _ext\nexcept ImportError:\n"
    "    if not getattr(builtins, '__POINTNET2_SETUP__', False):\n        raise ImportError('Could not import _ext module.')\n\n\n"
    "def ball_query(radius, xyz):\n    return _ext.ball_query(xyz, radius)\n"
)
POINTNET_TEST = "import torch\nimport pointnet2_utils\n\nxyz = torch.randn(1, 4, 3).cuda()\nidx = pointnet2_utils.ball_query(0.1, xyz)\n"


def test_a_module_whose_import_of_the_kernel_raises_again_drives_it_whole(tmp_path):
    # facebookresearch/votenet@2f6d6d3 pointnet2/pointnet2_utils.py:25, pointnet2_test.py:22
    files = {"pointnet2/setup.py": POINTNET_SETUP, "pointnet2/pointnet2_utils.py": POINTNET_UTILS, "pointnet2/pointnet2_test.py": POINTNET_TEST}
    assert codes(tmp_path, files)["pointnet2/pointnet2_test.py"] == []


def test_a_module_that_compiles_the_kernel_when_its_import_fails_drives_it_whole(tmp_path):
    # AllenXiangX/SnowflakeNet@0880ba1 models/pointnet2_ops_lib/pointnet2_ops/pointnet2_utils.py:7-33:
    # the fallback builds the same kernel from globbed CUDA sources (or with ``with_cuda=True``)
    for sources in ("glob.glob('src/*.cpp') + glob.glob('src/*.cu')", "glob.glob('src/*')"):
        compiled = POINTNET_UTILS.replace(
            "    if not getattr(builtins, '__POINTNET2_SETUP__', False):\n        raise ImportError('Could not import _ext module.')\n",
            "    import glob\n    from torch.utils.cpp_extension import load\n\n    _ext_sources = " + sources + "\n"
            "    _ext = load('_ext', sources=_ext_sources" + ("" if "cu'" in sources else ", with_cuda=True") + ")\n",
        )
        files = {"pointnet2/pointnet2_utils.py": compiled, "pointnet2/pointnet2_test.py": POINTNET_TEST}
        found = codes(tmp_path, files)
        assert found["pointnet2/pointnet2_test.py"] == [], sources
        assert found["pointnet2/pointnet2_utils.py"] == ["TDV310"], sources


def test_an_import_whose_failure_is_only_reported_leaves_the_test_reported(tmp_path):
    quiet = POINTNET_UTILS.replace("        raise ImportError('Could not import _ext module.')", "        print('no _ext: slow path')")
    files = {"pointnet2/setup.py": POINTNET_SETUP, "pointnet2/pointnet2_utils.py": quiet, "pointnet2/pointnet2_test.py": POINTNET_TEST}
    assert "TDV101" in codes(tmp_path, files)["pointnet2/pointnet2_test.py"]


def test_a_test_that_imports_the_kernel_package_is_the_kernel_test(tmp_path):
    # Pang-Yatian/Point-MAE@7445a68 extensions/chamfer_dist/{setup.py,__init__.py,test.py}
    setup = (
        "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n\n"
        "setup(name='chamfer', ext_modules=[CUDAExtension('chamfer', ['chamfer_cuda.cpp', 'chamfer.cu'])])\n"
    )
    package = (
        "import torch\nimport chamfer\n\n\nclass ChamferFunction(torch.autograd.Function):\n    @staticmethod\n"
        "    def forward(ctx, xyz1, xyz2):\n        return chamfer.forward(xyz1, xyz2)\n"
    )
    test = "import torch\nfrom extensions.chamfer_dist import ChamferFunction\n\nx = torch.randn(1, 4, 3).cuda()\nd = ChamferFunction.apply(x, x)\n"
    files = {"extensions/chamfer_dist/setup.py": setup, "extensions/chamfer_dist/__init__.py": package, "extensions/chamfer_dist/test.py": test}
    found = codes(tmp_path, files)
    assert found["extensions/chamfer_dist/test.py"] == [] and found["extensions/chamfer_dist/setup.py"] == ["TDV310"]


def test_functions_taken_from_the_kernel_module_drive_it(tmp_path):
    # autonomousvision/occupancy_networks@406f794 setup.py:82, im2mesh/dmc/ops/grid_pooling.py:5
    setup = (
        "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\n"
        "setup(ext_modules=[CUDAExtension('im2mesh.dmc.ops._cuda_ext', ['im2mesh/dmc/ops/src/grid_pooling_kernel.cu'])])\n"
    )
    wrapper = (
        "import torch\nfrom ._cuda_ext import grid_pooling_forward\n\n\ndef grid_pooling(points):\n"
        "    grid = torch.zeros(8).type(torch.cuda.FloatTensor)\n    return grid_pooling_forward(points.cuda(), grid)\n"
    )
    files = {"setup.py": setup, "im2mesh/dmc/ops/grid_pooling.py": wrapper}
    found = codes(tmp_path, files)
    assert found["im2mesh/dmc/ops/grid_pooling.py"] == [] and found["setup.py"] == ["TDV310"]


def test_two_builds_of_one_kernel_are_reported_alike_whatever_the_hash_seed(tmp_path):
    # autonomousvision/occupancy_networks@406f794: setup.py and im2mesh/dmc/ops/setup.py both build _cuda_ext
    import subprocess
    import sys

    build = "from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n\nsetup(ext_modules=[CUDAExtension('{}', ['k.cu'])])\n"
    files = {
        "setup.py": build.format("pkg.ops._cuda_ext"), "pkg/__init__.py": "", "pkg/ops/__init__.py": "",
        "pkg/ops/setup.py": build.format("_cuda_ext"), "pkg/ops/layer.py": "import torch\nfrom ._cuda_ext import grid\n\n\ndef run(x):\n    return grid(x.cuda())\n",
        "pkg/ops/test_layer.py": "import torch\nfrom pkg.ops.layer import run\nrun(torch.zeros(1).cuda())\n",
    }
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(code)
    outputs = {
        subprocess.run(
            [sys.executable, "-m", "torchdevice_lint", "check", "--no-cache", "--output-format", "concise", "."],
            cwd=tmp_path, capture_output=True, text=True, env={**__import__("os").environ, "PYTHONHASHSEED": str(seed)},
        ).stdout
        for seed in range(6)
    }
    assert len(outputs) == 1 and "TDV310" in outputs.pop()
