package correlate

import "github.com/gpuprof/gpuprof/events"

// Config says how steps are found.
type Config struct {
	// Boundary names the call whose return ends a step (NAME or NAME:DIR for
	// a copy). Empty: found from the calls' repeating pattern.
	Boundary string
	// Thread is the thread whose steps are reported. 0: found.
	Thread uint32
	// LearnMin is how many steps the boundary must have repeated for before
	// steps are reported. 0 means 6.
	LearnMin int
	// NoLaunchCounts says kernel launches were not counted (attach
	// --no-launches): steps are then told apart by their other calls.
	// Otherwise a step must launch kernels, which keeps patterns such as a
	// model's set-up copying its weights one by one from passing for steps.
	NoLaunchCounts bool
	// User describes the user-named probes (--probe), by event API ID.
	User map[uint16]UserProbe
	// BatchSize is the samples a step trains on (--batch-size), for
	// train_capacity and thru. 0: unknown.
	BatchSize int
	// MaxBuffer bounds the events held while the boundary is not yet known
	// (and the review window's): past it the older half goes. 0 means
	// DefaultMaxBuffer.
	MaxBuffer int
	// GPUs, when set, joins each step with the hardware state of its
	// process's GPUs (NVML samples), shared by a job's correlators.
	GPUs *GPUs
}

// UserProbe is what correlate needs of a --probe: its role and a name to
// show.
type UserProbe struct {
	Role events.Role
	Name string
}
