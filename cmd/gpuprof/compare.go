package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gpuprof/gpuprof/validate"
)

// compareCmd lines gpuprof's steps up with a job's own log.
func compareCmd(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("compare", stderr)
	truthPath := fs.String("truth", "", "the job's own log: one JSON object per step with t_start_ns, t_end_ns and fields in seconds")
	stepsPath := fs.String("steps", "", "gpuprof's --jsonl output")
	skip := fs.Int("skip", 5, "leave out truth steps numbered below this (warm-up)")
	tol := fs.Float64("tolerance", 0.05, "largest relative difference of medians that passes")
	required := fs.StringSlice("require", []string{"period", "compute_time", "step_time"}, "fields that must pass")
	rank := fs.Int("rank", -1, "compare only this rank's steps (a job of several ranks: gpuprof's \"rank\", and the truth's if it has one)")
	pid := fs.Int("pid", 0, "compare only this process's steps (gpuprof's \"pid\")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *truthPath == "" || *stepsPath == "" {
		return usageErr("compare needs --truth FILE and --steps FILE")
	}
	truth, err := validate.ReadJSONL(*truthPath)
	if err != nil {
		return fmt.Errorf("read truth: %w", err)
	}
	ours, err := validate.ReadJSONL(*stepsPath)
	if err != nil {
		return fmt.Errorf("read steps: %w", err)
	}
	if *rank >= 0 {
		truth = validate.Only(truth, "rank", float64(*rank), true)
		ours = validate.Only(ours, "rank", float64(*rank), false)
	}
	if *pid > 0 {
		ours = validate.Only(ours, "pid", float64(*pid), false)
	}
	if len(ours) == 0 {
		return fmt.Errorf("no steps of gpuprof's in %s for that --rank or --pid: see its \"rank\" and \"pid\" fields", *stepsPath)
	}
	res := validate.Compare(truth, ours, *skip, *tol, *required)
	fmt.Fprintf(stdout, "steps: gpuprof %d, matched to truth %d, one to one: %v", res.Ours, res.Matched, res.OneToOne)
	if res.Outside > 0 {
		fmt.Fprintf(stdout, " (%d more outside the truth's steps, left out)", res.Outside)
	}
	fmt.Fprintln(stdout)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "field\tsteps\ttruth median\tgpuprof median\tdiff\t\t")
	floor := false
	for _, f := range res.Fields {
		verdict := "off"
		switch {
		case f.ByFloor:
			verdict, floor = "ok*", true
		case f.Pass:
			verdict = "ok"
		case f.Required:
			verdict = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%d\t%.6g\t%.6g\t%+.1f%%\t%s\t\n", f.Name, f.N, f.Truth, f.Ours, 100*(f.Ours-f.Truth)/f.Truth, verdict)
	}
	tw.Flush()
	if floor {
		fmt.Fprintf(stdout, "ok*: a sliver of the step, off by more than %s of itself but less than %s of the period (a capacity: its time was); or a pool within one item\n", pct(*tol), pct(*tol))
	}
	if !res.Pass() {
		return fmt.Errorf("gpuprof's steps do not match the truth within %.0f%%", *tol*100)
	}
	return nil
}

func pct(f float64) string { return fmt.Sprintf("%.0f%%", 100*f) }
