"""A stand-in for torch.utils.data.DataLoader with worker processes, for
gpuprof's tests on machines without torch: the same module path, class and
method names, and the same queues as torch 2.x's
_MultiProcessingDataLoaderIter, so a loop using it shows the frames and
queues a real DataLoader does:

  index queues -> worker processes -> a multiprocessing result queue
  -> (pin_memory: a thread moving batches into a queue.Queue) -> __next__

dataset is a function of an index; batches come back in the order taken
(the real one reorders out-of-order batches; nothing here needs that).
"""
import multiprocessing, queue, threading

from ._utils.pin_memory import _pin_memory_loop
from ._utils.worker import _worker_loop


class DataLoader:
    def __init__(self, dataset, num_workers=2, prefetch_factor=2, pin_memory=False):
        self.dataset, self.num_workers = dataset, num_workers
        self.prefetch_factor, self.pin_memory = prefetch_factor, pin_memory

    def __iter__(self):
        return _MultiProcessingDataLoaderIter(self)


class _BaseDataLoaderIter:
    def __init__(self, loader):
        self._send_idx = 0

    def __iter__(self):
        return self

    def __next__(self):
        return self._next_data()


class _MultiProcessingDataLoaderIter(_BaseDataLoaderIter):
    def __init__(self, loader):
        super().__init__(loader)
        ctx = multiprocessing.get_context("fork")
        self._workers_done_event = ctx.Event()
        self._worker_result_queue = ctx.Queue()
        self._index_queues, self._workers = [], []
        for _ in range(loader.num_workers):
            iq = ctx.Queue()
            w = ctx.Process(target=_worker_loop, args=(loader.dataset, iq, self._worker_result_queue,
                                                       self._workers_done_event), daemon=True)
            w.start()
            self._index_queues.append(iq)
            self._workers.append(w)
        if loader.pin_memory:
            self._data_queue = queue.Queue()
            self._pin_memory_thread = threading.Thread(
                target=_pin_memory_loop, args=(self._worker_result_queue, self._data_queue,
                                               self._workers_done_event), daemon=True)
            self._pin_memory_thread.start()
        else:
            self._data_queue = self._worker_result_queue
        for _ in range(loader.prefetch_factor * loader.num_workers):
            self._try_put_index()

    def _try_put_index(self):
        self._index_queues[self._send_idx % len(self._index_queues)].put(self._send_idx)
        self._send_idx += 1

    def _try_get_data(self, timeout=5.0):
        try:
            return True, self._data_queue.get(timeout=timeout)
        except queue.Empty:
            return False, None

    def _get_data(self):
        while True:
            ok, data = self._try_get_data()
            if ok:
                return data

    def _next_data(self):
        idx, data = self._get_data()
        self._try_put_index()
        return data

    def shutdown(self):
        self._workers_done_event.set()
