# check_prologues.awk: fails unless every exported function of a library
# starts with `endbr64` directly followed by `push %rbp`.
#
# gpuprof places some probes past the endbr64 on the push of the frame
# pointer (an instruction uprobes emulate instead of single-stepping), so
# the stand-ins must have the prologue CET-enabled builds such as CPython
# have. Two exports at one address would also make one probe fire for two
# names, so that fails too.
#
# Input: `objdump -T LIB`, a line "#disassembly", then `objdump -d
# --no-show-raw-insn LIB`. Set lib=NAME for the messages.

function addr(s) {
	sub(/^0+/, "", s)
	return s
}

/^#disassembly$/ { disasm = 1; next }

# objdump -T: exported functions are defined (not *UND*) in .text:
#   0000000000001139 g    DF .text  0000000000000005  libcudart.so.13 cudaFree
!disasm && / DF \.text/ {
	a = addr($1)
	if (a in name) {
		printf "%s: %s shares its address with %s\n", lib, $NF, name[a]
		bad++
	}
	name[a] = $NF
	next
}

# objdump -d: "    1139:\tendbr64"; remember each instruction and the one after.
disasm && /^ *[0-9a-f]+:\t/ {
	split($0, f, "\t")
	a = f[1]
	sub(/^ */, "", a)
	sub(/:$/, "", a)
	a = addr(a)
	insn[a] = f[2]
	if (prev != "")
		next_of[prev] = a
	prev = a
}

END {
	n = 0
	for (a in name) {
		n++
		first = insn[a]
		second = (a in next_of) ? insn[next_of[a]] : ""
		if (first !~ /^endbr64 *$/ || second !~ /^push +%rbp *$/) {
			printf "%s: %s starts with \"%s\", \"%s\"; want endbr64, push %%rbp\n",
			    lib, name[a], first, second
			bad++
		}
	}
	if (n == 0) {
		printf "%s: no exported functions found\n", lib
		exit 1
	}
	if (bad) exit 1
	printf "%s: all %d exported functions start with endbr64; push %%rbp\n", lib, n
}
