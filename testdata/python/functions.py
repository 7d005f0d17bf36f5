"""Functions of every shape pymem.Function finds or refuses, for pymem's tests.

  python3 functions.py

Calls the plain functions often enough that 3.11+ have quickened and
specialised their bytecode (rewritten in place, as pymem reads it), then
prints one JSON line

  {"pid": ..., "minor": ..., "runtime": address of _PyRuntime,
   "functions": {"module:qualname": {"code": id(code), "entry": offset,
                 "entry_op": opcode, "returns": [offset, ...],
                 "return_ops": [opcode, ...]}}}

where offsets are byte offsets into the bytecode the interpreter runs
(3.10 co_code, 3.11+ co_code_adaptive) as dis decodes it, and the opcodes
are the bytes there. It then waits for the end of its input.
"""
import ctypes, dis, functools, json, json.decoder, opcode, os, sys, time

MINOR = sys.version_info.minor
CONSTANT = 3


def plain(x):
    return x + 1


def many_returns(x):
    if x < 0:
        return None  # RETURN_CONST on 3.12+
    if x == 0:
        return "zero"
    for i in range(3):
        if i == x:
            return i
    return x * 2


def loop_first(n):
    while n > 0:
        n -= 1
    return n


def with_cell(x):
    # x is a cell: 3.11+ put MAKE_CELL before RESUME.
    def inner():
        return x

    return inner()


def always_raises():
    raise ValueError("no return instruction")


def logged(f):
    # Every function this decorates runs the one code object of wrapper.
    @functools.wraps(f)
    def wrapper(*args, **kwargs):
        return f(*args, **kwargs)

    return wrapper


@logged
@logged
def decorated(x):
    return x * 3


@functools.wraps(len)
def wraps_builtin(x):
    return len(x)


def gen():
    yield 1


async def coro():
    return 1


async def agen():
    yield 1


class Loader:
    now = time.monotonic  # a builtin, not a Python function

    def fetch(self, n):
        total = 0
        for i in range(n):
            total += self.scale(i)
        return total

    def scale(self, i):
        return i * 2

    @staticmethod
    def static(x):
        return x - 1

    @classmethod
    def klass(cls, x):
        return cls.__name__, x

    class Inner:
        def method(self):
            return 42


# More than 256 constants and global names: EXTENDED_ARG before
# LOAD_CONST, before LOAD_GLOBAL (which has caches on 3.11+) and, on
# 3.12+, before RETURN_CONST.
for _i in range(300):
    globals()["G%d" % _i] = _i
exec(
    "def big(x):\n"
    + "".join(
        "    x += G%d + %d.5\n    if x < -%d:\n        return %d\n" % (i, i, i, i)
        for i in range(300)
    )
    + "    return x\n"
)

WARM = [
    lambda: plain(1),
    lambda: [many_returns(x) for x in (-1, 0, 1, 5)],
    lambda: loop_first(5),
    lambda: with_cell(2),
    lambda: Loader().fetch(3),
    lambda: Loader.static(1),
    lambda: Loader.klass(1),
    lambda: Loader.Inner().method(),
    lambda: big(0.0),
    lambda: json.dumps({"a": 1}),
    lambda: decorated(2),
]

# module:qualname -> the function object.
FOUND = {
    "__main__:plain": plain,
    "__main__:many_returns": many_returns,
    "__main__:loop_first": loop_first,
    "__main__:with_cell": with_cell,
    "__main__:always_raises": always_raises,
    "__main__:Loader.fetch": Loader.fetch,
    "__main__:Loader.static": Loader.static,
    "__main__:Loader.klass": Loader.klass.__func__,
    "__main__:Loader.Inner.method": Loader.Inner.method,
    "__main__:big": big,
    "__main__:decorated": decorated.__wrapped__.__wrapped__,
    "__main__:json.dumps": json.dumps,
    "json:dumps": json.dumps,
    "json.decoder:JSONDecoder.decode": json.decoder.JSONDecoder.decode,
}

# opname -> its base instruction's name, specialised forms included.
DEOPT = {s: b for b, ss in getattr(opcode, "_specializations", {}).items() for s in ss}


def offsets(f):
    """Entry and return offsets of f's running bytecode, as dis sees them."""
    code = f.__code__
    raw = getattr(code, "_co_code_adaptive", code.co_code)
    kw = {"adaptive": True} if MINOR >= 11 else {}
    entry, returns = (0 if MINOR == 10 else None), []
    for ins in dis.get_instructions(f, **kw):
        base = DEOPT.get(ins.opname, ins.opname)
        if base == "RESUME" and ins.arg == 0 and entry is None:
            entry = ins.offset
        if base in ("RETURN_VALUE", "RETURN_CONST"):
            returns.append(ins.offset)
    return {
        "code": id(code),
        "entry": entry,
        "entry_op": raw[entry],
        "returns": returns,
        "return_ops": [raw[o] for o in returns],
    }


def main():
    for _ in range(2000):
        for w in WARM:
            w()
    runtime = ctypes.addressof(ctypes.c_char.in_dll(ctypes.pythonapi, "_PyRuntime"))
    out = {
        "pid": os.getpid(),
        "minor": MINOR,
        "runtime": runtime,
        "functions": {name: offsets(f) for name, f in FOUND.items()},
    }
    print(json.dumps(out), flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
