package pymem

// The bytecode Function scans is the interpreter's own, rewritten in place
// as it runs: 3.11+ follow most instructions with inline CACHE code units
// and replace them by specialised forms (numbered apart, with the same
// caches). Decoding it needs each version's opcode numbers and cache
// counts. The tables below were generated from each interpreter's opcode
// and dis modules (opcode._inline_cache_entries, _specializations,
// dis._all_opmap); TestOpcodes holds them to the live interpreters, and
// they agree with _PyOpcode_Caches and _PyOpcode_Deopt in each version's
// internal headers.

// opKind is what the scan does on meeting an opcode.
type opKind uint8

const (
	// Not an opcode of this version: not bytecode, or a table out of date.
	opUndefined opKind = iota
	opPlain
	// CACHE: only ever inside an instruction's inline cache.
	opCache
	// EXTENDED_ARG: widens the next instruction's oparg.
	opExtendedArg
	// RESUME and its specialised forms.
	opResume
	// RETURN_VALUE, RETURN_CONST (3.12+).
	opReturn
	// INSTRUMENTED_* (3.12+): sys.monitoring, or sys.settrace and the
	// profilers built on it, put them there. INSTRUMENTED_LINE and
	// INSTRUMENTED_INSTRUCTION keep the opcode they replace in a side
	// table, so neither the instruction nor its caches can be told.
	opInstrumented
	// ENTER_EXECUTOR (3.13): the tier-2 optimiser replaced a
	// JUMP_BACKWARD (one cache) or an EXTENDED_ARG before one (none); only
	// the executor, not the bytecode, says which.
	opExecutor
)

// opFamily is one instruction and its specialised forms.
type opFamily struct {
	base   string // its name in the opcode module; "" for the rest
	kind   opKind
	caches uint8   // inline CACHE code units after each instruction
	ops    []uint8 // the base opcode, then its specialised forms'
}

// opInfo is what the scan knows of one opcode.
type opInfo struct {
	kind   opKind
	caches uint8
	base   string
}

// opTables is each version's families by opcode.
var opTables = map[int]*[256]opInfo{
	10: expand(opcodes310), 11: expand(opcodes311), 12: expand(opcodes312), 13: expand(opcodes313),
}

func expand(fams []opFamily) *[256]opInfo {
	var t [256]opInfo
	for _, f := range fams {
		for _, op := range f.ops {
			t[op] = opInfo{kind: f.kind, caches: f.caches, base: f.base}
		}
	}
	return &t
}

// opRange is the opcodes lo to hi, both included.
func opRange(lo, hi uint8) []uint8 {
	var ops []uint8
	for op := int(lo); op <= int(hi); op++ {
		ops = append(ops, uint8(op))
	}
	return ops
}

// opcodes310: no caches, no specialisation, no RESUME (a call starts at
// offset 0).
var opcodes310 = []opFamily{
	{"RETURN_VALUE", opReturn, 0, []uint8{83}},
	{"EXTENDED_ARG", opExtendedArg, 0, []uint8{144}},
	// Every other opcode: no cache, nothing pymem looks for.
	{"", opPlain, 0, []uint8{
		1, 2, 3, 4, 5, 6, 9, 10, 11, 12, 15, 16, 17, 19, 20, 22, 23, 24, 25, 26, 27, 28, 29, 30,
		31, 32, 33, 34, 49, 50, 51, 52, 54, 55, 56, 57, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68,
		69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 82, 84, 85, 86, 87, 89, 90, 91, 92, 93, 94,
		95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113,
		114, 115, 116, 117, 118, 119, 121, 122, 124, 125, 126, 129, 130, 131, 132, 133, 135, 136,
		137, 138, 141, 142, 143, 145, 146, 147, 148, 152, 154, 155, 156, 157, 160, 161, 162, 163,
		164, 165,
	}},
}

// opcodes311: the _QUICK forms are what 3.11 quickens a warm function's
// RESUME, JUMP_BACKWARD and EXTENDED_ARG to.
var opcodes311 = []opFamily{
	{"CACHE", opCache, 0, []uint8{0}},
	{"BINARY_SUBSCR", opPlain, 4, []uint8{25, 17, 18, 19, 20, 21}},
	{"STORE_SUBSCR", opPlain, 1, []uint8{60, 168, 169, 170}},
	{"RETURN_VALUE", opReturn, 0, []uint8{83}},
	{"UNPACK_SEQUENCE", opPlain, 1, []uint8{92, 177, 178, 179, 180}},
	{"STORE_ATTR", opPlain, 4, []uint8{95, 153, 154, 158, 159}},
	{"LOAD_CONST", opPlain, 0, []uint8{100, 44}},
	{"LOAD_ATTR", opPlain, 4, []uint8{106, 39, 40, 41, 42, 43}},
	{"COMPARE_OP", opPlain, 2, []uint8{107, 26, 27, 28, 29}},
	{"LOAD_GLOBAL", opPlain, 5, []uint8{116, 47, 48, 55}},
	{"BINARY_OP", opPlain, 1, []uint8{122, 3, 4, 5, 6, 7, 8, 13, 14, 16}},
	{"LOAD_FAST", opPlain, 0, []uint8{124, 45, 46}},
	{"STORE_FAST", opPlain, 0, []uint8{125, 161, 167}},
	{"JUMP_BACKWARD", opPlain, 0, []uint8{140, 38}},
	{"EXTENDED_ARG", opExtendedArg, 0, []uint8{144, 34}},
	{"RESUME", opResume, 0, []uint8{151, 150}},
	{"LOAD_METHOD", opPlain, 10, []uint8{160, 56, 57, 58, 59, 62, 63}},
	{"PRECALL", opPlain, 1, []uint8{166, 64, 65, 66, 67, 72, 73, 76, 77, 78, 79, 80, 81, 113, 121, 127, 141, 143}},
	{"CALL", opPlain, 4, []uint8{171, 22, 23, 24}},
	// Every other opcode: no cache, nothing pymem looks for.
	{"", opPlain, 0, []uint8{
		1, 2, 9, 10, 11, 12, 15, 30, 31, 32, 33, 35, 36, 37, 49, 50, 51, 52, 53, 54, 61, 68, 69,
		70, 71, 74, 75, 82, 84, 85, 86, 87, 88, 89, 90, 91, 93, 94, 96, 97, 98, 99, 101, 102, 103,
		104, 105, 108, 109, 110, 111, 112, 114, 115, 117, 118, 119, 120, 123, 126, 128, 129, 130,
		131, 132, 133, 134, 135, 136, 137, 138, 139, 142, 145, 146, 147, 148, 149, 152, 155, 156,
		157, 162, 163, 164, 165, 172, 173, 174, 175, 176,
	}},
}

// opcodes312: RETURN_CONST is new; nothing specialises RESUME.
var opcodes312 = []opFamily{
	{"CACHE", opCache, 0, []uint8{0}},
	{"BINARY_SUBSCR", opPlain, 1, []uint8{25, 19, 20, 21, 22}},
	{"STORE_SUBSCR", opPlain, 1, []uint8{60, 159, 160}},
	{"RETURN_VALUE", opReturn, 0, []uint8{83}},
	{"UNPACK_SEQUENCE", opPlain, 1, []uint8{92, 161, 166, 167}},
	{"FOR_ITER", opPlain, 1, []uint8{93, 62, 63, 64, 65}},
	{"STORE_ATTR", opPlain, 4, []uint8{95, 113, 148, 153}},
	{"LOAD_CONST", opPlain, 0, []uint8{100, 84}},
	{"LOAD_ATTR", opPlain, 9, []uint8{106, 70, 72, 73, 76, 77, 78, 79, 80, 81, 82}},
	{"COMPARE_OP", opPlain, 1, []uint8{107, 57, 58, 59}},
	{"LOAD_GLOBAL", opPlain, 4, []uint8{116, 111, 112}},
	{"RETURN_CONST", opReturn, 0, []uint8{121}},
	{"BINARY_OP", opPlain, 1, []uint8{122, 6, 7, 8, 10, 13, 14, 16, 18}},
	{"SEND", opPlain, 1, []uint8{123, 168}},
	{"LOAD_FAST", opPlain, 0, []uint8{124, 86, 88}},
	{"STORE_FAST", opPlain, 0, []uint8{125, 154, 158}},
	{"LOAD_SUPER_ATTR", opPlain, 1, []uint8{141, 66, 67}},
	{"EXTENDED_ARG", opExtendedArg, 0, []uint8{144}},
	{"RESUME", opResume, 0, []uint8{151}},
	{"CALL", opPlain, 3, []uint8{171, 23, 24, 28, 29, 34, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 56}},
	{"INSTRUMENTED_*", opInstrumented, 0, opRange(237, 254)},
	// Every other opcode: no cache, nothing pymem looks for.
	{"", opPlain, 0, []uint8{
		1, 2, 3, 4, 5, 9, 11, 12, 15, 17, 26, 27, 30, 31, 32, 33, 35, 36, 37, 49, 50, 51, 52, 53,
		54, 55, 61, 68, 69, 71, 74, 75, 85, 87, 89, 90, 91, 94, 96, 97, 98, 99, 101, 102, 103,
		104, 105, 108, 109, 110, 114, 115, 117, 118, 119, 120, 126, 127, 128, 129, 130, 131, 132,
		133, 134, 135, 136, 137, 138, 139, 140, 142, 143, 145, 146, 147, 149, 150, 152, 155, 156,
		157, 162, 163, 164, 165, 172, 173, 174, 175, 176,
	}},
}

// opcodes313: RESUME_CHECK is RESUME specialised.
var opcodes313 = []opFamily{
	{"CACHE", opCache, 0, []uint8{0}},
	{"BINARY_SUBSCR", opPlain, 1, []uint8{5, 157, 158, 159, 160, 161}},
	{"RETURN_VALUE", opReturn, 0, []uint8{36}},
	{"STORE_SUBSCR", opPlain, 1, []uint8{39, 212, 213}},
	{"TO_BOOL", opPlain, 3, []uint8{40, 214, 215, 216, 217, 218, 219}},
	{"BINARY_OP", opPlain, 1, []uint8{45, 3, 150, 151, 152, 153, 154, 155, 156}},
	{"CALL", opPlain, 3, []uint8{53, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 173, 174, 175, 176, 177, 178, 179, 180, 181}},
	{"COMPARE_OP", opPlain, 1, []uint8{58, 182, 183, 184}},
	{"CONTAINS_OP", opPlain, 1, []uint8{59, 185, 186}},
	{"ENTER_EXECUTOR", opExecutor, 0, []uint8{70}},
	{"EXTENDED_ARG", opExtendedArg, 0, []uint8{71}},
	{"FOR_ITER", opPlain, 1, []uint8{72, 187, 188, 189, 190}},
	{"JUMP_BACKWARD", opPlain, 1, []uint8{77}},
	{"LOAD_ATTR", opPlain, 9, []uint8{82, 191, 192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202}},
	{"LOAD_GLOBAL", opPlain, 4, []uint8{91, 203, 204}},
	{"LOAD_SUPER_ATTR", opPlain, 1, []uint8{93, 205, 206}},
	{"POP_JUMP_IF_FALSE", opPlain, 1, []uint8{97}},
	{"POP_JUMP_IF_NONE", opPlain, 1, []uint8{98}},
	{"POP_JUMP_IF_NOT_NONE", opPlain, 1, []uint8{99}},
	{"POP_JUMP_IF_TRUE", opPlain, 1, []uint8{100}},
	{"RETURN_CONST", opReturn, 0, []uint8{103}},
	{"SEND", opPlain, 1, []uint8{104, 208}},
	{"STORE_ATTR", opPlain, 4, []uint8{108, 209, 210, 211}},
	{"UNPACK_SEQUENCE", opPlain, 1, []uint8{117, 220, 221, 222}},
	{"RESUME", opResume, 0, []uint8{149, 207}},
	{"INSTRUMENTED_*", opInstrumented, 0, opRange(236, 254)},
	// Every other opcode: no cache, nothing pymem looks for.
	{"", opPlain, 0, []uint8{
		1, 2, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26,
		27, 28, 29, 30, 31, 32, 33, 34, 35, 37, 38, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51, 52,
		54, 55, 56, 57, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 73, 74, 75, 76, 78, 79, 80, 81,
		83, 84, 85, 86, 87, 88, 89, 90, 92, 94, 95, 96, 101, 102, 105, 106, 107, 109, 110, 111,
		112, 113, 114, 115, 116, 118,
	}},
}
