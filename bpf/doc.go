// Package bpf holds gpuprof's eBPF programs (gpuprof.bpf.c) and the Go
// bindings bpf2go generates from them. The generated .go and .o files are
// committed together so that a fresh clone builds without clang; `make
// generate` rebuilds them and `make test` fails when they are stale.
package bpf

//go:generate go tool bpf2go -cc clang -cflags "-O2 -g -Wall -Wpadded -Werror -D__TARGET_ARCH_x86 -I/usr/include/x86_64-linux-gnu" -target amd64 -type event -type name_event -type site_event -type kernel_key -type py_layout -type py_event -type py_site_key -type py_site -type wait_key -type wait_count -type twin_key -type stack_event -type stack_reason -type stack_flag -type event_kind -type cookie_layout -type layer -type out_kind -type stat -type loss gpuprof gpuprof.bpf.c
