package pymem

import (
	"fmt"
)

// maxBytecode bounds the bytecode read (bytes): a function of a million
// instructions is not one; the size is garbage.
const maxBytecode = 1 << 22

// bytecode reads the bytecode the interpreter runs for the code object
// at code: 3.10 the bytes of co_code, 3.11+ co_code_adaptive (the copy it
// specialises in place; co_code there is made on demand from it). It
// returns the bytecode's address in the target and its bytes.
func (r *Reader) bytecode(code uint64) (uint64, []byte, error) {
	l := r.l
	var start, n uint64
	if r.minor == 10 {
		b, err := r.ptr(code + l.CodeCode)
		if err != nil {
			return 0, nil, fmt.Errorf("co_code: %w", err)
		}
		if err := r.checkType(b, "bytes"); err != nil {
			return 0, nil, fmt.Errorf("co_code: %w", err)
		}
		if n, err = r.ptr(b + l.VarSize); err != nil {
			return 0, nil, fmt.Errorf("co_code's size: %w", err)
		}
		start = b + l.BytesData
	} else {
		units, err := r.ptr(code + l.VarSize)
		if err != nil {
			return 0, nil, fmt.Errorf("code size: %w", err)
		}
		n, start = units*2, code+l.CodeAdaptive
	}
	if n == 0 || n%2 != 0 || n > maxBytecode {
		return 0, nil, fmt.Errorf("implausible bytecode size %d bytes", int64(n))
	}
	buf := make([]byte, n)
	if err := r.read(start, buf); err != nil {
		return 0, nil, fmt.Errorf("bytecode: %w", err)
	}
	return start, buf, nil
}

// scan decodes bytecode of CPython 3.minor and returns the byte offsets of
// the instruction each call starts with and of every return instruction.
// Each instruction is a code unit (opcode, oparg) and, on 3.11+, the
// inline caches its opcode has: stepping over them is what keeps a
// cache's data from being read as an instruction.
func scan(minor int, code []byte) (entry int, returns []int, err error) {
	ops, ok := opTables[minor]
	if !ok {
		return 0, nil, fmt.Errorf("no opcode table for 3.%d", minor)
	}
	if len(code) == 0 {
		return 0, nil, fmt.Errorf("no bytecode") // 3.10's entry, offset 0, would be past it
	}
	entry = -1
	if minor == 10 {
		entry = 0 // no RESUME: a call starts at the first instruction
	}
	ext := 0 // oparg bits from EXTENDED_ARGs before this instruction
	i := 0
	for i+1 < len(code) {
		op, arg := code[i], int(code[i+1])
		info := ops[op]
		switch info.kind {
		case opUndefined:
			return 0, nil, fmt.Errorf("offset %d: opcode %d is none of CPython 3.%d's", i, op, minor)
		case opCache:
			return 0, nil, fmt.Errorf("offset %d: CACHE where an instruction starts", i)
		case opInstrumented:
			return 0, nil, fmt.Errorf("offset %d: instrumented opcode %d: sys.monitoring (or sys.settrace, a profiler, coverage) is watching this function, and its bytecode cannot be read as the interpreter runs it", i, op)
		case opExecutor:
			return 0, nil, fmt.Errorf("offset %d: ENTER_EXECUTOR: the tier-2 optimiser (JIT) rewrote this function, and what it replaced is not in the bytecode", i)
		case opResume:
			if entry < 0 && ext<<8|arg == 0 {
				entry = i
			}
		case opReturn:
			returns = append(returns, i)
		}
		if info.kind == opExtendedArg {
			ext = ext<<8 | arg
		} else {
			ext = 0
		}
		i += 2 * (1 + int(info.caches))
	}
	if i != len(code) {
		return 0, nil, fmt.Errorf("the last instruction's caches run %d bytes past the bytecode's end", i-len(code))
	}
	if entry < 0 {
		return 0, nil, fmt.Errorf("no RESUME with oparg 0")
	}
	return entry, returns, nil
}
