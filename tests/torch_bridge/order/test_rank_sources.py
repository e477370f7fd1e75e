"""Rank and world size from the arguments, the process group or the launcher's variables:
an inconsistent or malformed set is a ValueError naming the variables, never rank 0 of a
world whose other shares nobody reads."""
from __future__ import annotations

import pytest

from dali_pipes.launch_env import launch_env, local_rank, local_world_size
from torch_bridge.order.ranks import resolve_ranks


def _env(**values: str) -> dict[str, str]:
    return dict(values)


@pytest.mark.parametrize("environ, want", [
    ({}, (0, 1)),
    (_env(RANK="1", WORLD_SIZE="2"), (1, 2)),
    (_env(RANK="0"), (0, 1)),
    (_env(RANK="3", WORLD_SIZE="4", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2"), (3, 4)),
    (_env(RANK=" 1\n", WORLD_SIZE="2"), (1, 2)),
])
def test_a_consistent_environment_gives_its_ranks(environ, want):
    assert resolve_ranks(None, None, environ=environ) == want


@pytest.mark.parametrize("environ, said", [
    (_env(WORLD_SIZE="2"), r"world size 2 \(WORLD_SIZE\) but no rank.*1 of 2 shares"),
    (_env(RANK="abc", WORLD_SIZE="2"),
     r"RANK='abc' is not an integer \(environment: RANK='abc', WORLD_SIZE='2'\)"),
    (_env(RANK="", WORLD_SIZE="2"), r"RANK='' is not an integer"),
    (_env(RANK="0", WORLD_SIZE="2.0"), r"WORLD_SIZE='2.0' is not an integer"),
    (_env(RANK="0", WORLD_SIZE="0"), r"WORLD_SIZE='0' must be at least 1"),
    (_env(RANK="-1", WORLD_SIZE="2"), r"RANK='-1' must be at least 0"),
    (_env(RANK="2", WORLD_SIZE="2"), r"RANK='2' is not below WORLD_SIZE='2'"),
    (_env(RANK="1"), r"rank 1 \(RANK\) is outside \[0, world_size\) for world size 1 "
                     r"\(WORLD_SIZE unset\)"),
    (_env(LOCAL_WORLD_SIZE="4"), r"LOCAL_WORLD_SIZE=4 processes on this node, but world "
                                 r"size 1 \(WORLD_SIZE unset\)"),
    (_env(RANK="0", WORLD_SIZE="8", LOCAL_RANK="2", LOCAL_WORLD_SIZE="2"),
     r"LOCAL_RANK='2' is not below LOCAL_WORLD_SIZE='2'"),
])
def test_a_malformed_or_inconsistent_environment_names_the_variables(environ, said):
    with pytest.raises(ValueError, match=said):
        resolve_ranks(None, None, environ=environ)


@pytest.mark.parametrize("rank, world_size, said", [
    (2, 2, r"rank 2 \(rank=\) is outside \[0, world_size\) for world size 2 \(world_size=\)"),
    (-1, 2, r"rank -1 \(rank=\) is outside"),
    (0, 0, r"world_size must be at least 1, got 0 \(world_size=\)"),
    (None, 3, r"world size 3 \(world_size=\) but no rank"),
])
def test_the_arguments_are_checked_the_same_way(rank, world_size, said):
    with pytest.raises(ValueError, match=said):
        resolve_ranks(rank, world_size, environ={})


def test_arguments_and_environment_combine_and_are_checked_together():
    assert resolve_ranks(1, None, environ=_env(WORLD_SIZE="2")) == (1, 2)
    assert resolve_ranks(None, 4, environ=_env(RANK="3")) == (3, 4)
    with pytest.raises(ValueError, match=r"rank 3 \(RANK\) is outside .* 2 \(world_size=\)"):
        resolve_ranks(None, 2, environ=_env(RANK="3"))
    # both given: the environment is not read at all
    assert resolve_ranks(0, 1, environ=_env(RANK="x", WORLD_SIZE="2")) == (0, 1)


def test_the_process_group_wins_over_a_misleading_environment():
    environ = _env(RANK="0", WORLD_SIZE="1", LOCAL_RANK="1", LOCAL_WORLD_SIZE="2")
    assert resolve_ranks(None, None, group=(1, 2), environ=environ) == (1, 2)
    with pytest.raises(ValueError, match=r"rank 5 \(rank=\) is outside .*torch\.distributed"):
        resolve_ranks(5, None, group=(1, 2), environ=environ)


def test_a_world_larger_than_the_data_set_is_refused():
    assert resolve_ranks(None, None, samples=2, environ=_env(RANK="1", WORLD_SIZE="2")) == (1, 2)
    with pytest.raises(ValueError, match=r"world size 1000000000000 \(WORLD_SIZE\) is larger "
                                         r"than the data set's 37 samples"):
        resolve_ranks(None, None, samples=37,
                      environ=_env(RANK="0", WORLD_SIZE=str(10**12)))


def test_the_node_variables_are_read_on_their_own():
    environ = _env(RANK="abc", LOCAL_RANK="1", LOCAL_WORLD_SIZE="4")
    assert local_world_size(environ) == 4 and local_rank(environ) == 1
    assert local_world_size({}) == 1 and local_rank({}) is None
    for bad, said in (("x", "LOCAL_WORLD_SIZE='x' is not an integer"),
                      ("0", "LOCAL_WORLD_SIZE='0' must be at least 1")):
        with pytest.raises(ValueError, match=said):
            local_world_size(_env(LOCAL_WORLD_SIZE=bad))
    with pytest.raises(ValueError, match="LOCAL_RANK='4' is not below LOCAL_WORLD_SIZE='4'"):
        local_rank(_env(LOCAL_RANK="4", LOCAL_WORLD_SIZE="4"))
    assert launch_env(environ={"RANK": "2", "OTHER": "x"}) == {"RANK": 2}
