package main

import "github.com/gpuprof/gpuprof/probes"

// steered is the session as the control loop steers it (control.Probes):
// the step thread is the session's, launch and wait sampling its
// Sampling's, record narrowing its Records'.
type steered struct {
	*probes.Session
	*probes.Sampling
}

func steer(sess *probes.Session) steered { return steered{sess, sess.Sampling()} }

// NarrowRecords says pid's boundary is no event record.
func (s steered) NarrowRecords(pid int) { s.Session.Records().Narrow(pid) }
