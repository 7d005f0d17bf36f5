//go:build !nvmlfake

package nvml

import "github.com/NVIDIA/go-nvml/pkg/nvml"

// Open returns the real library. Nothing is loaded until New calls Init,
// which dlopens libnvidia-ml.so.1, so Open itself cannot fail.
func Open() Library { return nvml.New() }
