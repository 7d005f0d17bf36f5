package nvml

import (
	"slices"
	"testing"

	"github.com/gpuprof/gpuprof/events"
)

func TestParseGPUs(t *testing.T) {
	for _, c := range []struct {
		spec  string
		count int
		want  []int
		err   string
	}{
		{"all", 4, []int{0, 1, 2, 3}, ""},
		{" all ", 1, []int{0}, ""},
		{"0", 8, []int{0}, ""},
		{"0,2-4", 8, []int{0, 2, 3, 4}, ""},
		{"4-4", 8, []int{4}, ""},
		{"7, 3,3, 0-1", 8, []int{0, 1, 3, 7}, ""},
		{"", 8, nil, `empty GPU list: give "all" or NVML indexes such as 0,2-4`},
		{"8", 8, nil, `GPU list "8": GPU 8 does not exist: NVML sees 8 GPUs (0-7)`},
		{"0,6-9", 8, nil, `GPU list "0,6-9": GPU 9 does not exist: NVML sees 8 GPUs (0-7)`},
		{"x", 8, nil, `GPU list "x": "x" is not an index or a range of them (such as 0,2-4)`},
		{"0,,1", 8, nil, `GPU list "0,,1": "" is not an index or a range of them (such as 0,2-4)`},
		{"-1", 8, nil, `GPU list "-1": "-1" is not an index or a range of them (such as 0,2-4)`},
		{"+1", 8, nil, `GPU list "+1": "+1" is not an index or a range of them (such as 0,2-4)`},
		{"1-", 8, nil, `GPU list "1-": "1-" is not an index or a range of them (such as 0,2-4)`},
		{"1-2-3", 8, nil, `GPU list "1-2-3": "1-2-3" is not an index or a range of them (such as 0,2-4)`},
		{"4-2", 8, nil, `GPU list "4-2": range "4-2" runs backwards`},
		{"GPU-1234", 8, nil, `GPU list "GPU-1234": "GPU-1234" is not an index or a range of them (such as 0,2-4)`},
		{"all", 0, nil, `GPU list "all": NVML sees no GPU`},
	} {
		got, err := ParseGPUs(c.spec, c.count)
		if msg := errString(err); msg != c.err || !slices.Equal(got, c.want) {
			t.Errorf("ParseGPUs(%q, %d) = %v, %q; want %v, %q", c.spec, c.count, got, msg, c.want, c.err)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestCUDAView(t *testing.T) {
	gpus := []events.GPU{ // out of order on purpose: CUDAView goes by index
		{Index: 2, UUID: "GPU-2b3c4d5e-0000-1111-2222-333344445555"},
		{Index: 0, UUID: "GPU-0a1b2c3d-0000-1111-2222-333344445555"},
		{Index: 1, UUID: "GPU-0a1b9999-0000-1111-2222-333344445555"},
		{Index: 3, UUID: "GPU-3c4d5e6f-0000-1111-2222-333344445555"},
	}
	for _, c := range []struct {
		visible string
		want    []int
		err     string
	}{
		{"", []int{0, 1, 2, 3}, ""},
		{"2", []int{2}, ""},
		{"3,1", []int{3, 1}, ""},
		{" 3 , 0 ", []int{3, 0}, ""},
		{"GPU-2b3c4d5e-0000-1111-2222-333344445555,0", []int{2, 0}, ""},
		{"GPU-3c4d", []int{3}, ""},
		{"gpu-3C4D", []int{}, ""}, // the GPU- prefix is matched as written, the hex in any case
		{"GPU-3C4D,1", []int{3, 1}, ""},
		{"GPU-0a1b,2", []int{}, ""},    // ambiguous prefix: the list stops
		{"1,GPU-0a1b,2", []int{1}, ""}, // ... where it is
		{"0,7,1", []int{0}, ""},        // no GPU 7
		{"-1", []int{}, ""},            // hides every GPU
		{"1,1,2", []int{1}, ""},        // a GPU twice
		{"2,GPU-ffff", []int{2}, ""},   // no such UUID
		{"GPU-", []int{}, ""},          // no prefix at all
		{"1,foo,2", []int{1}, ""},      // not an entry
		{"0,5,MIG-abcd", []int{0}, ""}, // MIG after the stop is never read
		{"MIG-GPU-0a1b2c3d-0000/1/0", nil, "CUDA_VISIBLE_DEVICES=MIG-GPU-0a1b2c3d-0000/1/0 names a MIG instance (MIG-GPU-0a1b2c3d-0000/1/0): MIG is not supported"},
		{"0,MIG-5c6d", nil, "CUDA_VISIBLE_DEVICES=0,MIG-5c6d names a MIG instance (MIG-5c6d): MIG is not supported"},
	} {
		got, err := CUDAView(c.visible, gpus)
		if msg := errString(err); msg != c.err || !slices.Equal(got, c.want) || (err == nil && got == nil) {
			t.Errorf("CUDAView(%q) = %v, %q; want %v, %q", c.visible, got, msg, c.want, c.err)
		}
	}
}
