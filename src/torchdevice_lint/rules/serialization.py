"""Serialization: loading checkpoints onto the device they were saved from."""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, Optional, Tuple

from ..engine.rule import Invalid, Rule, Valid
from ..first_stage.triggers import Unguarded
from ..model.fixes import Applicability
from ..project.facts import GIVEN_PATH
from ..syntax.cst_lazy import cst
from ..syntax.cst_nodes import last_name, source_of
from .support.common import appended, display_only, keyword, keyword_arg, positional
from .support.load_examples import (
    CACHE_RETURNING, CACHE_TRIED, DECODER_SAVED_ON_CPU, EARLY_STOP_LOOP, EARLY_STOPPING, EARLY_STOPPING_TRAIN, FOLDER_CACHE, FRAMEWORK, FRAMEWORK_SCRIPT, MODEL_ZOO_LOADER, NUMPY_SAVED, RESUMED,
    RESUMED_IN_LOOP, SAVE_HELPER, SAVED_THROUGH_HELPER, SCRIPT_TEST, STATE_LOADER,
    STATE_SAVED_AFTER_CPU, STATE_SAVED_FROM_CUDA, SWITCHED_OFF_LOAD, UNREACHED_LOADS, WEIGHTS_SAVED_AS_THEY_ARE, WEIGHTS_SAVED_ON_CPU, earlier_runs_saved, global_path_saves, loaded_after_a_failing_line, ray_trainables, reloaded_from_returned_path, reloaded_under_the_same_option, staged_checkpoints, resumed_family,
    loaded_only_when_configured, resumed_only_when_asked, saved_checkpoint, scheduler_states, whole_models_saved,
)
from .support.load_sites import load_sites
from .support.loaded_values import loaded_as_module, loaded_into_network, loaded_into_place, read_as_numpy, restores_scheduler
from .support.saved_files import (
    LOADERS, SAVERS, SavedFiles, binding_above, cache_written_when_missing, global_file_names, in_dataset_class, may_be_none, named_file_names,
    opened_path, path_keys, restored_by_ray_tune, retried_with_map_location, returned_by_its_saver, saved_in_same_loop, shipped_on_cpu,
    single_binding, unopened,
)
from .support.run_order import Branches, branches_of, reloaded_after_script_saves, save_branches, saved_first


#: The ``map_location`` that restores each tensor where it was saved unless that is CUDA and CUDA
#: is missing: what the program did wherever it ran, and the CPU where it raised.
KEEP_SAVED = 'lambda storage, location: storage if location.startswith("cuda") and not torch.cuda.is_available() else None'


class LoadWithoutMapLocation(Rule):
    code = "TDV501"
    name = "load-without-map-location"
    hazard_without_cuda = True
    message = "`{}` without `map_location` restores tensors to the device they were saved on, which raises when a CUDA checkpoint is loaded without CUDA"
    message_may_be_none = "`{}` with `map_location={}`, which may be None here: a CUDA checkpoint then raises without CUDA"
    fix_title = "Pass `map_location=`"
    fix_safety = Applicability.SAFE
    what = "Checks for `torch.load(...)` and `torch.jit.load(...)` calls without `map_location`."
    why = (
        "A checkpoint saved from GPU tensors remembers `cuda:N`; loading it on a CPU-only machine "
        "raises `RuntimeError: Attempting to deserialize object on a CUDA device but "
        "torch.cuda.is_available() is False`."
    )
    fix_safety_note = (
        "Where the loaded state provably goes into the program's own tensors (every part of it "
        'handed to `load_state_dict`, or moved with `.to(device)`), the fix passes `"cpu"` (or '
        "the `device` bound there): the same result on every machine. Elsewhere (an EMA shadow, "
        "a queue or a memory bank used as loaded) it passes `map_location=lambda storage, "
        'location: storage if location.startswith("cuda") and not torch.cuda.is_available() '
        "else None`: each tensor goes where it was saved, as before, unless that is CUDA and "
        "CUDA is missing, where the original raised. Never a dict such as "
        '`{"cuda:0": "cpu"}`, which misses checkpoints tagged `cuda:1`. `torch.jit.load` takes '
        'no function: there the fix passes `None if torch.cuda.is_available() else "cpu"`, '
        "unsafe, as a module saved on a Mac's MPS would load to the CPU."
    )
    triggers = Unguarded(load_sites)
    valid = (
        Valid('import torch\nstate = torch.load("model.pt", map_location="cpu")\n'),
        Valid(STATE_LOADER, files=STATE_SAVED_AFTER_CPU),  # a state dict saved after `net.cpu()`
        whole_models_saved(KEEP_SAVED)[0],  # every save of the project writes a model moved to the CPU
        loaded_after_a_failing_line(KEEP_SAVED)[0],  # after a line that fails on every machine
        reloaded_from_returned_path()[0],  # the path a method saved to and returned, reloaded at once
        staged_checkpoints()[0],  # a stage's checkpoints found by a glob pattern; a branch a switch turns off
        reloaded_under_the_same_option(), resumed_only_when_asked(KEEP_SAVED)[0], SWITCHED_OFF_LOAD,  # saved and reloaded under two tests of one option; a resume no document asks for; `in []`
        loaded_only_when_configured(KEEP_SAVED)[0],  # a config key no config sets
        Valid(MODEL_ZOO_LOADER, files=WEIGHTS_SAVED_ON_CPU),  # released weights, saved as the project saves them
        Valid("import torch\ndecoder.load_state_dict(torch.load(args.decoder))\n", files=DECODER_SAVED_ON_CPU), Valid(FOLDER_CACHE),  # ... key by key; a folder built where missing
        # tensors made from numpy data (facebookresearch/GradientEpisodicMemory@34c6b8e data/raw/raw.py:42-49)
        *(Valid("import torch\nx, y = torch.load('mnist_train.pt')\n", files={"raw.py": NUMPY_SAVED.format(y)}) for y in ("torch.from_numpy(f['y']).long()", "torch.LongTensor(f['y'])")),
        # another module of the project writes the file from `.cpu()` values
        Valid(
            'import torch\nfeatures = torch.load(os.path.join(args.out, "train_feat.pth"))\n',
            files={"extract.py": 'import torch\ntorch.save(feats.cpu(), os.path.join(out, "train_feat.pth"))\n'},
        ),
        # a module that imports TensorRT runs only on NVIDIA GPUs (Megvii-BaseDetection/YOLOX@6ddff48 tools/trt.py)
        Valid("import tensorrt as trt\nimport torch\n\nstate = torch.load('model_trt.pth')\n", files={"demo.py": "import torch\n"}),
        # lightaime/deep_gcns_torch@4f6681e examples/ogb_eff/ogbn_arxiv_dgl/main.py:216-217,244: the
        # path is bound to a variable first
        Valid(
            "import os\nimport torch\n\n\ndef save_pred(pred, run, kd_dir):\n    fname = os.path.join(kd_dir, 'best_pred_run{}.pt'.format(run))\n"
            "    torch.save(pred.cpu(), fname)\n\n\ndef teacher_output(args, run):\n"
            "    return torch.load('./{}/best_pred_run{}.pt'.format(args.kd_dir, run))\n"
        ),
        # lyndonzheng/Pluralistic-Inpainting@034a758 model/base_model.py:94-116: each file name is
        # a `%` template bound to a name of its own, saved from `net.cpu().state_dict()`
        Valid(
            "import os\nimport torch\n\nclass BaseModel:\n    def save_networks(self, epoch):\n        for name in self.model_names:\n"
            "            save_filename = '%s_net_%s.pth' % (epoch, name)\n            save_path = os.path.join(self.save_dir, save_filename)\n"
            "            net = getattr(self, 'net_' + name)\n            torch.save(net.cpu().state_dict(), save_path)\n\n"
            "    def load_networks(self, epoch):\n        for name in self.model_names:\n"
            "            filename = '%s_net_%s.pth' % (epoch, name)\n            path = os.path.join(self.save_dir, filename)\n"
            "            getattr(self, 'net_' + name).load_state_dict(torch.load(path))\n"
        ),
        # `torch` here is the file's own import, not the one the star import brings
        Valid('from utils import *\nimport safetensors.torch as torch\nstate = torch.load("model.pt")\n', files={"utils.py": "import torch\n"}),
        Valid('import torch\nstate = torch.load("model.pt", device)\n'),
        Valid("import torch\nstate = torch.load(path, **load_kwargs)\n"),
        Valid("import pickle\nstate = pickle.load(handle)\nimport json\ncfg = json.load(handle)\n"),
        Valid('import torch\nif torch.cuda.is_available():\n    state = torch.load("gpu.pt")\n'),
        # the program reads back a file it writes itself (a cache, features, the best model)
        Valid('import torch\ntorch.save(model.state_dict(), "params.ckpt")\nmodel.load_state_dict(torch.load("params.ckpt"))\n'),
        Valid(
            "import os\nimport torch\n\ndef dump(feats, args):\n"
            '    torch.save(feats.cpu(), os.path.join(args.dump_features, "feat.pth"))\n\n'
            "def restore(args):\n"
            '    return torch.load(os.path.join(args.load_features, "feat.pth"))\n'
        ),
        Valid(
            "import torch\n\nfor epoch in range(3):\n    with open(args.save, 'wb') as f:\n        torch.save(model, f)\n"
            "with open(args.save, 'rb') as f:\n    model = torch.load(f)\n"
        ),
        # a dataset's processed files (the import alias resolves to torch.utils.data.Dataset)
        Valid(
            "import os\nimport pickle\nimport torch\nimport torch.utils.data as data\n\nclass MNISTM(data.Dataset):\n    def __init__(self, root):\n"
            "        self.data, self.labels = torch.load(os.path.join(root, 'train.pt'))\n\n"
            "    def process(self, root):\n        with open(os.path.join(root, 'raw.pkl'), 'rb') as f:\n"
            "            raw = pickle.load(f)\n        data = torch.ByteTensor(raw['train'])\n"
            "        labels = torch.LongTensor(raw['labels'])\n"
            "        with open(os.path.join(root, 'train.pt'), 'wb') as f:\n            torch.save((data, labels), f)\n"
        ),
        # the data files of a Dataset: a DataLoader serves CPU tensors only
        Valid("import torch\n\nclass ExpertDataset(torch.utils.data.Dataset):\n    def __init__(self, file_name):\n        self.trajectories = torch.load(file_name)\n"),
        # rampasek/GraphGPS@2801570 voc_superpixels.py:95: what a PyG dataset's process() collated
        Valid(
            "import torch\nfrom torch_geometric.data import InMemoryDataset\n\nclass Superpixels(InMemoryDataset):\n"
            "    def __init__(self, root):\n        super().__init__(root)\n        self.data, self.slices = torch.load(self.processed_paths[0])\n"
        ),
        # black0017/MedicalZooPytorch@8f40dab lib/medzoo/BaseModelClass.py:53: the error is caught and retried
        Valid(
            "import torch\n\ndef restore(model, path):\n    try:\n        state = torch.load(path)\n    except RuntimeError:\n"
            "        state = torch.load(path, map_location=lambda storage, loc: storage)\n    model.load_state_dict(state)\n"
        ),
        # a cache written when it is missing
        Valid(
            "import os\nimport torch\n\nif os.path.isfile(args.vector_cache):\n"
            "    vectors = torch.load(args.vector_cache)\nelse:\n    vectors = build(args)\n"
            "    torch.save(vectors, args.vector_cache)\nmodel.to(device)\n"
        ),
        # a numpy array saved with torch.save: from_numpy proves it
        Valid("import torch\ndata = torch.load('traindata.pt')\ninputs = torch.from_numpy(data[3:, :-1])\n"),
        Valid("import torch\nmapping = torch.from_numpy(torch.load('best_mapping.pth'))\n"),  # MUSE src/trainer.py:238
        # .numpy() raises on a CUDA tensor everywhere: the file holds CPU tensors
        Valid("import torch\nfrom PIL import Image\nimage = Image.fromarray(torch.load(filename).numpy())\n"),
        # the best epoch's file, saved above by this run
        Valid(
            "import torch\nfor epoch in range(epochs):\n    torch.save(model.state_dict(), '{}.pkl'.format(epoch))\n"
            "model.load_state_dict(torch.load('{}.pkl'.format(best_epoch)))\n"
        ),
        Valid(
            "import torch\n\ndef train(model, epochs, best):\n    for epoch in range(epochs):\n"
            "        torch.save(model.state_dict(), f'ckpt/{epoch}.pt')\n"
            "    model.load_state_dict(torch.load(f'ckpt/{best}.pt'))\n"
        ),
        # the best model this run saved, reloaded after training (locuslab/TCN@2f8c2b0
        # TCN/poly_music/music_test.py:126-138)
        Valid(
            "import torch\n\nif __name__ == '__main__':\n    for ep in range(1, args.epochs + 1):\n"
            "        if evaluate() < best:\n            with open(model_name, 'wb') as f:\n                torch.save(model, f)\n"
            "    model = torch.load(open(model_name, 'rb'))\n"
        ),
        # saved by train(), which the module called above (kimiyoung/transformer-xl@44781ed
        # pytorch/train.py:512,539,550)
        Valid(
            "import os\nimport torch\n\ndef train():\n    with open(os.path.join(args.work_dir, 'model.pt'), 'wb') as f:\n"
            "        torch.save(model, f)\n\ntry:\n    for epoch in range(10):\n        train()\nexcept KeyboardInterrupt:\n    pass\n"
            "with open(os.path.join(args.work_dir, 'model.pt'), 'rb') as f:\n    model = torch.load(f)\n"
        ),
        # weights the project ships, saved from the CPU (timesler/facenet-pytorch@787da06
        # models/mtcnn.py:33-34 loads data/pnet.pt)
        Valid(
            "import os\nimport torch\n\nclass PNet(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        state_dict_path = os.path.join(os.path.dirname(__file__), 'data/pnet.pt')\n"
            "        self.load_state_dict(torch.load(state_dict_path))\n",
            files={"data/pnet.pt": saved_checkpoint("cpu")},
        ),
        # past `if args.distributed: ... else: raise`, only a distributed run goes on
        Valid(
            "import torch\n\ndef main_worker(args):\n    if args.distributed:\n"
            "        torch.distributed.init_process_group(backend=args.dist_backend)\n"
            "    elif args.gpu is not None:\n        raise NotImplementedError('Only DDP')\n"
            "    else:\n        raise NotImplementedError('Only DDP')\n"
            "    checkpoint = torch.load(args.resume)\n"
        ),
        # the best model a saver built here wrote during training (thuml/Autoformer@51c7d41
        # exp/exp_main.py:117,172-173, utils/tools.py:52)
        Valid(EARLY_STOPPING_TRAIN, files={"utils/tools.py": EARLY_STOPPING}),
        Valid(FRAMEWORK_SCRIPT, files={"framework.py": FRAMEWORK}),  # ... or told where to save
        Valid(SAVED_THROUGH_HELPER, files={"utils.py": SAVE_HELPER}),  # saved by another module's function
        Valid(SCRIPT_TEST.format("", "", "acc = test()\n"), files={"utils.py": "import torch\n"}),  # tested after training
        Valid(  # ... by the function that trains (chennnM/GCNII@ca91f56 full-supervised.py:61-62,101,108)
            "import torch\n\ndef test_step(model):\n    model.load_state_dict(torch.load(checkpt_file))\n\ndef train():\n"
            "    for epoch in range(10):\n        torch.save(model.state_dict(), checkpt_file)\n    return test_step(model)\n\n"
            "for run in range(10):\n    train()\n",
            files={"utils.py": "import torch\n"},
        ),
        Valid(CACHE_TRIED), Valid(CACHE_RETURNING),  # caches written where missing
        Valid(EARLY_STOP_LOOP.format("")),  # the best round's file, saved by earlier rounds
        # a learning-rate scheduler's state holds numbers (princeton-nlp/LM-BFF@c282f52 src/trainer.py:267)
        Valid("import os\nimport torch\n\ndef resume(scheduler, path):\n    scheduler.load_state_dict(torch.load(os.path.join(path, 'scheduler.pt')))\n"),
        scheduler_states(KEEP_SAVED)[0], ray_trainables()[0],
        # None only where CUDA is there
        Valid(
            "import torch\n\ndef restore(path):\n    location = None\n"
            "    if not torch.cuda.is_available():\n        location = 'cpu'\n"
            "    return torch.load(path, map_location=location)\n"
        ),
        global_path_saves('"cpu"')[0],  # a script's test() reloads what its train() saved to a module-level path
        UNREACHED_LOADS[0],  # a helper nothing in the project calls never runs
    )
    invalid = (
        Invalid(STATE_LOADER, files=STATE_SAVED_FROM_CUDA, fixed=STATE_LOADER.replace("')", "', map_location=\"cpu\")")),
        Invalid(MODEL_ZOO_LOADER, files=WEIGHTS_SAVED_AS_THEY_ARE, fixed=MODEL_ZOO_LOADER.replace("')", "', map_location=\"cpu\")")),
        scheduler_states(KEEP_SAVED)[1], ray_trainables()[1],
        Invalid(  # the labels moved to CUDA before the save
            "import torch\nx, y = torch.load('mnist_train.pt')\n", files={"raw.py": NUMPY_SAVED.format("torch.from_numpy(f['y']).long().cuda()")},
            fixed=f"import torch\nx, y = torch.load('mnist_train.pt', map_location={KEEP_SAVED})\n",
        ),
        resumed_family(KEEP_SAVED),  # a family of checkpoints loaded, then saved: a resume, not a cache
        global_path_saves('"cpu"')[1],  # the path is a parameter: not the module's
        *UNREACHED_LOADS[1],  # the same helper, checked by the setting, in a package, or named by the README
        # nothing shows where the state goes: the saved device is kept where it exists
        Invalid(
            'import torch\nstate = torch.load("model.pt")\n',
            fixed=f'import torch\nstate = torch.load("model.pt", map_location={KEEP_SAVED})\n',
        ),
        Invalid(
            "import torch\n\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True))\n",
            fixed="import torch\n\ndef restore(model, path, device):\n    model.load_state_dict(torch.load(path, weights_only=True, map_location=device))\n",
        ),
        # torch.jit.load takes no function: the CPU where CUDA is missing may not be the MPS it was saved on
        Invalid(
            'import torch as th\nscripted = th.jit.load("model.ts")\n',
            fixed='import torch as th\nscripted = th.jit.load("model.ts", map_location=None if th.cuda.is_available() else "cpu")\n',
            applicability=Applicability.UNSAFE,
        ),
        Invalid(
            "from torch import load\n\ndef restore(model, path):\n    ckpt = load(\n        path,\n    )\n    model.load_state_dict(ckpt)\n",
            fixed='from torch import load\n\ndef restore(model, path):\n    ckpt = load(\n        path,\n        map_location="cpu",\n    )\n    model.load_state_dict(ckpt)\n',
        ),
        Invalid(RESUMED.format(""), fixed=RESUMED.format(', map_location="cpu"')),  # resumed, then overwritten
        Invalid(RESUMED_IN_LOOP.format(""), fixed=RESUMED_IN_LOOP.format(', map_location="cpu"')),
        # the saver's file, loaded by a function that built none: an earlier (GPU) run wrote it
        Invalid(
            "import torch\n\ndef test(model, path):\n    model.load_state_dict(torch.load(path + '/checkpoint.pth'))\n",
            files={"utils/tools.py": EARLY_STOPPING, "main.py": "from example import test\ntest(model, args.path)\n"},
            fixed="import torch\n\ndef test(model, path):\n    model.load_state_dict(torch.load(path + '/checkpoint.pth', map_location=\"cpu\"))\n",
        ),
        # tested before training too: the first test reads what an earlier run saved
        Invalid(
            SCRIPT_TEST.format("", "acc = test()\n", "acc = test()\n"), files={"utils.py": "import torch\n"},
            fixed=SCRIPT_TEST.format(', map_location="cpu"', "acc = test()\n", "acc = test()\n"),
        ),
        # a checkpoint saved by another function (a GPU run) and loaded to resume
        Invalid(
            "import torch\n\ndef test(net):\n    torch.save(net.state_dict(), './ckpt.pth')\n\n"
            "def resume(net):\n    net.load_state_dict(torch.load('./ckpt.pth'))\n",
            fixed="import torch\n\ndef test(net):\n    torch.save(net.state_dict(), './ckpt.pth')\n\n"
            "def resume(net):\n    net.load_state_dict(torch.load('./ckpt.pth', map_location=\"cpu\"))\n",
        ),
        # a file saved by another name is not one the program wrote
        Invalid(
            'import torch\ntorch.save(model, "last.pt")\nmodel = torch.load("best.pt").to(device)\n',
            fixed='import torch\ntorch.save(model, "last.pt")\nmodel = torch.load("best.pt", map_location="cpu").to(device)\n',
        ),
        # saved from a value handed in (a model trained on a GPU elsewhere): not known CPU
        Invalid(
            "import torch\n\ndef save(model, path):\n    torch.save(model.state_dict(), path)\n\n"
            "def resume(model, path):\n    model.load_state_dict(torch.load(path))\n",
            fixed="import torch\n\ndef save(model, path):\n    torch.save(model.state_dict(), path)\n\n"
            "def resume(model, path):\n    model.load_state_dict(torch.load(path, map_location=\"cpu\"))\n",
        ),
        # one more `elif` that does not exit: a single-process run reaches the load
        Invalid(
            "import torch\n\ndef main_worker(args):\n    if args.distributed:\n"
            "        torch.distributed.init_process_group(backend=args.dist_backend)\n"
            "    elif args.gpu is not None:\n        torch.cuda.set_device(args.gpu)\n"
            "    else:\n        raise NotImplementedError('Only DDP')\n"
            "    checkpoint = torch.load(args.resume)\n",
            fixed="import torch\n\ndef main_worker(args):\n    if args.distributed:\n"
            "        torch.distributed.init_process_group(backend=args.dist_backend)\n"
            "    elif args.gpu is not None:\n        torch.cuda.set_device(args.gpu)\n"
            "    else:\n        raise NotImplementedError('Only DDP')\n"
            f"    checkpoint = torch.load(args.resume, map_location={KEEP_SAVED})\n",
        ),
        # None unless the user passes --num_gpu 0 (default 1): a GPU checkpoint raises on a CPU
        Invalid(
            "import torch\n\ndef load_model(self):\n    if self.args.num_gpu == 0:\n"
            "        map_location = lambda storage, loc: storage\n    else:\n        map_location = None\n"
            "    self.shared.load_state_dict(torch.load(self.shared_path, map_location=map_location))\n",
            fixed=None,
            applicability=Applicability.DISPLAY_ONLY,
        ),
        # another family of files than the one saved above
        Invalid(
            "import torch\nfor epoch in range(3):\n    torch.save(model.state_dict(), f'{epoch}.pkl')\n"
            "model.load_state_dict(torch.load(f'{args.pretrained}.pth'))\n",
            fixed="import torch\nfor epoch in range(3):\n    torch.save(model.state_dict(), f'{epoch}.pkl')\n"
            "model.load_state_dict(torch.load(f'{args.pretrained}.pth', map_location=\"cpu\"))\n",
        ),
        # `device` is assigned only below the load: a literal, never the unbound name
        Invalid(
            'import torch\n\nmodel.load_state_dict(torch.load("model.pt"))\ndevice = torch.device("cpu")\n',
            fixed='import torch\n\nmodel.load_state_dict(torch.load("model.pt", map_location="cpu"))\ndevice = torch.device("cpu")\n',
        ),
        # an EMA shadow used as loaded: on a GPU resume it must stay on the GPU
        Invalid(
            "import torch\n\ndef resume(model, ema, path):\n    ckpt = torch.load(path)\n"
            '    model.load_state_dict(ckpt["model"])\n    ema.shadow = ckpt["ema"]\n    return ckpt["epoch"]\n',
            fixed="import torch\n\ndef resume(model, ema, path):\n"
            f"    ckpt = torch.load(path, map_location={KEEP_SAVED})\n"
            '    model.load_state_dict(ckpt["model"])\n    ema.shadow = ckpt["ema"]\n    return ckpt["epoch"]\n',
        ),
        # every part goes into load_state_dict: the CPU means the same everywhere
        Invalid(
            "import torch\n\ndef resume(model, optimizer, path):\n    ckpt = torch.load(path)\n"
            '    if "optimizer" in ckpt:\n        optimizer.load_state_dict(ckpt["optimizer"])\n'
            '    model.load_state_dict(ckpt.get("model"))\n',
            fixed="import torch\n\ndef resume(model, optimizer, path):\n    ckpt = torch.load(path, map_location=\"cpu\")\n"
            '    if "optimizer" in ckpt:\n        optimizer.load_state_dict(ckpt["optimizer"])\n'
            '    model.load_state_dict(ckpt.get("model"))\n',
        ),
        *earlier_runs_saved(KEEP_SAVED),  # a resume at start-up, or a test run, reads what an earlier run saved
        whole_models_saved(KEEP_SAVED)[1],  # a whole model saved without a move to the CPU first
        loaded_after_a_failing_line(KEEP_SAVED)[1],  # the line fails nowhere: another module sets the option
        reloaded_from_returned_path()[1],  # the method returns another path than the one it saves to
        *staged_checkpoints()[1:], *resumed_only_when_asked(KEEP_SAVED)[1:], loaded_only_when_configured(KEEP_SAVED)[1],  # the loading stage runs first; the switch is on; a resume documented, or no run documented
        # a shipped checkpoint saved from a GPU
        Invalid(
            "import os\nimport torch\n\nstate = torch.load(os.path.join(os.path.dirname(__file__), 'data/onet.pt'))\n",
            fixed="import os\nimport torch\n\n"
            f"state = torch.load(os.path.join(os.path.dirname(__file__), 'data/onet.pt'), map_location={KEEP_SAVED})\n",
            files={"data/onet.pt": saved_checkpoint("cuda:0")},
        ),
        Invalid(
            "import torch\n\ndef scripted(path, device):\n    return torch.jit.load(path).to(device)\n",
            fixed="import torch\n\ndef scripted(path, device):\n    return torch.jit.load(path, map_location=device).to(device)\n",
        ),
        # `torch` comes from the project's utils.py through a star import
        Invalid(
            'from utils import *\nstate = torch.load("model.pt")\n',
            fixed=(
                'from utils import *\nstate = torch.load("model.pt", map_location=lambda storage, location: storage '
                'if location.startswith("cuda") and not torch.cuda.is_available() else None)\n'
            ),
            files={"utils.py": "import os\nimport torch\n"},
        ),
    )

    def __init__(self, ctx) -> None:
        super().__init__(ctx)
        #: (enclosing function or None, keys, branches) of the saves visited so far, i.e. above;
        #: a call of a function that saves counts as a save of the paths it writes.
        self._saves_above: List[Tuple[Optional[int], FrozenSet[str], Tuple[Branches, FrozenSet[Tuple[str, bool]]]]] = []
        #: Function name -> the code of the paths it saves to (``train()`` writes ``model.pt``).
        self._saving_functions: Dict[str, FrozenSet[str]] = {}
        self._saved_files: Optional[SavedFiles] = None

    def visit_Call(self, node: cst.Call) -> None:
        name = self.ctx.qualname(node.func)
        if name in SAVERS and len(node.args) > 1:
            self._add_save(self._file_keys(node.args[1].value), self._path_code(node.args[1].value))
        elif isinstance(node.func, cst.Name) and node.func.value in self._saving_functions:
            codes = self._saving_functions[node.func.value]
            self._add_save(codes, codes)
        elif self.ctx.project.saving_classes and last_name(node.func) in self.ctx.project.saving_classes:
            files = self._built_saver_files(node)  # a saver built here: what it writes counts as saved
            self._add_save(files, files)
        if self.ctx.guarded or name not in LOADERS or not node.args or any(arg.star for arg in node.args):
            return
        location = keyword(node, "map_location")
        if location is not None:
            self._check_location(node, location.value)
            return
        if len(positional(node)) > 1:
            return
        keys = self._file_keys(node.args[0].value)
        if self._written_by_this_program(keys) or read_as_numpy(self.ctx, node) or retried_with_map_location(self.ctx) or restored_by_ray_tune(self.ctx):
            return
        if in_dataset_class(self.ctx) or restores_scheduler(self.ctx) or shipped_on_cpu(self.ctx, unopened(node.args[0].value)) or returned_by_its_saver(self.ctx, node.args[0].value):
            return
        project = self.ctx.project
        if (project.weights_saved_on_cpu or project.every_save_on_cpu) and loaded_into_network(self.ctx, node):
            return  # the weights the project releases are what it saves: CPU tensors
        if project.every_save_on_cpu and loaded_as_module(self.ctx, node):
            return
        location, applicability, title = self._location(node)
        new_arg = keyword_arg("map_location", cst.parse_expression(location))

        fix = self.make_fix({node: lambda updated: appended(updated, new_arg)}, applicability, message=title, imports=self.ctx.torch_imports() if "torch." in location else ())
        self.report(node, self.message.format(f"{source_of(node.func)}(...)"), fix)

    def _location(self, node: cst.Call) -> Tuple[str, Applicability, str]:
        """The ``map_location`` to pass, its safety and the fix's title. Where the restored state
        provably goes into the program's own tensors (``load_state_dict``, a move), the CPU (or
        the ``device`` bound here) means the same on every machine. Elsewhere a GPU run must get
        what it got before: ``torch.load`` keeps each tensor's saved device unless that is CUDA
        and CUDA is missing; ``torch.jit.load`` takes no such function, and the CPU it falls
        back to may differ from the MPS device a Mac saved on, so that fix is unsafe."""
        ctx = self.ctx
        if loaded_into_place(ctx, node):
            device_name = ctx.settings.device_name
            location = device_name if ctx.devices.device_bound_here(device_name) else '"cpu"'
            return location, Applicability.SAFE, f"Pass `map_location={location}`: the state is loaded into tensors that are where they belong"
        torch = ctx.torch_reference()
        if ctx.qualname(node.func) == "torch.jit.load":
            location = f'None if {torch}.cuda.is_available() else "cpu"'
            return location, Applicability.UNSAFE, "Pass `map_location=` the CPU where CUDA is missing"
        location = KEEP_SAVED.replace("torch.", f"{torch}.")
        return location, Applicability.SAFE, "Pass `map_location=` that keeps the saved device, or the CPU where CUDA is missing"

    def _check_location(self, node: cst.Call, location: cst.BaseExpression) -> None:
        """``map_location=name`` where ``name`` may be None (set by a user flag, not by an
        availability check) loads like no ``map_location`` at all."""
        if isinstance(location, cst.Name) and may_be_none(self.ctx, location.value):
            message = self.message_may_be_none.format(f"{source_of(node.func)}(...)", location.value)
            self.report(node, message, display_only(self, self.fix_title))

    def _written_by_this_program(self, keys: FrozenSet[str]) -> bool:
        """A file this program saves holds what it produced: on this machine when the save
        ran earlier in the same function (the best model reloaded at the end of training) or in
        an earlier round of a loop the reload ends, or writes a cache the load finds missing, and CPU tensors anywhere when the saved value is
        ``.cpu()``. A checkpoint saved in another function
        (``--resume``) may come from a GPU machine: still reported."""
        scope, branches = self._scope(), branches_of(self.ctx.stack)
        if any(where == scope and keys & saved and saved_first(self.ctx, branches, taken) for where, saved, taken in self._saves_above):
            return True
        if cache_written_when_missing(self.ctx.stack, keys, self.ctx.qualname) or saved_in_same_loop(self.ctx.stack, keys, self.ctx.qualname):
            return True
        if reloaded_after_script_saves(self.ctx, keys, self._saved_by_call):
            return True
        if self._saved_files is None:
            self._saved_files = SavedFiles(self.ctx)
        return bool(keys & self._saved_files.cpu_keys())

    def _add_save(self, keys: FrozenSet[str], codes: FrozenSet[str]) -> None:
        function = self.ctx.enclosing_function()
        self._saves_above.append((self._scope(), keys, save_branches(self.ctx)))
        if function is not None:
            name = function.name.value
            self._saving_functions[name] = self._saving_functions.get(name, frozenset()) | codes

    def _saved_by_call(self, call: cst.Call) -> FrozenSet[str]:
        """The files a call of one of the project's saving functions writes, wherever it is."""
        files = self.ctx.project.saving_classes.get(last_name(call.func)) if isinstance(call.func, (cst.Name, cst.Attribute)) else None
        if not files:
            return frozenset()
        given = frozenset().union(*(path_keys(arg.value) for arg in call.args)) if GIVEN_PATH in files else frozenset()
        return frozenset(files) - {GIVEN_PATH} | given

    def _built_saver_files(self, construction: cst.Call) -> FrozenSet[str]:
        """The files a saver built here writes (``EarlyStopping()``: ``checkpoint.pth``), and the
        paths handed to one that saves where it is told (``SentenceRE(..., ckpt=ckpt)``)."""
        files = self.ctx.project.saving_classes[last_name(construction.func)]
        given = frozenset().union(*(self._file_keys(arg.value) for arg in construction.args)) if GIVEN_PATH in files else frozenset()
        return frozenset(files) - {GIVEN_PATH} | given

    def _scope(self) -> Optional[int]:
        function = self.ctx.enclosing_function()
        return id(function) if function is not None else None

    def _file_keys(self, target: cst.BaseExpression) -> FrozenSet[str]:
        """``f`` bound by an enclosing ``with open(path, ...) as f``, and ``open(path, "rb")``,
        stand for ``path``; a name bound once in the function, for its value too."""
        path = unopened(opened_path(target, self.ctx.stack) or target)
        bound = (single_binding(self.ctx, path.value) or binding_above(self.ctx, path.value)) if isinstance(path, cst.Name) else None
        built = bound if bound is not None else path
        keys = path_keys(path) | path_keys(built) | named_file_names(built, self._single_value)
        return keys | global_file_names(self.ctx, path.value) if isinstance(path, cst.Name) and bound is None else keys

    def _single_value(self, name: str) -> Tuple[cst.BaseExpression, ...]:
        value = single_binding(self.ctx, name)
        return (value,) if value is not None else ()

    def _path_code(self, target: cst.BaseExpression) -> FrozenSet[str]:
        """The path's code alone: a save through a function call matches the same expression
        only (``os.path.join(args.work_dir, 'model.pt')``), not any file of the same name."""
        return frozenset({re.sub(r"\s+", "", source_of(unopened(opened_path(target, self.ctx.stack) or target)))})


RULES = (LoadWithoutMapLocation,)
