"""Sample pools of every kind pymem reads, for pymem's tests.

  python3 pool_objects.py

Prints one JSON line

  {"pid": ..., "minor": ..., "objects": {name: [id(obj), qsize or null]},
   "semlocks": {name: [handle, maxvalue, kind, reader fd]}}

and then reads stdin: on a line "more" it puts one more item into every
queue and prints the JSON again; at end of input it exits. In CPython,
id(obj) is the object's address, what gpuprof's frame walk captures.
"semlocks" is what the multiprocessing queues' C SemLock objects say of
themselves, so the test can hold pymem's reading of that struct to it.
"""
import json, multiprocessing, multiprocessing.queues, os, queue, sys, time


class TaggedQueue(queue.Queue):
    """A user subclass whose instances' attributes start with its own."""

    def __init__(self, maxsize=0):
        # Before Queue.__init__: "queue" is not where it is in a plain Queue.
        self.tag = "tagged"
        super().__init__(maxsize)


class NotAQueue:
    """Has a "queue" list like queue.Queue's, but is no queue."""

    def __init__(self):
        self.queue = [1, 2, 3]


def vars_called(q):
    # Materialises the instance dict (3.11+ keep attributes in values
    # outside any dict until something asks for the dict).
    vars(q)
    return q


def dict_replaced(q):
    # A new, combined dict with a non-str key: the general key layout.
    q.__dict__ = dict(vars(q))
    q.__dict__[0] = "not a name"
    return q


def many_attrs(q):
    # More attributes than the type's shared keys hold.
    for i in range(40):
        setattr(q, "extra_%d" % i, i)
    return q


# name: (object, items put); the many_attrs queue comes last so that it
# fills Queue's shared keys after the other queues were made.
made = {
    "queue": (queue.Queue(), 7),
    "lifo": (queue.LifoQueue(), 3),
    "priority": (queue.PriorityQueue(), 2),
    "subclass": (TaggedQueue(), 4),
    "vars": (vars_called(queue.Queue()), 5),
    "dict_replaced": (dict_replaced(queue.Queue()), 6),
    "mp": (multiprocessing.Queue(), 5),
    "mp_bounded": (multiprocessing.Queue(16), 9),
    "mp_joinable": (multiprocessing.JoinableQueue(), 2),
    "not_a_queue": (NotAQueue(), None),
    "many_attrs": (many_attrs(queue.Queue()), 3),
}
objects = {name: obj for name, (obj, _) in made.items()}


def qsize(obj):
    return obj.qsize() if hasattr(obj, "qsize") else None


def settle(want):
    # multiprocessing's put() hands items to a feeder thread; wait until
    # every queue reports what was put.
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if all(qsize(obj) == n for obj, n in want.items()):
            return
        time.sleep(0.01)
    sys.exit("queues did not settle: %r" % {k: qsize(o) for k, o in objects.items()})


def report():
    semlocks = {}
    for name, obj in objects.items():
        if isinstance(obj, multiprocessing.queues.Queue):
            sl = obj._sem._semlock
            semlocks[name] = [sl.handle, sl.maxvalue, sl.kind, obj._reader.fileno()]
    print(json.dumps({
        "pid": os.getpid(),
        "minor": sys.version_info.minor,
        "objects": {name: [id(obj), qsize(obj)] for name, obj in objects.items()},
        "semlocks": semlocks,
    }), flush=True)


for obj, n in made.values():
    for i in range(n or 0):
        obj.put(i)
settle({obj: n for obj, n in made.values()})
report()
for line in sys.stdin:
    if line.strip() != "more":
        continue
    want = {}
    for obj in objects.values():
        if qsize(obj) is not None:
            want[obj] = qsize(obj) + 1
            obj.put(len(want))
    settle(want)
    report()
