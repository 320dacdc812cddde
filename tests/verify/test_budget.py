"""Work-sized batches, the time budget (an honest cut), progress lines, devices."""

import io

import numpy as np
import pytest
import torch

import compiler
import verify.check as check
import verify.cost as cost
from compiler.automata.errors import ShortcutError
from compiler.cli import main
from verify.progress import Progress
from verify.report import summary_line, verification_summary


@pytest.fixture(scope="module")
def q8():
    return compiler.compile_automaton("quaternion", max_len=24, method="scan")


class FakeClock:
    """Seconds that advance by ``step`` at every reading."""

    def __init__(self, step: float) -> None:
        self.t, self.step = 0.0, step

    def __call__(self) -> float:
        self.t += self.step
        return self.t


def test_exhaustive_order_covers_every_short_prefix_first():
    seqs = check.all_sequences(3, 4)
    for j in range(5):
        assert len({tuple(r) for r in seqs[: 3**j, :j]}) == 3**j  # every length-j input among the first 3^j rows
    assert check.exhaustive_covered(3, 80, 4) == 3 and check.exhaustive_covered(3, 81, 4) == 4
    assert check.exhaustive_covered(3, 8, 4) == 1 and check.exhaustive_covered(1, 1, 5) == 5


def test_batches_are_bounded_by_work_and_memory(q8):
    flops = cost.forward_flops(q8, 24)
    rows = cost.batch_rows(q8, 24)
    assert rows >= 1 and rows * flops <= cost.BATCH_FLOPS
    with q8.explicit_attention():
        assert cost.batch_rows(q8, 24) * 4 * 25**2 <= cost.SCORE_BUDGET or cost.batch_rows(q8, 24) == 1
    assert cost.forward_flops(q8, 48) / 49 > flops / 25  # attention: the cost per position grows with T


def test_a_time_budget_cuts_honestly(q8, monkeypatch):
    full = check.verify(q8, samples=6, exhaustive_budget=256)
    monkeypatch.setattr(cost, "BATCH_FLOPS", 1)  # one sequence per batch
    r = check.verify(q8, samples=6, exhaustive_budget=256, time_budget=5.0, clock=FakeClock(1.0))
    cut = r.checked["cut_by_time_budget"]
    assert full.checked["cut_by_time_budget"] is None and cut
    # the first batch of every check ran, and no more than the budget allowed
    assert r.checked["exhaustive_sequences"] >= 1 and r.checked["random_sequences"] >= 1
    assert all(v >= 1 for v in r.checked["adversarial_families"].values())
    assert r.n_positions < full.n_positions
    L = r.checked["exhaustive_sequence_length"]
    assert r.checked["exhaustive_length"] < L == full.checked["exhaustive_length"]
    assert 4 ** r.checked["exhaustive_length"] <= r.checked["exhaustive_sequences"]
    assert r.exact and r.checked["layerwise"] and r.invariants.sequences == 1
    assert any("time budget" in n for n in r.notes)
    line = summary_line(verification_summary(r, q8))
    assert "cut by the 5 s time budget" in line and "random: 1 of 6 sequences" in line
    with pytest.raises(ShortcutError):
        check.verify(q8, samples=1, time_budget=0)


def test_a_check_one_sequence_of_which_outlasts_the_budget_is_refused(q8):
    """At the rate the first batches ran, one full-length sequence would take longer than the whole
    budget: refused before it starts (at max_len 2**20 one forward takes hours), naming the options."""
    with pytest.raises(ShortcutError, match=r"verifying one input of length 24 would take about .* over the "
                                            r"time budget of 1e-09 s"):
        check.verify(q8, samples=2, exhaustive_budget=64, time_budget=1e-9)
    assert check.verify(q8, samples=2, exhaustive_budget=64, time_budget=60.0).exact


def test_progress_counts_positions_and_ends_at_the_total(q8):
    calls = []
    r = check.verify(q8, samples=3, exhaustive_budget=64, progress=lambda *a: calls.append(a))
    dones = [d for _, d, _ in calls]
    assert dones == sorted(dones) and calls[-1][1] == calls[-1][2] == calls[0][2]
    assert calls[-1][1] >= r.n_positions  # positions of the model's checks plus the layer-wise sample


def test_progress_lines_off_a_terminal_are_periodic_with_an_eta():
    out = io.StringIO()
    p = Progress(out, tty=False, interval=10, quiet=2, clock=FakeClock(3.0))  # 3 s per call
    for done in range(0, 100, 10):
        p("random", done, 100)
    p("", 100, 100)
    lines = out.getvalue().splitlines()
    assert 2 <= len(lines) <= 5 and all("\r" not in x for x in lines)
    assert "ETA" in lines[0] and "of 100 positions" in lines[0] and "random" in lines[0]
    assert lines[-1].startswith("verifying: 100 of 100 positions (100%)")
    quiet = io.StringIO()
    q = Progress(quiet, tty=False, clock=FakeClock(0.1))
    q("random", 1, 2)
    q("", 2, 2)
    assert quiet.getvalue() == ""


def test_model_forward_chunks_the_mlp_with_the_same_values(q8, monkeypatch):
    import constructions.layers as layers_module

    toks = torch.from_numpy(np.random.default_rng(1).integers(0, 4, (5, 24)))
    with torch.no_grad():
        whole = q8(toks)
        monkeypatch.setattr(layers_module, "CHUNK_ELEMENTS", 64)  # a few positions per chunk
        chunked = q8(toks)
    assert torch.equal(whole, chunked)
    assert torch.equal(q8(toks).detach(), whole)  # with autograd: the hooked path, same values


def test_device_cpu_works_and_an_unavailable_device_is_bad_input(tmp_path, capsys):
    path = tmp_path / "p.safetensors"
    assert main(["compile", "parity", "-o", str(path), "--max-len", "8", "--device", "cpu"]) == 0
    assert main(["run", str(path), "--input", "1 1 0", "--device", "cpu"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "odd even even"
    assert main(["verify", str(path), "--device", "cpu", "--time-budget", "30", "--samples", "2"]) == 0
    capsys.readouterr()
    model = compiler.load(path).to("cpu")
    assert check.verify(model, samples=2).exact
    bad = "cuda" if not torch.cuda.is_available() else "cuda:99"
    for argv in (["run", str(path), "--input", "1", "--device", bad], ["verify", str(path), "--device", "nonsense"],
                 ["compile", "parity", "-o", str(tmp_path / "q.safetensors"), "--device", bad]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith("error: ") and err.count("\n") == 1 and "device" in err
    assert not (tmp_path / "q.safetensors").exists()
