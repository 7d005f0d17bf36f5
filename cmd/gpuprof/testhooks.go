//go:build gpuproftesthooks

package main

import (
	"os"
	"strconv"
	"time"

	"github.com/gpuprof/gpuprof/probes"
)

// A build for tests only (badinput_test.go): with GPUPROF_TEST_PAUSE=DIR,
// gpuprof writes DIR/looked-up holding the PID it looked up, then waits
// for DIR/go before attaching, for the test to reuse the PID in between.
// It polls rather than blocking in a read: a blocked thread can make the
// Go runtime start another, which would take a PID of its own.
func init() {
	dir := os.Getenv("GPUPROF_TEST_PAUSE")
	if dir == "" {
		return
	}
	betweenLookupAndAttach = func(t probes.Target) {
		os.WriteFile(dir+"/looked-up", []byte(strconv.Itoa(t.PID)), 0o644)
		for {
			if _, err := os.Stat(dir + "/go"); err == nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}
