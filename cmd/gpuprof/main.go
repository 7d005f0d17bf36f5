// Command gpuprof tells people who train models on GPUs why their job is
// slow, without touching their code: it attaches eBPF uprobes to the CUDA
// libraries of a running process and turns what they see into per-step
// numbers.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/probes"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

const usage = `gpuprof: why is my GPU training job slow?

Usage:
  gpuprof attach --pid PID [flags]     attach to a running job
  gpuprof top --pid PID [flags]        attach, with a full-screen live view (q quits)
  gpuprof run [flags] -- CMD ARGS...   start a job and attach before its first step
  gpuprof probes --pid PID             show what would be attached where, and why not
  gpuprof gpus                         the GPUs' hardware state as gpuprof reads it (NVML)
  gpuprof replay TRACE [flags]         cut a recorded trace (--record) into steps
  gpuprof report TRACE --html OUT      draw a recorded trace as an HTML report
  gpuprof compare --truth F --steps F  line gpuprof's steps up with a job's own log
  gpuprof version

Run 'gpuprof COMMAND --help' for a command's flags.
`

func main() {
	if probes.IsReleaser() {
		os.Exit(probes.RunReleaser())
	}
	// Uprobe links are made and let go of in a copy of this binary, which
	// no signal meant for gpuprof reaches (probes/releaser.go).
	probes.UseReleaser("/proc/self/exe")
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// errUsage marks errors in how gpuprof was called (exit status 2).
var errUsage = errors.New("usage")

func run(args []string, stdout, stderr io.Writer) int {
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: logLevel()})))
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	endProfile, err := startSelfProfile()
	if err != nil {
		fmt.Fprintf(stderr, "gpuprof: %v\n", err)
		return 1
	}
	defer endProfile()
	switch args[0] {
	case "attach":
		err = attachCmd(ctx, args[1:], stdout, stderr)
	case "top":
		err = topCmd(ctx, args[1:], stdout, stderr)
	case "run":
		err = runCmd(ctx, args[1:], stdout, stderr)
	case "probes":
		err = probesCmd(args[1:], stdout, stderr)
	case "gpus":
		err = gpusCmd(args[1:], stdout, stderr)
	case "replay":
		err = replayCmd(args[1:], stdout, stderr)
	case "report":
		err = reportCmd(args[1:], stdout, stderr)
	case "compare":
		err = compareCmd(args[1:], stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "gpuprof %s\n", version)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		fmt.Fprintf(stderr, "gpuprof: unknown command %q; run gpuprof --help\n", args[0])
		return 2
	}
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	case errors.Is(err, errHelp):
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintf(stderr, "gpuprof: %v\n", err)
		return 2
	}
	fmt.Fprintf(stderr, "gpuprof: %v\n", err)
	return 1
}

// exitError carries an exit status that needs no further message, such as
// the status of the command gpuprof run started.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func logLevel() slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(os.Getenv("GPUPROF_LOG"))); err != nil {
		return slog.LevelWarn
	}
	return l
}

func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// errHelp ends a command after its --help was printed (exit status 0).
var errHelp = errors.New("help shown")

// newFlags returns a subcommand's flag set, printing its help to stderr.
func newFlags(name string, stderr io.Writer) *pflag.FlagSet {
	fs := pflag.NewFlagSet(name, pflag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}

// parseFlags parses a subcommand's arguments.
func parseFlags(fs *pflag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return errHelp
		}
		return usageErr("%v", err)
	}
	return nil
}
