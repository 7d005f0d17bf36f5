//go:build !verifierfault

package bpf

import "github.com/cilium/ebpf"

// breakForTest leaves the programs as they are (verifierfault.go breaks
// one, for the tests).
func breakForTest(*ebpf.CollectionSpec) {}
