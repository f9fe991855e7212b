"""``singlehead.numerics.thread_map``: the order of results, errors, and the BLAS pools held at one thread."""

from __future__ import annotations

import threading

import pytest

from singlehead.numerics.thread_map import blas_threads, single_blas_thread, thread_map


def test_results_keep_the_order_of_the_items_and_use_several_threads():
    seen = set()

    def f(x: int) -> int:
        seen.add(threading.get_ident())
        barrier.wait(timeout=10)  # both pieces run at once, or this times out
        return x * x

    barrier = threading.Barrier(2)
    assert thread_map(f, [3, 4], 2) == [9, 16]
    assert len(seen) == 2


def test_one_thread_is_the_plain_loop_in_the_calling_thread():
    me = threading.get_ident()
    assert thread_map(lambda x: (x, threading.get_ident() == me), range(3), 1) == [(0, True), (1, True), (2, True)]


def test_an_error_of_a_piece_is_raised():
    def f(x: int) -> int:
        if x == 2:
            raise KeyError("piece 2")
        return x

    with pytest.raises(KeyError, match="piece 2"):
        thread_map(f, range(4), 2)


@pytest.mark.parametrize("threads", [0, -1, 1.5, True])
def test_threads_must_be_a_positive_integer(threads):
    with pytest.raises(ValueError, match="threads must be an integer >= 1"):
        thread_map(abs, [1], threads)


def test_the_blas_pools_are_at_one_thread_inside_the_block_and_restored_after():
    import threadpoolctl

    before = blas_threads()
    with single_blas_thread():
        assert blas_threads() == 1
        assert all(i["num_threads"] == 1 for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas")
    assert blas_threads() == before
    with single_blas_thread(active=False):
        assert blas_threads() == before
