package control

import "github.com/gpuprof/gpuprof/correlate"

// Output is where the loop sends what it finds, from the goroutine that
// adds events.
type Output interface {
	// Step takes each step as it is cut, its rank set where known.
	Step(s correlate.Step)
	// Note takes a finding worth a line of its own: a step boundary found
	// or moved.
	Note(msg string)
	// Processes says how many processes have sent events, as another
	// comes (a live line names the process of each step once there are
	// several).
	Processes(n int)
}
