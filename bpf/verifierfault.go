//go:build verifierfault

package bpf

import (
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
)

// breakForTest, in a gpuprof built for its own tests (-tags
// verifierfault), has api_entry read memory through its return value, a
// number, where it would return: a program the kernel's verifier rejects
// after walking a path of it, as it would one of gpuprof's on a kernel
// that verifies differently, so that the rejection's path (its log kept,
// one line said) is tested on the real verifier. In place of the exit, one
// instruction for one: no jump's offset changes.
func breakForTest(spec *ebpf.CollectionSpec) {
	p := spec.Programs[gpuprofProgApiEntry]
	for i, ins := range p.Instructions {
		if ins.OpCode.JumpOp() == asm.Exit {
			p.Instructions[i] = asm.LoadMem(asm.R0, asm.R0, 0, asm.DWord)
			return
		}
	}
}
