"""dali_pipes/progress.py: plain lines off a terminal, a rich bar on one, nothing when off."""
import io

from dali_pipes.progress import format_eta, progress_bar, progress_line
from dali_pipes.sources.frames import extract_tree


def test_format_eta():
    assert [format_eta(s) for s in (None, float("nan"), -1, 4.4, 65, 3725)] == \
        ["?", "?", "?", "4s", "1m05s", "1h02m"]


def test_progress_line_has_count_percent_rate_and_eta():
    line = progress_line("extracting frames", 30, 120, 10.0, unit="videos")
    assert line == "extracting frames: 30/120 (25%), 3.0 videos/s, ETA 30s"
    assert progress_line("writing", 7, None, 2.0) == "writing: 7, 3.5/s"


def test_plain_lines_every_tenth_and_a_last_line():
    out = io.StringIO()
    with progress_bar(95, "work", stream=out, every_s=1e9) as bar:
        for _ in range(95):
            bar.advance()
    lines = out.getvalue().splitlines()
    # one line per 9 items (10% of 95, rounded down), then the final 95/95
    assert [x.split(",")[0] for x in lines] == [f"work: {9 * k}/95 ({100 * 9 * k / 95:.0f}%)"
                                                for k in range(1, 11)] + ["work: 95/95 (100%)"]
    assert all("/s" in x and "ETA" in x for x in lines)


def test_plain_lines_by_time_and_a_total_learnt_later():
    out = io.StringIO()
    with progress_bar(None, "files", stream=out, every_s=0.0) as bar:
        bar.update(1)
        bar.update(2, total=4)
        bar.print("a note")
    lines = out.getvalue().splitlines()
    assert len(lines) == 3 and lines[2] == "a note"  # finish() adds nothing new
    assert lines[0].startswith("files: 1, ") and lines[1].startswith("files: 2/4 (50%)")


def test_terminal_gets_a_rich_bar_and_disabled_prints_nothing():
    out = io.StringIO()
    with progress_bar(4, "bar", stream=out, terminal=True, unit="steps") as bar:
        bar.update(4)
    text = out.getvalue()
    assert "bar" in text and "4/4" in text and "steps/s" in text and "ETA" in text
    quiet = io.StringIO()
    with progress_bar(4, "off", stream=quiet, enabled=False) as bar:
        bar.advance(4)
        bar.print("dropped")
    assert quiet.getvalue() == ""


def test_frames_extract_reports_progress_off_a_terminal(tmp_path, capsys):
    for k in range(3):  # files with a video extension that are not videos: fail fast
        (tmp_path / "src" / "c").mkdir(parents=True, exist_ok=True)
        (tmp_path / "src" / "c" / f"v{k}.mp4").write_bytes(b"not a video" * k)
    report = extract_tree(tmp_path / "src", tmp_path / "dst")
    err = capsys.readouterr().err.splitlines()
    assert len(report.failed) == 3
    assert sum(x.startswith("failed ") and "v" in x for x in err) == 3
    progress = [x for x in err if x.startswith("extracting frames: ")]
    assert progress[-1].startswith("extracting frames: 3/3 (100%)") and "videos/s" in progress[-1]
    extract_tree(tmp_path / "src", tmp_path / "dst2", progress=False)
    assert capsys.readouterr().err == ""
