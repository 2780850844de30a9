package server

import (
	"context"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	smpb "github.com/bazelbuild/remote-apis/build/bazel/semver"
)

type capabilities struct {
	repb.UnimplementedCapabilitiesServer
	exec bool
}

// GetCapabilities advertises REAPI 2.0 as the lowest version, so that older
// clients such as Bazel 4 are accepted.
func (c *capabilities) GetCapabilities(context.Context, *repb.GetCapabilitiesRequest) (*repb.ServerCapabilities, error) {
	return &repb.ServerCapabilities{
		CacheCapabilities: &repb.CacheCapabilities{
			DigestFunctions:                 []repb.DigestFunction_Value{repb.DigestFunction_SHA256},
			ActionCacheUpdateCapabilities:   &repb.ActionCacheUpdateCapabilities{UpdateEnabled: true},
			MaxBatchTotalSizeBytes:          MaxBatchSize,
			SymlinkAbsolutePathStrategy:     repb.SymlinkAbsolutePathStrategy_DISALLOWED,
			SupportedCompressors:            []repb.Compressor_Value{repb.Compressor_ZSTD},
			SupportedBatchUpdateCompressors: []repb.Compressor_Value{repb.Compressor_ZSTD},
		},
		ExecutionCapabilities: &repb.ExecutionCapabilities{
			DigestFunction:  repb.DigestFunction_SHA256,
			DigestFunctions: []repb.DigestFunction_Value{repb.DigestFunction_SHA256},
			ExecEnabled:     c.exec,
		},
		LowApiVersion:  &smpb.SemVer{Major: 2, Minor: 0},
		HighApiVersion: &smpb.SemVer{Major: 2, Minor: 2},
	}, nil
}
