"""Placement: code that pins tensors, modules or the default device to CUDA."""

from __future__ import annotations

from typing import Optional

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Placed, Unguarded
from ..knowledge.flags import turned_off_first
from ..knowledge.unused_defaults import bound_unread, field_default_unused, in_unused_default
from ..model.fixes import Applicability
from ..syntax.cst_lazy import cst
from .support.common import (
    argument_usage, availability_check, built_string, defines_device, is_cuda_string, keyword_is, may_name_cuda,
    method_name, names_a_device, names_cuda_device, only_asks, report_device_literal, report_device_method,
)
from .support.examples import (
    ASKED_FOR_GPUS, ATTRS_LAYER_NORM, AVAILABILITY_ATTRIBUTE_PASSED, AVAILABILITY_NAME_PASSED, CALLED_HELPER, CLAMPED_GPU_COUNTS, CONSTANT_FLAG_ON, CONSTANT_FLAGS_OFF,
    CRITERION_FACTORY, CUDA_OPTIONS_OFF, DEAD_HELPERS, DEFAULT_REPLACED, DEVICE, EMPTY_LOSS, EVAL_OFF_IN_SCRIPTS, EVAL_ON_IN_A_SCRIPT, INLINE, LAZY_KERNEL_FUNCTION, LOSS_USER, REGISTRY_FACTORY, SACRED_COMMAND_NAMED, SACRED_COMMAND_UNNAMED, WRAPPED_EMPTY_LOSS, WRAPPED_LAYER,
    NAMESAKE_CALLED, NCE_LOSSES, OPTION_OF_THE_IMPORTER, PACKAGE_CALLED, PREPARE_Z_Y, HEIR_BUILT, REBOUND_USE_GPU, SCRIPT_RUN_BY_README, UNREAD_DEVICE, configured_flags,
)
from .support.kernel_examples import ALIASED_TEST_SCRIPT, FFI_TEST_SCRIPT, JIT_KERNEL_USER, KERNEL_PROGRAM, KERNEL_SELF_TEST, KERNEL_TEST_SCRIPT, NESTED_KERNEL_SELF_TEST, kernel_callers, kernel_program


_GUARDED = "'cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'"


class CudaMethodCall(Rule):
    code = "TDV101"
    name = "cuda-method-call"
    hazard_without_cuda = True
    message = "`.cuda()` moves to CUDA unconditionally and raises on a machine without CUDA (CPU-only, a Mac)"
    fix_title = "Replace `.cuda()` with `.to(device)`"
    fix_safety = Applicability.UNSAFE
    what = "Checks for `.cuda()` calls on tensors and modules, with any arguments."
    why = (
        "`.cuda()` raises `AssertionError: Torch not compiled with CUDA enabled` on a CPU-only "
        "machine and ignores other accelerators. Moving to a device chosen once at start-up "
        "keeps the code runnable everywhere."
    )
    fix_safety_note = (
        "The fix moves to the `device` bound to a device where the line runs (or, inside "
        "`forward`, to the device of an input known to be a tensor, or to a module-level `device` "
        "it defines; where that name is taken, the expression itself), which may differ from "
        "the CUDA device `.cuda(N)` named."
    )
    triggers = Unguarded(lambda facts: facts.calls_named.get("cuda", ()))
    valid = (
        Valid("import torch\nx = torch.ones(2)\nif torch.cuda.is_available():\n    x = x.cuda()\n"),
        Valid("import torch\nx = torch.ones(2)\nx = x.cuda() if torch.cuda.is_available() else x\n"),
        Valid("def main(args, model):\n    if args.cuda:\n        model.cuda()\n"),
        Valid("print(args.cuda)\nuse = args.cuda and True\n"),
        Valid("import torch\n\nclass Wrapper:\n    def cuda(self):\n        self.model.cuda()\n        return super().cuda()\n"),
        Valid("class EdgeConnect:\n    def cuda(self, *args):\n        return (item.to(self.device) for item in args)\n\n    def train(self, items):\n        images, masks = self.cuda(*items)\n"),
        Valid("import torch\n\ndef f(x):\n    if not torch.cuda.is_available():\n        return x\n    return x.cuda()\n"),
        Valid('import torch\n\ndef f(g, x):\n    if g.device != torch.device("cpu"):\n        x = x.cuda(g.device)\n    return x\n'),  # THUDM/GCC@20398aa gcc/models/graph_encoder.py:155: only where the graph is on a GPU
        Valid("import torch\nx = torch.ones(2)\nx = x.cuda()  # noqa: TDV101\n"),
        # yitu-opensource/T2T-ViT@0f63dc9 main.py:516-521: timm's losses hold no tensor either
        Valid("import torch.nn as nn\nfrom timm.loss import SoftTargetCrossEntropy\nloss = nn.CrossEntropyLoss().cuda(args.gpu)\nsoft = SoftTargetCrossEntropy().cuda()\n"),
        # a project module keeping only numbers has nothing to move (its module chosen at run time)
        Valid(LOSS_USER, files={"models/pointnet.py": EMPTY_LOSS, "models/pointnet2.py": EMPTY_LOSS.replace("0.001", "1")}),
        NCE_LOSSES, CRITERION_FACTORY, REGISTRY_FACTORY, WRAPPED_EMPTY_LOSS,  # losses holding only losses or numbers, made directly or by a function (or its registry), or on `self`
        # a module's own function named `cuda`, the module name bound only in another function
        Valid("import kernels\n\ndef build():\n    kernels = load()\n\ndef run(x):\n    return kernels.cuda(x)\n"),
        # an opt-in flag (off by default) and a flag derived from availability are guards
        Valid('import torch\np.add_argument("--no-cuda", action="store_true")\nargs = p.parse_args()\n'
              "args.cuda = not args.no_cuda and torch.cuda.is_available()\nif args.cuda:\n    model.cuda()\n"),
        *CONSTANT_FLAGS_OFF,  # a name or attribute set to False, or to True only where CUDA is there
        *DEAD_HELPERS,  # nested helpers nothing names
        SACRED_COMMAND_UNNAMED,  # a Sacred command no document runs
        # only runs in a multi-process run, whose backend (TDV303) is the hazard
        Valid("import torch\n\ndef all_reduce_mean(x):\n    if get_world_size() > 1:\n        x = torch.tensor(x).cuda()\n    return x\n"),
        # only a tensor already on CUDA takes these branches (TDV202 reports `isinstance`; `type(x) is`: Shen-Lab/GraphCL@b4d7501 graph_embedding.py:104)
        Valid(
            "import torch\n\ndef pad(out, zeros, feat):\n    if isinstance(out.data, torch.cuda.FloatTensor):\n        zeros = zeros.cuda()\n"
            "    if type(feat) is torch.cuda.FloatTensor:\n        feat = feat.cuda()\n    return torch.cat([out.data, zeros, feat], dim=1)\n"
        ),
        # a function that calls a collective (it raises without a process group) is distributed
        Valid("import torch\nimport torch.distributed as dist\n\ndef sync_loss(loss):\n    total = loss.detach().cuda()\n    dist.all_reduce(total)\n    return total\n"),
        # every call passes torch.cuda.is_available() as the flag (ermongroup/ncsnv2@1bcea03 evaluation/nearest_neighbor.py:70,149)
        Valid("def neighbours(data, k=10, cuda=True):\n    if cuda:\n        model.cuda()\n", files={"run.py": "import torch\nfrom example import neighbours\nneighbours(data, 10, torch.cuda.is_available())\n"}),
        AVAILABILITY_NAME_PASSED[0], AVAILABILITY_ATTRIBUTE_PASSED, SCRIPT_RUN_BY_README,  # ... a name or an attribute bound to it; an unrun method
        KERNEL_TEST_SCRIPT, FFI_TEST_SCRIPT, ALIASED_TEST_SCRIPT, LAZY_KERNEL_FUNCTION, KERNEL_SELF_TEST, NESTED_KERNEL_SELF_TEST, JIT_KERNEL_USER, KERNEL_PROGRAM,  # a CUDA-only kernel's code: one TDV310 instead
        Valid("import torch\n\ndef load(trt_file):\n    if trt_file is not None:\n        from torch2trt import TRTModule\n        x = torch.ones(1, 3).cuda()\n"),  # TensorRT's branch (YOLOX@6ddff48 tools/demo.py:122)
        ASKED_FOR_GPUS[0], EVAL_OFF_IN_SCRIPTS,  # `-visible_gpus` ("-1", the CPU, by default) in another module; `--eval` off in every script
        *CUDA_OPTIONS_OFF,  # `--cuda` off by default, compared with 0
        *configured_flags(DEVICE)[0],  # a YAML config's `cuda: true` decides nothing when off or disputed
    )
    invalid = (
        # one definition of the name keeps a layer: `.cuda()` moves it
        Invalid(LOSS_USER, files={"models/pointnet.py": EMPTY_LOSS, "models/pointnet2.py": EMPTY_LOSS.replace("scale\n", "nn.Linear(2, 2)\n")},
                fixed="import importlib\nimport torch\n\n" + DEVICE + LOSS_USER[17:].replace(".cuda()", ".to(device)")),
        Invalid("import torch\nx = torch.ones(2).cuda()\n", fixed="import torch\n\n" + DEVICE + "x = torch.ones(2).to(device)\n"),
        Invalid(
            "import torch\n\ndef run(model, batch, device):\n    model.cuda()\n    return model(batch.cuda(non_blocking=True))\n",
            fixed="import torch\n\ndef run(model, batch, device):\n    model.to(device)\n    return model(batch.to(device, non_blocking=True))\n",
            count=2,
        ),
        # forward's input, known to be a tensor (a list or an int has no `.size()`): its device
        Invalid(
            "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        n = x.size(1)\n        mask = torch.ones(n).cuda(0)\n        return x * mask\n",
            fixed="import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        n = x.size(1)\n        mask = torch.ones(n).to(x.device)\n        return x * mask\n",
        ),
        Invalid(
            "import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x: torch.Tensor):\n        return x * torch.ones(3).cuda()\n",
            fixed="import torch\n\nclass Net(torch.nn.Module):\n    def forward(self, x: torch.Tensor):\n        return x * torch.ones(3).to(x.device)\n",
        ),
        # an input that may be a list of crops or a tuple of outputs has no `.device`
        Invalid(
            "import torch\n\nclass MultiCrop(torch.nn.Module):\n    def forward(self, inputs):\n"
            "        ids = torch.arange(len(inputs)).cuda()\n        return [self.backbone(crop) for crop in inputs], ids\n",
            fixed="import torch\n\n"
            f'{DEVICE}\n'
            "class MultiCrop(torch.nn.Module):\n    def forward(self, inputs):\n"
            "        ids = torch.arange(len(inputs)).to(device)\n        return [self.backbone(crop) for crop in inputs], ids\n",
        ),
        Invalid(
            "import torch\n\nclass Loss(torch.nn.Module):\n    def forward(self, predictions, targets):\n"
            "        loc, conf = predictions\n        zeros = torch.zeros(conf.size(0)).cuda()\n        return loc, zeros\n",
            fixed="import torch\n\n"
            f'{DEVICE}\n'
            "class Loss(torch.nn.Module):\n    def forward(self, predictions, targets):\n"
            "        loc, conf = predictions\n        zeros = torch.zeros(conf.size(0)).to(device)\n        return loc, zeros\n",
        ),
        Invalid("def load(model):\n    return model.cuda()\n", fixed=f"import torch\n\n{DEVICE}\n\ndef load(model):\n    return model.to(device)\n"),
        Invalid(
            "import torch as th\ndevice = th.device('cpu')\nmodel = th.nn.Linear(2, 2).cuda(device=0)\n",
            fixed="import torch as th\ndevice = th.device('cpu')\nmodel = th.nn.Linear(2, 2).to(device)\n",
        ),
        Invalid(
            "import torch\nx = torch.ones(2).cuda(**options)\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # a `device` bound only later (here in the __main__ block) is not reused: NameError
        Invalid(
            "import torch\n\n\ndef run(x):\n    return x.cuda()\n\n\n"
            'if __name__ == "__main__":\n    device = torch.device("cpu")\n    run(torch.ones(2))\n',
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n\n'
                "def run(x):\n    return x.to(device)\n\n\n"
                'if __name__ == "__main__":\n    device = torch.device("cpu")\n    run(torch.ones(2))\n'
            ),
        ),
        # a local `device` assigned below hides any module-level one: the expression is written
        Invalid(
            "import torch\n\n\ndef run(x):\n    x = x.cuda()\n    device = x.device\n    return x, device\n",
            fixed=(
                "import torch\n\n\ndef run(x):\n"
                '    x = x.to(torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"))\n'
                "    device = x.device\n    return x, device\n"
            ),
        ),
        # a flag that picks the GPU unless told otherwise is not an availability check
        Invalid(
            "import torch\n\ndef totensor(data, device, cuda=True):\n    if cuda:\n        data = data.cuda()\n    return data\n",
            fixed="import torch\n\ndef totensor(data, device, cuda=True):\n    if cuda:\n        data = data.to(device)\n    return data\n",
        ),
        Invalid(
            'import torch\np.add_argument("--use_cuda", default=True, type=bool)\nargs = p.parse_args()\n'
            "if args.use_cuda:\n    model.cuda()\n",
            fixed=(
                'import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                'p.add_argument("--use_cuda", default=True, type=bool)\nargs = p.parse_args()\n'
                "if args.use_cuda:\n    model.to(device)\n"
            ),
        ),
        AVAILABILITY_NAME_PASSED[1],  # the name the script passes is bound to a constant as well
        OPTION_OF_THE_IMPORTER, CALLED_HELPER,  # the default of the script that imports the module; a helper called
        # a name the module only ever sets to True (Tianxiaomo/pytorch-YOLOv4@a65d219 models.py:479)
        Invalid(CONSTANT_FLAG_ON, fixed="import torch\n\n" + DEVICE + CONSTANT_FLAG_ON[13:].replace(".cuda()", ".to(device)")),
        # a look-alike of a collective (a strategy's own barrier) is no process group
        Invalid(
            "import torch\n\ndef fit(strategy, model):\n    strategy.barrier()\n    model.cuda()\n",
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n'
                "def fit(strategy, model):\n    strategy.barrier()\n    model.to(device)\n"
            ),
        ),
        # an imported module's name rebound to a model (awd-lstm's `model = model.RNNModel(...)`)
        Invalid(
            "import torch\nimport model\n\nmodel = model.RNNModel(3)\nmodel.cuda()\n",
            fixed=(
                "import torch\nimport model\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "\nmodel = model.RNNModel(3)\nmodel.to(device)\n"
            ),
        ),
        # a helper named like a distributed setup may serve single-GPU runs: not a guard
        Invalid(
            "import torch\n\ndef train(args, model):\n    init_distributed_mode(args)\n    model.cuda()\n",
            fixed=(
                "import torch\n\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n'
                "def train(args, model):\n    init_distributed_mode(args)\n    model.to(device)\n"
            ),
        ),
        # code before the imports: torch is not imported a second time
        Invalid(
            '__author__ = "someone"\nimport torch\n\nx = torch.ones(2).cuda()\n',
            fixed=(
                '__author__ = "someone"\nimport torch\n\n'
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n\n'
                "x = torch.ones(2).to(device)\n"
            ),
        ),
        # a `device` that is a function, a class or torch's own `device`: never written into `.to(...)`
        Invalid(
            'import torch\n\n\ndef device():\n    return "cpu"\n\n\ndef run(x):\n    return x.cuda()\n',
            fixed=f'import torch\n\n\ndef device():\n    return "cpu"\n\n\ndef run(x):\n    return x.to({INLINE})\n',
        ),
        Invalid(
            "from torch import device\nimport torch\nx = torch.ones(2).cuda()\n",
            fixed=f"from torch import device\nimport torch\nx = torch.ones(2).to({INLINE})\n",
        ),
        # a parameter callers may leave None is no device
        Invalid(
            "import torch\n\ndef run(model, device=None):\n    return model.cuda()\n",
            fixed=f"import torch\n\ndef run(model, device=None):\n    return model.to({INLINE})\n",
        ),
        # the configured name binds torch (NFKC: the fullwidth spelling is the same name)
        Invalid(
            "import torch\nx = torch.ones(2).cuda()\n",
            fixed=f"import torch\nx = torch.ones(2).to({INLINE})\n",
            config={"device-name": "\uff54\uff4f\uff52\uff43\uff48"},
        ),
        # torch imported inside a top-level `try`: not imported a second time
        Invalid(
            "try:\n    import torch\nexcept ImportError:\n    raise\n\nx = torch.ones(2).cuda()\n",
            fixed=f"try:\n    import torch\nexcept ImportError:\n    raise\n\n{DEVICE}\nx = torch.ones(2).to(device)\n",
        ),
        # the file places on CUDA-or-CPU itself: the fix keeps that convention (no MPS on a Mac)
        Invalid(
            "import torch\n\n\ndef helper(x):\n    return x.cuda()\n\n\ndef main(model, x):\n"
            "    if torch.cuda.is_available():\n        model = model.cuda()\n    return model(helper(x))\n",
            fixed='import torch\n\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n\n\n'
            "def helper(x):\n    return x.to(device)\n\n\ndef main(model, x):\n"
            "    if torch.cuda.is_available():\n        model = model.cuda()\n    return model(helper(x))\n",
        ),
        *kernel_callers(DEVICE),  # beside a kernel with a CPU fallback; a model that may run without a CUDA-only one
        *configured_flags(DEVICE)[1],  # `cuda: True` in the project's only config
        # `--gpu_mode` defaults to True in main.py: the branch runs on a CPU-only machine
        Invalid(
            "import torch\n\n\nclass GAN:\n    def __init__(self, args, G):\n        self.gpu_mode = args.gpu_mode\n"
            "        self.G = G\n        if self.gpu_mode:\n            self.G.cuda()\n",
            fixed=(
                "import torch\n\n" + DEVICE + "\n\nclass GAN:\n    def __init__(self, args, G):\n"
                "        self.gpu_mode = args.gpu_mode\n        self.G = G\n        if self.gpu_mode:\n            self.G.to(device)\n"
            ),
            files={"main.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_mode', type=bool, default=True)\n"},
        ),
        # `use_gpu()` only tests `--gpu_ids`, which defaults to "0" in options.py
        Invalid(
            "import torch\n\n\nclass Pix2Pix:\n    def use_gpu(self):\n        return len(self.opt.gpu_ids) > 0\n\n"
            "    def prepare(self, x):\n        if self.use_gpu():\n            x = x.cuda()\n        return x\n",
            fixed="import torch\n\n" + DEVICE + "\n\nclass Pix2Pix:\n    def use_gpu(self):\n        return len(self.opt.gpu_ids) > 0\n\n"
            "    def prepare(self, x):\n        if self.use_gpu():\n            x = x.to(device)\n        return x\n",
            files={"options.py": "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--gpu_ids', type=str, default='0')\n"
                   "from example import Pix2Pix\nPix2Pix().prepare(0)\n"},
        ),
        # a process group on gloo runs on a CPU: what follows is no GPU-only code
        # (layumi/Person_reID_baseline_pytorch@82ff40f train_DDP.py:104, 513)
        Invalid(
            'import torch\nimport torch.distributed as dist\n\ndist.init_process_group(backend="gloo", init_method="env://")\n'
            "model = torch.nn.Linear(2, 2).cuda()\n",
            fixed=(
                "import torch\nimport torch.distributed as dist\n\n"
                f"{DEVICE}\n"
                'dist.init_process_group(backend="gloo", init_method="env://")\nmodel = torch.nn.Linear(2, 2).to(device)\n'
            ),
        ),
    )

    def visit_Call(self, node: cst.Call) -> None:
        if method_name(node) == "cuda" and not self.ctx.guarded:
            report_device_method(self, node, self.message)


class HardcodedCudaDevice(Rule):
    code = "TDV102"
    name = "hardcoded-cuda-device"
    hazard_without_cuda = True
    message = "hard-coded CUDA device `{}`: it raises on a machine without CUDA (CPU-only, a Mac)"
    fix_title = "Use a device chosen at run time"
    fix_safety = Applicability.UNSAFE
    what = (
        'Checks for `"cuda"`/`"cuda:N"` literals (and strings built with an index: `f"cuda:{rank}"`, '
        '`"cuda:{}".format(rank)`, `"cuda:%d" % rank`) used as a device: in `.to(...)`, a `device=` or '
        "`map_location=` argument (or a value of its dict), `torch.device(...)`, or a value assigned to a "
        "device variable, parameter default or `--device` option; a string built with an index, whatever it is assigned to."
    )
    why = (
        '`x.to("cuda")` and `torch.zeros(2, device="cuda")` raise on a CPU-only machine. One arm '
        "of an availability check (`\"cuda\" if torch.cuda.is_available() else \"cpu\"`) is fine."
    )
    fix_safety_note = (
        'A literal used as a device becomes the `device` bound there (or a module-level one the '
        'fix defines); a literal that defines a device becomes `"cuda" if '
        'torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"` '
        '(a Mac gets its GPU, not the CPU; in a file that places on CUDA-or-CPU behind its own '
        'check, `"cpu"` stays the fallback). Either may pick another GPU than `"cuda:N"` named.'
    )
    triggers = Unguarded(Placed(may_name_cuda, as_device=True).literals)
    valid = (
        Valid('import torch\ndevice = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'),
        # a comparison with a CUDA device only asks where a tensor is
        Valid('import torch\nif attr.device != torch.device("cuda") and x.device.type != torch.device("cuda").type:\n    attr = attr.to(torch.float32)\n'),
        Valid('print("using cuda")\nif args.device == "cuda":\n    pass\n'),
        Valid('import torch\n\ndef f(x):\n    if x.device.type == "cuda":\n        return x.to("cuda:0")\n    return x\n'),
        Valid('import torch\ndevice = torch.device("cpu" if not torch.cuda.is_available() else "cuda")\n'),
        Valid('import torch\nwith torch.autocast("cuda"):\n    pass\nbackend = "cuda"\n'),
        Valid('import torch\nx = torch.ones(2)\nif x.is_cuda:\n    y = torch.zeros(2, device="cuda")\n'),
        Valid('import torch\ndev = "cuda" if torch.cuda.is_available() else "cpu"\nx = torch.ones(1).to(dev)\n'),
        # built strings that are no device: a message, a name
        Valid('import torch\nprint("cuda: {} MB".format(mb))\nlog(tag="cuda:" + name)\nx = torch.ones(1).to("cuda_{}".format(i) and dev)\n'),
        Valid('import torch\nimport torch.distributed as dist\n\ndef all_gather(data):\n    if dist.get_world_size() == 1:\n        return [data]\n    return torch.ByteTensor(data).to("cuda")\n'),
        # a flag kept under a key (facebookresearch/BLINK@5fe254d elq/main_dense.py:623,710)
        Valid('import torch\n\ndef run(params, x):\n    return x.to("cpu" if params["no_cuda"] else "cuda")\n'),
        # defaults every call in the project overrides (ajbrock/BigGAN-PyTorch@9845943 utils.py:1086, train.py:142;
        # openai/glide-text2im@69b5307 glide_text2im/clip/utils.py:32, encoders.py:98, model_creation.py:75)
        Valid(PREPARE_Z_Y, files={"train.py": "from example import prepare_z_y\nz_, y_ = prepare_z_y(G_batch_size, dim_z, n_classes, device=device)\n"}),
        Valid(ATTRS_LAYER_NORM, files={"encoders.py": "from .example import LayerNorm\nln = LayerNorm(n_state, 1e-5, self.device)\nln2 = LayerNorm(n_state, device=device)\n"}),
        ASKED_FOR_GPUS[1], EVAL_ON_IN_A_SCRIPT, WRAPPED_LAYER, SACRED_COMMAND_NAMED, kernel_program(DEVICE),  # a Sacred command the README runs; a program whose network falls back without the kernel; one arm of a device option's choice: "cuda" only where the user names GPUs; a script passes `--eval 1`; a layer on `self`
        REBOUND_USE_GPU,  # the option is rebound to an availability check in another module
        # a default never read (jannerm/diffuser@7ea4228 serialization.py:36); a GPU count clamped to device_count()
        Valid("import torch\n\ndef load_diffusion(*loadpath, epoch='latest', device='cuda:0'):\n    return load(loadpath, epoch)\n"),
        Valid("import torch\n\nclass Informer:\n    def __init__(self, d_model=512, device=torch.device('cuda:0')):\n        self.d_model = d_model\n"),
        *CLAMPED_GPU_COUNTS, HEIR_BUILT[0], PACKAGE_CALLED, DEFAULT_REPLACED, NAMESAKE_CALLED, UNREAD_DEVICE,  # a flag every build passes, bound to availability; a package's call; a default replaced without CUDA; a namesake's call; a device never read
    )
    invalid = (
        Invalid(
            'import torch\nx = torch.ones(2).to("cuda")\n',
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                "x = torch.ones(2).to(device)\n"
            ),
        ),
        Invalid(
            'import torch\ndevice = torch.device("cuda:0")\n',
            fixed='import torch\ndevice = torch.device("cuda:0" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n',
        ),
        Invalid(
            'import torch\n\ndef make(n, device):\n    return torch.zeros(n, device="cuda")\n',
            fixed='import torch\n\ndef make(n, device):\n    return torch.zeros(n, device=device)\n',
        ),
        Invalid(
            'import torch\n\ndef make(n, device="cuda"):\n    return torch.zeros(n, device=device)\n',
            fixed='import torch\n\ndef make(n, device="cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"):\n    return torch.zeros(n, device=device)\n',
        ),
        Invalid(
            'import torch\ndevice = "cpu"\nx = torch.ones(1).to(torch.device(f"cuda:{rank}"))\n',
            fixed='import torch\ndevice = "cpu"\nx = torch.ones(1).to(device)\n',
        ),
        Invalid(
            "import torch\n\ndef noise(shape, device='cuda'):\n    return torch.randn(shape, device=device)\n",
            fixed="import torch\n\ndef noise(shape, device='cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu'):\n    return torch.randn(shape, device=device)\n",
        ),
        Invalid(
            'import torch\n\ndef quantize(w, device=None):\n    device = device or torch.device("cuda")\n    return w.to(device)\n',
            fixed='import torch\n\ndef quantize(w, device=None):\n    device = device or torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n    return w.to(device)\n',
        ),
        Invalid(
            'import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument("--device", default="cuda")\n',
            fixed='import argparse\nimport torch\np = argparse.ArgumentParser()\np.add_argument("--device", default="cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n',
        ),
        Invalid(
            'import torch\nstate = torch.load("ckpt.pt", map_location="cuda")\n',
            fixed=(
                "import torch\n"
                "\n"
                'device = torch.device("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu")\n'
                'state = torch.load("ckpt.pt", map_location=device)\n'
            ),
        ),
        # a device string built at run time (hifi-gan, swav)
        Invalid(
            "import torch\n\ndef train(rank):\n    device = torch.device('cuda:{:d}'.format(rank))\n",
            fixed=(
                "import torch\n\ndef train(rank):\n    device = torch.device('cuda:{:d}'.format(rank) if torch.cuda.is_available() "
                "else 'mps' if torch.backends.mps.is_available() else 'cpu')\n"
            ),
        ),
        Invalid(
            'import torch\n\ndef restore(path, gpu, device):\n    return torch.load(path, map_location="cuda:" + str(gpu))\n',
            fixed='import torch\n\ndef restore(path, gpu, device):\n    return torch.load(path, map_location=device)\n',
        ),
        # `--no_cuda` is off by default: the else arm, CUDA, is what runs (3D-ResNets)
        Invalid(
            'import torch\np.add_argument("--no_cuda", action="store_true")\nopt = p.parse_args()\n'
            'opt.device = torch.device("cpu" if opt.no_cuda else "cuda")\n',
            fixed=(
                'import torch\np.add_argument("--no_cuda", action="store_true")\nopt = p.parse_args()\n'
                'opt.device = torch.device("cpu" if opt.no_cuda else ("cuda" if torch.cuda.is_available() else "mps" if torch.backends.mps.is_available() else "cpu"))\n'
            ),
        ),
        HEIR_BUILT[1],  # a base class built through its subclass, with the option on by default
        # `opt.cuda = not opt.no_cuda`: a user flag that picks CUDA by default, not a check
        Invalid(
            'import torch\np.add_argument("-no_cuda", "--no_cuda", action="store_true")\nopt = p.parse_args()\n'
            "opt.cuda = not opt.no_cuda\ndevice = torch.device('cuda' if opt.cuda else 'cpu')\n",
            fixed=(
                'import torch\np.add_argument("-no_cuda", "--no_cuda", action="store_true")\nopt = p.parse_args()\n'
                "opt.cuda = not opt.no_cuda\ndevice = torch.device(('cuda' if torch.cuda.is_available() else 'mps' if torch.backends.mps.is_available() else 'cpu') if opt.cuda else 'cpu')\n"
            ),
        ),
        Invalid("import torch\nloc = 'cuda:{}'.format(rank)\n", fixed="import torch\nloc = 'cuda:{}'.format(rank) if " + _GUARDED.split(" if ", 1)[1] + "\n"),  # YOLOX@6ddff48 tools/eval.py:166
        # a value of map_location's dict (hkchengrex/XMem@f3b841d model/trainer.py:187)
        Invalid("import torch\nm = {'cuda:0': 'cuda:%d' % rank}\nx = torch.load(p, map_location={'cuda:0': 'cuda:%d' % rank})\n",
                fixed="import torch\nm = {'cuda:0': 'cuda:%d' % rank}\nx = torch.load(p, map_location={'cuda:0': 'cuda:%d' % rank if " + _GUARDED.split(" if ", 1)[1] + "})\n"),
        # one call takes the default; `*args` proves nothing; a class also used as a base
        Invalid(PREPARE_Z_Y, fixed=PREPARE_Z_Y.replace("'cuda'", _GUARDED), files={"sample.py": "from example import prepare_z_y\nz_, y_ = prepare_z_y(8, 128, 1000)\n"}),
        Invalid(PREPARE_Z_Y, fixed=PREPARE_Z_Y.replace("'cuda'", _GUARDED), files={"sample.py": "from example import prepare_z_y\nz_, y_ = prepare_z_y(*sizes)\n"}),
        Invalid(
            ATTRS_LAYER_NORM, fixed=ATTRS_LAYER_NORM.replace('"cuda"', _GUARDED.replace("'", '"')),
            files={"enc.py": "from .example import LayerNorm\nln = LayerNorm(n_state, device=device)\nclass Norm(LayerNorm):\n    pass\n"},
        ),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        self._check(node)

    def visit_FormattedString(self, node: cst.FormattedString) -> None:
        self._check(node)

    def _check(self, literal: cst.BaseExpression) -> None:
        ctx = self.ctx
        if ctx.guarded or field_default_unused(ctx.stack, ctx.project) or in_unused_default(ctx.stack, ctx.project):
            return
        depth, holder, template = 1, literal, None
        if not self.names_device(literal):
            template = built_string(ctx, literal, self.names_template)
            if template is None:
                return
            # `"cuda:{}".format(rank)`, `"cuda:" + str(rank)`: the built string is the literal
            literal, depth = template
            holder = literal
        # `"cuda" if opt.cuda else "cpu"`, `"cpu" if opt.no_cuda else "cuda"` (a condition that is
        # no guard: a guard's arm is not visited as unguarded) is used like the literal
        while isinstance(ctx.parent(depth), cst.IfExp) and holder in (ctx.parent(depth).body, ctx.parent(depth).orelse):
            holder, depth = ctx.parent(depth), depth + 1
        parent = ctx.parent(depth)
        if isinstance(parent, cst.Arg) and isinstance(ctx.parent(depth + 1), cst.Call):
            call = ctx.parent(depth + 1)
            usage = self._argument_usage(call, parent)
            if usage == "device-call" and only_asks(ctx.parent(depth + 2)):
                return  # constructing a device that is only compared or named is silent
            if usage == "device-call":
                self._report_device_call(literal, call)
            elif usage == "use":
                self._report(literal, literal, inline=False)
            elif usage == "define":
                self._report(literal, literal, inline=True)
        elif isinstance(parent, (cst.Assign, cst.AnnAssign)) and parent.value is holder:
            targets = [t.target for t in parent.targets] if isinstance(parent, cst.Assign) else [parent.target]
            if (any(names_a_device(t) for t in targets) or template is not None) and not bound_unread(ctx.stack, targets):  # `loc = "cuda:{}".format(rank)`
                self._report(literal, literal, inline=True)
        elif isinstance(parent, cst.DictElement) and parent.value is holder and keyword_is(ctx.parent(depth + 2), "map_location"):
            self._report(literal, literal, inline=True)  # `map_location={"cuda:0": "cuda:%d" % rank}`
        elif isinstance(parent, cst.Param) and parent.default is holder and "device" in parent.name.value.lower() and not turned_off_first(ctx.parent(depth + 2), parent.name.value):
            self._report(literal, literal, inline=True)

    def names_device(self, literal: cst.BaseExpression) -> bool:
        return is_cuda_string(literal)

    def names_template(self, head: str) -> bool:
        """Whether a string built from a template that starts with ``head`` names a device."""
        return names_cuda_device(head, True)

    def message_for(self, literal: cst.BaseExpression, text: str) -> str:
        return self.message.format(text)

    def availability_for(self, literal: cst.BaseExpression) -> Optional[str]:
        """The check a literal that defines a device is guarded with; None: no fix."""
        return availability_check(self.ctx)

    def fallback_for(self, quote: str) -> str:
        """Where a device defined by the literal goes when its backend is missing: MPS, then the
        CPU; the CPU alone in a file whose own placement is CUDA-or-CPU (``engine/devices.py``)."""
        return self.ctx.devices.fallback(quote)

    def _argument_usage(self, call: cst.Call, arg: cst.Arg) -> Optional[str]:
        return argument_usage(self.ctx, call, arg)

    def _report_device_call(self, literal: cst.BaseExpression, call: cst.Call) -> None:
        """``torch.device("cuda")``: defining a device keeps the call and guards the literal;
        using one in place replaces the whole call by the device chosen at run time."""
        if defines_device(self.ctx):
            self._report(literal, literal, inline=True)
        else:
            self._report(literal, call, inline=False)

    def _report(self, literal: cst.BaseExpression, replaced: cst.CSTNode, inline: bool) -> None:
        report_device_literal(self, literal, replaced, inline)


RULES = (CudaMethodCall, HardcodedCudaDevice)
