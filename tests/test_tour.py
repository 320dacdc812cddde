"""``examples/tour.ipynb``: committed without outputs, and (slow; needs nbclient, nbformat and
ipykernel) runs top to bottom, saying what it should."""

import json
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parent.parent / "examples" / "tour.ipynb"


def test_tour_is_committed_without_outputs():
    nb = json.loads(NOTEBOOK.read_text())
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code and all(c["outputs"] == [] and c["execution_count"] is None for c in code)


@pytest.mark.slow
def test_tour_runs_top_to_bottom(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    out = [o for c in nb.cells for o in c.get("outputs", [])]
    assert not [o for o in out if o["output_type"] == "error"]
    text = "".join(o.get("text", "") for o in out if o["output_type"] == "stream")
    assert "exact:  True" in text and "layer 4: query 20 reads key 12" in text
    assert "torch.equal: True" in text or "skipped: TransformerLens 4.x is not installed" in text
    assert sum("<svg" in str(o.get("data", {}).get("text/html", "")) for o in out) >= 3  # the heatmaps
