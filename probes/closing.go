package probes

import (
	"errors"
	"sync"

	"github.com/cilium/ebpf/link"
)

// closeLinks closes links one after another, in order, returning every
// error. The order matters while the target is traced: a call's entry
// probe closed before its return probe leaves no call entered whose
// return goes unseen (a runtime call seen in flight would hide the driver
// calls under it until the runtime generation is raised, ~0.1 s later).
func closeLinks(links []link.Link) error {
	var errs []error
	for _, l := range links {
		errs = append(errs, l.Close())
	}
	return errors.Join(errs...)
}

// closeAtOnce closes links all at once, for a detach, where no event is
// read any more. Each close waits for the kernel to see no CPU inside its
// probes (below): one after another, the ~30 links of a DDP job's three
// processes took ~15 s to detach on the H200 host, the job paying for
// the probes not yet closed.
func closeAtOnce(links []link.Link) error {
	errs := make([]error, len(links))
	var wg sync.WaitGroup
	for i, l := range links {
		wg.Go(func() { errs[i] = l.Close() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// backgroundCloser closes links off the event loop. Closing a uprobe link
// waits for the kernel to see no CPU inside the probe (~0.1 s on the dev
// VM, more on a busy host): on the H200 host the eight twin decisions of
// a DDP job held the loop ~5 s. Nothing waits on a close but Detach and
// Close, which must leave the target as it was.
type backgroundCloser struct {
	mu      sync.Mutex
	pending int
	idle    *sync.Cond // on mu: pending fell to 0
}

func newBackgroundCloser() *backgroundCloser {
	c := &backgroundCloser{}
	c.idle = sync.NewCond(&c.mu)
	return c
}

// close closes links on a goroutine of its own, then runs after (if not
// nil); fail hears of a link that would not close.
func (c *backgroundCloser) close(links []link.Link, after func(), fail func(error)) {
	if len(links) == 0 && after == nil {
		return
	}
	c.mu.Lock()
	c.pending++
	c.mu.Unlock()
	go func() {
		if err := closeLinks(links); err != nil {
			fail(err)
		}
		if after != nil {
			after()
		}
		c.mu.Lock()
		c.pending--
		if c.pending == 0 {
			c.idle.Broadcast()
		}
		c.mu.Unlock()
	}()
}

// wait returns once every close begun has ended.
func (c *backgroundCloser) wait() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for c.pending > 0 {
		c.idle.Wait()
	}
}
