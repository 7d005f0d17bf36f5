package main

import (
	"fmt"
	"log/slog"

	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/gpuprof/gpuprof/probes"
)

// targetFlags say which processes may be attached to besides the
// invoking user's own in gpuprof's PID namespace (probes.LookupTarget).
type targetFlags struct {
	policy probes.TargetPolicy
}

func (t *targetFlags) register(fs *pflag.FlagSet) {
	fs.BoolVar(&t.policy.OtherUser, "allow-other-user", false, "attach to processes of another user than the one running gpuprof (under sudo, the one who ran sudo)")
	fs.BoolVar(&t.policy.OtherContainer, "allow-other-container", false, "attach to processes in another PID namespace than gpuprof's (another container), by their PID here")
}

// betweenLookupAndAttach is called with each target once it has been
// looked up, before it is attached to: a test build (testhooks.go) makes
// its PID be reused there.
var betweenLookupAndAttach = func(probes.Target) {}

// lookupTarget checks that pid may be attached to.
func (t *targetFlags) lookupTarget(pid int) (probes.Target, error) {
	tg, err := probes.LookupTarget("/proc", pid, t.policy)
	if err != nil {
		return tg, err
	}
	betweenLookupAndAttach(tg)
	return tg, nil
}

// notAttached is the note for a process found on a GPU (--gpus) that is
// not attached to.
func notAttached(err error) string {
	return fmt.Sprintf("gpuprof: not attached: %v", err)
}

// dropAmbientCaps clears this thread's ambient and inheritable
// capabilities, so that a job gpuprof run starts from it gets none of
// those gpuprof was given to trace it (setpriv --ambient-caps, a
// capability-aware launcher): the job runs with its user's own
// privileges. Capabilities are a thread's, and the job is forked from
// this one (startStopped locks it); gpuprof's own effective set stays.
func dropAmbientCaps() {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		slog.Warn("the job may get gpuprof's ambient capabilities", "err", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	err := unix.Capget(&hdr, &data[0])
	if err == nil {
		data[0].Inheritable, data[1].Inheritable = 0, 0
		err = unix.Capset(&hdr, &data[0])
	}
	if err != nil {
		slog.Warn("the job may get gpuprof's inheritable capabilities", "err", err)
	}
}
