// Package platform provides Platform, the operating system and processor
// that a build targets and a worker runs, named as users write it
// ("linux-x86_64", "linux-arm64") and mapped to the REAPI platform
// properties OSFamily and ISA that actions carry and workers offer.
package platform

import (
	"fmt"
	"os"
	"runtime"
	"strings"
)

// The REAPI platform property names a platform sets.
const (
	OSFamily = "OSFamily"
	ISA      = "ISA"
)

// EnvVar is the environment variable that names the target platform of
// rbs build and of the targets rbs job submit stages.
const EnvVar = "RBS_TARGET_PLATFORM"

// Platform is an operating system and a processor architecture. The zero
// value is no platform: anything.
type Platform struct {
	OS   string // GOOS and REAPI OSFamily: linux, darwin, windows, freebsd
	Arch string // the name users write: x86_64, arm64, ...
}

// arch is one processor architecture: the name users write, Go's name and
// the REAPI ISA value (the names of the remote-apis lexicon).
type arch struct{ name, goarch, isa string }

var arches = []arch{
	{"x86_64", "amd64", "x86-64"},
	{"arm64", "arm64", "arm-a64"},
	{"x86_32", "386", "x86-32"},
	{"arm", "arm", "arm-a32"},
	{"ppc64le", "ppc64le", "ppc64le"},
	{"s390x", "s390x", "s390x"},
	{"riscv64", "riscv64", "riscv64"},
}

// aliases are other names of architectures that Parse accepts.
var aliases = map[string]string{"amd64": "x86_64", "x86-64": "x86_64", "aarch64": "arm64", "arm-a64": "arm64", "386": "x86_32", "i386": "x86_32"}

var oses = []string{"linux", "darwin", "windows", "freebsd"}

func archByName(name string) (arch, bool) {
	for _, a := range arches {
		if a.name == name {
			return a, true
		}
	}
	return arch{}, false
}

// Parse reads "OS-ARCH", such as "linux-x86_64" or "linux-arm64"
// (aarch64 and amd64 are accepted too), into its canonical form.
func Parse(s string) (Platform, error) {
	bad := func(why string) (Platform, error) {
		var names []string
		for _, a := range arches {
			names = append(names, a.name)
		}
		return Platform{}, fmt.Errorf("platform %q: %s; give OS-ARCH, such as linux-x86_64 or linux-arm64 (OS: %s; ARCH: %s)",
			s, why, strings.Join(oses, ", "), strings.Join(names, ", "))
	}
	osName, archName, ok := strings.Cut(strings.ToLower(strings.TrimSpace(s)), "-")
	if !ok {
		return bad("no '-' between the OS and the architecture")
	}
	if a, ok := aliases[archName]; ok {
		archName = a
	}
	known := false
	for _, o := range oses {
		known = known || o == osName
	}
	if !known {
		return bad(fmt.Sprintf("unknown OS %q", osName))
	}
	if _, ok := archByName(archName); !ok {
		return bad(fmt.Sprintf("unknown architecture %q", archName))
	}
	return Platform{OS: osName, Arch: archName}, nil
}

// Host is the platform of this machine.
func Host() Platform {
	for _, a := range arches {
		if a.goarch == runtime.GOARCH {
			return Platform{OS: runtime.GOOS, Arch: a.name}
		}
	}
	return Platform{OS: runtime.GOOS, Arch: runtime.GOARCH}
}

// FromEnv is the platform RBS_TARGET_PLATFORM names, or the host's when it
// is unset.
func FromEnv() (Platform, error) {
	v := strings.TrimSpace(os.Getenv(EnvVar))
	if v == "" {
		return Host(), nil
	}
	p, err := Parse(v)
	if err != nil {
		return Platform{}, fmt.Errorf("%s: %w", EnvVar, err)
	}
	return p, nil
}

// IsZero reports whether p is no platform.
func (p Platform) IsZero() bool { return p == Platform{} }

// String is the canonical name, "linux-x86_64"; "" for no platform.
func (p Platform) String() string {
	if p.IsZero() {
		return ""
	}
	return p.OS + "-" + p.Arch
}

// ISA is the REAPI ISA value of p's architecture.
func (p Platform) ISA() string {
	if a, ok := archByName(p.Arch); ok {
		return a.isa
	}
	return p.Arch
}

// Properties are the REAPI platform properties of p.
func (p Platform) Properties() map[string]string {
	return map[string]string{OSFamily: p.OS, ISA: p.ISA()}
}

// FromProperties is the platform that the OSFamily and ISA among props
// name; ok is false when either is missing or unknown.
func FromProperties(props map[string]string) (p Platform, ok bool) {
	osName, isa := props[OSFamily], props[ISA]
	for _, a := range arches {
		if a.isa == isa && osName != "" {
			return Platform{OS: osName, Arch: a.name}, true
		}
	}
	return Platform{}, false
}
