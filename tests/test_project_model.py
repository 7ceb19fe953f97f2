"""The project model: each file is judged with what its whole project says (options parsed in
another module, attributes and predicates that read them, files saved from the CPU)."""

import ast
import base64
import json
import marshal
import subprocess
import sys
from pathlib import Path

from torchdevice_lint import api
from torchdevice_lint.app.cache import StoredFacts
from torchdevice_lint.project.model import Projects, project_root
from torchdevice_lint.project.stored import KeptTrees

OPTIONS = "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_mode', type=bool, default={})\n"
MODEL = "import torch\n\n\nclass GAN:\n    def __init__(self, args):\n        self.gpu_mode = args.gpu_mode\n        if self.gpu_mode:\n            self.G = self.G.cuda()\n"


def project(tmp_path: Path, default: str) -> Path:
    (tmp_path / "main.py").write_text(OPTIONS.format(default))
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "__init__.py").write_text("")
    (tmp_path / "models" / "gan.py").write_text(MODEL)
    return tmp_path / "models" / "gan.py"


def codes(path: Path, projects=None):
    result = api.engine(projects=projects).check_source(str(path), path.read_text())
    return [finding.code for finding in result.findings]


def test_an_option_on_by_default_in_another_module_is_no_guard(tmp_path):
    assert codes(project(tmp_path, "True"), Projects()) == ["TDV101"]


def test_an_option_off_by_default_in_another_module_still_guards(tmp_path):
    assert codes(project(tmp_path, "False"), Projects()) == []


def test_scripts_disagreeing_on_an_option_give_a_module_the_default_of_its_importers(tmp_path):
    gan = project(tmp_path, "True")
    (tmp_path / "main.py").write_text(OPTIONS.format("True") + "from models.gan import GAN\nGAN(parser.parse_args())\n")
    (tmp_path / "demo.py").write_text(OPTIONS.format("False"))
    assert codes(gan, Projects()) == ["TDV101"]  # main.py, on by default, imports it
    (tmp_path / "demo.py").write_text(OPTIONS.format("False") + "from models.gan import GAN\nGAN(parser.parse_args())\n")
    assert codes(gan, Projects()) == []  # imported by both: the default is unknown, the flag a guard


def test_a_stale_script_turning_the_option_off_does_not_make_it_a_guard(tmp_path):
    # black0017/MedicalZooPytorch@8f40dab lib/visual3D_temp/viz_old.py:55 sets args.cuda = False;
    # --cuda is on by default in every training script: their `if args.cuda:` guards nothing
    train = tmp_path / "train.py"
    train.write_text(
        "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--cuda', action='store_true', default=True)\n"
        "args = parser.parse_args()\nif args.cuda:\n    model = model.cuda()\n"
    )
    (tmp_path / "viz_old.py").write_text("def viz(args):\n    args.cuda = False\n")
    assert codes(train, Projects()) == ["TDV101"]


def test_a_file_judged_alone_keeps_the_flag_as_a_guard(tmp_path):
    assert codes(project(tmp_path, "True")) == []


def test_what_the_root_gitignore_ignores_is_not_part_of_the_project(tmp_path):
    """A downloaded checkout under an ignored folder says nothing of the project's own options
    (read, its other default for `--gpu_mode` would make the option unknown, and so a guard)."""
    model = project(tmp_path, "True")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "third_party" / "big").mkdir(parents=True)
    (tmp_path / "third_party" / "big" / "opts.py").write_text(OPTIONS.format("False"))
    assert codes(model, Projects()) == []
    (tmp_path / ".gitignore").write_text("third_party/\n[z-a\n")
    assert codes(model, Projects()) == ["TDV101"]


def test_a_project_inside_the_folder_is_a_project_of_its_own(tmp_path):
    model = project(tmp_path, "True")
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "checkouts" / "other").mkdir(parents=True)
    (tmp_path / "checkouts" / "other" / "opts.py").write_text(OPTIONS.format("False"))
    assert codes(model, Projects()) == []  # its other default makes the option unknown
    (tmp_path / "checkouts" / "other" / "pyproject.toml").write_text("")
    assert codes(model, Projects()) == ["TDV101"]


def test_the_root_of_a_tree_of_scripts_is_above_its_outermost_package(tmp_path):
    model = project(tmp_path, "True")
    assert project_root(str(model)) == tmp_path
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "models" / "pyproject.toml").write_text("")
    assert project_root(str(model)) == tmp_path / "models"


def test_the_build_folder_of_a_kernel_belongs_to_the_project_around_it(tmp_path):
    # hszhao/PointWeb@f31fe05 lib/pointops/setup.py builds the kernel the project's models call
    model = project(tmp_path, "True")
    (tmp_path / "requirements.txt").write_text("torch\n")
    build = tmp_path / "lib" / "ops"
    build.mkdir(parents=True)
    (build / "setup.py").write_text("from setuptools import setup\nfrom torch.utils.cpp_extension import CUDAExtension\n")
    assert project_root(str(build / "ops.py")) == tmp_path
    assert str(build / "setup.py") in Projects().of(str(model)).modules
    (build / "setup.py").write_text("from setuptools import setup\nsetup(name='ops')\n")  # a package of its own
    assert project_root(str(build / "ops.py")) == build


def test_a_module_cpython_cannot_parse_still_tells_what_it_imports(tmp_path):
    model = project(tmp_path, "True")
    (tmp_path / "seg.py").write_text("from models.gan import (GAN,\n    Other)\nimport numpy, \\\n    helpers\nprint 'python 2'\n")
    facts = Projects().of(str(model)).modules[str(tmp_path / "seg.py")]
    assert facts.kernels["imports"] == {
        "GAN": ["models.gan.GAN", False], "Other": ["models.gan.Other", False], "helpers": ["helpers", False],
    }


def test_a_checkout_without_a_marker_is_the_folder_named_for_the_run(tmp_path):
    # a downloaded archive of a repository: no .git, scripts in folders without __init__.py
    module = tmp_path / "repo" / "gym" / "evaluation" / "episodes.py"
    module.parent.mkdir(parents=True)
    module.write_text("def evaluate(model, device='cuda'):\n    return model.to(device)\n")
    (tmp_path / "repo" / "gym" / "experiment.py").write_text(
        "from evaluation.episodes import evaluate\nevaluate(model, device=device)\n"
    )
    assert project_root(str(module)) == module.parent
    assert project_root(str(module), [tmp_path / "repo"]) == tmp_path / "repo"
    assert project_root(str(module), [tmp_path / "elsewhere"]) == module.parent
    assert codes(module, Projects()) == ["TDV102"]  # alone, its callers are unseen
    assert codes(module, Projects(named=[str(tmp_path / "repo")])) == []  # every call passes the device


def test_a_buffer_on_stdin_has_no_project():
    assert project_root("-") is None and project_root("<stdin>") is None


def test_an_open_buffer_replaces_its_file_in_the_model(tmp_path):
    model = project(tmp_path, "False")
    projects = Projects()
    assert codes(model, projects) == []
    projects.of(str(model)).update(str(tmp_path / "main.py"), OPTIONS.format("True"))
    assert codes(model, projects) == ["TDV101"]


def test_the_cached_result_of_a_file_changes_when_another_module_of_its_project_does(tmp_path):
    model = project(tmp_path, "False")
    command = [sys.executable, "-m", "torchdevice_lint", "check", "--output-format", "concise", str(model)]
    assert subprocess.run(command, capture_output=True, text=True, cwd=tmp_path).returncode == 0
    (tmp_path / "main.py").write_text(OPTIONS.format("True"))
    again = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path)
    assert again.returncode == 1 and "TDV101" in again.stdout


def stored_projects(tmp_path: Path, cache: Path) -> Projects:
    """The projects as the command line reads them with a cache directory."""
    store = StoredFacts(cache)
    facts, prints = store.load()
    projects = Projects(facts, prints=prints)
    projects.read(str(tmp_path / "main.py"))
    store.save(projects.cache, prints)
    return projects


def test_a_second_run_parses_only_the_modules_that_changed(tmp_path):
    (tmp_path / "tree").mkdir()
    model = project(tmp_path / "tree", "True")
    assert stored_projects(tmp_path / "tree", tmp_path / "cache").cache.parsed == 3
    model.write_text(MODEL + "\nprint('changed')\n")
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 1
    assert codes(model, again) == ["TDV101"]


def test_stored_facts_read_back_equal_to_parsed_ones(tmp_path):
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "main.py").write_text(
        "parser.add_argument('--ids', default=(0, 1))\nparser.add_argument('--lr', default=-0.0)\n"
        "parser.add_argument('--name', default=b'x')\nparser.add_argument('--n', default=True)\n"
    )
    first = stored_projects(tmp_path / "tree", tmp_path / "cache").facts_for(str(tmp_path / "tree" / "main.py"))
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 0
    assert again.facts_for(str(tmp_path / "tree" / "main.py")) == first and first.options["ids"] == (0, 1)


def test_an_edited_stored_entry_is_parsed_again(tmp_path):
    """An entry whose bytes no longer match their checksum is a miss: its module is parsed
    again, and what it said (here ``--gpu_mode`` on by default) is not believed."""
    (tmp_path / "tree").mkdir()
    project(tmp_path / "tree", "False")
    store = stored_projects(tmp_path / "tree", tmp_path / "cache")
    path = StoredFacts(tmp_path / "cache").path
    stored = json.loads(path.read_text())
    entries = stored["modules"]
    for key, (encoded, checksum) in entries.items():
        fields = marshal.loads(base64.b64decode(encoded))
        if fields[0].get("gpu_mode") is False:
            edited = (dict(fields[0], gpu_mode=True), *fields[1:])
            entries[key] = [base64.b64encode(marshal.dumps(edited)).decode(), checksum]
    path.write_text(json.dumps(stored))
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 1
    assert codes(tmp_path / "tree" / "models" / "gan.py", again) == [] == codes(tmp_path / "tree" / "models" / "gan.py", store)


KERNEL_SETUP = (
    "from setuptools import setup\nfrom torch.utils.cpp_extension import BuildExtension, CUDAExtension\n\n"
    "setup(name='fused', ext_modules=[CUDAExtension('fused_ops', ['fused.cpp', 'fused_kernel.cu'])])\n"
)
KERNEL_FUNCTION = (
    "import torch\nimport fused_ops\n\n\nclass FusedAct(torch.autograd.Function):\n    @staticmethod\n"
    "    def forward(ctx, x):\n        return fused_ops.forward(x.cuda())\n"
)
KERNEL_TEST = (
    "import torch\nfrom fused import FusedAct\n\n\ndef test_forward():\n    x = torch.randn(8, device='cuda')\n"
    "    torch.testing.assert_close(FusedAct.apply(x.cuda()), torch.relu(x))\n    torch.cuda.synchronize()\n"
)


def kernel_project(tmp_path: Path, wrapper: str = KERNEL_FUNCTION) -> dict:
    files = {"setup.py": KERNEL_SETUP, "fused.py": wrapper, "tests/test_fused.py": KERNEL_TEST}
    for name, code in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(code)
    return {name: tmp_path / name for name in files}


def test_a_cuda_only_kernel_and_the_code_that_drives_it_make_one_finding_at_the_build(tmp_path):
    projects = Projects()
    found = {name: codes(path, projects) for name, path in kernel_project(tmp_path).items()}
    assert found == {"setup.py": ["TDV310"], "fused.py": [], "tests/test_fused.py": []}
    message = api.engine(projects=projects).check_source(str(tmp_path / "setup.py"), KERNEL_SETUP).findings[0].message
    assert "`fused_ops`" in message and "in 2 files" in message


def test_a_kernel_with_a_cpu_fallback_leaves_the_findings_of_its_callers(tmp_path):
    fallback = KERNEL_FUNCTION.replace("class FusedAct", "def act(x):\n    return x if x.device.type == 'cpu' else FusedAct.apply(x)\n\n\nclass FusedAct")
    found = {name: codes(path, Projects()) for name, path in kernel_project(tmp_path, fallback).items()}
    assert found == {"setup.py": [], "fused.py": ["TDV101"], "tests/test_fused.py": ["TDV102", "TDV101", "TDV301"]}


def test_the_test_of_a_kernel_judged_alone_is_judged_as_before(tmp_path):
    test = kernel_project(tmp_path)["tests/test_fused.py"]
    assert codes(test) == ["TDV102", "TDV101", "TDV301"]


def test_stored_kernel_facts_read_back_equal_to_parsed_ones(tmp_path):
    kernel_project(tmp_path / "tree")
    (tmp_path / "tree" / "main.py").write_text("")
    first = stored_projects(tmp_path / "tree", tmp_path / "cache").facts_for(str(tmp_path / "tree" / "main.py"))
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 0 and first.cuda_kernels
    assert again.facts_for(str(tmp_path / "tree" / "main.py")) == first


PREPARE = "import torch\n\n\ndef prepare_z_y(batch, dim_z, device='cuda'):\n    return torch.randn(batch, dim_z, device=device)\n"


def test_a_device_default_every_call_overrides_is_silent_until_one_call_omits_it(tmp_path):
    (tmp_path / "utils.py").write_text(PREPARE)
    (tmp_path / "train.py").write_text("import utils\nz = utils.prepare_z_y(8, 128, device=device)\nz = utils.prepare_z_y(8, 128, device)\n")
    assert codes(tmp_path / "utils.py", Projects()) == []
    (tmp_path / "sample.py").write_text("from utils import prepare_z_y\nz = prepare_z_y(8, 128)\n")
    assert codes(tmp_path / "utils.py", Projects()) == ["TDV102"]


def test_a_device_default_nobody_in_the_project_calls_is_reported(tmp_path):
    """A library's API: its users, outside the project, get the default."""
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "utils.py").write_text(PREPARE)
    assert codes(tmp_path / "utils.py", Projects()) == ["TDV102"]


def test_call_facts_and_checkpoint_names_read_back_from_the_cache(tmp_path):
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "main.py").write_text(
        PREPARE + "z = prepare_z_y(1, 2, **options)\nstate = torch.load('weights/net.pt')\nfn = prepare_z_y\n"
    )
    first = stored_projects(tmp_path / "tree", tmp_path / "cache")
    again = stored_projects(tmp_path / "tree", tmp_path / "cache")
    assert again.cache.parsed == 0 and again.cache.by_hash == first.cache.by_hash
    [facts] = again.cache.by_hash.values()
    [call] = facts.calls.sites["prepare_z_y@."]
    assert call.signature() == [2, [], True] and call.caller == "" and "prepare_z_y@." in facts.calls.escaped
    assert facts.checkpoint_files == ["weights/net.pt"]


def test_calls_of_another_module_s_namesake_do_not_count(tmp_path):
    """glide-text2im: clip/utils.py's LayerNorm has the CUDA default and every construction of
    it passes the device; xf.py's own LayerNorm, and torch's, are called without one."""
    utils = "import attr\nimport torch\n\n\n@attr.s\nclass LayerNorm(torch.nn.Module):\n    device: torch.device = attr.ib(default=torch.device('cuda'))\n"
    (tmp_path / "utils.py").write_text(utils)
    (tmp_path / "encoders.py").write_text("from .utils import LayerNorm\nln = LayerNorm(device=device)\n")
    (tmp_path / "xf.py").write_text("import torch.nn as nn\n\n\nclass LayerNorm(nn.LayerNorm):\n    pass\n\n\nln = LayerNorm(4)\nother = nn.LayerNorm(4)\n")
    assert codes(tmp_path / "utils.py", Projects()) == []
    (tmp_path / "sample.py").write_text("from utils import LayerNorm\nln = LayerNorm()\n")
    assert codes(tmp_path / "utils.py", Projects()) == ["TDV102"]


def test_the_first_stage_takes_the_tree_the_model_parsed_of_a_checked_file(tmp_path):
    model = project(tmp_path, "True")
    projects = Projects(checked=[str(model)])
    projects.read(str(model))
    assert set(projects.trees._kept) == {str(model)}  # main.py is read for the model, not checked
    assert codes(model, projects) == ["TDV101"]
    assert projects.trees._kept == {} and projects.take_tree(str(model), model.read_text()) is None


def test_a_tree_parsed_from_other_text_is_not_taken(tmp_path):
    model = project(tmp_path, "True")
    projects = Projects(checked=[str(model)])
    projects.read(str(model))
    assert projects.take_tree(str(model), model.read_text() + "\nx = 1\n") is None


def test_trees_are_parsed_from_the_text_the_checker_decodes(tmp_path):
    model = project(tmp_path, "True")
    declared = tmp_path / "declared.py"
    declared.write_bytes("# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n".encode("latin-1"))
    marked = tmp_path / "marked.py"
    marked.write_bytes(b"\xef\xbb\xbfimport torch\n")
    undecodable = tmp_path / "undecodable.py"
    undecodable.write_bytes(b"name = '\xe9'\n")
    projects = Projects(checked=[str(model), str(declared), str(marked), str(undecodable)])
    projects.read(str(model))
    assert set(projects.trees._kept) == {str(model), str(declared), str(marked)}
    assert projects.take_tree(str(declared), "# -*- coding: latin-1 -*-\nname = 'caf\xe9'\n") is not None
    assert projects.take_tree(str(marked), "import torch\n") is not None


def test_trees_beyond_the_budget_are_parsed_again_by_the_first_stage(tmp_path):
    trees = KeptTrees([str(tmp_path / "a.py")], budget=5)
    trees.keep(str(tmp_path / "a.py"), "x = 1\n", ast.parse("x = 1\n"))
    assert trees.take(str(tmp_path / "a.py"), "x = 1\n") is None


def test_a_state_dict_saved_after_the_module_moved_to_the_cpu_is_cpu_data():
    from torchdevice_lint.project.facts import module_facts

    def saved(body: str) -> list:
        source = "import torch\n\ndef train(net, load):\n" + body + "    torch.save(net.module.state_dict(), 'final.pth')\n"
        return module_facts(ast.parse(source)).cpu_saved_files

    assert saved("    net.cpu()\n") == ["final.pth"]
    assert saved("    net.cpu()\n    net.cuda()\n") == []  # moved back before the save
    assert saved("    if not load:\n        net = net.cpu()\n") == []  # GraphMAE: only on one path
    assert saved("    other.cpu()\n") == []
