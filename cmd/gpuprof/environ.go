package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/gpuprof/gpuprof/events"
)

// environ is a process's environment as it was started (/proc/PID/environ).
func environ(pid uint32) (map[string]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// processInfo is the event that says who a process is in a distributed
// job: its rank, local rank and the world's size as torchrun (and
// accelerate, DeepSpeed and others after it) set them in its environment.
// ok is false for a process that has none.
func processInfo(pid uint32) (events.Event, bool) {
	env, err := environ(pid)
	if err != nil {
		return events.Event{}, false
	}
	rank, err := strconv.Atoi(env["RANK"])
	if err != nil || rank < 0 {
		return events.Event{}, false
	}
	e := events.Event{Kind: events.KindProcess, PID: pid, Args: [5]uint64{uint64(rank) + 1}}
	if local, err := strconv.Atoi(env["LOCAL_RANK"]); err == nil && local >= 0 {
		e.Args[1] = uint64(local) + 1
	}
	if world, err := strconv.Atoi(env["WORLD_SIZE"]); err == nil && world > 0 {
		e.Args[2] = uint64(world)
	}
	return e, true
}
