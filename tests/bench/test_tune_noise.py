"""tune.py's verdicts: the best of repeated runs, "within noise" when ranges overlap, and a
preset holding only the keys the sweep measured."""

from bench.tune import mark_best, noise_notes, preset_keys, write_preset


def _rows(*ranges):
    return [{"param": "num_threads", "value": v, "samples_per_s": (lo + hi) / 2,
             "samples_per_s_range": [lo, hi]}
            # one to three ranges take the first values: the lengths differ on purpose
            for v, (lo, hi) in zip((1, 2, 4), ranges, strict=False)]


def test_best_is_the_highest_median_and_clear_when_ranges_do_not_overlap():
    rows = _rows((90, 110), (150, 170), (120, 140))
    mark_best(rows)
    best = [r for r in rows if r.get("best")]
    assert [r["value"] for r in best] == [2]
    assert best[0]["within_noise"] is False and best[0]["runner_up"] == 4
    assert noise_notes(rows) == []


def test_overlapping_ranges_are_within_noise():
    rows = _rows((90, 110), (130, 170), (120, 140))
    mark_best(rows)
    assert rows[1]["best"] and rows[1]["within_noise"]
    (note,) = noise_notes(rows)
    assert note.startswith("num_threads: best 2 is within noise of 4")


def test_a_single_value_has_no_runner_up():
    rows = _rows((90, 110))
    mark_best(rows)
    assert rows[0]["best"] and not rows[0]["within_noise"] and "runner_up" not in rows[0]


def test_preset_keys_are_the_measured_ones_plus_base_differences(tmp_path):
    from dali_pipes.pipelines.config import PipelineConfig, config_values, load_config
    config = config_values(PipelineConfig(num_threads=4))
    report = {"best": {"config": config},
              "rows": [{"param": "num_threads", "value": 4},
                       {"param": "prefetch_factor", "value": None, "skipped": "..."}]}
    assert preset_keys(report) == ["num_threads"] and report["measured"] == ["num_threads"]
    base = config_values(PipelineConfig(num_threads=4, antialias=False))
    report["best"]["config"] = base  # a base preset that is not the default
    keys = preset_keys(report)
    assert set(keys) == {"num_threads", "antialias"} and report["measured"] == ["num_threads"]
    write_preset(tmp_path / "p.toml", {k: base[k] for k in keys}, "measured: num_threads")
    loaded = load_config(tmp_path / "p.toml")
    assert loaded.num_threads == 4 and loaded.antialias is False
    assert "prefetch_queue_depth" not in (tmp_path / "p.toml").read_text()
