package probes

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/gpuprof/gpuprof/bpf"
)

// attachPlan attaches every probe of a plan to pid.
func attachPlan(objs *bpf.Objects, pid int, lp LibraryPlan) ([]link.Link, error) {
	return attachPrograms(objs, pid, lp, slices.Concat(callPrograms, []Program{ProgLaunch, ProgLibLoad})...)
}

// attachPrograms attaches the plan's probes that run the given programs, with
// one uprobe_multi link per program, so that a library costs a handful of
// links rather than one per symbol (closing a single uprobe link takes
// ~75-100 ms). On error the links made so far are closed: no half-attached
// library.
func attachPrograms(objs *bpf.Objects, pid int, lp LibraryPlan, progs ...Program) ([]link.Link, error) {
	type group struct {
		addrs, cookies []uint64
	}
	groups := map[Program]*group{}
	for _, p := range lp.Probes {
		for _, prog := range p.Programs() {
			g := groups[prog]
			if g == nil {
				g = &group{}
				groups[prog] = g
			}
			g.addrs = append(g.addrs, p.Address())
			g.cookies = append(g.cookies, p.Cookie())
		}
	}
	if len(groups) == 0 {
		return nil, nil
	}
	var links []link.Link
	undo := func(err error) ([]link.Link, error) {
		closeAtOnce(links)
		return nil, err
	}
	for _, prog := range progs {
		g := groups[prog]
		if g == nil {
			continue
		}
		opts := &link.UprobeMultiOptions{Addresses: g.addrs, Cookies: g.cookies, PID: uint32(pid)}
		var l link.Link
		var err error
		path := lp.File.HostPath
		switch prog {
		case ProgEntry:
			l, err = attachUprobes(path, objs.ApiEntry, opts, false)
		case ProgReturn:
			l, err = attachUprobes(path, objs.ApiReturn, opts, true)
			if err == nil {
				l = returnLink{l}
			}
		case ProgLaunch:
			l, err = attachUprobes(path, objs.LaunchEntry, opts, false)
		case ProgLibLoad:
			l, err = attachUprobes(path, objs.LibLoad, opts, false)
		case ProgInstant:
			l, err = attachUprobes(path, objs.ApiInstant, opts, false)
		}
		if err != nil {
			if errors.Is(err, ebpf.ErrNotSupported) {
				err = fmt.Errorf("%w: gpuprof needs uprobe_multi links (Linux 6.6 or newer)", err)
			}
			return undo(fmt.Errorf("attach %s probes to %s in PID %d: %w", prog, lp.File.Path, pid, err))
		}
		links = append(links, l)
	}
	return links, nil
}

// AttachBare attaches the empty program at the given file offsets of path,
// for measuring what a bare uprobe costs.
func AttachBare(objs *bpf.Objects, path string, pid int, offsets []uint64) (link.Link, error) {
	ex, err := link.OpenExecutable(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	l, err := ex.UprobeMulti(nil, objs.Bare, &link.UprobeMultiOptions{Addresses: offsets, PID: uint32(pid)})
	if err != nil {
		return nil, fmt.Errorf("attach bare probe to %s: %w", path, err)
	}
	return l, nil
}
