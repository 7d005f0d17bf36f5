package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/gpuprof/gpuprof/pyroscope"
)

// The secrets of --pyroscope come from the environment or a file, never
// the command line: a flag's value shows in ps, /proc/PID/cmdline and
// shell history. So there is no --pyroscope-password, and a URL with
// user:password@ is refused.
const (
	pyroscopeUserEnv     = "GPUPROF_PYROSCOPE_USER"
	pyroscopePasswordEnv = "GPUPROF_PYROSCOPE_PASSWORD"
	pyroscopeTenantEnv   = "GPUPROF_PYROSCOPE_TENANT"
)

// gpuprofLabels are the series and sample labels gpuprof sets itself: a
// --pyroscope-label of one of these names would be a duplicate.
var gpuprofLabels = []string{"service_name", "host", "pid", "rank", "gpu", "group", "phase", "wait_kind", "span_id", "profile_id"}

// The bounds of --pyroscope-interval: a window shorter than a second is
// mostly upload overhead, and a profile is filed at its window's start,
// which the server refuses once an hour old (a window of minutes keeps
// that far off and the flame graphs still live).
const (
	minPyroscopeInterval = time.Second
	maxPyroscopeInterval = 5 * time.Minute
)

// pyroscopeFlags are --pyroscope and the flags that go with it.
type pyroscopeFlags struct {
	fs           *pflag.FlagSet
	url          string
	service      string
	labels       []string
	interval     time.Duration
	user         string
	passwordFile string
	tenantFile   string
}

func (f *pyroscopeFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.url, "pyroscope", "", "push profiles to this Grafana Pyroscope server every --pyroscope-interval, e.g. http://127.0.0.1:4040")
	fs.StringVar(&f.service, "pyroscope-service", "", "the profiles' service_name (default: from the job's command line: the script for python train.py, the module for python -m pkg.mod, else the program)")
	fs.StringArrayVar(&f.labels, "pyroscope-label", nil, "a label K=V on every profile series, e.g. cluster=east (repeat for several)")
	fs.DurationVar(&f.interval, "pyroscope-interval", pyroscope.DefaultInterval, "the window each profile covers, and how often they are pushed")
	fs.StringVar(&f.user, "pyroscope-user", "", "basic auth user (default $"+pyroscopeUserEnv+"); the password comes from $"+pyroscopePasswordEnv+" or --pyroscope-password-file")
	fs.StringVar(&f.passwordFile, "pyroscope-password-file", "", "read the basic auth password from this file (else $"+pyroscopePasswordEnv+")")
	fs.StringVar(&f.tenantFile, "pyroscope-tenant-file", "", "read the tenant ID (X-Scope-OrgID) from this file (else $"+pyroscopeTenantEnv+")")
}

// enabled says whether --pyroscope was given.
func (f *pyroscopeFlags) enabled() bool { return f.url != "" }

// config is the Pusher's configuration for the flags, the service named
// from the job's command line (cmdline) unless --pyroscope-service. With
// no --pyroscope it is the zero Config, or an error if a flag that needs
// it was given.
func (f *pyroscopeFlags) config(cmdline []string) (pyroscope.Config, error) {
	if !f.enabled() {
		for _, name := range []string{"pyroscope-service", "pyroscope-label", "pyroscope-interval", "pyroscope-user", "pyroscope-password-file", "pyroscope-tenant-file"} {
			if f.fs != nil && f.fs.Changed(name) {
				return pyroscope.Config{}, usageErr("--%s needs --pyroscope URL, the server to push to", name)
			}
		}
		return pyroscope.Config{}, nil
	}
	if err := pyroscope.CheckURL(f.url); err != nil {
		if errors.Is(err, pyroscope.ErrCredentialsInURL) {
			return pyroscope.Config{}, usageErr("--pyroscope: leave the credentials out of the URL (they would show in ps): give the user with --pyroscope-user and the password in $%s or --pyroscope-password-file", pyroscopePasswordEnv)
		}
		return pyroscope.Config{}, usageErr("--pyroscope: %v", err) // "pyroscope URL ...: give ..."
	}
	cfg := pyroscope.Config{URL: f.url, Interval: f.interval, Service: f.service}
	if cfg.Service == "" {
		cfg.Service = defaultService(cmdline)
	} else if s := pyroscope.SanitizeService(cfg.Service); s != cfg.Service {
		return cfg, usageErr("--pyroscope-service %q: use letters, digits, '_', '.' and '-', e.g. %s", f.service, s)
	}
	if f.interval < minPyroscopeInterval || f.interval > maxPyroscopeInterval {
		return cfg, usageErr("--pyroscope-interval %v: give %v to %v, e.g. 10s", f.interval, minPyroscopeInterval, maxPyroscopeInterval)
	}
	var err error
	if cfg.Labels, err = parseLabels(f.labels); err != nil {
		return cfg, err
	}
	cfg.User = f.user
	if cfg.User == "" {
		cfg.User = os.Getenv(pyroscopeUserEnv)
	}
	if cfg.Password, err = secret("password", pyroscopePasswordEnv, f.passwordFile, "--pyroscope-password-file"); err != nil {
		return cfg, err
	}
	if cfg.TenantID, err = secret("tenant ID", pyroscopeTenantEnv, f.tenantFile, "--pyroscope-tenant-file"); err != nil {
		return cfg, err
	}
	switch {
	case cfg.User != "" && cfg.Password == "":
		return cfg, usageErr("--pyroscope-user %s: give the password in $%s or --pyroscope-password-file", cfg.User, pyroscopePasswordEnv)
	case cfg.User == "" && cfg.Password != "":
		return cfg, usageErr("a Pyroscope password was given without a user: give --pyroscope-user (or $%s)", pyroscopeUserEnv)
	}
	return cfg, nil
}

// parseLabels reads --pyroscope-label K=V flags.
func parseLabels(flags []string) (map[string]string, error) {
	labels := map[string]string{}
	for _, kv := range flags {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, usageErr("--pyroscope-label %q: give K=V, e.g. cluster=east", kv)
		}
		if slices.Contains(gpuprofLabels, k) {
			return nil, usageErr("--pyroscope-label %s: gpuprof sets %s itself; give another name", kv, k)
		}
		if err := pyroscope.CheckLabel(k, v); err != nil {
			return nil, usageErr("--pyroscope-label %q: %v", kv, err)
		}
		if _, dup := labels[k]; dup {
			return nil, usageErr("--pyroscope-label %s given twice: give each name once", k)
		}
		labels[k] = v
	}
	return labels, nil
}

// secret is a credential from file (its first line) or else the
// environment variable env; "" if neither has it. Both is an error: which
// one meant is not gpuprof's guess.
func secret(what, env, file, flag string) (string, error) {
	fromEnv := os.Getenv(env)
	if file == "" {
		return fromEnv, nil
	}
	if fromEnv != "" {
		return "", usageErr("the Pyroscope %s is both in $%s and %s %s: give one", what, env, flag, file)
	}
	fi, err := os.Stat(file)
	if err != nil {
		return "", usageErr("%s: %v", flag, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", usageErr("%s: %v", flag, err)
	}
	s, _, _ := strings.Cut(string(b), "\n")
	s = strings.TrimSuffix(s, "\r")
	if s == "" {
		return "", usageErr("%s %s: the file's first line is empty: put the %s there", flag, file, what)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		slog.Warn("the Pyroscope "+what+" file can be read by others: chmod 600 it", "file", file, "mode", fi.Mode().Perm().String())
	}
	return s, nil
}

// defaultService names a job's profiles from its command line: the
// script's base name without .py for python train.py, the module for
// python -m pkg.mod, the script a launcher runs (torchrun, accelerate,
// deepspeed, python -m torch.distributed.run), else the program's name.
// Sanitized for the server; "gpuprof-job" if nothing is left.
func defaultService(cmdline []string) string {
	name := serviceFrom(cmdline)
	if s := pyroscope.SanitizeService(name); s != "" {
		return s
	}
	return "gpuprof-job"
}

var pythonExe = regexp.MustCompile(`^(python|pypy)[0-9.]*[a-z]?$`)

// launchers run a Python script given among their own arguments.
var (
	launcherExes    = []string{"torchrun", "accelerate", "deepspeed", "mpirun", "mpiexec", "srun", "horovodrun", "uv", "poetry", "env"}
	launcherModules = []string{"torch.distributed.run", "torch.distributed.launch", "accelerate.commands.launch", "deepspeed.launcher.runner"}
)

func serviceFrom(cmdline []string) string {
	if len(cmdline) == 0 {
		return ""
	}
	exe := filepath.Base(cmdline[0])
	args := cmdline[1:]
	switch {
	case pythonExe.MatchString(exe):
		return pythonService(exe, args)
	case slices.Contains(launcherExes, exe):
		if s := launchedService(args); s != "" {
			return s
		}
	}
	return exe
}

// pythonService reads python's options: -m MODULE, -c, or a script.
func pythonService(exe string, args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "-m" && i+1 < len(args):
			return moduleService(args[i+1], args[i+2:])
		case strings.HasPrefix(a, "-m") && len(a) > 2:
			return moduleService(a[2:], args[i+1:])
		case a == "-c" || strings.HasPrefix(a, "-c") || a == "-":
			return exe // code on the command line or stdin: no name to take
		case a == "-W" || a == "-X" || a == "--check-hash-based-pycs":
			i++ // takes a value
		case strings.HasPrefix(a, "-"):
		default:
			return scriptName(a)
		}
	}
	return exe
}

func moduleService(module string, rest []string) string {
	if slices.Contains(launcherModules, module) {
		if s := launchedService(rest); s != "" {
			return s
		}
	}
	return module
}

// launchedService is the script among a launcher's arguments, or what a
// python among them runs; "" if neither.
func launchedService(args []string) string {
	for i, a := range args {
		if strings.HasSuffix(a, ".py") {
			return scriptName(a)
		}
		if a == "-m" && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") { // torchrun -m pkg.train
			return args[i+1]
		}
		if pythonExe.MatchString(filepath.Base(a)) {
			return pythonService(filepath.Base(a), args[i+1:])
		}
	}
	return ""
}

func scriptName(path string) string { return strings.TrimSuffix(filepath.Base(path), ".py") }

// procCmdline is a running process's command line, for naming the
// service of gpuprof attach.
func procCmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return nil, err
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), nil
}
