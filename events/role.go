package events

// Role is what a user-named function is to the pipeline (--probe
// ROLE=...): probes parse it, correlate reads each call of the function
// by it.
type Role string

const (
	RoleDispatch Role = "dispatch" // waiting for samples (a Ray queue get)
	RoleData     Role = "data"     // the data iterator
	RoleFetch    Role = "fetch"    // fetching samples (a Mooncake get)
	RoleCompute  Role = "compute"  // the step's compute
	RoleInfer    Role = "infer"    // one inference-engine generate call
	RoleStep     Role = "step"     // its return ends a step
	// RoleGet is a whole get from a queue: a wait of the kind of the
	// waits inside it (samples for a pool, batches for a DataLoader), so
	// that the work a get does besides blocking (unpickling, rebuilding a
	// shared tensor) counts as waiting for what it gets.
	RoleGet Role = "get"
)

// Roles are the roles a --probe may name, in the order usage lists them.
func Roles() []Role {
	return []Role{RoleDispatch, RoleData, RoleFetch, RoleCompute, RoleInfer, RoleStep, RoleGet}
}
