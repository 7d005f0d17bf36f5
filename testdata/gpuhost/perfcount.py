"""The CPU work of a process's threads, counted by perf_event_open(2): for
twin.py, a lens on what an attach costs that the host's speed does not move.

On the GPU host the step rate of one job moves ~10% from second to second,
each CPU on its own: the time a step's work takes is the host's (its cores'
speed, other tenants). The instructions a step retires are the job's own,
with what the uprobes' traps add to them (counted in the kernel too); the
cycles a step takes are its CPU time at whatever clock the core ran, not
counting the time the hypervisor took. Where the host has no PMU (no
/sys/bus/event_source/devices/cpu) only the software task clock (CPU ns)
is there, and it moves with the host as the step rate does.

  c = ThreadCounters(pid); c.read() -> {"instructions": n, "cycles": n, "task_clock_ns": n}

Counters are per thread (a counter opened with inherit counts live child
threads only once they exit); read() opens them for threads born since the
last read and keeps the final counts of threads that have ended.
"""
import ctypes, os, struct

PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE = 0, 1
HW_CPU_CYCLES, HW_INSTRUCTIONS = 0, 1
SW_TASK_CLOCK = 1
EXCLUDE_HV = 1 << 6
PERF_FLAG_FD_CLOEXEC = 8
NR_PERF_EVENT_OPEN = 298  # x86_64
EVENTS = {"instructions": (PERF_TYPE_HARDWARE, HW_INSTRUCTIONS), "cycles": (PERF_TYPE_HARDWARE, HW_CPU_CYCLES),
          "task_clock_ns": (PERF_TYPE_SOFTWARE, SW_TASK_CLOCK)}
_libc = ctypes.CDLL(None, use_errno=True)


def has_pmu():
    return os.path.isdir("/sys/bus/event_source/devices/cpu")


def _open(tid, kind, config):
    # struct perf_event_attr, PERF_ATTR_SIZE_VER0 (64 bytes): type, size,
    # config, sample_period, sample_type, read_format, flags, wakeup_events,
    # bp_type, config1. Enabled from the open, user and kernel counted.
    attr = struct.pack("IIQQQQQIIQ", kind, 64, config, 0, 0, 0, EXCLUDE_HV, 0, 0, 0)
    buf = ctypes.create_string_buffer(attr, 64)
    fd = _libc.syscall(NR_PERF_EVENT_OPEN, buf, tid, -1, -1, PERF_FLAG_FD_CLOEXEC)
    return fd if fd >= 0 else None


class ThreadCounters:
    """Counts of EVENTS (those the host has) over every thread of pid."""

    def __init__(self, pid):
        self.pid = pid
        self.events = {k: v for k, v in EVENTS.items() if has_pmu() or v[0] == PERF_TYPE_SOFTWARE}
        self.fds = {}  # (tid, event) -> fd
        self.ended = {k: 0 for k in self.events}
        self._scan()

    def _scan(self):
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except OSError:
            return
        for tid in tids:
            for name, (kind, config) in self.events.items():
                if (tid, name) not in self.fds:
                    fd = _open(tid, kind, config)
                    if fd is not None:
                        self.fds[(tid, name)] = fd

    def read(self):
        self._scan()
        out = dict(self.ended)
        for (tid, name), fd in list(self.fds.items()):
            try:
                n = struct.unpack("Q", os.read(fd, 8))[0]
            except OSError:
                continue
            out[name] += n
            if not os.path.exists(f"/proc/{self.pid}/task/{tid}"):
                # Its count is final: keep it, close the counter.
                self.ended[name] += n
                os.close(fd)
                del self.fds[(tid, name)]
        return out

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
