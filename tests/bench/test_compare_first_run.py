"""compare.py's first run: every line fits 80 columns, and only our DALI rows ask for the
native operators (the end-to-end first run is in test_compare_rows.py)."""
from bench.compare import fit, uses_native


def test_fit_wraps_long_messages_to_80_columns():
    text = "compare.py: dali failed: SampleError: sample 3 (" + "/long" * 40 + "): why " * 9
    lines = fit(text).splitlines()
    assert len(lines) > 1 and all(len(x) <= 80 for x in lines)
    assert "".join(x.strip() for x in lines).replace(" ", "") == text.replace(" ", "")
    assert fit("short") == "short"


def test_only_our_dali_rows_ask_for_the_native_operators():
    assert uses_native(["torch", "dali:throughput"]) and uses_native(["adapter"])
    assert not uses_native(["torch", "classic", "dali-stock", "usual"])
