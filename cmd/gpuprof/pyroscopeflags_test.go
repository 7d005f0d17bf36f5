package main

import (
	"errors"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gpuprof/gpuprof/pyroscope"
)

// parsePyroscope parses args as run's flags and returns the Pusher's
// configuration for a job started as python3 train.py.
func parsePyroscope(t *testing.T, args ...string) (pyroscope.Config, error) {
	t.Helper()
	fs := newFlags("run", io.Discard)
	var f profileFlags
	f.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return pyroscope.Config{}, err
	}
	return f.pyroscope.config([]string{"/usr/bin/python3", "-u", "train.py", "--lr", "3e-4"})
}

func writeSecret(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestPyroscopeFlags(t *testing.T) {
	t.Setenv(pyroscopeUserEnv, "")
	t.Setenv(pyroscopePasswordEnv, "")
	t.Setenv(pyroscopeTenantEnv, "")
	cfg, err := parsePyroscope(t, "--pyroscope", "https://profiles.example.com", "--pyroscope-label", "cluster=east",
		"--pyroscope-label", "team=ml-infra", "--pyroscope-interval", "15s")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"cluster": "east", "team": "ml-infra"}
	if cfg.URL != "https://profiles.example.com" || cfg.Service != "train" || cfg.Interval != 15*time.Second || !maps.Equal(cfg.Labels, want) {
		t.Errorf("config %+v; want the URL, service train (from python3 -u train.py), 15s and labels %v", cfg, want)
	}
	if cfg.User != "" || cfg.Password != "" || cfg.TenantID != "" {
		t.Errorf("credentials %q:%q tenant %q with none given", cfg.User, cfg.Password, cfg.TenantID)
	}

	cfg, err = parsePyroscope(t, "--pyroscope", "http://127.0.0.1:4040", "--pyroscope-service", "llama-pretrain")
	if err != nil || cfg.Service != "llama-pretrain" || cfg.Interval != pyroscope.DefaultInterval {
		t.Errorf("--pyroscope-service llama-pretrain: %+v, %v", cfg, err)
	}

	cfg, err = parsePyroscope(t)
	if err != nil || cfg.URL != "" {
		t.Errorf("no --pyroscope: %+v, %v; want the zero config", cfg, err)
	}
}

func TestPyroscopeSecrets(t *testing.T) {
	const url = "http://127.0.0.1:4040"
	t.Setenv(pyroscopeUserEnv, "")
	t.Setenv(pyroscopeTenantEnv, "")

	t.Setenv(pyroscopePasswordEnv, "from-env")
	cfg, err := parsePyroscope(t, "--pyroscope", url, "--pyroscope-user", "123456")
	if err != nil || cfg.User != "123456" || cfg.Password != "from-env" {
		t.Errorf("password from $%s: %q:%q, %v", pyroscopePasswordEnv, cfg.User, cfg.Password, err)
	}

	t.Setenv(pyroscopePasswordEnv, "")
	t.Setenv(pyroscopeUserEnv, "env-user")
	pw := writeSecret(t, "glc_token\n", 0o600)
	tenant := writeSecret(t, "tenant-7\r\n", 0o600)
	cfg, err = parsePyroscope(t, "--pyroscope", url, "--pyroscope-password-file", pw, "--pyroscope-tenant-file", tenant)
	if err != nil || cfg.User != "env-user" || cfg.Password != "glc_token" || cfg.TenantID != "tenant-7" {
		t.Errorf("password and tenant from files, user from $%s: %q:%q tenant %q, %v", pyroscopeUserEnv, cfg.User, cfg.Password, cfg.TenantID, err)
	}

	t.Setenv(pyroscopeTenantEnv, "tenant-env")
	cfg, err = parsePyroscope(t, "--pyroscope", url, "--pyroscope-password-file", pw)
	if err != nil || cfg.TenantID != "tenant-env" {
		t.Errorf("tenant from $%s: %q, %v", pyroscopeTenantEnv, cfg.TenantID, err)
	}
}

// Bad input: a one-line usage error saying what to give.
func TestPyroscopeFlagErrors(t *testing.T) {
	const url = "http://127.0.0.1:4040"
	t.Setenv(pyroscopeUserEnv, "")
	t.Setenv(pyroscopePasswordEnv, "")
	t.Setenv(pyroscopeTenantEnv, "")
	pw := writeSecret(t, "pw\n", 0o600)
	empty := writeSecret(t, "\nsecond line\n", 0o600)
	for _, c := range []struct {
		env  string // a password in the environment
		args []string
		want string
	}{
		{"", []string{"--pyroscope-password", "hunter2"}, "unknown flag: --pyroscope-password"},
		{"", []string{"--pyroscope", "http://u:hunter2@h:4040"}, "leave the credentials out of the URL"},
		{"", []string{"--pyroscope", "127.0.0.1:4040"}, "give an http:// or https:// URL"},
		{"", []string{"--pyroscope", "u:hunter2@127.0.0.1:4040"}, "give an http:// or https:// URL"},
		{"", []string{"--pyroscope", "ftp://h"}, "give an http:// or https:// URL"},
		{"", []string{"--pyroscope-label", "a=b"}, "--pyroscope-label needs --pyroscope URL"},
		{"", []string{"--pyroscope-service", "x"}, "--pyroscope-service needs --pyroscope URL"},
		{"", []string{"--pyroscope", url, "--pyroscope-service", "my job"}, "use letters, digits, '_', '.' and '-', e.g. my_job"},
		{"", []string{"--pyroscope", url, "--pyroscope-label", "cluster"}, "give K=V"},
		{"", []string{"--pyroscope", url, "--pyroscope-label", "rank=3"}, "gpuprof sets rank itself"},
		{"", []string{"--pyroscope", url, "--pyroscope-label", "a=x,y"}, "may not hold ',' or '}'"},
		{"", []string{"--pyroscope", url, "--pyroscope-label", "a-b=x"}, "use letters, digits and '_'"},
		{"", []string{"--pyroscope", url, "--pyroscope-label", "a=1", "--pyroscope-label", "a=2"}, "given twice"},
		{"", []string{"--pyroscope", url, "--pyroscope-interval", "100ms"}, "give 1s to 5m0s"},
		{"", []string{"--pyroscope", url, "--pyroscope-interval", "1h"}, "give 1s to 5m0s"},
		{"", []string{"--pyroscope", url, "--pyroscope-user", "u"}, "give the password in $GPUPROF_PYROSCOPE_PASSWORD"},
		{"", []string{"--pyroscope", url, "--pyroscope-password-file", pw}, "give --pyroscope-user"},
		{"", []string{"--pyroscope", url, "--pyroscope-user", "u", "--pyroscope-password-file", empty}, "first line is empty"},
		{"", []string{"--pyroscope", url, "--pyroscope-user", "u", "--pyroscope-password-file", "/nonexistent/pw"}, "no such file"},
		{"env-pw", []string{"--pyroscope", url, "--pyroscope-user", "u", "--pyroscope-password-file", pw}, "give one"},
	} {
		t.Setenv(pyroscopePasswordEnv, c.env)
		_, err := parsePyroscope(t, c.args...)
		if err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v; want a one-line usage error saying %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error shows the password: %v", c.args, err)
		}
	}
}

func TestDefaultService(t *testing.T) {
	for _, c := range []struct {
		cmdline []string
		want    string
	}{
		{[]string{"python", "train.py"}, "train"},
		{[]string{"/usr/bin/python3.12", "-u", "-X", "dev", "-W", "ignore", "scripts/train_llama.py", "--epochs", "3"}, "train_llama"},
		{[]string{"python3", "-m", "pkg.train", "--lr", "1"}, "pkg.train"},
		{[]string{"python3", "-mpkg.train"}, "pkg.train"},
		{[]string{"python3", "-m", "torch.distributed.run", "--nproc_per_node=8", "pretrain.py"}, "pretrain"},
		{[]string{"python3", "-c", "import torch"}, "python3"},
		{[]string{"/opt/venv/bin/torchrun", "--nnodes", "2", "finetune.py", "--cfg", "x.yaml"}, "finetune"},
		{[]string{"torchrun", "--nproc_per_node", "8", "-m", "pkg.train"}, "pkg.train"},
		{[]string{"accelerate", "launch", "my train.py"}, "my_train"},
		{[]string{"env", "CUDA_VISIBLE_DEVICES=0", "python3", "-u", "train.py"}, "train"},
		{[]string{"uv", "run", "python", "-m", "app.serve"}, "app.serve"},
		{[]string{"./demo-trainer", "--steps", "100"}, "demo-trainer"},
		{[]string{"torchrun", "--standalone"}, "torchrun"},
		{[]string{"/usr/bin/pypy3", "bench.py"}, "bench"},
		{[]string{"sträng"}, "str_ng"},
		{nil, "gpuprof-job"},
	} {
		if got := defaultService(c.cmdline); got != c.want {
			t.Errorf("defaultService(%q) = %q, want %q", c.cmdline, got, c.want)
		}
	}
}

func TestProcCmdline(t *testing.T) {
	got, err := procCmdline(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(os.Args) || got[0] != os.Args[0] || got[len(got)-1] != os.Args[len(os.Args)-1] {
		t.Errorf("procCmdline(self) = %q, want %q", got, os.Args)
	}
}
