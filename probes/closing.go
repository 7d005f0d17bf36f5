package probes

import (
	"errors"
	"sync"

	"github.com/cilium/ebpf/link"
)

// returnLink is a return probe's link, which closeLinks closes only once
// every entry probe's is closed.
type returnLink struct{ link.Link }

// closeLinks closes links in two waves, each all at once: the entry
// probes, then the return probes. A call's entry probe closed before its
// return probe leaves no call entered whose return goes unseen (a
// runtime call seen in flight would hide the driver calls under it until
// the runtime generation is raised, ~0.1 s later). One after another, the
// launch and Python wait probes of an H200 DDP rank took 1.0-1.4 s to go
// at each switch off, the job paying for those not yet closed (each close
// waits for the kernel, below).
func closeLinks(links []link.Link) error {
	var entries, returns []link.Link
	for _, l := range links {
		if _, ok := l.(returnLink); ok {
			returns = append(returns, l)
		} else {
			entries = append(entries, l)
		}
	}
	return errors.Join(closeAtOnce(entries), closeAtOnce(returns))
}

// closeAtOnce closes links all at once, in no order: for a detach, where
// no event is read any more, and for each of closeLinks' waves. Each
// close waits for the kernel to see no CPU inside its probes (below): one
// after another, the ~30 links of a DDP job's three processes took ~15 s
// to detach on the H200 host, the job paying for the probes not yet
// closed. The last reference to each goes in the link releaser where
// there is one (releaser.go: a SIGKILL mid-close must not leave probes in
// the job).
func closeAtOnce(links []link.Link) error {
	if len(links) == 0 {
		return nil
	}
	if done, err := theReleaser().closeLinks(links); done {
		return err
	}
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
