package testenv

import "github.com/cilium/ebpf/link"

// UprobeLinksOn returns the uprobe_multi links anyone holds that fire
// only in pid: what a probe left on a process looks like to the kernel.
func UprobeLinksOn(pid int) ([]*link.Info, error) {
	var out []*link.Info
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.UprobeMultiType {
			continue // gone meanwhile, or not a uprobe
		}
		if p, ok := info.UprobeMulti().Pid(); ok && int(p) == pid {
			out = append(out, info)
		}
	}
	return out, it.Err()
}
