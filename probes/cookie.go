package probes

import (
	"github.com/gpuprof/gpuprof/bpf"
	"github.com/gpuprof/gpuprof/cudaapi"
)

// Attach cookies. Each probe on a CUDA call is attached with a 64-bit
// cookie that tells its BPF program what it probes: the entry point's ID
// and layer, what to read through an output pointer at return, which
// arguments are the kernel and its name, its twin group, whether to note
// the caller. Where each field lies is gpuprof.bpf.c's enum cookie_layout,
// generated into bpf.Cookie*: the programs decode with the same constants
// this file packs with, and no other Go code packs a cookie.

// cookieField places v in a field of the cookie. The fields never
// overflow (TestCookieFieldsFit): the mask only keeps a wrong value from
// spilling into the next field.
func cookieField(v, shift, mask uint64) uint64 { return (v & mask) << shift }

// cookieArg is an argument index as a cookie field holds it: past the
// arguments for none.
func cookieArg(i int8) uint64 {
	if i == cudaapi.NoArg {
		return bpf.CookieNoArg
	}
	return uint64(i)
}

// Cookie is the attach cookie the BPF programs decode.
func (p Probe) Cookie() uint64 {
	a := p.API
	c := cookieField(uint64(a.ID), bpf.CookieAPIShift, bpf.CookieAPIMask) |
		cookieField(uint64(a.Layer), bpf.CookieLayerShift, bpf.CookieLayerMask) |
		cookieField(uint64(a.Out), bpf.CookieOutShift, bpf.CookieOutMask) |
		cookieField(cookieArg(a.OutArg), bpf.CookieOutArgShift, bpf.CookieOutArgMask) |
		cookieField(twinCode(a), bpf.CookieTwinShift, bpf.CookieTwinMask)
	if a.FuncArg > 0 {
		c |= cookieField(uint64(a.FuncArg), bpf.CookieFuncArgShift, bpf.CookieFuncArgMask)
	}
	switch {
	case a.NameArg != cudaapi.NoArg:
		c |= cookieField(uint64(a.NameArg+1), bpf.CookieNameArgShift, bpf.CookieNameArgMask)
	case a.Class == cudaapi.ClassKernelName:
		// cuKernelGetFunction: a name event with no name, mapping a
		// function back to the kernel whose name was seen.
		c |= cookieField(bpf.CookieNoArg, bpf.CookieNameArgShift, bpf.CookieNameArgMask)
	}
	if a.Class == cudaapi.ClassGraphLaunch {
		c |= cookieField(1, bpf.CookieGraphShift, bpf.CookieGraphMask)
	}
	if a.Class == cudaapi.ClassSync || a.Class == cudaapi.ClassCopy {
		// Their stacks are the wait profile's CUDA waits (bpf.Settings.StackCalls).
		c |= cookieField(1, bpf.CookieStackShift, bpf.CookieStackMask)
	}
	if a.Class == cudaapi.ClassRecord && a.Layer == cudaapi.LayerRuntime {
		c |= cookieField(1, bpf.CookieCallerShift, bpf.CookieCallerMask) // the record's caller tells whose it is (recordsites.go)
	}
	return c
}

// withoutCaller is a record function probe's cookie for a probe on one of
// its call sites: no return address is on the stack yet there, so there
// is no caller to note.
func withoutCaller(c uint64) uint64 {
	return c &^ cookieField(bpf.CookieCallerMask, bpf.CookieCallerShift, bpf.CookieCallerMask)
}

// twinCode is a call's twin group as the BPF programs see it
// (COOKIE_TWIN): a driver call is counted as a runtime call's twin only
// under a runtime call of its own group.
func twinCode(a cudaapi.API) uint64 { return twinGroupCode(twinGroup(a)) }

// twinGroupCode is twin group g's COOKIE_TWIN code, 0 for none; also the
// index of the group's runtime generation (rt_gen).
func twinGroupCode(g string) uint64 {
	switch g {
	case twinCopies:
		return 1
	case twinSyncs:
		return 2
	case twinEvents:
		return 3
	}
	return 0
}

// waitCookie is a Python wait probe's cookie: which wait function it is
// on (WaitFunc), whole, as py_lock_entry reads it.
func waitCookie(wait uint16) uint64 { return uint64(wait) }
