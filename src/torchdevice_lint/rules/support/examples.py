"""Example projects that several rules' valid/invalid examples share: defaults and modules that
hold nothing, options rebound to an availability check (extension kernels: ``kernel_examples``)."""

from __future__ import annotations

import io
import pickle
import zipfile
from typing import Tuple

from ...engine.rule import Invalid, Valid
from ...model.fixes import Applicability

#: What the fix writes where no device is bound: the module-level binding, or, where that name is
#: taken, the expression itself (the examples' default target torch).
INLINE = 'torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'
DEVICE = f"device = {INLINE}\n"

#: TDV101's and TDV102's examples of defaults and modules that hold nothing.
PREPARE_Z_Y = "import torch\n\ndef prepare_z_y(G_batch_size, dim_z, nclasses, device='cuda'):\n    return torch.randn(G_batch_size, dim_z, device=device)\n"
ATTRS_LAYER_NORM = (
    "import attr\nimport torch\n\n@attr.s(eq=False)\nclass LayerNorm(torch.nn.Module):\n    n_state: int = attr.ib()\n"
    '    eps: float = attr.ib(default=1e-6)\n    device: torch.device = attr.ib(default=torch.device("cuda"))\n'
)
EMPTY_LOSS = (
    "import torch.nn as nn\n\nclass get_loss(nn.Module):\n    def __init__(self, scale=0.001):\n"
    "        super().__init__()\n        self.scale = scale\n"
)
LOSS_USER = "import importlib\nMODEL = importlib.import_module('models.pointnet')\ncriterion = MODEL.get_loss()\ncriterion = criterion.cuda()\n"
#: THUDM/GCC@20398aa train.py:634-635, gcc/contrastive/criterions.py:5-10: either of two losses that
#: hold only an unweighted nn.CrossEntropyLoss (and a plain tensor, which is not registered:
#: CoinCheung/BiSeNet@6b4b67a old/loss.py:15,48).
NCE_LOSSES = Valid(
    "from criterions import NCESoftmaxLoss, NCESoftmaxLossNS\n\ndef build(args):\n"
    "    criterion = NCESoftmaxLoss() if args.moco else NCESoftmaxLossNS()\n    criterion = criterion.cuda(args.gpu)\n",
    files={"criterions.py": "import torch\nimport torch.nn as nn\n\nclass NCESoftmaxLoss(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.criterion = nn.CrossEntropyLoss()\n        self.thresh = -torch.log(torch.tensor(0.7))\n\n"
           "class NCESoftmaxLossNS(NCESoftmaxLoss):\n    pass\n"},
)
#: wvangansbeke/Unsupervised-Classification@952ec31 simclr.py:76-78, utils/common_config.py:14-30: a loss
#: chosen by configuration, each keeping only the numbers handed in.
CRITERION_FACTORY = Valid(
    "from utils.config import get_criterion\n\ncriterion = get_criterion(p)\ncriterion = criterion.cuda()\n",
    files={"utils/config.py": "def get_criterion(p):\n    if p['criterion'] == 'simclr':\n        from losses import SimCLRLoss\n"
           "        criterion = SimCLRLoss(**p['criterion_kwargs'])\n    else:\n        raise ValueError(p['criterion'])\n    return criterion\n",
           "losses.py": "import torch.nn as nn\n\nclass SimCLRLoss(nn.Module):\n    def __init__(self, temperature):\n        super().__init__()\n"
           "        self.temperature = temperature\n"},
)
#: thuml/Autoformer@51c7d41 run.py:82, exp/exp_basic.py:17-19: an option rebound to an availability check (or off: cure-lab/LTSF-Linear@0c11366 run_stat.py:49).
REBOUND_USE_GPU = Valid(
    "import torch\n\ndef acquire(args):\n    if args.use_gpu:\n        return torch.device('cuda:{}'.format(args.gpu))\n",
    files={"run.py": "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--use_gpu', type=bool, default=True)\n"
           "args = p.parse_args()\nargs.use_gpu = True if torch.cuda.is_available() and args.use_gpu else False\n", "run_stat.py": "from run import args\nargs.use_gpu = False\n"},
)


def saved_checkpoint(location: str) -> bytes:
    """A ``torch.save`` file (zip format) of one float whose storage was saved on ``location``,
    written without torch, for the examples' shipped checkpoints."""
    storage = object()

    class Saver(pickle.Pickler):
        def persistent_id(self, value):
            return ("storage", "FloatStorage", "0", location, 1) if value is storage else None

    state = io.BytesIO()
    Saver(state, protocol=2).dump({"weight": storage})
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as files:
        for name, data in (("data.pkl", state.getvalue()), ("data/0", bytes(4)), ("version", b"3\n")):
            files.writestr(zipfile.ZipInfo(f"archive/{name}", date_time=(1980, 1, 1, 0, 0, 0)), data)
    return archive.getvalue()


#: An early-stopping helper that saves the best model (thuml/Autoformer@51c7d41 utils/tools.py:24-52),
#: and a training function that builds one, then reloads the best model.
EARLY_STOPPING = (
    "import torch\n\nclass EarlyStopping:\n    def __call__(self, val_loss, model, path):\n        self.save_checkpoint(model, path)\n\n"
    "    def save_checkpoint(self, model, path):\n        torch.save(model.state_dict(), path + '/' + 'checkpoint.pth')\n"
)
EARLY_STOPPING_TRAIN = (
    "import torch\nfrom utils.tools import EarlyStopping\n\ndef train(model, epochs, path):\n    early_stopping = EarlyStopping()\n"
    "    for epoch in range(epochs):\n        early_stopping(validate(model), model, path)\n"
    "    best_model_path = path + '/' + 'checkpoint.pth'\n    model.load_state_dict(torch.load(best_model_path))\n"
)

#: Caches a program writes where they are missing (facebookresearch/BLINK@5fe254d
#: blink/biencoder/eval_biencoder.py:179-199, elq/biencoder/data_process.py:372-375,561-564), and a
#: checkpoint a run resumes from and overwrites, which an earlier (GPU) run may have written.
CACHE_TRIED = (
    "import torch\n\ndef candidates(path):\n    pool = None\n    try:\n        pool = torch.load(path)\n    except:\n        print('rebuilding')\n"
    "    if pool is None:\n        pool = build()\n        torch.save(pool, path)\n    return pool\n"
)
CACHE_RETURNING = (
    "import os\nimport torch\n\ndef process(folder):\n    if folder is not None and os.path.exists(os.path.join(folder, 'tensors.pt')):\n"
    "        return torch.load(os.path.join(folder, 'data.pt')), torch.load(os.path.join(folder, 'tensors.pt'))\n"
    "    data, tensors = build()\n    torch.save(data, os.path.join(folder, 'data.pt'))\n    torch.save(tensors, os.path.join(folder, 'tensors.pt'))\n"
    "    return data, tensors\n"
)
RESUMED = (
    "import os\nimport torch\n\ndef train(model, path):\n    if os.path.exists(path):\n        model.load_state_dict(torch.load(path{}))\n"
    "    fit(model)\n    torch.save(model.state_dict(), path)\n"
)
#: An early stop that reloads the best round's checkpoint, written by earlier rounds of the loop
#: (twitter-research/tgn@d55bbe6 train_self_supervised.py:293-302), and a resume the loop goes on from.
EARLY_STOP_LOOP = (
    "import torch\n\ndef train(net, stopper, epochs):\n    for epoch in range(epochs):\n        if stopper.stop():\n"
    "            net.load_state_dict(torch.load(checkpoint_path(stopper.best){}))\n            break\n"
    "        else:\n            torch.save(net.state_dict(), checkpoint_path(epoch))\n"
)
RESUMED_IN_LOOP = (
    "import torch\n\ndef train(net, folds, resume):\n    for fold in range(folds):\n        if resume:\n"
    "            net.load_state_dict(torch.load(checkpoint_path(fold){}))\n        fit(net)\n"
    "        torch.save(net.state_dict(), checkpoint_path(fold))\n"
)
#: A training framework that saves where it is told, built with the path the script then loads
#: (thunlp/OpenNRE@d6a2c6c example/train_supervised_cnn.py:129-147, opennre/framework/sentence_re.py:94,138).
FRAMEWORK = (
    "import torch\n\nclass SentenceRE:\n    def __init__(self, model, ckpt):\n        self.model, self.ckpt = model, ckpt\n\n"
    "    def train_model(self):\n        torch.save({'state_dict': self.model.state_dict()}, self.ckpt)\n"
)
FRAMEWORK_SCRIPT = (
    "import torch\nfrom framework import SentenceRE\n\nckpt = 'ckpt/{}.pth.tar'.format(args.ckpt)\n"
    "framework = SentenceRE(model, ckpt=ckpt)\nif not args.only_test:\n    framework.train_model()\n"
    "framework.model.load_state_dict(torch.load(ckpt)['state_dict'])\n"
)
#: A script that saves through a helper of another module, then reloads the best model
#: (quark0/darts@f276dd3 rnn/train.py:298-314, rnn/utils.py:45-51).
SAVE_HELPER = (
    "import os\nimport torch\n\ndef save_checkpoint(model, optimizer, path):\n"
    "    torch.save(model, os.path.join(path, 'model.pt'))\n    torch.save(optimizer.state_dict(), os.path.join(path, 'optimizer.pt'))\n"
)
SAVED_THROUGH_HELPER = (
    "import os\nimport torch\nfrom utils import save_checkpoint\n\nfor epoch in range(args.epochs):\n"
    "    if evaluate() < best:\n        save_checkpoint(model, optimizer, args.save)\n"
    "model = torch.load(os.path.join(args.save, 'model.pt'))\n"
)
#: A script's test function, called once training saved the file it loads
#: (chennnM/GCNII@ca91f56 train.py:43,79-80,108,117); {} is where the script calls it.
SCRIPT_TEST = (
    "import torch\n\ncheckpt_file = 'pretrained/' + uuid.uuid4().hex + '.pt'\n\ndef test():\n"
    "    model.load_state_dict(torch.load(checkpt_file{}))\n    return evaluate(model)\n\n{}"
    "for epoch in range(args.epochs):\n    if validate() < best:\n        torch.save(model.state_dict(), checkpt_file)\n{}"
)
#: A kernel reached through a lazy getter, whose Function moves its input to CUDA first
#: (ashawkey/stable-dreamfusion@5550b91 raymarching/raymarching.py:14-47, raymarching/backend.py:32).
LAZY_KERNEL_FUNCTION = Valid(
    "import torch\nfrom torch.autograd import Function\n\nBACKEND = None\n\ndef get_backend():\n    global BACKEND\n"
    "    if BACKEND is None:\n        try:\n            import _raymarching as _backend\n        except ImportError:\n"
    "            from .backend import _backend\n        BACKEND = _backend\n    return BACKEND\n\n"
    "class NearFar(Function):\n    @staticmethod\n    def forward(ctx, rays_o):\n        if not rays_o.is_cuda:\n"
    "            rays_o = rays_o.cuda()\n        return get_backend().near_far_from_aabb(rays_o)\n",
    files={"backend.py": "from torch.utils.cpp_extension import load\n\n_backend = load(name='_raymarching', sources=['src/raymarching.cu', 'src/bindings.cpp'])\n"},
)


#: ``--cuda`` off by default: a store_true flag tested, and compared with 0 in another module (an
#: integer option) and in the script itself (jwyang/faster-rcnn.pytorch@f9d984d demo.py:69-71,213-217).
CUDA_OPTIONS_OFF = (
    Valid(
        'import argparse\np = argparse.ArgumentParser()\np.add_argument("--cuda", action="store_true")\n'
        "args = p.parse_args()\nif args.cuda:\n    model.cuda()\n"
    ),
    Valid(
        "def build(args, model):\n    if args.cuda > 0:\n        model.cuda()\n",
        files={"opts.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--cuda', type=int, default=0)\n"},
    ),
    Valid('import argparse\np = argparse.ArgumentParser()\np.add_argument("--cuda", action="store_true")\nargs = p.parse_args()\nif args.cuda > 0:\n    model.cuda()\n'),
)

#: A name the module binds only to one constant: True picks the GPU (reported), False never
#: does, and one also set False where CUDA is missing is a guard, like an attribute holding a check.
CONSTANT_FLAG_ON = "import torch\nuse_cuda = True\nif use_cuda:\n    model.cuda()\n"
CONSTANT_FLAGS_OFF = (
    # CSAILVision/semantic-segmentation-pytorch@8f27c9b mit_semseg/lib/utils/data/dataloader.py:196,222: a check kept
    Valid("import torch\n\nclass Loader:\n    def __init__(self, pin):\n        self.pin = pin and torch.cuda.is_available()\n\n    def start(self, x):\n        return x.cuda() if self.pin else x\n"),
    Valid(CONSTANT_FLAG_ON.replace("True", "False")),
    Valid(CONSTANT_FLAG_ON.replace("if use_cuda", "if not torch.cuda.is_available():\n    use_cuda = False\nif use_cuda")),
)

#: CoinCheung/BiSeNet@6b4b67a old/train.py:167-169 and old/evaluate.py:157: the trainer moves the
#: network to the CPU before saving its state, so the evaluator loads CPU tensors only; one that
#: moves it back to CUDA first saves CUDA tensors.
STATE_LOADER = "import torch\nnet.load_state_dict(torch.load('res/model_final.pth'))\n"
STATE_SAVED_AFTER_CPU = {
    "train.py": (
        "import os\nimport torch\n\ndef train(net, respth):\n    net.cuda()\n    fit(net)\n"
        "    save_pth = os.path.join(respth, 'model_final.pth')\n    net.cpu()\n"
        "    state = net.module.state_dict() if hasattr(net, 'module') else net.state_dict()\n"
        "    torch.save(state, save_pth)\n"
    )
}
STATE_SAVED_FROM_CUDA = {"train.py": STATE_SAVED_AFTER_CPU["train.py"].replace("    net.cpu()\n", "    net.cpu()\n    net.cuda()\n")}

#: cszn/KAIR@fc1732f models/model_base.py:151-156 (BasicSR's ``save_network``): every parameter
#: moved to the CPU before the save, so the released weights main_test_*.py load are CPU tensors.
MODEL_ZOO_LOADER = "import torch\nmodel.load_state_dict(torch.load('model_zoo/dncnn_25.pth'), strict=True)\n"
WEIGHTS_SAVED_ON_CPU = {
    "models/model_base.py": (
        "import torch\n\nclass ModelBase:\n    def save_network(self, save_path, network):\n"
        "        state_dict = network.state_dict()\n        for key, param in state_dict.items():\n"
        "            state_dict[key] = param.cpu()\n        torch.save(state_dict, save_path)\n"
    )
}
WEIGHTS_SAVED_AS_THEY_ARE = {
    "models/model_base.py": WEIGHTS_SAVED_ON_CPU["models/model_base.py"].replace("            state_dict[key] = param.cpu()\n", "            print(key)\n")
}

#: kaituoxu/Conv-TasNet@0d9d9dc src/solver.py:21,174, src/train.py:54: ``--use_cuda`` is 1 in the
#: script that imports the solver and 0 in another script: the solver reads train.py's.
_SOLVER = "import torch\n\nclass Solver:\n    def __init__(self, args):\n        self.use_cuda = args.use_cuda\n\n    def run(self, x):\n        if self.use_cuda:\n            x = x.cuda()\n        return x\n"
OPTION_OF_THE_IMPORTER = Invalid(
    _SOLVER,
    files={
        "train.py": (
            "import argparse\nfrom example import Solver\np = argparse.ArgumentParser()\np.add_argument('--use_cuda', type=int, default=1)\n"
            "print(Solver(p.parse_args()).run(0))\n"
        ),
        "separate.py": "import argparse\np = argparse.ArgumentParser()\np.add_argument('--use_cuda', type=int, default=0)\n",
    },
    fixed="import torch\n\n" + DEVICE + _SOLVER[len("import torch\n"):].replace("x.cuda()", "x.to(device)"),
)

#: facebookresearch/DeepSDF@48c19b8 train_deep_sdf.py:307, reconstruct.py:145: helpers defined in
#: a function or a script's main block that never names them again never run; one it calls does.
_HELPER = "    def empirical_stat(vecs):\n        return torch.zeros(0).cuda()\n"
#: A method only an unreached method calls never runs either (LTH14/mar@fe470ac
#: diffusion/gaussian_diffusion.py:624-671: ``ddim_sample_loop`` nothing calls, then its loop).
_SAMPLER = (
    "import torch\n\n\nclass Diffusion:\n    def sample(self, n):\n        return torch.randn(n)\n\n"
    "    def ddim_sample(self, n):\n        return self.ddim_loop(n)\n\n    def ddim_loop(self, n):\n        return torch.randn(n).cuda()\n"
)
DEAD_HELPERS = (
    Valid("import torch\n\ndef train(vecs):\n" + _HELPER + "    return vecs\n"),
    Valid("import torch\n\nif __name__ == '__main__':\n" + _HELPER + "    print(1)\n"),
    Valid(_SAMPLER, files={"sample.py": "from example import Diffusion\nprint(Diffusion().sample(4))\n"}),
)
#: TDV501's: a helper nothing in the project calls (hszhao/PointWeb@f31fe05 util/pt_util.py:389
#: ``load_checkpoint``), and what still checks it: the setting, a package others install, a
#: README that names it.
_LOADER = "import torch\n\n\ndef load_checkpoint(model, path):\n    model.load_state_dict(torch.load(path))\n\n\ndef train(model):\n    return model\n"
_LOADER_USER = {"train.py": "import torch\nfrom example import train\ntrain(torch.nn.Linear(2, 2))\n"}
_LOADER_FIXED = _LOADER.replace("torch.load(path)", 'torch.load(path, map_location="cpu")')
UNREACHED_LOADS = (
    Valid(_LOADER, files=_LOADER_USER),
    (
        Invalid(_LOADER, files=_LOADER_USER, config={"check-unreached": True}, fixed=_LOADER_FIXED),
        Invalid(_LOADER, files={**_LOADER_USER, "pyproject.toml": "[project]\nname = 'example'\n"}, fixed=_LOADER_FIXED),
        Invalid(_LOADER, files={**_LOADER_USER, "README.md": "Resume with `load_checkpoint(model, path)`.\n"}, fixed=_LOADER_FIXED),
    ),
)
#: A function moving to CUDA under a flag, and a script passing it a name bound to ``{}``
#: (tomgoldstein/loss-landscape@64ef4d5 cifar10/main.py:34-35,175,259: ``net.train()``, which it
#: cannot take, is no call of it); the name bound to a constant as well leaves the flag on.
_TRAIN_IF_CUDA = "def train(net, use_cuda=True):\n    net.train()\n    if use_cuda:\n        net.cuda()\n"
_NAME_PASSED = "import torch\nfrom example import train\n\nuse_cuda = {}\ntrain(torch.nn.Linear(2, 2), use_cuda)\n"
AVAILABILITY_NAME_PASSED = (
    Valid(_TRAIN_IF_CUDA, files={"main.py": _NAME_PASSED.format("torch.cuda.is_available()")}),
    Invalid(
        _TRAIN_IF_CUDA, fixed="import torch\n\n" + DEVICE + "\n\n" + _TRAIN_IF_CUDA.replace(".cuda()", ".to(device)"),
        files={"main.py": _NAME_PASSED.format("torch.cuda.is_available()") + "use_cuda = True\ntrain(torch.nn.Linear(2, 2), use_cuda)\n"},
    ),
)
#: A flag attribute another module binds to an availability test, passed as a flag (Tiiiger/SGC@2c7a272
#: args.py:39 ``args.cuda = not args.no_cuda and torch.cuda.is_available()``, citation.py:28).
AVAILABILITY_ATTRIBUTE_PASSED = Valid(
    "def load_citation(dataset, cuda=True):\n    if cuda:\n        features.cuda()\n",
    files={
        "args.py": (
            "import argparse\nimport torch\n\ndef get_citation_args():\n    parser = argparse.ArgumentParser()\n"
            "    parser.add_argument('--no-cuda', action='store_true')\n    args = parser.parse_args()\n"
            "    args.cuda = not args.no_cuda and torch.cuda.is_available()\n    return args\n"
        ),
        "citation.py": "from args import get_citation_args\nfrom example import load_citation\nargs = get_citation_args()\nload_citation('cora', args.cuda)\n",
    },
)
#: An evaluation script the README runs (weijun88/F3Net@eecace3 "python test.py"): a method its
#: own statements never call does not run.
SCRIPT_RUN_BY_README = Valid(
    "import torch\n\nclass Test:\n    def save(self):\n        return 1\n\n    def show(self):\n        return torch.ones(1).cuda()\n\n"
    "if __name__ == '__main__':\n    Test().save()\n",
    files={"README.md": "Evaluate with `python example.py`.\n"},
)
#: A decoder's weights moved to the CPU key by key before each save (naoto0804/pytorch-AdaIN@47950d0
#: train.py:130-134): the released decoder holds CPU tensors.
DECODER_SAVED_ON_CPU = {
    "train.py": (
        "import torch\n\nfor i in range(10):\n    state_dict = net.decoder.state_dict()\n    for key in state_dict.keys():\n"
        "        state_dict[key] = state_dict[key].to(torch.device('cpu'))\n    torch.save(state_dict, 'decoder_iter_{:d}.pth.tar'.format(i + 1))\n"
    )
}
#: Tensors made on the CPU from numpy data and saved (``{}``: how the labels are made).
NUMPY_SAVED = "import numpy as np\nimport torch\nf = np.load('mnist.npz')\nx = torch.from_numpy(f['x'])\ny = {}\ntorch.save((x, y), 'mnist_train.pt')\n"
#: A folder of splits built where it is missing (galsang/BiDAF-pytorch@8e16379 model/data.py:46-64).
FOLDER_CACHE = (
    "import os\nimport torch\n\ndef splits(dataset_path):\n    train_path = dataset_path + 'train_examples.pt'\n"
    "    if os.path.exists(dataset_path):\n        train = torch.load(train_path)\n    else:\n        train = build()\n"
    "        os.makedirs(dataset_path)\n        torch.save(train, train_path)\n    return train\n"
)
#: A kernel's class built only where a flag rebound with an availability test holds
#: (hendrycks/outlier-exposure@e6ede98 NLP_language_modeling/torchqrnn/forget_mult.py:95-117,175-179);
#: ``{}``: the flag's rebinding.
_GPU_ONLY_CLASS = (
    "import torch\n\n\nclass GPUForget(torch.autograd.Function):\n    def __init__(self):\n"
    "        super(GPUForget, self).__init__()\n\n    def compile(self):\n        return torch.cuda.current_device()\n\n\n"
    "class Forget(torch.nn.Module):\n    def forward(self, f, use_cuda=True):\n{}"
    "        return GPUForget().compile() if use_cuda else f\n"
)
GPU_ONLY_CLASS = (
    Valid(_GPU_ONLY_CLASS.format("        use_cuda = use_cuda and torch.cuda.is_available()\n"), files={"train.py": "from example import Forget\nForget()(f)\n"}),
    # the flag turned off first where CUDA is missing (yuqinie98/PatchTST@204c21e PatchTST_self_supervised/src/basics.py:52-56)
    Valid(
        "import torch\n\n\ndef default_device(use_cuda=True):\n    if not torch.cuda.is_available():\n        use_cuda = False\n"
        "    return torch.device(torch.cuda.current_device()) if use_cuda else torch.device('cpu')\n"
    ),
)
#: The same where the flag is the parameter alone (on by default): reported.
GPU_CLASS_ON_BY_DEFAULT = Invalid(
    _GPU_ONLY_CLASS.format(""), fixed=None, applicability=Applicability.DISPLAY_ONLY, files={"train.py": "from example import Forget\nForget()(f)\n"},
)
#: Try-loading step N of a family of checkpoints, then saving each step: a resume, no cache
#: (xcmyz/FastSpeech@1e1a61b train.py:47-49,174); ``{}``: what the load passes.
_RESUMED_FAMILY = (
    "import torch\n\n\ndef main(args, model):\n    try:\n        state = torch.load('checkpoint_%d.pth' % args.restore_step{})\n"
    "    except Exception:\n        state = None\n    for step in range(10):\n"
    "        torch.save(model.state_dict(), 'checkpoint_%d.pth' % step)\n    return state\n"
)


def resumed_family(keep_saved: str) -> Invalid:
    """TDV501's example of it; ``keep_saved``: the ``map_location`` the fix writes."""
    return Invalid(_RESUMED_FAMILY.format(""), fixed=_RESUMED_FAMILY.format(f", map_location={keep_saved}"))


#: A script whose ``train()`` saves to a module-level path and whose ``test()`` reloads it after
#: training (ethanfetaya/NRI@e63fcb0 train.py:95,278,305,390-401); ``{}``: ``test``'s parameters.
_GLOBAL_PATH = (
    "import os\nimport torch\n\nencoder_file = os.path.join(args.save_folder, 'encoder.pt')\n\n\n"
    "def train(epoch):\n    torch.save(encoder.state_dict(), encoder_file)\n\n\n"
    "def test({}):\n    encoder.load_state_dict(torch.load(encoder_file{{}}))\n\n\n"
    "for epoch in range(10):\n    train(epoch)\ntest({})\n"
)


def global_path_saves(location: str) -> Tuple[Valid, Invalid]:
    """TDV501's examples of it: the reload is exempt; one of a path ``test`` is given is not
    (``location``: the ``map_location`` the fix writes)."""
    given = _GLOBAL_PATH.format("encoder_file", "args.load")
    return (
        Valid(_GLOBAL_PATH.format("", "").format(""), files={"data.py": "import torch\n"}),
        Invalid(given.format(""), fixed=given.format(f", map_location={location}"), files={"data.py": "import torch\n"}),
    )


#: One name bound to each state file in turn; the scheduler's holds numbers (lioryariv/idr@44959e7
#: code/training/idr_train.py:132-141). ``{}``: a later statement.
_STATES_IN_TURN = (
    "import torch\n\n\ndef resume(self, path, cameras):\n    data = torch.load(path + '/scheduler.pth'{})\n"
    "    self.scheduler.load_state_dict(data['scheduler'])\n    if cameras:\n"
    "        data = torch.load(path + '/cameras.pth', map_location='cpu')\n        self.poses.load_state_dict(data['poses'])\n{}"
)


def scheduler_states(keep_saved: str) -> Tuple[Valid, Invalid]:
    """TDV501's examples of it: silent; reported where the name may still hold the scheduler's
    file when it is returned (``keep_saved``: the ``map_location`` the fix writes)."""
    returned = "    return data\n"
    return (
        Valid(_STATES_IN_TURN.format("", "")),
        Invalid(_STATES_IN_TURN.format("", returned), fixed=_STATES_IN_TURN.format(f", map_location={keep_saved}", returned)),
    )


#: A Ray Tune trainable restoring what the same tuning run saved (twitter-research/graph-neural-pde@af9047e
#: src/ray_tune.py:130-142); ``{}``: a suffix of the parameter's name (another name is no such hand-back).
_RAY_TRAINABLE = (
    "import os\nimport torch\nfrom ray import tune\n\n\ndef train(config, checkpoint_dir{0}=None):\n"
    "    model = build(config)\n    if checkpoint_dir{0}:\n"
    "        model.load_state_dict(torch.load(os.path.join(checkpoint_dir{0}, 'checkpoint'){{}}))\n"
    "    for epoch in range(10):\n        with tune.checkpoint_dir(step=epoch) as folder:\n"
    "            torch.save(model.state_dict(), os.path.join(folder, 'checkpoint'))\n"
)


def ray_trainables() -> Tuple[Valid, Invalid]:
    """TDV501's examples of it: silent; reported where the folder comes from elsewhere."""
    restored = _RAY_TRAINABLE.format("_restored")
    return Valid(_RAY_TRAINABLE.format("").format("")), Invalid(restored.format(""), fixed=restored.format(', map_location="cpu"'))


#: A device-portable program adding a CPU tensor to a device one (TDV402).
PORTABLE_MIX = (
    'import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
    "x = torch.randn(8, 3).to(device)\nnoise = torch.randn(8, 3)\ny = x + noise\n"
)
PORTABLE_MIX_FIXED = PORTABLE_MIX.replace("randn(8, 3)\ny", "randn(8, 3, device=x.device)\ny")
#: A module whose CUDA arm and CPU arm each make their own tensor (TDV403).
CPU_ARM = (
    "import torch\nfrom torch import nn\n\nclass Focal(nn.Module):\n    def forward(self, x):\n"
    "        if torch.cuda.is_available():\n            return x * torch.ones(x.shape).cuda()\n"
    "        else:\n            return x * torch.ones(x.shape)\n"
)


#: A module class of the project that holds no state, called on a device tensor (frostinassiky/gtad@6deb5b1
#: gtad_lib/align.py:72-76): nothing is mixed.
STATELESS_LAYER_CALL = Valid(
    "import torch\n\n\nclass Shift(torch.nn.Module):\n    def __init__(self, k):\n        super().__init__()\n"
    "        self.k = k\n\n    def forward(self, x):\n        return torch.roll(x, self.k)\n\n\n"
    "layer = Shift(2)\nout = layer(torch.randn(4).cuda())\n",
    files={"train.py": "from example import Shift\nShift()(x)\n"},
)


#: A base class whose ``__init__`` picks the device from a flag, built only through a subclass of the
#: same file (ayumiymk/aster.pytorch@be67004 lib/evaluators.py:24-30,129, main.py:96,170);
#: ``{}``: what ``main.py`` does to the option before passing it.
_HEIR = (
    "import torch\n\n\nclass BaseEvaluator(object):\n    def __init__(self, model, use_cuda=True):\n"
    "        self.device = torch.device({} if use_cuda else \"cpu\")\n\n\n"
    "class Evaluator(BaseEvaluator):\n    def evaluate(self, x):\n        return x.to(self.device)\n"
)
_HEIR_MAIN = (
    "import argparse\nimport torch\nfrom example import Evaluator\n\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--cuda', type=bool, default=True)\nargs = parser.parse_args()\n{}evaluator = Evaluator(None, args.cuda)\n"
)
HEIR_BUILT = (
    Valid(_HEIR.format('"cuda"'), files={"main.py": _HEIR_MAIN.format("args.cuda = args.cuda and torch.cuda.is_available()\n")}),
    Invalid(
        _HEIR.format('"cuda"'), fixed=_HEIR.format('("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")'),
        files={"main.py": _HEIR_MAIN.format("")},
    ),
)


CALLED_HELPER = Invalid(
    "import torch\n\ndef train(vecs):\n" + _HELPER + "    return empirical_stat(vecs)\n",
    fixed="import torch\n\n" + DEVICE + "\ndef train(vecs):\n" + _HELPER.replace(".cuda()", ".to(device)") + "    return empirical_stat(vecs)\n",
)

#: A GPU count clamped to ``torch.cuda.device_count()`` (the pytorch-template's ``prepare_device``),
#: or set to zero where there is none (yassouali/CCT@65d4e5b base/base_trainer.py:74-82).
_PREPARE = "import torch\n\ndef prepare_device(n_gpu_use):\n    n_gpu = torch.cuda.device_count()\n"
_CHOSEN = "    return torch.device('cuda:0' if n_gpu_use > 0 else 'cpu'), list(range(n_gpu_use))\n"
CLAMPED_GPU_COUNTS = (
    Valid(_PREPARE + "    if n_gpu_use > n_gpu:\n        n_gpu_use = n_gpu\n" + _CHOSEN),
    Valid(_PREPARE + "    if n_gpu == 0:\n        n_gpu_use = 0\n    elif n_gpu_use > n_gpu:\n        print(n_gpu)\n" + _CHOSEN),
)


#: A default every call overrides through a package whose folder holds a module named setup.py (jannerm/trajectory-transformer@8834a6e utils/serialization.py:34)
PACKAGE_CALLED = Valid("import torch\n\ndef load_model(*path, epoch=None, device='cuda:0'):\n    return build(path, epoch).to(device)\n", files={"tools/__init__.py": "from example import *\n", "tools/setup.py": "def watch(args):\n    return args\n", "plan.py": "import tools\nmodel = tools.load_model('logs', epoch=0, device=args.device)\n"})
#: A YAML config's setting read as ``config['cuda']`` (daa233/generative-inpainting-pytorch@c6cdaea
#: configs/config.yaml:21, train.py:29-31,109-112); {} is where the fix binds the device.
CONFIG_READER = (
    "import torch\nimport yaml\n\n{}config = yaml.safe_load(open('configs/config.yaml'))\ncuda = config['cuda']\n{}"
    "if cuda:\n    x = x{}\n"
)


def configured_flags(device: str) -> Tuple[Tuple[object, ...], Tuple[object, ...]]:
    """(valid, invalid): ``cuda: True`` in the project's config picks the GPU like an option on by
    default; off, disagreeing configs, or a setting the program turns off without CUDA
    (oxwhirl/pymarl@c971afd src/run.py:220-221) decide nothing."""
    turned_off = "if config['cuda'] and not torch.cuda.is_available():\n    config['cuda'] = False\n"
    valid = (
        Valid(CONFIG_READER.format("", "", ".cuda()"), files={"configs/config.yaml": "cuda: false\n"}),
        Valid(CONFIG_READER.format("", "", ".cuda()"), files={"configs/a.yaml": "cuda: true\n", "configs/b.yaml": "cuda: false\n"}),
        Valid(CONFIG_READER.format("", turned_off, ".cuda()"), files={"configs/config.yaml": "cuda: true\n"}),
    )
    invalid = Invalid(
        CONFIG_READER.format("", "", ".cuda()"), fixed=CONFIG_READER.format(device + "\n", "", ".to(device)"),
        files={"configs/config.yaml": "# defaults\ncuda: True\nbatch_size: 16\n"},
    )
    return valid, (invalid,)
#: A device parameter's CUDA default replaced first where CUDA is missing (yuqinie98/PatchTST@204c21e
#: PatchTST_self_supervised/src/learner.py:381-386).
DEFAULT_REPLACED = Valid(
    "import torch\n\n\ndef load(fname, device='cuda'):\n    if not torch.cuda.is_available():\n        device = 'cpu'\n"
    "    return torch.load(fname, map_location=device)\n"
)
#: A default every call overrides, beside a namesake method called without the arguments it needs
#: (ashawkey/stable-dreamfusion@5550b91 ldm/modules/evaluate/torch_frechet_video_distance.py:199:
#: ``x.compute()`` cannot be a call of ``compute(videos, device='cuda')``).
NAMESAKE_CALLED = Valid(
    "import torch\n\n\ndef compute(videos, device='cuda'):\n    return videos.to(device)\n",
    files={"train.py": (
        "import torch\nfrom example import compute\n\nmetric.compute()\n"
        "out = compute(x, device='cuda' if torch.cuda.is_available() else 'cpu')\n"
    )},
)
#: A device bound and never read (tjddus9597/Proxy-Anchor-CVPR2020@51db570 code/utils.py:34): the
#: function moves with ``.cuda()``, which TDV101 reports; the binding itself selects nothing.
UNREAD_DEVICE = Valid("import torch\n\n\ndef predict(model, loader):\n    device = 'cuda'\n    return [model(x.cuda()) for x in loader]\n")
