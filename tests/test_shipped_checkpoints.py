"""Checkpoints a project ships are read without torch: the storage locations of real
``torch.save`` files, zip and legacy, saved from the CPU and (with the location tag patched) from
CUDA; and a load of such a file is judged by what it holds."""

from unittest import mock

import pytest

from torchdevice_lint import api
from torchdevice_lint.project.model import Projects
from torchdevice_lint.project.shipped import storage_locations

torch = pytest.importorskip("torch")

MTCNN = (
    "import os\nimport torch\n\n\ndef pnet():\n"
    "    path = os.path.join(os.path.dirname(__file__), '../data/pnet.pt')\n    return torch.load(path)\n"
)


@pytest.mark.parametrize("zipped", [True, False], ids=["zip", "legacy"])
def test_the_locations_of_a_real_checkpoint(tmp_path, zipped):
    state = {"weight": torch.ones(3), "bias": torch.zeros(3)[1:], "epoch": 3}
    torch.save(state, tmp_path / "cpu.pt", _use_new_zipfile_serialization=zipped)
    with mock.patch("torch.serialization.location_tag", lambda storage: "cuda:1"):
        torch.save(state, tmp_path / "cuda.pt", _use_new_zipfile_serialization=zipped)
    assert storage_locations(str(tmp_path / "cpu.pt")) == ["cpu", "cpu"]
    assert storage_locations(str(tmp_path / "cuda.pt")) == ["cuda:1", "cuda:1"]


def test_what_is_no_checkpoint_has_no_locations(tmp_path):
    (tmp_path / "notes.pt").write_bytes(b"not a pickle")
    assert storage_locations(str(tmp_path / "notes.pt")) is None


@pytest.mark.parametrize("location, found", [("cpu", []), ("cuda:0", ["TDV501"])])
def test_a_load_of_a_shipped_checkpoint_is_judged_by_its_storages(tmp_path, location, found):
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "models").mkdir()
    (tmp_path / "data").mkdir()
    module = tmp_path / "models" / "mtcnn.py"
    module.write_text(MTCNN)
    with mock.patch("torch.serialization.location_tag", lambda storage: location):
        torch.save(torch.nn.Linear(2, 2).state_dict(), tmp_path / "data" / "pnet.pt")
    result = api.engine(projects=Projects()).check_source(str(module), MTCNN)
    assert [finding.code for finding in result.findings] == found
    alone = api.engine().check_source(str(module), MTCNN)
    assert [finding.code for finding in alone.findings] == ["TDV501"]
