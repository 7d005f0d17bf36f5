package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// keepVerifierLog turns the kernel's verifier rejecting one of gpuprof's
// programs (a kernel that verifies differently from those it was tested
// on) into one line that names a file holding the verifier's whole log:
// hundreds of lines that say why, for a bug report, and that do not belong
// on the terminal. Any other error is returned as it is.
func keepVerifierLog(err error) error {
	var ve *ebpf.VerifierError
	if !errors.As(err, &ve) {
		return err
	}
	var uts unix.Utsname
	unix.Uname(&uts)
	kernel := unix.ByteSliceToString(uts.Release[:])
	f, ferr := os.CreateTemp("", "gpuprof-verifier-*.log")
	if ferr != nil {
		return fmt.Errorf("%w (Linux %s; its whole log could not be kept: %v)", err, kernel, ferr)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "gpuprof %s on Linux %s: %v\n\n", version, kernel, err)
	for _, l := range ve.Log {
		fmt.Fprintln(w, l)
	}
	if werr := errors.Join(w.Flush(), f.Close()); werr != nil {
		os.Remove(f.Name())
		return fmt.Errorf("%w (Linux %s; its whole log could not be kept: %v)", err, kernel, werr)
	}
	return fmt.Errorf("the kernel (Linux %s) rejected a BPF program: %w; the verifier's whole log is in %s: send it with a bug report", kernel, err, f.Name())
}
