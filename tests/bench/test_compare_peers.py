"""compare.py --peers: the other loaders' rows and the decode-only ceiling (bench/peers.py).
PyAV (a dependency) and the ceiling always run; a peer that is not installed is skipped
with one line. The end-to-end run with peers is in test_compare.py."""
import pytest

from bench.compare import peer_rows
from bench.peers import PEERS, unavailable


def test_every_peer_is_a_row_or_one_skipped_line():
    lines: list[str] = []
    rows = peer_rows("image", "all", lines.append)
    assert {"pyav", "decode-ceiling"} <= set(rows)
    assert sorted(rows + [line.split()[1] for line in lines]) == sorted(PEERS)
    assert all(line.startswith("skipped: ") and "\n" not in line for line in lines)
    assert unavailable("nosuch").startswith("unknown peer")
    with pytest.raises(SystemExit, match="unknown nosuch"):
        peer_rows("image", "pyav,nosuch", lines.append)
    with pytest.raises(SystemExit, match="only for --modality image or video"):
        peer_rows("hyperspectral", "all", lines.append)
