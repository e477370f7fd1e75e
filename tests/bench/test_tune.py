"""tune.py end to end: a 2-value sweep writes JSON, a PNG and a preset that loads and runs."""
import json

import pytest

from bench.tune import parse_args, sweep_plan, write_preset
from tests.conftest import write_image_folder


def test_tune_writes_json_png_and_a_working_preset(tmp_path, capsys):
    """tune.py's main here (the sweep's logic and outputs); every setting is measured in
    its own process, `tune.py --child`, as on the command line."""
    from bench.tune import main
    from dali_pipes.pipelines.config import load_config
    from torch_bridge import make_loader
    data = write_image_folder(tmp_path / "d", n_images=16, n_classes=2)
    out = tmp_path / "out"
    code = main(
        ["--data", str(data), "--device", "cpu", "--params",
         "prefetch_queue_depth,hw_decoder_load", "--values", "prefetch_queue_depth=1,3",
         "--steps", "2", "--warmup", "1", "--batch-size", "8", "--size", "32",
         "--repeats", "2", "--json", str(out / "t.json"), "--plot", str(out / "t.png"),
         "--out-preset", str(out / "best.toml")])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    report = json.loads((out / "t.json").read_text())
    assert [r["value"] for r in report["rows"]] == [1, 3]
    assert all(r["samples_per_s"] > 0 for r in report["rows"])
    for r in report["rows"]:  # median of 2 runs inside their min-max
        lo, hi = r["samples_per_s_range"]
        assert r["repeats"] == 2 and lo <= r["samples_per_s"] <= hi
    assert sum(bool(r.get("best")) for r in report["rows"]) == 1
    assert "min-max" in printed.out
    assert any("hw_decoder_load skipped" in n for n in report["notes"])
    from tests.bench.png_check import assert_plot_has_content
    assert_plot_has_content(out / "t.png")
    best = max(report["rows"], key=lambda r: r["samples_per_s"])["value"]
    assert load_config(out / "best.toml").prefetch_queue_depth == best
    keys = [x.split(" =")[0] for x in (out / "best.toml").read_text().splitlines()
            if " = " in x and not x.startswith("#")]
    assert keys == ["description", "prefetch_queue_depth"]  # only what it measured
    loader = make_loader("image", data, backend="dali", batch_size=4, size=32,
                         config=str(out / "best.toml"))
    batch = next(iter(loader))
    assert batch["image"].shape == (4, 3, 32, 32)


def test_sweep_plan_rejects_unknown_parameters():
    args = parse_args(["--backend", "torch", "--params", "num_threads"])
    with pytest.raises(ValueError, match="num_threads"):
        sweep_plan(args, "cpu")
    args = parse_args(["--values", "bogus=1,2"])
    with pytest.raises(ValueError, match="bogus"):
        sweep_plan(args, "cpu")


def test_sweep_plan_keeps_hw_decoder_load_on_gpu():
    plan, notes = sweep_plan(parse_args(["--values", "hw_decoder_load=0.2,0.8"]), "cuda")
    assert ("hw_decoder_load", [0.2, 0.8]) in plan and not notes


def test_write_preset_round_trips(tmp_path):

    from dali_pipes.pipelines.config import PipelineConfig, config_values
    config = config_values(PipelineConfig(num_threads=3, antialias=False))
    write_preset(tmp_path / "p.toml", config, "a comment\nsecond line")
    text = (tmp_path / "p.toml").read_text()
    assert text.startswith("# a comment") and "antialias = false" in text
