"""Calling context: a function or class every call of which in the project runs only where CUDA
is (under a CUDA check, or from a worker ``mp.spawn`` starts once per GPU) has its body judged
like code under the check (``project/context.py``)."""

from pathlib import Path

from torchdevice_lint import api
from torchdevice_lint.app.config import settings_from_table
from torchdevice_lint.project.model import Projects

HELPER = "import torch\n\n\ndef smart_ddp(model):\n    return model.cuda()\n"
GUARDED_CALL = (
    "import torch\nfrom utils import smart_ddp\n\n\ndef train(model, device, rank):\n"
    "    cuda = device.type != 'cpu'\n    if cuda and rank != -1:\n        model = smart_ddp(model)\n    return model\n"
)
SPAWN = (
    "import torch\nimport torch.distributed as dist\nimport torch.multiprocessing as mp\nimport argparse\n"
    "from utils import smart_ddp\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--dist-backend', default='nccl')\n\n\ndef main(args):\n"
    "    gpus = torch.cuda.device_count()\n    mp.spawn(main_worker, nprocs=gpus, args=(args,))\n\n\n"
    "def main_worker(gpu, args):\n    dist.init_process_group(backend=args.dist_backend)\n    smart_ddp(None)\n"
)


def codes(root: Path, files: dict, checked: str = "utils.py", unreached: bool = True):
    """The findings in ``checked``; ``unreached``: code nothing calls is checked too (the calls
    these tests make are their point, not what calls them)."""
    (root / "setup.py").write_text("")
    for name, code in files.items():
        (root / name).write_text(code)
    path = root / checked
    engine = api.engine(settings_from_table({"check-unreached": unreached}), projects=Projects())
    return [f.code for f in engine.check_source(str(path), path.read_text()).findings]


def test_a_helper_called_only_under_a_cuda_check_is_judged_guarded(tmp_path):
    assert codes(tmp_path, {"utils.py": HELPER, "train.py": GUARDED_CALL}) == []


def test_a_helper_nobody_calls_is_unreached_not_guarded(tmp_path):
    files = {"utils.py": HELPER, "train.py": "import utils\n"}
    assert codes(tmp_path, files) == ["TDV101"]
    assert codes(tmp_path, files, unreached=False) == []  # it never runs
    (tmp_path / "alone").mkdir()
    assert codes(tmp_path / "alone", {"utils.py": HELPER}, unreached=False) == ["TDV101"]  # nothing imports it: an API


def test_one_unguarded_call_keeps_the_finding(tmp_path):
    files = {"utils.py": HELPER, "train.py": GUARDED_CALL, "demo.py": "from utils import smart_ddp\nsmart_ddp(None)\n"}
    assert codes(tmp_path, files) == ["TDV101"]


def test_a_helper_also_used_as_a_value_stays_reported(tmp_path):
    files = {"utils.py": HELPER, "train.py": GUARDED_CALL, "hooks.py": "from utils import smart_ddp\nwrap = smart_ddp\n"}
    assert codes(tmp_path, files) == ["TDV101"]


def test_a_namesake_in_another_module_does_not_count(tmp_path):
    files = {"utils.py": HELPER, "train.py": GUARDED_CALL, "other.py": "def smart_ddp(m):\n    return m\n\n\nsmart_ddp(None)\n"}
    assert codes(tmp_path, files) == []


def test_a_worker_spawned_per_gpu_and_what_it_calls_are_judged_guarded(tmp_path):
    files = {"utils.py": HELPER, "train.py": SPAWN}
    assert codes(tmp_path, files) == []
    # the --dist-backend option only reaches the worker; the spawn itself starts none without a GPU
    assert codes(tmp_path, files, "train.py") == ["TDV307"]


def test_a_worker_spawned_at_least_once_is_judged_as_usual(tmp_path):
    # the count TDV307 suggests: the worker runs on a CPU, where its process group needs a backend
    files = {"utils.py": HELPER, "train.py": SPAWN.replace("nprocs=gpus", "nprocs=max(1, gpus)")}
    assert codes(tmp_path, files, "train.py") == ["TDV303"]


def test_a_process_group_started_outside_the_worker_keeps_the_backend_finding(tmp_path):
    files = {"utils.py": HELPER, "train.py": SPAWN + "\n\ndist.init_process_group(backend=parser.parse_args().dist_backend)\n"}
    assert codes(tmp_path, files, "train.py") == ["TDV303", "TDV307"]


def test_a_class_built_only_in_the_worker_has_its_methods_judged_guarded(tmp_path):
    wrapper = "import torch\n\n\nclass MixUp:\n    def __iter__(self):\n        yield torch.randperm(8).cuda()\n"
    train = SPAWN.replace("from utils import smart_ddp", "from utils import MixUp").replace("smart_ddp(None)", "MixUp()")
    assert codes(tmp_path, {"utils.py": wrapper, "train.py": train}) == []
    assert codes(tmp_path, {"utils.py": wrapper, "train.py": train, "demo.py": "from utils import MixUp\nMixUp()\n"}) == ["TDV101"]


def test_a_worker_also_called_directly_without_spawn_is_judged_as_usual(tmp_path):
    """facebookresearch/moco main_lincls.py: ``mp.spawn`` per GPU, else ``main_worker(args.gpu, ...)``."""
    train = SPAWN.replace("    mp.spawn(main_worker", "    main_worker(0, args)\n    mp.spawn(main_worker")
    assert codes(tmp_path, {"utils.py": HELPER, "train.py": train}) == ["TDV101"]


def test_a_worker_spawned_per_gpu_silences_every_cuda_only_rule_in_what_it_calls(tmp_path):
    """jaywalnut310/vits train.py:45-50: ``n_gpus = torch.cuda.device_count()`` then
    ``mp.spawn(run, nprocs=n_gpus, ...)``; here the worker starts no process group of its own."""
    step = (
        "import torch\n\n\ndef step(model, x):\n    torch.cuda.synchronize()\n"
        "    with torch.cuda.amp.autocast():\n        return model.cuda()(x)\n"
    )
    train = (
        "import torch\nimport torch.multiprocessing as mp\nfrom utils import step\n\n\ndef main():\n"
        "    n_gpus = torch.cuda.device_count()\n    mp.spawn(run, nprocs=n_gpus, args=(n_gpus,))\n\n\n"
        "def run(rank, n_gpus):\n    step(None, None)\n"
    )
    assert sorted(codes(tmp_path, {"utils.py": step})) == ["TDV101", "TDV301", "TDV302"]
    assert codes(tmp_path, {"utils.py": step, "train.py": train}) == []
    assert sorted(codes(tmp_path, {"utils.py": step, "train.py": train.replace("nprocs=n_gpus", "nprocs=4")})) == [
        "TDV101", "TDV301", "TDV302"
    ]


LAUNCH = (
    "import torch\nimport torch.multiprocessing as mp\nfrom utils import smart_ddp\n\n\n"
    "def launch(fn, n_gpu, args=()):\n    world_size = n_gpu\n    if world_size {}:\n"
    "        mp.spawn(worker, nprocs=n_gpu, args=(fn, args))\n    else:\n        fn(*args)\n\n\n"
    "def worker(rank, fn, args):\n    torch.cuda.set_device(rank)\n    smart_ddp(None)\n"
)


def test_a_worker_spawned_only_for_several_processes_is_judged_guarded(tmp_path):
    """rosinality/vq-vae-2-pytorch@ef5f67c distributed/launch.py:24-40: ``--n_gpu`` (1 by
    default) processes, spawned only when there are more than one."""
    assert codes(tmp_path, {"utils.py": HELPER, "launch.py": LAUNCH.format("> 1")}, "launch.py") == []
    assert codes(tmp_path, {"utils.py": HELPER, "launch.py": LAUNCH.format("> 1")}) == []
    assert codes(tmp_path, {"utils.py": HELPER, "launch.py": LAUNCH.format(">= 1")}, "launch.py") == ["TDV301"]


def test_a_method_of_a_model_named_like_the_worker_does_not_call_it(tmp_path):
    """jaywalnut310/glow-tts@13e9b9e train.py:95-99, init.py:40-46: ``generator.train()`` of a model
    built here (or a parameter, inside ``train`` itself) is ``nn.Module.train``, not the worker's
    ``train``."""
    worker = (
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef main():\n    n_gpus = torch.cuda.device_count()\n"
        "    mp.spawn(run, nprocs=n_gpus)\n\n\ndef run(rank):\n    train(rank, Net())\n\n\n"
        "def train(rank, generator):\n    generator.train()\n    torch.randn(2).cuda(rank)\n"
    )
    init = "from models import Net\n\n\ndef main():\n    generator = Net().cuda()\n    generator.train()\n"
    models = "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
    # the spawn itself starts no process without a GPU (TDV307); the worker's code is judged guarded
    assert codes(tmp_path, {"train.py": worker, "models.py": models}, "train.py") == ["TDV307"]
    assert codes(tmp_path, {"train.py": worker, "init.py": init, "models.py": models}, "train.py") == ["TDV307"]
    assert codes(tmp_path, {"train.py": worker, "other.py": "import train\ntrain.train(0, None)\n"}, "train.py") == ["TDV307", "TDV101"]


def test_a_method_call_on_a_value_does_not_reach_the_worker_of_its_name(tmp_path):
    """p0p4k/vits2_pytorch@1f4f379 train.py:48-58 spawns ``run`` per GPU; infer_onnx.py:45's
    ``model.run(...)`` of an ONNX session, a Flask ``app.run()`` and ``self.model.run()`` call
    methods of values, never the worker. A module's ``train.run()`` does call it."""
    worker = (
        "import torch\nimport torch.multiprocessing as mp\n\n\ndef main():\n    n_gpus = torch.cuda.device_count()\n"
        "    mp.spawn(run, nprocs=n_gpus)\n\n\ndef run(rank):\n    torch.randn(2).cuda(rank)\n"
    )
    values = (
        "import onnxruntime\nfrom flask import Flask\n\napp = Flask(__name__)\n"
        "session = onnxruntime.InferenceSession('m.onnx')\nsession.run(None, {})\napp.run()\n\n\n"
        "class Encoder:\n    def encode(self, x):\n        return self.model.run(None, x)\n\n\n"
        "def decode(task, mel):\n    return Task(task).run(mel)\n"
    )
    assert codes(tmp_path, {"train.py": worker, "serve.py": values}, "train.py") == ["TDV307"]
    module_call = "def again():\n    import train\n    train.run(0)\n\n\nagain()\n"
    assert codes(tmp_path, {"train.py": worker, "serve.py": values, "other.py": module_call}, "train.py") == ["TDV307", "TDV101"]


def test_a_helper_called_after_a_device_test_in_an_and_is_judged_guarded(tmp_path):
    # NVlabs/stylegan3@c233a91 torch_utils/ops/upfirdn2d.py:160: ``_init()`` (which builds the
    # plugin and asks the GPU's name) runs only once the input is known to be on CUDA
    helper = "import torch\n\n\ndef init_plugin():\n    return torch.cuda.get_device_name()\n"
    caller = (
        "from utils import init_plugin\n\n\ndef op(x, impl='cuda'):\n"
        "    if impl == 'cuda' and x.device.type == 'cuda' and init_plugin():\n        return x\n    return x\n"
    )
    assert codes(tmp_path, {"utils.py": helper, "ops.py": caller}) == []
    assert codes(tmp_path, {"utils.py": helper, "ops.py": caller.replace("impl == 'cuda' and x.device.type == 'cuda'", "x.ndim == 4")}) == ["TDV301"]
