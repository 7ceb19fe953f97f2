"""TDV501's example projects: checkpoints saved on the CPU or as they were, caches, resumes,
the savers and loaders a project splits between modules."""

from __future__ import annotations

import io
import pickle
import zipfile
from typing import Tuple

from ...engine.rule import Invalid, Valid


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


def earlier_runs_saved(keep_saved: str) -> Tuple[Invalid, Invalid, Invalid]:
    """A resume at start-up reads what an earlier run saved, though ``train()`` saves it later;
    a test run reads what a training run saved in the other branch, or in a branch an option
    turns on that the load is not in (``--do_train`` then ``--do_test``)."""
    resume = (
        "import os\nimport torch\n\ndef train():\n    torch.save(model, os.path.join(args.work_dir, 'model.pt'))\n\n"
        "if args.restart:\n    model = torch.load(os.path.join(args.work_dir, 'model.pt'){})\ntrain()\n"
    )
    test = "import torch\nif args.train:\n    torch.save(model, 'model.pt')\nelse:\n    model = torch.load('model.pt'{})\n"
    options = (  # salesforce/CodeT5@7de7f69 CodeT5/run_gen.py:334-368
        "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--do_train', action='store_true')\n"
        "parser.add_argument('--do_test', action='store_true')\n\n\ndef main(args, model):\n    if args.do_train:\n"
        "        torch.save(model, 'best/model.bin')\n    if args.do_test:\n        model = torch.load('best/model.bin'{})\n"
    )
    project = {"README.md": "Train, then test: `python example.py --do_train --do_test`\n"}
    return tuple(
        Invalid(code.format(""), fixed=code.format(f", map_location={keep_saved}"), files=files)
        for code, files in ((resume, None), (test, None), (options, project))
    )


#: tbepler/protein-sequence-embedding-iclr2019@be32cff train_lm_pfam.py:250-254, embed_sequences.py:97-99:
#: each epoch's model saved whole after ``model = model.cpu()``, loaded whole elsewhere.
_WHOLE_MODEL_SAVER = (
    "import torch\n\ndef save(model, path, use_cuda):\n    model = model.cpu()\n    torch.save(model, path)\n"
    "    if use_cuda:\n        model = model.cuda()\n"
)
_WHOLE_MODEL_LOADER = "import torch\n\ndef load_model(path):\n    encoder = torch.load(path{})\n    encoder.eval()\n    return encoder\n"


def whole_models_saved(keep_saved: str) -> Tuple[Valid, Invalid]:
    """Loaded as a whole module where every save of the project writes one moved to the CPU;
    reported where the saver keeps the model where it trained."""
    kept = {"train.py": _WHOLE_MODEL_SAVER.replace("    model = model.cpu()\n", "")}
    return (
        Valid(_WHOLE_MODEL_LOADER.format(""), files={"train.py": _WHOLE_MODEL_SAVER}),
        Invalid(_WHOLE_MODEL_LOADER.format(""), files=kept, fixed=_WHOLE_MODEL_LOADER.format(f", map_location={keep_saved}")),
    )


#: mahmoodlab/MCAT@b9cca63 main.py:130-164: a script that reads an option nothing defines
#: (``args.inst_loss``) fails on every machine before the load; not where another module sets it.
_FAILING_SCRIPT = (
    "import argparse\nimport torch\nfrom utils import setup\nparser = argparse.ArgumentParser()\n"
    "parser.add_argument('--ckpt', default='model.pt')\nargs = parser.parse_args()\nargs = setup(args)\n"
    "settings = {{'loss': args.inst_loss}}\nstate = torch.load(args.ckpt{})\n"
)


def loaded_after_a_failing_line(keep_saved: str) -> Tuple[Valid, Invalid]:
    setup = "def setup(args):\n    args.{} = 'run'\n    return args\n"
    return (
        Valid(_FAILING_SCRIPT.format(""), files={"utils.py": setup.format("exp_code")}),
        Invalid(_FAILING_SCRIPT.format(""), files={"utils.py": setup.format("inst_loss")}, fixed=_FAILING_SCRIPT.format(f", map_location={keep_saved}")),
    )


#: songyouwei/ABSA-PyTorch@9a7c6c1 train.py:89-130,165-177: a method saves the best model and
#: returns its path; the caller reloads it at once (written by this run, on this machine).
_RETURNED_PATH = (
    "import torch\n\n\nclass Instructor:\n    def _train(self, model):\n        path = None\n"
    "        for epoch in range(3):\n            path = 'state_dict/epoch_{{}}'.format(epoch)\n            torch.save(model.state_dict(), path)\n"
    "        return {}\n\n    def run(self, model):\n        best_model_path = self._train(model)\n"
    "        model.load_state_dict(torch.load(best_model_path{}))\n"
)


def reloaded_from_returned_path() -> Tuple[Valid, Invalid]:
    """Silent on the path the saver returns; reported on one it was handed (an earlier run's)."""
    return (
        Valid(_RETURNED_PATH.format("path", "")),
        Invalid(_RETURNED_PATH.format("self.resume", ""), fixed=_RETURNED_PATH.format("self.resume", ', map_location="cpu"')),
    )


#: cwmok/LapIRN@c17fb75 Code/Train_LapIRN_diff_resize.py:171-192,420-423: each stage saves its
#: checkpoints, the next loads the newest by a glob pattern, in the ``__main__`` block's order;
#: a load under a switch the code sets off never runs.
_STAGES = (
    "import glob\nimport torch\n\n\ndef train_lvl1(model):\n    for step in range(3):\n"
    "        modelname = '../Model/Stage/' + model_name + 'stagelvl1_' + str(step) + '.pth'\n"
    "        torch.save(model.state_dict(), modelname)\n\n\ndef train_lvl2(model):\n"
    "    model_path = sorted(glob.glob('../Model/Stage/' + model_name + 'stagelvl1_?????.pth'))[-1]\n"
    "    model.load_state_dict(torch.load(model_path{}))\n    load_model = {}\n    if load_model is True:\n"
    "        model_path = '../Model/pretrained.pth'\n        model.load_state_dict(torch.load(model_path{}))\n\n\n"
    "model_name = 'lap_'\nif __name__ == '__main__':\n    {}(net)\n    {}(net)\n"
)


def staged_checkpoints() -> Tuple[Valid, Invalid, Invalid]:
    """Silent as the script runs its stages; reported where the stage that loads runs first, and
    where the switch is on."""
    cpu, readme = ', map_location="cpu"', {"README.md": "Train: `python example.py`\n"}
    return (
        Valid(_STAGES.format("", "False", "", "train_lvl1", "train_lvl2"), files=readme),
        Invalid(_STAGES.format("", "False", "", "train_lvl2", "train_lvl1"), files=readme, fixed=_STAGES.format(cpu, "False", "", "train_lvl2", "train_lvl1")),
        Invalid(_STAGES.format("", "True", "", "train_lvl1", "train_lvl2"), files=readme, fixed=_STAGES.format("", "True", cpu, "train_lvl1", "train_lvl2")),
    )


def reloaded_under_the_same_option() -> Valid:
    """twitter-research/tgn@d55bbe6 train_supervised.py:231-241: the best model saved and
    reloaded under two ``if args.use_validation:``: the save ran wherever the reload runs."""
    return Valid(
        "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--use_validation', action='store_true')\n\n\n"
        "def train(args, decoder):\n    if args.use_validation:\n        torch.save(decoder.state_dict(), 'best.pth')\n"
        "    if args.use_validation:\n        decoder.load_state_dict(torch.load('best.pth'))\n",
        files={"README.md": "`python example.py --use_validation`\n"},
    )



#: edenton/svg@3f19f0b train_svg_lp.py:19,47,49: a resume behind an option off by default.
_RESUME = (
    "import argparse\nimport torch\nparser = argparse.ArgumentParser()\nparser.add_argument('--resume', default='')\n"
    "parser.add_argument('--epochs', type=int, default=10)\nargs = parser.parse_args()\n"
    "if args.resume:\n    state = torch.load(args.resume{})\n"
)


def resumed_only_when_asked(keep_saved: str) -> Tuple[Valid, Invalid, Invalid]:
    """Silent where the README runs the script and never passes ``--resume``; reported where a
    document passes it, and where nothing documents how the project runs."""
    return (
        Valid(_RESUME.format(""), files={"README.md": "Train: `python example.py --epochs 50`\n"}),
        Invalid(_RESUME.format(""), files={"README.md": "Resume: `python example.py --resume runs/last.pt`\n"}, fixed=_RESUME.format(f", map_location={keep_saved}")),
        Invalid(_RESUME.format(""), fixed=_RESUME.format(f", map_location={keep_saved}")),
    )


#: G-U-N/PyCIL@87cc411 models/pa2s.py:70-71: a load switched off by membership in an empty list.
SWITCHED_OFF_LOAD = Valid(
    "import torch\n\n\nclass Learner:\n    def _train(self, path):\n        if self._cur_task in []:\n"
    "            self._network.load_state_dict(torch.load(path)['model_state_dict'])\n"
)


#: yinboc/few-shot-meta-baseline@779fae3 train_classifier.py:98-99: a load behind a config key no
#: shipped config sets; reported where one does.
_CONFIG_LOAD = (
    "import torch\nimport yaml\n\nconfig = yaml.safe_load(open('configs/train.yaml'))\nmodel = torch.nn.Linear(2, 2)\n"
    "if config.get('load'):\n    model = torch.load(config['load']{})\n"
)


def loaded_only_when_configured(keep_saved: str) -> Tuple[Valid, Invalid]:
    """Silent where no config sets ``load``; reported where one does."""
    readme = {"README.md": "Train: `python example.py`\n"}
    return (
        Valid(_CONFIG_LOAD.format(""), files={**readme, "configs/train.yaml": "lr: 0.1\n"}),
        Invalid(_CONFIG_LOAD.format(""), files={**readme, "configs/train.yaml": "lr: 0.1\nload: save/max-va.pth\n"},
                fixed=_CONFIG_LOAD.format(f", map_location={keep_saved}")),
    )

