"""Example projects that several rules' valid/invalid examples share: defaults and modules that
hold nothing, options rebound to an availability check (extension kernels: ``kernel_examples``)."""

from __future__ import annotations

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
#: JDAI-CV/image-captioning@d39126d main.py:106, losses/__init__.py:5-17: a loss a registry's factory makes.
REGISTRY_FACTORY = Valid(
    "import losses\n\ncriterion = losses.create(cfg.LOSSES.XE_TYPE).cuda()\n",
    files={"losses/__init__.py": "from losses.cross_entropy import CrossEntropy\n\n__factory = {\n    'CrossEntropy': CrossEntropy,\n}\n\n\n"
           "def create(name):\n    if name not in __factory:\n        raise KeyError(name)\n    return __factory[name]()\n",
           "losses/cross_entropy.py": "import torch.nn as nn\n\n\nclass CrossEntropy(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
           "        self.criterion = nn.CrossEntropyLoss(ignore_index=-1)\n"},
)
#: thuml/Autoformer@51c7d41 run.py:82, exp/exp_basic.py:17-19: an option rebound to an availability check (or off: cure-lab/LTSF-Linear@0c11366 run_stat.py:49).
REBOUND_USE_GPU = Valid(
    "import torch\n\ndef acquire(args):\n    if args.use_gpu:\n        return torch.device('cuda:{}'.format(args.gpu))\n",
    files={"run.py": "import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument('--use_gpu', type=bool, default=True)\n"
           "args = p.parse_args()\nargs.use_gpu = True if torch.cuda.is_available() and args.use_gpu else False\n", "run_stat.py": "from run import args\nargs.use_gpu = False\n"},
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
#: A method of a parameter calls no function of the project's (Shen-Lab/GraphCL@b4d7501
#: adversarialRobustness_Component/code/common/test.py:68, train/metrics.py:16 ``scores.argmax()``).
_METRICS = (
    "import torch\n\n\ndef argmax(x):\n    return x.cuda().argmax()\n\n\ndef accuracy(scores, labels):\n"
    "    return (scores.argmax(dim=1) == labels).float().mean()\n\n\nprint(accuracy(torch.ones(2, 3), torch.zeros(2)))\n"
)
DEAD_HELPERS = (
    Valid("import torch\n\ndef train(vecs):\n" + _HELPER + "    return vecs\n"),
    Valid(_METRICS, files={"README.md": "Evaluate with `python example.py`.\n"}),
    # a class without bases is no subclass a listing of modules looks for (botaoye/OSTrack@33b5e12)
    Valid(
        "import importlib\n\n\nclass Preprocessor:\n    def process(self, x):\n        return x\n\n\n"
        "class PreprocessorX:\n    def process(self, x):\n        return x.cuda()\n\n\n"
        "class Tracker:\n    def __init__(self, name):\n        self.params = importlib.import_module('parameters.' + name)\n"
        "        self.preprocessor = Preprocessor()\n\n    def track(self, x):\n        return self.preprocessor.process(x)\n\n\n"
        "print(Tracker('ostrack').track(1))\n",
        files={"README.md": "Track with `python example.py`.\n"},
    ),
    # a decorator that only wraps (``@contextmanager``, ``@torch.no_grad()``) registers nothing
    Valid(_METRICS.replace("\ndef argmax", "\n@torch.no_grad()\ndef argmax"), files={"README.md": "Evaluate with `python example.py`.\n"}),
    Valid("import torch\n\nif __name__ == '__main__':\n" + _HELPER + "    print(1)\n"),
    Valid(_SAMPLER, files={"sample.py": "from example import Diffusion\nprint(Diffusion().sample(4))\n"}),
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
#: kkoutini/PaSST@2a5c818 ex_audioset.py:364: a Sacred experiment's command runs only where the
#: command line names it; silent where no document does, reported where the README runs it.
_SACRED = (
    "import torch\nfrom sacred import Experiment\n\nex = Experiment('audio')\n\n\ndef build():\n    return torch.nn.Linear(2, 2)\n\n\n"
    "@ex.command\ndef speed_test():\n    return build().cuda()\n\n\n@ex.automain\ndef main():\n    return build()\n"
)
SACRED_COMMAND_UNNAMED = Valid(_SACRED, files={"README.md": "Train with `python example.py with lr=0.1`.\n"})
SACRED_COMMAND_NAMED = Invalid(
    _SACRED, files={"README.md": "Time it with `python example.py speed_test`.\n"},
    fixed=_SACRED.replace("build().cuda()", "build().to(device)").replace("from sacred import Experiment\n", "from sacred import Experiment\n\n" + DEVICE, 1),
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


# nlpyang/PreSumm@70b810e src/train.py:98,117-118: a device option picking GPUs by value, the CPU
# ("-1") by default, in another module: code on its other branch runs only where the user names GPUs
VISIBLE_GPUS = {"opts.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('-visible_gpus', default='-1', type=str)\n"}
#: TDV101's and TDV102's examples of the same option.
ASKED_FOR_GPUS = (
    Valid("def restore(args, state):\n    if args.visible_gpus != '-1':\n        state = state.cuda()\n    return state\n", files=VISIBLE_GPUS),
    Valid('import torch\n\ndef build(args, model):\n    device = "cpu" if args.visible_gpus == "-1" else "cuda"\n    return model.to(device)\n', files=VISIBLE_GPUS),
)
#: thuml/Transolver@75e0f67 PDE-Solving-StandardBenchmark/exp_plas.py:24,28,168: ``--eval`` off by
#: default, bound to a global the function tests; silent where every script passes ``--eval 0``,
#: reported where one passes ``--eval 1``.
_EVAL_BRANCH = (
    "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--eval', type=int, default=0)\n"
    "args = parser.parse_args()\neval = args.eval\n\n\ndef main(model):\n    if eval:\n        model = model.cuda()\n    return model\n"
)
EVAL_OFF_IN_SCRIPTS = Valid(_EVAL_BRANCH, files={"scripts/train.sh": "python example.py --eval 0\n"})
EVAL_ON_IN_A_SCRIPT = Invalid(
    _EVAL_BRANCH, files={"scripts/train.sh": "python example.py --eval 0\n", "scripts/test.sh": "python example.py --eval 1\n"},
    fixed=_EVAL_BRANCH.replace("model.cuda()", "model.to(device)").replace("import torch\n", "import torch\n\n" + DEVICE, 1),
)
#: AbnerHqC/GaitSet@5535943 model/model.py:59-62, model/network/triplet.py:6-10: a loss that keeps
#: only numbers, cast and wrapped in ``DataParallel`` on ``self``, then moved.
_WRAPPED_LOSS = (
    "import torch.nn as nn\nfrom network.triplet import TripletLoss\n\n\nclass Model:\n    def __init__(self, margin):\n"
    "        self.triplet_loss = {}.float()\n        self.triplet_loss = nn.DataParallel(self.triplet_loss)\n        self.triplet_loss.cuda()\n"
)
_TRIPLET = {"network/triplet.py": "import torch.nn as nn\n\n\nclass TripletLoss(nn.Module):\n    def __init__(self, margin):\n        super().__init__()\n        self.margin = margin\n"}
WRAPPED_EMPTY_LOSS = Valid(_WRAPPED_LOSS.format("TripletLoss(margin)"), files=_TRIPLET)
WRAPPED_LAYER = Invalid(
    _WRAPPED_LOSS.format("nn.Linear(margin, 1)"), files=_TRIPLET,
    fixed=_WRAPPED_LOSS.format("nn.Linear(margin, 1)").replace("import torch.nn as nn\n", "import torch\nimport torch.nn as nn\n\n" + DEVICE, 1).replace("self.triplet_loss.cuda()", "self.triplet_loss.to(device)"),
)
