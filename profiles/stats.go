package profiles

// Stats are a Builder's counts since it was made: how much of the steps'
// GPU time the GPU profile holds, and what its bounds folded or dropped.
type Stats struct {
	// StepsCovered are the steps whose GPU time went to launch stacks;
	// GPUCoveredNS their GPU time, what the GPU profile's gpu_time sums to.
	StepsCovered int
	GPUCoveredNS uint64
	// StepsCarried are steps with launches counted but none of them
	// sampled: their GPU time went to the next covered step's stacks
	// (and is in GPUCoveredNS), StepsCovered not counting them.
	StepsCarried int
	// StepsNoStacks are the steps left out of the GPU profile, no launch
	// sampled in them (launch counting was off); GPUNoStacksNS their GPU
	// time.
	StepsNoStacks int
	GPUNoStacksNS uint64
	// StepsNoGPUTime had launch stacks but no GPU time measured: their
	// launches count, with gpu_time_source "none".
	StepsNoGPUTime int
	// StacksFolded are samples whose new stack came past MaxStacks, and
	// SamplesFolded (stack, labels) pairs past MaxSamples: both went to
	// "[other stacks]".
	StacksFolded, SamplesFolded int
	// Unplaced are samples labelled outside any step at once, their
	// window holding MaxPending samples already.
	Unplaced int
	// Late are samples (or a blocked stretch's part, LateNS of it) of a
	// window already returned: a wait longer than the lag bound ends
	// after its first windows were sent. Dropped.
	Late   int
	LateNS uint64
	// OffCPUInWaits are off-CPU samples dropped, inside a probed wait
	// that reports that time itself; CPUInWaits CPU samples inside one,
	// labelled with its wait_kind.
	OffCPUInWaits, CPUInWaits int
	// Profiles are the profiles Flush returned.
	Profiles int
}
