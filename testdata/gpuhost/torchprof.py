"""Run a Python script under torch.profiler, toggled from outside: the
comparison overhead.py's @torchprof configuration and bench.py make with
gpuprof.

  python3 torchprof.py [--status FILE] [--from-start] SCRIPT ARGS...

SCRIPT runs as __main__ (runpy), in this process. SIGUSR1 starts
torch.profiler.profile(activities=[CPU, CUDA]) (prof.start(), no
schedule: every event is kept), SIGUSR2 stops it (prof.stop(), which
disables the profiler and parses its results into events: that processing
is part of what profiling costs the job, and runs on the job's main
thread). Nothing is exported. --from-start starts the profiler before
SCRIPT and stops it when SCRIPT ends (a return, sys.exit, or os._exit,
which hf_trainer.py calls: it is wrapped to stop the profiler first).

Each start and stop appends a line to --status FILE, monotonic ns (the
clock of the truth logs):
  started T_SIGNAL T_DONE
  stopped T_SIGNAL T_STOPPED T_DONE EVENTS   (T_DONE: after counting the
                                             parsed events, EVENTS of them)
  error T MESSAGE
The handlers run on the main thread between bytecodes: the training
loops of spec_pipeline.py, launchbound.py and the HF Trainer run there, so
a signal is handled within one CUDA sync or lock wait of its sending.
"""
import os, runpy, signal, sys, time

argv = sys.argv[1:]
status, from_start = None, False
while argv and argv[0].startswith("--"):
    if argv[0] == "--from-start":
        from_start, argv = True, argv[1:]
    elif argv[0] == "--status" and len(argv) > 1:
        status, argv = argv[1], argv[2:]
    elif argv[0] == "--":
        argv = argv[1:]
        break
    else:
        sys.exit(f"torchprof.py: unknown flag {argv[0]}")
if not argv:
    sys.exit("usage: torchprof.py [--status FILE] [--from-start] SCRIPT ARGS...")

prof = None


def note(*fields):
    if status:
        with open(status, "a") as f:
            f.write(" ".join(str(x) for x in fields) + "\n")


def start(*_):
    global prof
    t0 = time.monotonic_ns()
    if prof is not None:
        note("error", t0, "already-started")
        return
    try:
        import torch.profiler as tp
        p = tp.profile(activities=[tp.ProfilerActivity.CPU, tp.ProfilerActivity.CUDA])
        p.start()
    except Exception as e:  # never into the job's own code
        note("error", t0, repr(e).replace("\n", " ")[:300])
        return
    prof = p
    note("started", t0, time.monotonic_ns())


def stop(*_):
    global prof
    t0 = time.monotonic_ns()
    if prof is None:
        note("error", t0, "not-started")
        return
    p, prof = prof, None
    try:
        p.stop()
        t1 = time.monotonic_ns()
        # The parsed events: counting them makes sure the processing was
        # done here, whichever torch defers it.
        n = len(p.events() or [])
    except Exception as e:
        note("error", t0, repr(e).replace("\n", " ")[:300])
        return
    note("stopped", t0, t1, time.monotonic_ns(), n)


# Before anything else: SIGUSR1's default action ends the process.
signal.signal(signal.SIGUSR1, start)
signal.signal(signal.SIGUSR2, stop)

script = argv[0]
sys.argv = argv
sys.path[0] = os.path.dirname(os.path.abspath(script))
if from_start:
    _exit = os._exit

    def exit_stopped(code):
        stop()
        _exit(code)

    os._exit = exit_stopped
    start()
    try:
        runpy.run_path(script, run_name="__main__")
    finally:
        if prof is not None:
            stop()
else:
    runpy.run_path(script, run_name="__main__")
