"""The worker processes' loop, where torch keeps it (_utils/worker.py)."""


def _worker_loop(dataset, index_queue, data_queue, done):
    data_queue.cancel_join_thread()  # exit without draining what the loader did not take
    while not done.is_set():
        idx = index_queue.get()
        if idx is None:
            return
        data_queue.put((idx, dataset(idx)))
