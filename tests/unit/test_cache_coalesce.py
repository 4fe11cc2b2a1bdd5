"""MissCoalescer: followers wake when the leader is done, whatever happened to it."""

from __future__ import annotations

import asyncio

import pytest

from sits_inference.cache.coalesce import MissCoalescer

KEY = ("partition", "how do i reset my password")


async def test_a_follower_waits_for_the_leader_to_finish() -> None:
    coalescer = MissCoalescer(max_wait_s=5)
    order: list[str] = []

    async def leader() -> None:
        async with coalescer.lead(KEY):
            await asyncio.sleep(0.05)
            order.append("leader stored")

    async def follower() -> None:
        assert await coalescer.follow(KEY) is True
        order.append("follower woke")

    leading = asyncio.create_task(leader())
    await asyncio.sleep(0)  # the leader holds the key
    assert coalescer.leading(KEY)
    await asyncio.gather(follower(), follower(), leading)
    assert order == ["leader stored", "follower woke", "follower woke"]
    assert not coalescer.leading(KEY)
    assert len(coalescer) == 0


@pytest.mark.parametrize("failure", [RuntimeError("vLLM said 500"), asyncio.CancelledError()])
async def test_a_failed_or_cancelled_leader_still_wakes_its_followers(
    failure: BaseException,
) -> None:
    coalescer = MissCoalescer(max_wait_s=5)

    async def leader() -> None:
        async with coalescer.lead(KEY):
            await asyncio.sleep(0.02)
            raise failure

    leading = asyncio.create_task(leader())
    await asyncio.sleep(0)
    assert await coalescer.follow(KEY) is True
    with pytest.raises(type(failure)):
        await leading
    assert not coalescer.leading(KEY)


async def test_a_follower_gives_up_after_the_longest_wait() -> None:
    coalescer = MissCoalescer(max_wait_s=0.05)
    release = asyncio.Event()

    async def leader() -> None:
        async with coalescer.lead(KEY):
            await release.wait()

    leading = asyncio.create_task(leader())
    await asyncio.sleep(0)
    assert await coalescer.follow(KEY) is False
    assert coalescer.leading(KEY)  # the leader is unaffected
    release.set()
    await leading


async def test_without_a_leader_there_is_nothing_to_wait_for() -> None:
    coalescer = MissCoalescer(max_wait_s=5)
    assert not coalescer.leading(KEY)
    assert await coalescer.follow(KEY) is True
    async with coalescer.lead(KEY):
        assert coalescer.leading(KEY)
        assert not coalescer.leading(("partition", "another question"))
