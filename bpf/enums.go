package bpf

// gpuprof.bpf.c's enums, as the Go constants bpf2go generates from them
// (-type in doc.go) under shorter names: a value changed in C changes
// here with the next make generate, and a name dropped there fails to
// build here.

// Record kinds, the first byte of every ring buffer record (gpuprof.bpf.c's
// enum event_kind).
const (
	KindCall       = uint8(gpuprofEventKindEV_CALL)
	KindKernelName = uint8(gpuprofEventKindEV_KERNEL_NAME)
	KindLibLoad    = uint8(gpuprofEventKindEV_LIB_LOAD)
	KindPyWait     = uint8(gpuprofEventKindEV_PY_WAIT)
	KindPyGIL      = uint8(gpuprofEventKindEV_PY_GIL)
	KindWrite      = uint8(gpuprofEventKindEV_WRITE)
	KindStack      = uint8(gpuprofEventKindEV_STACK)
	KindKernelSite = uint8(gpuprofEventKindEV_KERNEL_SITE)
)

// Why a stack sample was read (enum stack_reason).
const (
	StackCPU    = uint8(gpuprofStackReasonSTACK_CPU)
	StackLaunch = uint8(gpuprofStackReasonSTACK_LAUNCH)
	StackCall   = uint8(gpuprofStackReasonSTACK_CALL)
	StackOffCPU = uint8(gpuprofStackReasonSTACK_OFFCPU)
)

// A stack sample's flags (enum stack_flag).
const (
	StackFlagInCall   = uint32(gpuprofStackFlagSTACK_FLAG_IN_CALL)
	StackFlagRunnable = uint32(gpuprofStackFlagSTACK_FLAG_RUNNABLE)
	StackFlagCondWait = uint32(gpuprofStackFlagSTACK_FLAG_COND_WAIT)
)

// The attach cookie's fields, each a shift and a mask (enum
// cookie_layout): probes/cookie.go packs them.
const (
	CookieAPIShift     = uint64(gpuprofCookieLayoutCOOKIE_API_SHIFT)
	CookieAPIMask      = uint64(gpuprofCookieLayoutCOOKIE_API_MASK)
	CookieLayerShift   = uint64(gpuprofCookieLayoutCOOKIE_LAYER_SHIFT)
	CookieLayerMask    = uint64(gpuprofCookieLayoutCOOKIE_LAYER_MASK)
	CookieOutShift     = uint64(gpuprofCookieLayoutCOOKIE_OUT_SHIFT)
	CookieOutMask      = uint64(gpuprofCookieLayoutCOOKIE_OUT_MASK)
	CookieOutArgShift  = uint64(gpuprofCookieLayoutCOOKIE_OUT_ARG_SHIFT)
	CookieOutArgMask   = uint64(gpuprofCookieLayoutCOOKIE_OUT_ARG_MASK)
	CookieFuncArgShift = uint64(gpuprofCookieLayoutCOOKIE_FUNC_ARG_SHIFT)
	CookieFuncArgMask  = uint64(gpuprofCookieLayoutCOOKIE_FUNC_ARG_MASK)
	CookieNameArgShift = uint64(gpuprofCookieLayoutCOOKIE_NAME_ARG_SHIFT)
	CookieNameArgMask  = uint64(gpuprofCookieLayoutCOOKIE_NAME_ARG_MASK)
	CookieGraphShift   = uint64(gpuprofCookieLayoutCOOKIE_GRAPH_SHIFT)
	CookieGraphMask    = uint64(gpuprofCookieLayoutCOOKIE_GRAPH_MASK)
	CookieTwinShift    = uint64(gpuprofCookieLayoutCOOKIE_TWIN_SHIFT)
	CookieTwinMask     = uint64(gpuprofCookieLayoutCOOKIE_TWIN_MASK)
	CookieCallerShift  = uint64(gpuprofCookieLayoutCOOKIE_CALLER_SHIFT)
	CookieCallerMask   = uint64(gpuprofCookieLayoutCOOKIE_CALLER_MASK)
	CookieStackShift   = uint64(gpuprofCookieLayoutCOOKIE_STACK_SHIFT)
	CookieStackMask    = uint64(gpuprofCookieLayoutCOOKIE_STACK_MASK)
	CookieNoArg        = uint64(gpuprofCookieLayoutCOOKIE_NO_ARG)
)

// A cookie's layers (enum layer) and what a return reads through its
// output pointer (enum out_kind): cudaapi's Layer and Out values, as
// probes/cookie_test.go checks.
const (
	LayerRuntime = uint64(gpuprofLayerLAYER_RUNTIME)
	LayerDriver  = uint64(gpuprofLayerLAYER_DRIVER)
	LayerUser    = uint64(gpuprofLayerLAYER_USER)
	OutU32       = uint64(gpuprofOutKindOUT_U32)
	OutU64       = uint64(gpuprofOutKindOUT_U64)
)

// Counters in the stats map (enum stat).
const (
	StatRingbufFull   = uint32(gpuprofStatSTAT_RINGBUF_FULL)
	StatKernelMapFull = uint32(gpuprofStatSTAT_KERNEL_MAP_FULL)
	StatStaleCall     = uint32(gpuprofStatSTAT_STALE_CALL)
	StatNoThreadState = uint32(gpuprofStatSTAT_NO_THREAD_STATE)
	StatStacksFull    = uint32(gpuprofStatSTAT_STACKS_FULL)
	NumStats          = uint32(gpuprofStatNSTATS)
)
