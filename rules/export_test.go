package rules

import "github.com/rbs-build/rbs/starlark/loader"

func resolveForTest(s, pkg string) (string, error) {
	m, err := loader.Resolve(s, "", pkg)
	if err != nil {
		return "", err
	}
	return m.String(), nil
}
