"""The proof that matters for a notebook: after `torchdevice-fix --unsafe-fixes`, "Run all"
works on a CPU-only machine and on a Mac (simulated MPS), and still puts the work on the GPU of
the machine it was written for (simulated CUDA). Each run executes the notebook's cells in a
real IPython kernel (nbclient), magics and shell escapes included."""

import json
import shutil
from pathlib import Path

import pytest
from test_cli import run

nbclient = pytest.importorskip("nbclient", reason="executing notebooks needs nbclient and ipykernel (the test extra)")
pytest.importorskip("ipykernel", reason="executing notebooks needs nbclient and ipykernel (the test extra)")
torch = pytest.importorskip("torch", reason="the notebook trains a model")
pytestmark = [
    pytest.mark.slow,  # a kernel per run, each importing torch: 20-30 s a run
    pytest.mark.skipif(torch.cuda.is_available() or torch.backends.mps.is_available(),
                       reason="these runs are a CPU-only machine's, with the simulated devices"),
]

COLAB = Path(__file__).parent / "data" / "colab_train.ipynb"
#: A first cell that makes the kernel a machine with that (simulated) device, for the whole run.
SIMULATION = "import contextlib\nfrom torchdevice_lint.runtime.simdevice import simulation\n_device = contextlib.ExitStack()\n_device.enter_context(simulation({leg!r}))"
#: What the last cell proves: where the model and the data ended up.
PLACEMENT = "print(next(model.parameters()).device.type, x.device.type)"


def execute(path: Path, leg: str = "cpu") -> str:
    """Run every cell in a fresh kernel; the placement line it prints, or the error that stopped it."""
    document = json.loads(path.read_text(encoding="utf-8"))
    cells = document["cells"]
    if leg != "cpu":
        cells.insert(0, {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": SIMULATION.format(leg=leg)})
    cells.append({"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": PLACEMENT})
    nbformat = pytest.importorskip("nbformat")
    notebook = nbformat.reads(json.dumps(document), as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}})
    try:
        client.execute()
    except nbclient.exceptions.CellExecutionError as error:
        return f"{error.ename}: {error.evalue}"
    return "".join(notebook.cells[-1].outputs[0]["text"]).strip()


@pytest.fixture(scope="module")
def notebooks(tmp_path_factory):
    """The Colab notebook as written, and as fixed."""
    folder = tmp_path_factory.mktemp("notebooks")
    shutil.copy(COLAB, folder / "written.ipynb")
    shutil.copy(COLAB, folder / "fixed.ipynb")
    result = run("fix", "--no-cache", "--unsafe-fixes", "fixed.ipynb", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder


def test_as_written_it_stops_on_a_cpu_only_machine(notebooks):
    assert execute(notebooks / "written.ipynb") == "AssertionError: Torch not compiled with CUDA enabled"


def test_fixed_it_runs_all_on_a_cpu_only_machine(notebooks):
    assert execute(notebooks / "fixed.ipynb") == "cpu cpu"


def test_fixed_it_runs_all_on_a_mac(notebooks):
    assert execute(notebooks / "fixed.ipynb", "simmps") == "mps mps"


def test_fixed_it_still_trains_on_the_gpu(notebooks):
    assert execute(notebooks / "written.ipynb", "simcuda") == "cuda cuda"
    assert execute(notebooks / "fixed.ipynb", "simcuda") == "cuda cuda"
