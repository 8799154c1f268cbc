"""The load generator's reading of frames: a frame of several rows counts as its rows."""

from __future__ import annotations

import json

from bench.loadgen import row_frames


def test_row_frames_split_a_frame_of_several_rows_in_order() -> None:
    frame = json.dumps({"type": "trail.rows", "rows": [{"id": 1}, {"id": 2}]})
    assert [json.loads(text) for text in row_frames(frame)] == [
        {"type": "trail.row", "row": {"id": 1}},
        {"type": "trail.row", "row": {"id": 2}},
    ]


def test_row_frames_keep_a_one_row_frame_as_it_came() -> None:
    frame = json.dumps({"type": "message", "message": {"id": 3}})
    assert row_frames(frame) == [frame]
    several = json.dumps({"type": "messages", "rows": [{"id": 4}]})
    assert [json.loads(text) for text in row_frames(several)] == [
        {"type": "message", "message": {"id": 4}}
    ]
