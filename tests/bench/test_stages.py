"""compare.py --stages: the per-stage breakdown (bench/stages.py); the end-to-end run is in
test_compare.py."""


def test_stages_off_by_default():
    from bench import compare, run_one
    assert compare.parse_args([]).stages is False
    assert run_one.parser().parse_args(["--backend", "dali", "--data", "x"]).stages is False


def test_median_stages_and_unmeasured_backends():
    from bench.stages import empty_stages, instrument, median_stages
    rounds = [{"read_ms": 1.0, "transfer_ms": None}, {"read_ms": 3.0, "transfer_ms": None},
              {"read_ms": 2.0, "transfer_ms": None}]
    assert median_stages(rounds) == {"read_ms": 2.0, "transfer_ms": None}
    assert instrument("classic", object()) is None
    assert set(empty_stages()) >= {"read_ms", "decode_augment_ms", "transfer_ms"}
    assert all(v is None for v in empty_stages().values())
